"""Small files read and written with the fewest system calls: a launcher reads and writes some twenty a run (its
spec, the cgroup knobs and counters of the job), and Python's ``open`` adds a buffered
text layer and four more calls to each (``fstat``, ``ioctl``, two ``lseek``): a tenth of a trivial job's launcher
time."""

from __future__ import annotations

import os

Path = str | os.PathLike[str]


def read_text(path: Path, errors: str = "strict") -> str:
    """The whole file (raises the OSError ``open`` would), decoded with ``errors``."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode(errors=errors)


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to the file ``path``, which must be there (a knob of the kernel's, a cgroup's)."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        write_all(fd, text.encode())
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes, offset: int | None = None) -> None:
    """Every byte of ``data`` to ``fd`` (a pipe or socket may take part of it at a time), at ``offset`` if given
    (``pwrite``: the file's position stays)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view) if offset is None else os.pwrite(fd, view, offset)
        view = view[written:]
        if offset is not None:
            offset += written
