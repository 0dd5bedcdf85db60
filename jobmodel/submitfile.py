"""Submit descriptions sent as text to job ads, with condor_submit's own translation (the v1 ``htcondor.Submit`` of
the HTCondor 24.0 LTS wheel, offline), for a gateway that receives them from remote clients.

What condor_submit does and the bindings do not (HTCondor manual, "condor_submit"): every ``queue`` statement
counts, each with the commands in force where it stands; ``$(Process)`` runs on across the statements of a cluster;
a ``queue`` statement after the executable changed starts a new cluster.

The text comes from another machine and is translated by the gateway, so what would reach the gateway's own
machine is refused before the bindings see it: ``include`` (of a file, or the output of a command the gateway would
run), ``$ENV(...)`` and ``getenv`` (the gateway's environment).  Paths are the job's: the description is translated
in an empty directory, and what lands in it (a relative ``executable``, ``log``...) becomes a name relative to the
job's Iwd, which the gateway makes the job's spool.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

import classad2

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")

#: the most jobs one description may queue (a ``queue 1000000000`` is refused, not translated)
MAX_JOBS = 10000

_QUEUE = re.compile(r"\s*queue(\s|$)", re.IGNORECASE)
_EXECUTABLE = re.compile(r"\s*executable\s*=\s*(?P<value>.*?)\s*$", re.IGNORECASE)
#: an item list that goes on over the lines after the statement (``queue name from (``), ended by a line ``)``
_OPEN_LIST = re.compile(r"[(]\s*$")
#: what would read the gateway's files, run its commands or copy its environment
_REFUSED = ((re.compile(r"^\s*include\b", re.IGNORECASE), ("include is not allowed in a submit description sent to "
             "the gateway (it would read the gateway's files or run a command there)")),
            (re.compile(r"\$ENV\s*\(", re.IGNORECASE), ("$ENV() is not allowed in a submit description sent to the "
             "gateway (it would read the gateway's environment)")),
            (re.compile(r"^\s*getenv\s*=\s*(?!\s*(false|no)\s*$)", re.IGNORECASE), ("getenv is not allowed in a "
             "submit description sent to the gateway (it would copy the gateway's environment into the job)")))
#: what ``condor_submit -spool`` gives a job whose input it spools: it stays in the queue, completed, for ten days
#: (or until its output is fetched), so that its output can be fetched from the spool
SPOOLED_LEAVE_IN_QUEUE = ("JobStatus == 4 && (CompletionDate =?= undefined || CompletionDate == 0 || "
                          "((time() - CompletionDate) < 864000))")
_LEAVE_IN_QUEUE = re.compile(r"^\s*leave_in_queue\s*=", re.IGNORECASE | re.MULTILINE)
#: attributes condor_submit fills that the schedd sets itself at commit
SCHEDD_OWNED = frozenset({"ClusterId", "ProcId", "QDate", "EnteredCurrentStatus", "MyType", "TargetType", "Owner",
                          "User"})


class SubmitDescriptionError(ValueError):
    """A submit description the gateway refuses; the message is condor_submit's where it has one."""


@dataclass(frozen=True)
class ClusterDescription:
    """The ``queue`` statements of one cluster, each the description as it stands there."""

    statements: tuple[str, ...]

    def ads(self, cluster: int) -> list[classad2.ClassAd]:
        """The cluster's job ads for the id the schedd gave (:func:`cluster_ads`)."""
        return cluster_ads(self, cluster)


def clusters(text: str) -> list[ClusterDescription]:
    """The clusters a submit description makes (most make one); refuses what would reach the gateway's machine."""
    lines = logical_lines(text)
    for number, line in enumerate(lines, 1):
        for pattern, reason in _REFUSED:
            if pattern.search(line):
                raise SubmitDescriptionError(f"line {number}: {reason}")
    found: list[ClusterDescription] = []
    executable: str | None = None
    for statement, statement_executable in _statements(lines):
        if not found or statement_executable != executable:
            found.append(ClusterDescription(()))
            executable = statement_executable
        found[-1] = ClusterDescription(found[-1].statements + (statement,))
    return found


def logical_lines(text: str) -> list[str]:
    """The lines of a description with ``\\`` continuations joined (as condor_submit reads them)."""
    lines: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def _statements(lines: list[str]) -> Iterator[tuple[str, str | None]]:
    """Each ``queue`` statement with the description in force there, and the executable it runs.  A description
    without a queue statement queues one job (as ``queue`` would)."""
    commands: list[str] = []
    executable = None
    remaining = iter(lines)
    queued = False
    for line in remaining:
        if not _QUEUE.match(line):
            commands.append(line)
            named = _EXECUTABLE.match(line)
            executable = named["value"] if named else executable
            continue
        block = [line]
        if _OPEN_LIST.search(line):  # the item list's lines, up to the one that closes it, belong to it
            for item in remaining:
                block.append(item)
                if item.strip() == ")":
                    break
        queued = True
        yield "\n".join(commands + block) + "\n", executable
    if not queued:
        yield "\n".join(commands) + "\nqueue\n", executable


def cluster_ads(description: ClusterDescription, cluster: int) -> list[classad2.ClassAd]:
    """The proc ads of one cluster for the id the schedd gave, as ``condor_submit -spool`` makes them (the job
    stays queued for its output to be fetched), without what the schedd sets itself; paths that were relative stay
    relative (to the job's Iwd).  SubmitDescriptionError for what condor_submit refuses."""
    ads: list[classad2.ClassAd] = []
    for statement in description.statements:
        made = _translate(statement, cluster, len(ads))
        if not _LEAVE_IN_QUEUE.search(statement):
            for ad in made:
                ad["LeaveJobInQueue"] = classad2.ExprTree(SPOOLED_LEAVE_IN_QUEUE)
        ads.extend(made)
        if len(ads) > MAX_JOBS:
            raise SubmitDescriptionError(f"the description queues more than {MAX_JOBS} jobs")
    return ads


def _translate(statement: str, cluster: int, first_proc: int) -> list[classad2.ClassAd]:
    """The proc ads of one statement, numbered from ``first_proc``, translated in an empty directory."""
    import htcondor  # the v1 bindings: the only offline Submit(...).jobs() (htcondor2's raises NotImplementedError)

    directory = tempfile.mkdtemp(prefix="birdbath-submit-")
    try:
        try:
            submit = htcondor.Submit(statement)
            if not any(key.lower() == "initialdir" for key in submit.keys()):  # noqa: SIM118 - Submit is not iterable
                submit["initialdir"] = directory
            executable = next((key for key in submit.keys() if key.lower() == "executable"), None)  # noqa: SIM118
            if executable and not os.path.isabs(submit[executable]) and "$" not in submit[executable]:
                submit[executable] = os.path.join(directory, submit[executable])  # not the gateway's directory
            arguments = submit.getQArgs().split()
            count = int(arguments[0]) if arguments and arguments[0].isdigit() else 1
            items = list(submit.itemdata() or [])
            if count * max(1, len(items)) > MAX_JOBS:
                raise SubmitDescriptionError(f"the description queues more than {MAX_JOBS} jobs")
            jobs = (submit.jobs(count=count, itemdata=iter(items), clusterid=cluster, procid=first_proc) if items
                    else submit.jobs(count=count, clusterid=cluster, procid=first_proc))
            texts = [str(ad) for ad in jobs]
        except SubmitDescriptionError:
            raise
        except Exception as exc:  # noqa: BLE001 - the bindings raise their own types (HTCondorInternalError...)
            message = " ".join(str(exc).split()) or type(exc).__name__
            raise SubmitDescriptionError(message if message.startswith("ERROR") else f"ERROR: {message}") from None
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return [_relative(classad2.parseOne(text), directory) for text in texts]


def _relative(ad: classad2.ClassAd, directory: str) -> classad2.ClassAd:
    """The ad without what the schedd sets, and with the translation directory taken out of its paths.  A job whose
    Iwd becomes its spool has its files there, so they are transferred (``IF_NEEDED`` is ``YES``), as
    ``condor_submit -spool`` makes them."""
    if ad.get("Iwd") == directory and ad.get("ShouldTransferFiles") == "IF_NEEDED":
        ad["ShouldTransferFiles"] = "YES"
    for name in list(ad.keys()):
        value = ad.get(name)
        if name in SCHEDD_OWNED or value is classad2.Value.Undefined:
            del ad[name]
        elif isinstance(value, str) and value == directory:
            del ad[name]  # the Iwd condor_submit filled in: the gateway gives the job its own
        elif isinstance(value, str) and value.startswith(directory + os.sep):
            ad[name] = value[len(directory) + 1:]
    return ad
