"""The DAG runner's files, read and written with the rights of the DAGMan job's owner.

Every path a DAG names (the DAG file, node submit files, rescue DAGs, the lock file, ``dagman.out``, the DAGMan
job's output files) comes from its owner, so the gateway must never open one with its own privileges: when it runs
as root each open is done as the owner (:func:`~backends.local.owners.open_as`), as condor_dagman, which runs as
the owner, would.  ``account`` None means no switching (the gateway is not root, or the owner is its own user).

Files are opened non-blocking and read only when they are regular files, so a DAG naming a FIFO cannot hang the
backend's thread.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

from ..owners import Account, call_as, open_as, open_regular_as

#: flags for every open: never block on a FIFO or a device, never hand the descriptor to a child process (reads and
#: writes then block as usual: open_regular_as keeps only regular files)
_COMMON = os.O_NONBLOCK | os.O_CLOEXEC


def read_text(account: Account | None, path: Path) -> str:
    """A regular file's text, read as ``account``; OSError (as the owner's own open would raise) otherwise."""
    with os.fdopen(open_regular_as(account, path, os.O_RDONLY | _COMMON), "rb") as stream:
        return stream.read().decode(errors="replace")


def write_text(account: Account | None, path: Path, text: str, *, exclusive: bool = False) -> None:
    """Create or replace ``path`` (``exclusive``: only create it, FileExistsError if anything is there)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC) | _COMMON
    with _lines(open_regular_as(account, path, flags), "w") as stream:
        stream.write(text)


def touch(account: Account | None, path: Path) -> None:
    """Create ``path`` if it is missing (as the owner's job would when it opens its output)."""
    os.close(open_as(account, path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | _COMMON))


def append(account: Account | None, path: Path) -> TextIO:
    """``path`` opened for appending lines (created if missing), line-buffered."""
    return _lines(open_regular_as(account, path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | _COMMON), "a")


def names_in(account: Account | None, directory: Path) -> list[str]:
    """The entries of a directory, listed as ``account``."""
    fd = open_as(account, directory, os.O_RDONLY | os.O_DIRECTORY | _COMMON)
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def remove(account: Account | None, path: Path) -> None:
    """Remove a file as ``account`` (in a child that switched: the right to unlink is the directory's, so an
    unlink by the gateway itself could remove any file in any directory its owner can only look into)."""
    call_as(account, _remove, str(path), timeout=30)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def is_executable(account: Account | None, path: Path) -> bool:
    """Whether ``account`` may execute ``path`` (``os.access`` checks the real user id: the child's)."""
    return bool(call_as(account, _is_executable, str(path), timeout=30))


def _is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _lines(fd: int, mode: str) -> TextIO:
    """A line-buffered text stream of a descriptor."""
    return os.fdopen(fd, mode, buffering=1)
