"""Where the gateway's log goes and how much of it: twisted.logger events, filtered by level, as text lines.

Every log call in the gateway is a twisted.logger event whose fields (``cluster``, ``proc``, ``owner``,
``exit_code``, ``reason``, ...) are named in its format string, so a reader of the text sees them and an observer
added in-process (e.g. ``jsonFileLogObserver``) receives them as data.

Twisted's own notes of a port opened or closed and a factory started or stopped are left out (:func:`chatter`): the
gateway says where it listens in its own words.  With worker processes, every line names the process that wrote it
(``[core]``, ``[worker 1]``) after its time: all of them write to the same log.

The lines are written by a thread of their own (:class:`BackgroundWriter`): a write to a file waits whenever the file
system commits its journal (each durable commit of the queue makes it do so), for milliseconds, and the reactor must
never wait for the disk.
"""

from __future__ import annotations

import atexit
import math
import queue
import re
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from twisted.logger import (
    FileLogObserver,
    FilteringLogObserver,
    ILogObserver,
    LogEvent,
    LogLevel,
    LogLevelFilterPredicate,
    PredicateResult,
    formatEventAsClassicLogText,
    formatTime,
    globalLogBeginner,
)

#: the names ``--log-level`` and ``log_level`` accept, least to most severe
LEVELS: dict[str, LogLevel] = {"debug": LogLevel.debug, "info": LogLevel.info, "warn": LogLevel.warn,
                               "error": LogLevel.error}


def observer(stream: IO[str], predicate: KnownLevels) -> ILogObserver:
    """Text lines on ``stream`` for the events ``predicate`` admits (failures are critical, so always shown)."""
    return FilteringLogObserver(FileLogObserver(stream, line_of), [predicate, chatter])


def chatter(event: LogEvent) -> PredicateResult:
    """``no`` for Twisted's notes of its own machinery (``HandOffFactory (ConnectionGuard) starting on 1984``,
    ``(TCP Port 1984 Closed)``, ``Starting factory ...``), which it writes whatever a factory's ``noisy`` says for
    ports, and which opened the log before the gateway's own lines; ``maybe`` for every other event."""
    if event.get("log_format") in _FACTORY_NOTES:
        return PredicateResult.no
    if event.get("log_namespace") == "log_legacy" and _PORT_NOTE.match(str(event.get("log_text", ""))):
        return PredicateResult.no
    return PredicateResult.maybe


_FACTORY_NOTES = frozenset({"Starting factory {factory!r}", "Stopping factory {factory!r}"})
#: tcp, unix and udp ports' notes, as twisted.internet writes them (legacy log.msg events)
_PORT_NOTE = re.compile(r".* starting on \S+$|\((TCP |UNIX |UDP )?Port \S+ Closed\)$")


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


def line_of(event: Mapping[str, Any]) -> str | None:
    """twisted's classic text line for an event (``textFileLogObserver``'s), its time worked out once per second;
    none for an event without text (a request's record for in-process observers, whose line the access log
    writes), at no cost."""
    if event.get("log_format") is None and "log_failure" not in event:
        return None
    return formatEventAsClassicLogText(event, formatTime=log_time)


def log_time(when: float | None) -> str:
    """``formatTime(when)`` as the log's lines show it, then the name of the process when there are several
    (``2026-01-02T03:04:05+0000 [worker 1]``); worked out once per second (the access log writes a line per
    request, and the time zone's work costs more than the rest of a line)."""
    if when is None:
        return formatTime(when) + _process[0]
    second = math.floor(when)
    stamped = _stamped
    if stamped[0] != second:
        stamped = _stamped[:] = [second, formatTime(second) + _process[0]]
    return stamped[1]


_stamped: list[Any] = [None, ""]
#: `` [core]``, `` [worker N]``: what follows the time of this process's lines ("" when it is the only one)
_process: list[str] = [""]


def name_process(name: str | None) -> None:
    """Name this process in its lines from now on (``None``: the gateway is one process, its lines name none)."""
    _process[0] = f" [{name}]" if name else ""
    _stamped[:] = [None, ""]


class AccessLog:
    """The file twisted.web's access log writes to (``Site.logFile``): the gateway's log, written by its own thread,
    when that log takes ``birdbath.request`` events at info (``log_level``).  Until :func:`begin`, lines go
    nowhere, as events do until logging begins."""

    #: the gateway's one access log (every site of the process writes to it)
    default: AccessLog

    def __init__(self) -> None:
        self._stream: IO[str] | None = None
        self._predicate: KnownLevels | None = None

    def start(self, stream: IO[str], predicate: KnownLevels) -> None:
        self._stream, self._predicate = stream, predicate

    def write(self, line: str) -> None:
        stream, predicate = self._stream, self._predicate
        if stream is not None and predicate is not None and predicate(_REQUEST_AT_INFO) is not PredicateResult.no:
            stream.write(line)

    def close(self) -> None:
        """Nothing to close: the stream is the log's."""


AccessLog.default = AccessLog()
#: what the level filter is asked about an access log line
_REQUEST_AT_INFO = {"log_namespace": "birdbath.request", "log_level": LogLevel.info}


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


def begin(stream: IO[str], level: str, process: str | None = None) -> None:
    """Send every event from now on (and those buffered since start-up), and the access log's lines, to ``stream``
    through a :class:`BackgroundWriter`, each line naming ``process`` (the core's and each worker's, when there
    are workers).  Standard output is not redirected: the backend's helpers and a foreground user may still print
    there."""
    name_process(process)
    writer = BackgroundWriter(stream)
    predicate = KnownLevels(defaultLogLevel=LEVELS[level])
    AccessLog.default.start(writer, predicate)
    globalLogBeginner.beginLoggingTo([observer(writer, predicate)], redirectStandardIO=False)
