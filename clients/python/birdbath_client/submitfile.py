"""Submit description files to job ads, with condor_submit's own translation (the v1 ``htcondor.Submit`` of the
HTCondor 24.0 LTS wheel, offline).  Relative paths are taken from the submit file's directory.

What the bindings do not do and condor_submit does (HTCondor manual, "condor_submit" and "Submitting a Job"):

- every ``queue`` statement counts, each with the commands in force where it stands (the bindings stop at the
  first); ``$(Process)`` runs on across the statements of a cluster, ``$(Step)`` and ``$(ItemIndex)`` start again;
- a ``queue`` statement after the executable changed starts a new cluster ("a cluster is a set of jobs specified
  in the submit description file between queue commands for which the executable is not changed");
- ``$(Cluster)``/``$(ClusterId)`` are the cluster the schedd gave (:meth:`Cluster.ads` takes it);
- the files a job needs at submit time are checked, with condor_submit's messages (:func:`check_files`).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from .ads import Expr

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")

#: what starts a reference the schedd fills when it matches the job with a slot (``$$(OpSys)``)
MATCH_TIME = "$$("
#: attributes condor_submit fills that the schedd sets itself at commit
SCHEDD_OWNED = {"ClusterId", "ProcId", "QDate", "EnteredCurrentStatus", "MyType", "TargetType", "Owner"}

_QUEUE = re.compile(r"\s*queue(\s|$)", re.IGNORECASE)
_EXECUTABLE = re.compile(r"\s*executable\s*=\s*(?P<value>.*?)\s*$", re.IGNORECASE)
#: an item list that goes on over the lines after the statement (``queue name from (``), ended by a line ``)``
_OPEN_LIST = re.compile(r"[(]\s*$")


class SubmitFileError(ValueError):
    """A submit description condor_submit would refuse; the message is condor_submit's."""


@dataclass(frozen=True)
class Statement:
    """One ``queue`` statement: the description as it stands there (the commands before it, its own item list)."""

    text: str


@dataclass(frozen=True)
class Cluster:
    """The ``queue`` statements of one cluster."""

    path: Path
    statements: tuple[Statement, ...]

    def ads(self, cluster: int) -> list[dict[str, Any]]:
        """One ad per proc, for the cluster id the schedd gave; SubmitFileError for what condor_submit refuses."""
        ads: list[Any] = []
        for statement in self.statements:
            ads.extend(_translate(self.path, statement, cluster, len(ads)))
        for ad in ads:
            check_files(ad)
        return [_plain(ad) for ad in ads]


def clusters(path: Path, defined: Sequence[str] = (), appended: Sequence[str] = ()) -> list[Cluster]:
    """The clusters a submit file makes (most make one); ``defined``: condor_submit's ``VAR=VALUE`` arguments, read
    as the file's first lines; ``appended``: its ``-append`` commands, read just before the first queue
    statement."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SubmitFileError(f"ERROR: Failed to open command file ({exc.strerror})") from None
    found: list[Cluster] = []
    executable = None
    for statement, statement_executable in _statements("".join(f"{line}\n" for line in defined) + text, appended):
        if not found or statement_executable != executable:
            found.append(Cluster(path, ()))
            executable = statement_executable
        found[-1] = Cluster(path, found[-1].statements + (statement,))
    return found


def job_ads(path: Path, cluster: int) -> list[dict[str, Any]]:
    """The ads of a submit file that makes one cluster (SubmitFileError if it makes several)."""
    made = clusters(path)
    if len(made) != 1:
        raise SubmitFileError(f"{path}: its queue statements make {len(made)} clusters (the executable changes)")
    return made[0].ads(cluster)


def _statements(text: str, appended: Sequence[str] = ()) -> Iterator[tuple[Statement, str | None]]:
    """Each ``queue`` statement with the description in force there, and the executable it runs; the ``appended``
    commands come just before the first.  A file without a queue statement queues one job (as ``queue`` would)."""
    commands: list[str] = []
    executable = None
    lines = iter(_logical_lines(text))
    queued = False

    def command(line: str) -> None:
        nonlocal executable
        commands.append(line)
        named = _EXECUTABLE.match(line)
        executable = named["value"] if named else executable

    for line in lines:
        if not _QUEUE.match(line):
            command(line)
            continue
        if not queued:
            for extra in appended:
                command(extra)
        block = [line]
        if _OPEN_LIST.search(line):  # the item list's lines, up to the one that closes it, belong to it
            for item in lines:
                block.append(item)
                if item.strip() == ")":
                    break
        queued = True
        yield Statement("\n".join(commands + block) + "\n"), executable
    if not queued:
        for extra in appended:
            command(extra)
        yield Statement("\n".join(commands) + "\nqueue\n"), executable


def _logical_lines(text: str) -> list[str]:
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


def _translate(path: Path, statement: Statement, cluster: int, first_proc: int) -> list[Any]:
    """The proc ads of one statement, numbered from ``first_proc``."""
    import htcondor

    descriptor, name = tempfile.mkstemp(prefix="birdbath-submit-", suffix=".err")
    os.close(descriptor)
    captured = Path(name)
    try:
        with _stderr_to(captured):
            return _jobs(htcondor.Submit(statement.text), path, cluster, first_proc)
    except Exception as exc:  # the bindings raise their own error types (HTCondorInternalError, ...)
        said = " ".join(captured.read_text(errors="replace").split()) if captured.exists() else ""
        reason = str(exc).strip() or f"{path}: the submit language's translation failed ({type(exc).__name__})"
        raise SubmitFileError(said if said.startswith("ERROR") else f"ERROR: {reason}") from None
    finally:
        captured.unlink(missing_ok=True)


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """What the bindings print on the standard error (condor_submit's own messages: they raise only "Failed to
    get next job") goes to ``path`` meanwhile."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "wb") as stream:
            os.dup2(stream.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _jobs(description: Any, path: Path, cluster: int, first_proc: int) -> list[Any]:
    """The bindings' ads for a description, its relative paths taken from the submit file's directory."""
    directory = path.resolve().parent
    initialdir = next((key for key in description.keys() if key.lower() == "initialdir"), None)
    if initialdir is None:
        description["initialdir"] = str(directory)
    elif not os.path.isabs(description[initialdir]):  # as condor_submit run in the submit file's directory
        description[initialdir] = os.path.join(directory, description[initialdir])
    executable = next((key for key in description.keys() if key.lower() == "executable"), None)
    if executable and not os.path.isabs(description[executable]):
        description[executable] = os.path.join(directory, description[executable])  # "./prog" kept, as condor_submit
    arguments = description.getQArgs().split()
    count = int(arguments[0]) if arguments and arguments[0].isdigit() else 1
    items = list(description.itemdata() or [])
    if items:
        return list(description.jobs(count=count, itemdata=iter(items), clusterid=cluster, procid=first_proc))
    return list(description.jobs(count=count, clusterid=cluster, procid=first_proc))


def check_files(ad: Any) -> None:
    """What condor_submit opens before it queues a job: the executable (unless it is not transferred) and the
    input, and every file of ``transfer_input_files`` (not URLs) when files are transferred.  A name with a
    ``$$()`` reference (``prog.$$(OpSys).$$(Arch)``) is only known when the job is matched with a slot, so it is
    not checked, as condor_submit does not."""
    iwd = Path(str(ad.get("Iwd", ".")))
    needed = [] if ad.get("TransferExecutable") is False else [str(ad.get("Cmd", ""))]
    stdin = str(ad.get("In", "/dev/null"))
    needed += [] if stdin == "/dev/null" else [stdin]
    if str(ad.get("ShouldTransferFiles", "")).upper() != "NO":
        needed += [name.strip() for name in str(ad.get("TransferInput", "")).split(",")
                   if name.strip() and "://" not in name]
    for name in needed:
        if MATCH_TIME in name:
            continue
        target = iwd / name
        if not os.access(target, os.R_OK):
            reason = os.strerror(2 if not os.path.lexists(target) else 13)
            raise SubmitFileError(f"ERROR: Can't open \"{target}\"  with flags 00 ({reason})")


def _plain(ad: Any) -> dict[str, Any]:
    """A v1 ClassAd as typed Python values (expressions as :class:`Expr`), minus what the schedd assigns."""
    import classad

    result: dict[str, Any] = {}
    for name in ad.keys():
        if name in SCHEDD_OWNED:
            continue
        try:
            value = ad[name]
        except UnicodeDecodeError as exc:  # the bindings read every text as UTF-8
            hint = " (getenv = true copies your environment into it)" if name in ("Environment", "Env") else ""
            raise SubmitFileError(f"ERROR: the job's {name} holds text that is not UTF-8{hint}: byte "
                                  f"{exc.object[exc.start]:#04x} at {exc.start}") from None
        if isinstance(value, classad.Value):  # undefined/error literals: nothing to send
            continue
        if isinstance(value, classad.ExprTree):
            result[name] = Expr(str(value))
        elif isinstance(value, (bool, int, float, str)):
            result[name] = value
    return result
