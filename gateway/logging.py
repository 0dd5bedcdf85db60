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
import math
import queue
import string
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, Mapping

from twisted.logger import (
    FileLogObserver,
    FilteringLogObserver,
    ILogObserver,
    LogLevel,
    LogLevelFilterPredicate,
    formatEventAsClassicLogText,
    formatTime,
    globalLogBeginner,
)

#: the names ``--log-level`` and ``log_level`` accept, least to most severe
LEVELS: dict[str, LogLevel] = {"debug": LogLevel.debug, "info": LogLevel.info, "warn": LogLevel.warn,
                               "error": LogLevel.error}


def observer(stream: IO[str], level: str) -> ILogObserver:
    """Text lines on ``stream`` for events at ``level`` or above (failures are critical, so always shown)."""
    predicate = KnownLevels(defaultLogLevel=LEVELS[level])
    return FilteringLogObserver(FileLogObserver(stream, ClassicLines().line), [predicate])


class KnownLevels(LogLevelFilterPredicate):
    """twisted's level filter, with the level of each namespace remembered: twisted works it out from the
    namespace's parts for every event (every request logs one)."""

    def __init__(self, defaultLogLevel: LogLevel = LogLevel.info) -> None:
        self._known: dict[str, LogLevel] = {}
        super().__init__(defaultLogLevel)

    def logLevelForNamespace(self, namespace: str) -> LogLevel:
        level = self._known.get(namespace)
        if level is None:
            level = self._known[namespace] = super().logLevelForNamespace(namespace)
        return level

    def setLogLevelForNamespace(self, namespace: str, level: LogLevel) -> None:
        self._known.clear()
        super().setLogLevelForNamespace(namespace, level)

    def clearLogLevels(self) -> None:
        self._known.clear()
        super().clearLogLevels()


class ClassicLines:
    """twisted's classic text lines (``textFileLogObserver``'s, character for character) at a fraction of the cost:
    every request writes one, and twisted's formatter spent as long on it as the gateway on a small operation.

    The time stamp has a resolution of a second, so it is made once per second rather than with time-zone work per
    line; a format whose fields are all plain names (every format the gateway logs) is filled in with
    ``str.format_map``, which reads them exactly as twisted's own formatter does.  Anything else (a traceback to
    append, a field with an attribute, an index or a call, a format that fails) is left to twisted's formatter."""

    #: formats remembered as plain or not, at most this many (log formats are literals, a handful of them)
    KNOWN = 1024

    def __init__(self) -> None:
        self._stamped: tuple[int | None, str] = (None, "")  # one tuple, read and replaced whole by any thread
        self._plain: dict[str, bool] = {}

    def line(self, event: Mapping[str, Any]) -> str | None:
        """``formatEventAsClassicLogText(event)``."""
        text = self._text(event)
        if text is None:
            return formatEventAsClassicLogText(event, formatTime=self.stamp)
        if not text:
            return None
        system = event.get("log_system")
        if system is None:
            level = event.get("log_level")
            system = f"{event.get('log_namespace', '-')}#{'-' if level is None else level.name}"
        elif type(system) is not str:
            return formatEventAsClassicLogText(event, formatTime=self.stamp)
        return f"{self.stamp(event.get('log_time'))} [{system}] {text}".replace("\n", "\n\t") + "\n"

    def _text(self, event: Mapping[str, Any]) -> str | None:
        """The event's text, or None where twisted's formatter must make the line."""
        format = event.get("log_format")
        if type(format) is not str or "log_failure" in event or "log_flattened" in event or not self._is_plain(format):
            return None
        try:
            return format.format_map(event)
        except Exception:  # twisted's formatter says why, in its own words
            return None

    def _is_plain(self, format: str) -> bool:
        """Whether every field of ``format`` is a plain name (so twisted's call syntax and wrappers play no part)."""
        plain = self._plain.get(format)
        if plain is None:
            try:
                plain = all(name is None or (name.isidentifier() and "{" not in (spec or ""))
                            for _, name, spec, _ in string.Formatter().parse(format))
            except ValueError:
                plain = False
            if len(self._plain) < self.KNOWN:
                self._plain[format] = plain
        return plain

    def stamp(self, when: float | None) -> str:
        """``formatTime(when)``, made once per second."""
        if when is None:
            return formatTime(when)
        second = math.floor(when)
        stamped = self._stamped
        if stamped[0] != second:
            stamped = self._stamped = (second, formatTime(second))
        return stamped[1]


def open_log(path: Path | None) -> IO[str]:
    """The stream to log to: ``path`` appended to, line-buffered so a crash loses no line; else stderr."""
    if path is None:
        return sys.stderr
    return open(path, "a", encoding="utf-8", buffering=1)


class BackgroundWriter:
    """A text stream whose lines a thread of its own writes to ``stream`` and flushes, in order, within milliseconds
    (a line waits at most ``GATHER`` for the lines after it): the caller never waits for the disk.  What is still queued when the
    process exits is written first (``close``, registered with atexit); a process killed outright loses at most the
    lines of its last moments, which it had not written yet either way."""

    #: how long the writer lets lines gather after writing some (s)
    GATHER = 0.005

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
            # the lines of the next moments are written together: waking this thread for every line (a request's)
            # costs the caller more than making the line
            time.sleep(self.GATHER)

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
