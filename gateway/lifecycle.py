"""The gateway's lifecycle as ``twisted.application`` services: each part that starts and stops (a port, the
backend and core, a front end's broker, the workers, the keepalive) is a child of one :class:`InOrder` service,
started in order and stopped in reverse, each stop awaited before the next begins.

Ports bind in ``privilegedStartService`` (a taken port fails there, before the backend makes any state) and the
rest starts in ``startService``; a part whose stop fails is logged and the parts before it still stop (the backend's
threads would otherwise keep the process alive).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from twisted.application.service import MultiService, Service
from twisted.internet.defer import Deferred, ensureDeferred, maybeDeferred
from twisted.internet.interfaces import IListeningPort
from twisted.logger import Logger

log = Logger()


class InOrder(MultiService):
    """A MultiService whose children stop one after the other, in reverse (twisted's stops them all at once)."""

    def stopService(self) -> Deferred[None]:
        Service.stopService(self)
        return Deferred.fromCoroutine(self._stop_each())

    async def _stop_each(self) -> None:
        for child in reversed(list(self)):
            if not child.running:  # (a start that failed half-way)
                continue
            try:
                await maybeDeferred(child.stopService)
            except Exception:  # noqa: BLE001 - logged; what started before it still stops
                log.failure("stopping {name}", name=child.name or type(child).__name__)


class Step(Service):
    """A part of the lifecycle made of two functions: ``start`` (None: nothing to start) and ``stop`` (may return
    an awaitable the next stop waits for)."""

    def __init__(self, name: str, start: Callable[[], None] | None = None,
                 stop: Callable[[], Awaitable[Any] | None] | None = None) -> None:
        self.setName(name)
        self._start, self._stop = start, stop

    def startService(self) -> None:
        if self._start is not None:
            self._start()
        super().startService()

    def stopService(self) -> Deferred[Any] | None:
        super().stopService()
        stopped = self._stop() if self._stop is not None else None
        return None if stopped is None else ensureDeferred(stopped)


class Listening(Service):
    """A port: bound by ``listen`` at the privileged start (or, ``late``, at the start, once the state directory
    exists), closed at the stop.  ``listen`` returns None when the configuration has the port off."""

    def __init__(self, name: str, listen: Callable[[], IListeningPort | None], late: bool = False) -> None:
        self.setName(name)
        self._listen = listen
        self._late = late
        self.port: IListeningPort | None = None

    def privilegedStartService(self) -> None:
        if not self._late:
            self.port = self._listen()
        super().privilegedStartService()

    def startService(self) -> None:
        if self._late:
            self.port = self._listen()
        super().startService()

    def stopService(self) -> Deferred[None] | None:
        super().stopService()
        return None if self.port is None else maybeDeferred(self.port.stopListening)
