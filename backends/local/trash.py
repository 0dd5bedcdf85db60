"""Directories the local backend is done with (the execute directory of a run whose end is on disk, the spool of a
job that left the queue), removed by a thread of their own.

Removing a directory tree costs a system call per entry, and on a busy file system each may wait for the journal:
milliseconds that every job's end spent in the backend's one-at-a-time calls, before the next job could start.  A
directory is now moved into ``<state>/trash`` (one ``rename``: its name is free at once, so a job that starts again
gets a fresh execute directory, and nothing looks for it where it was) and emptied in the background.

Where the backend keeps directories on more than one file system (an ``execute`` directory elsewhere), each has a
trash of its own there: a rename cannot cross file systems.

What a crash leaves in the trash is emptied when the next gateway starts, before the backend writes anything else:
a gateway killed on a full disk may hold the space it needs to start again (the queue's journal, the spool's
directories) in its own trash, so recovery must free that space before it needs any.
"""

from __future__ import annotations

import itertools
import os
import shutil
import threading
from pathlib import Path

#: seconds between two emptyings of the trash
INTERVAL = 0.5


class Trash:
    def __init__(self, *roots: Path, interval: float = INTERVAL) -> None:
        """Empty what an earlier process left in the ``roots`` (now, needing no free space), then start the thread.
        Each root takes the directories of its own file system."""
        self._roots = [str(root) for root in roots]
        for root in roots:
            root.mkdir(mode=0o700, exist_ok=True)
        self._remove_all()
        self._prefixes: dict[int, str] = {}  # file system (st_dev) -> the names directories get in its trash
        for root in roots:
            root.chmod(0o700)  # the gateway's alone (a trash made by an older version was open to all)
            self._prefixes.setdefault(os.stat(root).st_dev, os.path.join(root, f"{os.getpid()}."))
        self._names = itertools.count()
        self._interval = interval
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._empty, name="trash", daemon=True)
        self._thread.start()

    def discard(self, path: Path) -> None:
        """Remove the directory ``path`` (nothing if there is none): moved out of the way now, emptied by the next
        round of the trash's thread (no thread is woken per directory); one that cannot be moved (another file
        system) is removed at once."""
        try:
            prefix = self._prefixes.get(os.lstat(path).st_dev)
            if prefix is not None:
                os.rename(path, f"{prefix}{next(self._names)}")
                return
        except FileNotFoundError:
            return
        except OSError:
            pass
        shutil.rmtree(path, ignore_errors=True)

    def close(self, timeout: float = 10.0) -> None:
        """Stop once what is in the trash now is removed (or after ``timeout``; the rest goes at the next start)."""
        if self._thread.is_alive():
            self._closing.set()
            self._thread.join(timeout)

    def _empty(self) -> None:
        """Every ``interval`` (and once more when closing), remove what is in the trash."""
        while True:
            closing = self._closing.is_set()
            self._remove_all()
            if closing:
                return
            self._closing.wait(self._interval)

    def _remove_all(self) -> None:
        for root in self._roots:
            for entry in os.scandir(root):
                shutil.rmtree(entry.path, ignore_errors=True)
