"""Where the gateway's log goes and how much of it: twisted.logger events, filtered by level, as text lines.

Every log call in the gateway is a twisted.logger event whose fields (``cluster``, ``proc``, ``owner``,
``exit_code``, ``reason``, ...) are named in its format string, so a reader of the text sees them and an observer
added in-process (e.g. ``jsonFileLogObserver``) receives them as data.
"""

from __future__ import annotations

import sys
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


def begin(stream: IO[str], level: str) -> None:
    """Send every event from now on (and those buffered since start-up) to ``stream``.  Standard output is not
    redirected: the backend's helpers and a foreground user may still print there."""
    globalLogBeginner.beginLoggingTo([observer(stream, level)], redirectStandardIO=False)
