"""The daemon side of a running gateway: the keepalive its configuration and environment call for (a
``twisted.application`` service, the last child of the daemon's, :class:`KeepAliveService`), and SIGQUIT.

Which keepalive:
  - ``master_keepalive = "HOST:PORT"`` (``--master-keepalive``): the 2009 datagram to that address, whatever else;
  - else, started by a condor_master (``CONDOR_INHERIT``): ``htcondor2.send_alive`` to it, and if that fails, the
    raw command over TCP to the same address;
  - else none.

Signals, as DaemonCore gives them to its daemons: SIGTERM is a graceful shutdown (Twisted's own handler: running
jobs get their stop signal and the grace period), SIGQUIT a fast one (running jobs are killed at once and requeued,
as on a crash, but with the queue closed cleanly).  A second SIGQUIT is ignored, as DaemonCore does.
"""

from __future__ import annotations

import os
import signal
from typing import Any, Callable, Mapping

from twisted.application.service import Service
from twisted.internet.error import ReactorNotRunning
from twisted.logger import Logger

from gateway.daemon import inherit
from gateway.daemon.keepalive import (
    BindingsSender,
    DatagramSender,
    KeepAlive,
    StreamSender,
    htcondor_param,
    parse_address,
    resolve_timeout,
)

log = Logger(namespace="birdbath.daemon")


def keepalive_for(reactor: Any, master_keepalive: str, not_responding_timeout: int,
                  environ: Mapping[str, str] = os.environ,
                  condor_param: Callable[[str], Any] = htcondor_param) -> KeepAlive | None:
    """The keepalive this gateway owes a master, not yet started; None when it owes none."""
    try:
        parent = inherit.parent(environ)
    except ValueError as exc:
        log.warn("not sending DC_CHILDALIVE to a parent: {reason}", reason=exc)
        parent = None
    if not master_keepalive and parent is None:
        return None
    timeout = resolve_timeout(not_responding_timeout, condor_param)
    if master_keepalive:
        return KeepAlive(reactor, DatagramSender(*parse_address(master_keepalive)), timeout)
    assert parent is not None
    return KeepAlive(reactor, BindingsSender(parent), timeout, fallback=StreamSender(reactor, parent.address))


class KeepAliveService(Service):
    """The keepalive as a part of the daemon's lifecycle: it starts once the gateway serves, and stops first."""

    def __init__(self, keepalive: KeepAlive) -> None:
        self.setName("keepalive")
        self.keepalive = keepalive

    def startService(self) -> None:
        super().startService()
        self.keepalive.start()

    def stopService(self) -> None:
        super().stopService()
        self.keepalive.stop()


class FastShutdown:
    """SIGQUIT: stop the reactor, with ``fast`` set for the gateway's stop to read (``Gateway.fast_shutdown``)."""

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor
        self.fast = False

    def install(self) -> None:
        signal.signal(signal.SIGQUIT, lambda number, frame: self.reactor.callFromThread(self.begin))

    def begin(self) -> None:
        if self.fast:
            log.info("got SIGQUIT, but a fast shutdown is already under way; ignoring it")
            return
        self.fast = True
        log.info("got SIGQUIT: performing a fast shutdown (running jobs are killed now and requeued)")
        try:
            self.reactor.stop()
        except ReactorNotRunning:  # a graceful shutdown is under way; its remaining steps read ``fast``
            pass
