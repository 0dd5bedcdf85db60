"""A run's file (``run.jsonl`` in its execute directory): the launcher's spec, which the gateway writes as its first
line, then what the launcher appends to it, a line each: that the job's first process exists (its process group and
the launcher's pid, and when), and how the run ended (the result the gateway records).

One file, written once and appended to, because on some file systems (ext4 without a journal) every file made costs
more the more were removed in the last minute, and short jobs make and remove thousands a minute: a pgid file and a
result file of their own (each written aside and renamed) were two of a run's five.  A line is appended with one
``write`` of a file opened ``O_APPEND``; a line read before it is all there, or cut short for good (the launcher
killed while writing it, a machine that went down), never parses (its closing brace is its last character) and is
read as not written, as are bytes that are no text.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from .quickio import read_text, write_all

NAME = "run.jsonl"
STARTED, ENDED = "started", "ended"


@dataclass(frozen=True)
class Started:
    """The job's first process exists: the gateway may signal it (through the launcher) and kills its group at the
    end."""

    group: int  # the job's process group
    launcher: int  # the pid of the launcher running it
    at: float  # when (time.time())


@dataclass(frozen=True)
class Run:
    """What a run's file says so far."""

    spec: dict[str, Any] | None
    started: Started | None
    ended: dict[str, Any] | None  # the launcher's result


def read(path: str | os.PathLike[str], spec: bool = True) -> Run:
    """The run as its file says (nothing of a file that is not there, or of a line that does not parse); without
    ``spec``, only what the launcher appended (the spec, with the job's environment, is the longest line to parse,
    and the executor asks for the start every few milliseconds while a signal waits for it)."""
    try:
        text = read_text(path, errors="replace")
    except OSError:
        return Run(None, None, None)
    lines = text.split("\n")
    started, ended = None, None
    spec_read = _parsed(lines[0]) if spec else None
    for line in lines[1:]:
        record = _parsed(line)
        if record is None:
            continue
        if STARTED in record:
            try:
                started = Started(int(record[STARTED][0]), int(record[STARTED][1]), float(record["at"]))
            except (KeyError, IndexError, TypeError, ValueError):
                continue
        elif isinstance(record.get(ENDED), dict):
            ended = record[ENDED]
    return Run(spec_read, started, ended)


def append(path: str | os.PathLike[str], record: dict[str, Any], sync: bool = False) -> None:
    """Add a line to the run's file (synced to disk with ``sync``: a run whose gateway is gone, read much later)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    try:
        write_all(fd, json.dumps(record).encode() + b"\n")
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _parsed(line: str) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None
