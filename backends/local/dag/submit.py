"""Node submit files to job ads, with condor_submit's own translation.

The v1 ``htcondor.Submit(...).jobs()`` of the HTCondor 24.0 LTS wheel turns a submit description into proc ads
offline, exactly as condor_submit would (defaults, ``Requirements``, ``RequestMemory``, macro expansion).  Limits:
only ``queue`` and ``queue N`` statements (a node is one cluster, as DAGMan requires); ``initialdir`` defaults to
the node's directory, and a relative ``executable`` is taken from the node's directory (where DAGMan would have
run condor_submit), not from the gateway's working directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import classad2

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")


class SubmitError(ValueError):
    pass


def node_ads(submit_file: Path, directory: Path, macros: dict[str, str], cluster: int) -> list[classad2.ClassAd]:
    """The proc ads of one node's submit file (``cluster`` fills ClusterId; the queue renumbers it)."""
    import htcondor  # the v1 bindings: the only offline Submit(...).jobs() (see docs/toolchain.md)

    try:
        text = submit_file.read_text()
    except OSError as exc:
        raise SubmitError(f"cannot read submit file {submit_file}: {exc.strerror}") from None
    try:
        description = htcondor.Submit(text)
        for name, value in macros.items():
            description[name] = value
        _resolve(description, "initialdir", directory, default=str(directory))
        _resolve(description, "executable", directory)  # condor_submit takes it relative to where it runs
        count = _count(description.getQArgs(), submit_file)
        return [classad2.parseOne(str(ad)) for ad in description.jobs(count=count, clusterid=cluster)]
    except SubmitError:
        raise
    except Exception as exc:  # the bindings raise their own error types for bad descriptions
        raise SubmitError(f"{submit_file}: {exc}") from None


def _resolve(description, command: str, directory: Path, default: str | None = None) -> None:
    """Make a path-valued submit command absolute, relative to the node's directory."""
    key = next((key for key in description.keys() if key.lower() == command), None)
    value = description[key] if key is not None else default
    if value is None:
        return
    description[key or command] = value if os.path.isabs(value) or "$" in value else str(directory / value)


def _count(queue_arguments: str, submit_file: Path) -> int:
    words = queue_arguments.split()
    if not words:
        return 1
    if len(words) == 1 and words[0].isdigit():
        return int(words[0])
    raise SubmitError(f"{submit_file}: only 'queue' and 'queue N' are supported in DAG node submit files, "
                      f"not 'queue {queue_arguments}'")
