"""Where the gateway's log goes and how much of it: twisted.logger events, filtered by level, as text lines.

Every log call in the gateway is a twisted.logger event whose fields (``cluster``, ``proc``, ``owner``,
``exit_code``, ``reason``, ...) are named in its format string, so a reader of the text sees them and an observer
added in-process (e.g. ``jsonFileLogObserver``) receives them as data.

The lines are written by a thread of their own (:class:`BackgroundWriter`): a write to a file waits whenever the file
system commits its journal (each durable commit of the queue makes it do so), for milliseconds, and the reactor must
never wait for the disk.
"""

from __future__ import annotations

import atexit
import queue
import sys
import threading
from pathlib import Path
from typing import IO

from twisted.logger import (
    FilteringLogObserver,
    ILogObserver,
    LogLevel,
    LogLevelFilterPredicate,
    globalLogBeginner,
    textFileLogObserver,
)

#: the names ``--log-level`` and ``log_level`` accept, least to most severe
LEVELS: dict[str, LogLevel] = {"debug": LogLevel.debug, "info": LogLevel.info, "warn": LogLevel.warn,
                               "error": LogLevel.error}


def observer(stream: IO[str], level: str) -> ILogObserver:
    """Text lines on ``stream`` for events at ``level`` or above (failures are critical, so always shown)."""
    predicate = LogLevelFilterPredicate(defaultLogLevel=LEVELS[level])
    return FilteringLogObserver(textFileLogObserver(stream), [predicate])


def open_log(path: Path | None) -> IO[str]:
    """The stream to log to: ``path`` appended to, line-buffered so a crash loses no line; else stderr."""
    if path is None:
        return sys.stderr
    return open(path, "a", encoding="utf-8", buffering=1)


class BackgroundWriter:
    """A text stream whose lines a thread of its own writes to ``stream`` and flushes, in order, as soon as it gets
    the interpreter (within milliseconds): the caller never waits for the disk.  What is still queued when the
    process exits is written first (``close``, registered with atexit); a process killed outright loses at most the
    lines of its last moments, which it had not written yet either way."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._write_lines, name="log-writer", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def write(self, text: str) -> int:
        self._lines.put(text)
        return len(text)

    def flush(self) -> None:
        """Nothing to do: the writer flushes after every batch of lines."""

    def close(self) -> None:
        """Write what is queued and stop the writer (the stream itself stays open)."""
        if self._thread.is_alive():
            self._lines.put(None)
            self._thread.join(timeout=10)

    def _write_lines(self) -> None:
        while True:
            batch, done = self._batch()
            try:
                self._stream.write("".join(batch))
                self._stream.flush()
            except (OSError, ValueError):  # a full disk or a closed stream: the lines are lost, the gateway goes on
                pass
            if done:
                return

    def _batch(self) -> tuple[list[str], bool]:
        """The lines queued now (waiting for one if there is none), and whether close() was asked for."""
        batch: list[str] = []
        text = self._lines.get()
        while text is not None:
            batch.append(text)
            try:
                text = self._lines.get_nowait()
            except queue.Empty:
                return batch, False
        return batch, True


def begin(stream: IO[str], level: str) -> None:
    """Send every event from now on (and those buffered since start-up) to ``stream``, through a
    :class:`BackgroundWriter`.  Standard output is not redirected: the backend's helpers and a foreground user may
    still print there."""
    globalLogBeginner.beginLoggingTo([observer(BackgroundWriter(stream), level)], redirectStandardIO=False)
