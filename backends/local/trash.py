"""Directories the local backend is done with (the execute directory of a run whose end is on disk, the spool of a
job that left the queue), removed by a thread of their own.

Removing a directory tree costs a system call per entry, and on a busy file system each may wait for the journal:
milliseconds that every job's end spent in the backend's one-at-a-time calls, before the next job could start.  A
directory is now moved into ``<state>/trash`` (one ``rename``: its name is free at once, so a job that starts again
gets a fresh execute directory, and nothing looks for it where it was) and emptied in the background.  What a crash
leaves in the trash is emptied when the next gateway starts.
"""

from __future__ import annotations

import itertools
import os
import queue
import shutil
import threading
from pathlib import Path


class Trash:
    def __init__(self, root: Path) -> None:
        root.mkdir(exist_ok=True)
        self._root = root
        self._names = itertools.count()
        self._doomed: queue.SimpleQueue[Path | None] = queue.SimpleQueue()
        for left in sorted(root.iterdir()):  # (a crash's leftovers, first)
            self._doomed.put(left)
        self._thread = threading.Thread(target=self._empty, name="trash", daemon=True)
        self._thread.start()

    def discard(self, path: Path) -> None:
        """Remove the directory ``path`` (nothing if there is none): moved out of the way now, emptied later; one
        that cannot be moved (another file system) is removed at once."""
        target = self._root / f"{os.getpid()}.{next(self._names)}"
        try:
            os.rename(path, target)
        except FileNotFoundError:
            return
        except OSError:
            shutil.rmtree(path, ignore_errors=True)
            return
        self._doomed.put(target)

    def close(self, timeout: float = 10.0) -> None:
        """Stop once what is in the trash now is removed (or after ``timeout``; the rest goes at the next start)."""
        if self._thread.is_alive():
            self._doomed.put(None)
            self._thread.join(timeout)

    def _empty(self) -> None:
        while (path := self._doomed.get()) is not None:
            shutil.rmtree(path, ignore_errors=True)
