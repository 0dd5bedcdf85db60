"""Small file operations every spool and staging area needs: plain names only, writes at offsets, what arrived
of a file sent in parts, MD5."""

from __future__ import annotations

import bisect
import hashlib
import os
import unicodedata
from pathlib import Path


def is_plain_name(name: str) -> bool:
    """A file name with no directory part (what clients may name in a spool)."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name


def transfer_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be the name of an input file a client sends (None when it can).

    Stricter than :func:`is_plain_name`, which reading keeps: the name ends up in the job's comma-separated
    ``TransferInput`` (a comma would split it, surrounding spaces are trimmed there), in the user log and in
    messages (control characters), and in paths that other platforms split at backslashes."""
    if not name:
        return "a file name must not be empty"
    if name in (".", ".."):
        return f"{name!r} is not a file name"
    for char, what in (("/", "a path separator '/'"), ("\\", "a backslash"), (",", "a comma")):
        if char in name:
            return f"a file name must not contain {what}"
    if any(unicodedata.category(char) == "Cc" for char in name):
        return "a file name must not contain control characters"
    if any(unicodedata.category(char) == "Cs" for char in name):
        return "a file name must be text (it holds an unpaired surrogate)"
    if name != name.strip():
        return "a file name must not begin or end with white space"
    return None


def write_at(path: Path, offset: int, data: bytes, create: bool = False) -> int:
    """Write all of ``data`` at ``offset`` (pwrite may write less than asked); returns the file's size."""
    fd = os.open(path, os.O_WRONLY | (os.O_CREAT if create else 0), 0o600)
    try:
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, offset)
            view, offset = view[written:], offset + written
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def md5_of(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class ByteRanges:
    """The parts of a file received so far: sorted, disjoint, non-adjacent ``[start, end)`` ranges.

    Chunks may come in any order and again (a client retrying one), so what counts is the union of the ranges
    written, not the sum of their lengths.  Adding or removing a range touches only its neighbours."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    def add(self, start: int, end: int) -> None:
        if start >= end:
            return
        first = bisect.bisect_left(self._ends, start)  # the first range that ends at or after ``start``
        last = bisect.bisect_right(self._starts, end)  # one past the last range that starts at or before ``end``
        if first < last:
            start, end = min(start, self._starts[first]), max(end, self._ends[last - 1])
        self._starts[first:last], self._ends[first:last] = [start], [end]

    def remove(self, start: int, end: int) -> None:
        if start >= end:
            return
        first = bisect.bisect_right(self._ends, start)  # the first range that ends after ``start``
        last = bisect.bisect_left(self._starts, end)  # one past the last range that starts before ``end``
        if first >= last:
            return
        kept = [(s, min(e, start)) for s, e in [(self._starts[first], self._ends[first])] if s < start]
        kept += [(max(s, end), e) for s, e in [(self._starts[last - 1], self._ends[last - 1])] if e > end]
        self._starts[first:last] = [s for s, _ in kept]
        self._ends[first:last] = [e for _, e in kept]

    def covered(self) -> int:
        """How many bytes the ranges cover."""
        return sum(self._ends) - sum(self._starts)

    def __len__(self) -> int:
        return len(self._starts)
