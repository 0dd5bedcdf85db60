"""Node submit files to job ads, with condor_submit's own translation.

The v1 ``htcondor.Submit(...).jobs()`` of the HTCondor 24.0 LTS wheel turns a submit description into proc ads
offline, exactly as condor_submit would (defaults, ``Requirements``, ``RequestMemory``, macro expansion).  Limits:
one ``queue`` or ``queue N`` statement (a node is one cluster, as DAGMan requires; a second statement is refused,
never dropped); ``initialdir`` defaults to
the node's directory, and a relative ``executable`` is taken from the node's directory (where DAGMan would have
run condor_submit), not from the gateway's working directory.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import classad2

from ..owners import Account, call_as
from .files import read_text

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")


class SubmitError(ValueError):
    pass


#: how long reading and translating one submit file may take (an ``include`` of a pipe, or an ``include command``
#: that never ends, must not hold the backend's thread for ever)
SUBMIT_TIMEOUT = 30.0


def node_ads(submit_file: Path, directory: Path, macros: dict[str, str], cluster: int,
             account: Account | None = None) -> list[classad2.ClassAd]:
    """The proc ads of one node's submit file (``cluster`` fills ClusterId; the queue renumbers it).

    With an ``account`` (the gateway is root) the file is read and translated by a child working as that account,
    as condor_submit runs as the user who submits: what it includes (``include : file``) is read, and what it runs
    (``include command : ...``), runs with the owner's rights and environment, never the gateway's."""
    import htcondor  # noqa: F401 - loaded here, before a child that switched user uses it

    try:
        answer = call_as(account, _translate, str(submit_file), str(directory), macros, cluster,
                         timeout=SUBMIT_TIMEOUT)
    except TimeoutError:
        raise SubmitError(f"{submit_file}: reading it took longer than {SUBMIT_TIMEOUT:g} s "
                          f"(does it include a pipe, or a command that does not end?)") from None
    except (OSError, RuntimeError) as exc:
        raise SubmitError(f"{submit_file}: {exc}") from None
    if "error" in answer:
        raise SubmitError(answer["error"])
    return [classad2.parseOne(text) for text in answer["ads"]]


def _translate(submit_file: str, directory: str, macros: dict[str, str], cluster: int) -> dict[str, object]:
    """What :func:`node_ads` does with the owner's rights: ``{"ads": [ad text...]}`` or ``{"error": message}``."""
    import htcondor  # the v1 bindings: the only offline Submit(...).jobs() (htcondor2's raises NotImplementedError)

    path = Path(submit_file)
    try:
        text = read_text(None, path)
    except OSError as exc:
        return {"error": f"cannot read submit file {submit_file}: {exc.strerror}"}
    try:
        description = htcondor.Submit(text)
        for name, value in macros.items():
            description[name] = value
        _resolve(description, "initialdir", Path(directory), default=directory)
        _resolve(description, "executable", Path(directory))  # condor_submit takes it relative to where it runs
        count = _count(description.getQArgs(), path, text)
        return {"ads": [str(ad) for ad in description.jobs(count=count, clusterid=cluster)]}
    except SubmitError as exc:
        return {"error": str(exc)}
    except Exception as exc:  # the bindings raise their own error types for bad descriptions
        return {"error": f"{submit_file}: {exc}"}


def _resolve(description, command: str, directory: Path, default: str | None = None) -> None:
    """Make a path-valued submit command absolute, relative to the node's directory."""
    key = next((key for key in description.keys() if key.lower() == command), None)
    value = description[key] if key is not None else default
    if value is None:
        return
    description[key or command] = value if os.path.isabs(value) or "$" in value else str(directory / value)


#: a queue statement (the bindings' Submit reads a description up to the first one only)
_QUEUE = re.compile(r"^[ \t]*queue([ \t]|$)", re.IGNORECASE | re.MULTILINE)


def _count(queue_arguments: str, submit_file: Path, text: str) -> int:
    if len(_QUEUE.findall(text)) > 1:
        raise SubmitError(f"{submit_file}: a DAG node submit file may have only one queue statement here "
                          f"(the node would run only the first)")
    words = queue_arguments.split()
    if not words:
        return 1
    if len(words) == 1 and words[0].isdigit():
        return int(words[0])
    raise SubmitError(f"{submit_file}: only 'queue' and 'queue N' are supported in DAG node submit files, "
                      f"not 'queue {queue_arguments}'")
