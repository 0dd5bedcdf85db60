"""Telling condor_master we are alive: DC_CHILDALIVE, every ``timeout / 3`` seconds, from the reactor's own timer.

The master kills a child that has not sent DC_CHILDALIVE for ``timeout`` seconds (it re-arms the child's
``hung_past_this_time`` with each message: ``DaemonKeepAlive::HandleChildAliveCommand``).  The message is the
command, our pid and the timeout, as CEDAR integers (``ChildAliveMsg``; the master treats the trailing log-lock
delay as optional, so that tools such as condor_squawk can send it).  The timeout is HTCondor's
``<SUBSYS>_NOT_RESPONDING_TIMEOUT`` / ``NOT_RESPONDING_TIMEOUT`` (default 3600 s); DaemonCore sends every
``timeout/3 - 30`` s, the 2009 recipe every ``timeout/3`` s, which we follow (a third of the time still leaves two
messages of slack).

Every message is sent by a reactor timer, never by a thread of its own: if the reactor is wedged no message goes,
and the master restarts a gateway that has stopped serving, which is the point of the exercise.

Two ways to send it:
  - under condor_master (``CONDOR_INHERIT``), through the bindings' ``htcondor2.send_alive``, which authenticates
    with the family session the master gives its children (``CONDOR_PRIVATE_INHERIT``); it blocks, so it runs in a
    thread, started by the timer, and a beat is skipped while one is still on its way.  When it fails (a master
    whose security it cannot satisfy) the gateway says so and sends the datagram below instead;
  - the datagram of the 2009 recipe (``--master-keepalive HOST:PORT``, or the fallback): a UDP packet holding the
    three integers and nothing else, which a master accepts as an unauthenticated command only where its security
    policy allows DAEMON-level commands without authentication (older masters, or ``SEC_DAEMON_AUTHENTICATION =
    OPTIONAL``).
"""

from __future__ import annotations

import os
import socket
from typing import Any, Callable, Protocol

from twisted.internet import protocol
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.endpoints import HostnameEndpoint, connectProtocol
from twisted.internet.error import ConnectionDone
from twisted.internet.task import LoopingCall
from twisted.internet.threads import deferToThread
from twisted.logger import Logger
from twisted.python.failure import Failure

from gateway.daemon import cedar
from gateway.daemon.inherit import Parent, Sinful

log = Logger(namespace="birdbath.daemon")

#: HTCondor's default NOT_RESPONDING_TIMEOUT (``param_info.in``)
DEFAULT_TIMEOUT = 3600
#: the name the gateway has in a master's DAEMON_LIST, and so the prefix of its per-daemon knobs
SUBSYSTEM = "BIRDBATH"


def childalive(pid: int, timeout: int) -> bytes:
    """DC_CHILDALIVE's message: command, pid and timeout, each an 8-byte big-endian integer."""
    return cedar.integers(cedar.DC_CHILDALIVE, pid, timeout)


def period_of(timeout: int) -> int:
    """Seconds between two messages: a third of the timeout, at least one."""
    return max(1, timeout // 3)


def resolve_timeout(configured: int, condor_param: Callable[[str], Any | None]) -> int:
    """The timeout to announce: ``not_responding_timeout`` when set (> 0), else HTCondor's configuration as
    DaemonCore reads it (``BIRDBATH_NOT_RESPONDING_TIMEOUT``, then ``NOT_RESPONDING_TIMEOUT``), else 3600."""
    if configured > 0:
        return configured
    for knob in (f"{SUBSYSTEM}_NOT_RESPONDING_TIMEOUT", "NOT_RESPONDING_TIMEOUT"):
        value = condor_param(knob)
        if value is None or str(value).strip() == "":
            continue
        try:
            number = int(str(value).strip())
        except ValueError:
            log.warn("ignoring {knob} = {value!r} from HTCondor's configuration: not a number", knob=knob,
                     value=value)
            continue
        if number > 0:
            return number
    return DEFAULT_TIMEOUT


def htcondor_param(knob: str) -> Any | None:
    """A knob of the HTCondor configuration this process was started with (the master passes CONDOR_CONFIG)."""
    import htcondor2

    return htcondor2.param.get(knob)


class Sender(Protocol):
    #: where the messages go, for the log
    target: str
    #: how they get there, for the log
    means: str

    def send(self, pid: int, timeout: int) -> Any: ...


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT``) of ``--master-keepalive`` (raises ValueError)."""
    host, colon, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


class DatagramSender:
    """DC_CHILDALIVE as one UDP datagram, sent from the calling (reactor) thread: a datagram socket does not
    block.  The host is resolved once, when the sender is made."""

    means = "UDP datagram"

    def __init__(self, host: str, port: int) -> None:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        self.target = f"{host}:{port}"
        self._address = address
        self._socket = socket.socket(family, kind, proto)
        self._socket.setblocking(False)

    def send(self, pid: int, timeout: int) -> None:
        self._socket.sendto(childalive(pid, timeout), self._address)

    def close(self) -> None:
        self._socket.close()


class _OneMessage(protocol.Protocol):
    """Writes one message on a fresh connection and closes it; ``done`` fires when the connection is closed."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.done: Deferred = Deferred()

    def connectionMade(self) -> None:
        self.transport.write(self.data)
        self.transport.loseConnection()

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        if reason is not None and not reason.check(ConnectionDone):
            self.done.errback(reason)
        else:
            self.done.callback(None)


class StreamSender:
    """DC_CHILDALIVE as a raw CEDAR command on a TCP connection to the parent's address, through
    condor_shared_port (SHARED_PORT_CONNECT first) when the address names a ``sock``: the way to a master that
    has no UDP command port, as a master behind condor_shared_port has none.  Connects without blocking."""

    means = "raw CEDAR command over TCP"

    def __init__(self, reactor: Any, address: Sinful, timeout: float = 20.0) -> None:
        self._reactor = reactor
        self._address = address
        self._timeout = timeout
        via = f" (shared port id {address.shared_port_id})" if address.shared_port_id else ""
        self.target = f"{address.host}:{address.port}{via}"

    def message(self, pid: int, timeout: int) -> bytes:
        command = cedar.packet(childalive(pid, timeout))
        if self._address.shared_port_id is None:
            return command
        return cedar.connect_request(self._address.shared_port_id, f"{SUBSYSTEM} {os.getpid()}",
                                     int(self._timeout)) + command

    async def send(self, pid: int, timeout: int) -> None:
        endpoint = HostnameEndpoint(self._reactor, self._address.host, self._address.port, timeout=self._timeout)
        protocol = _OneMessage(self.message(pid, timeout))
        await connectProtocol(endpoint, protocol)
        await protocol.done


class BindingsSender:
    """``htcondor2.send_alive`` to the parent named in CONDOR_INHERIT, in a thread (it blocks until delivered)."""

    means = "htcondor2.send_alive"

    def __init__(self, parent: Parent) -> None:
        self.target = f"the master (pid {parent.pid}) at {parent.address.host}:{parent.address.port}"

    def send(self, pid: int, timeout: int) -> Deferred:
        import htcondor2

        return deferToThread(htcondor2.send_alive, None, pid, timeout)


class KeepAlive:
    """Sends DC_CHILDALIVE every :func:`period_of` ``timeout`` seconds on ``clock`` (the reactor, or a fake clock
    in tests), first at once; ``fallback`` takes over for good the first time ``sender`` fails."""

    def __init__(self, clock: Any, sender: Sender, timeout: int, pid: int | None = None,
                 fallback: Sender | None = None) -> None:
        self.sender = sender
        self.fallback = fallback
        self.timeout = timeout
        self.pid = os.getpid() if pid is None else pid
        self.period = period_of(timeout)
        self.sent = 0
        self._in_flight = False
        self._call = LoopingCall(self._beat)
        self._call.clock = clock

    def start(self) -> None:
        log.info("sending DC_CHILDALIVE to {target} every {period} s by {means} (pid {pid}, timeout {timeout} s)",
                 target=self.sender.target, period=self.period, means=self.sender.means, pid=self.pid,
                 timeout=self.timeout)
        self._call.start(self.period, now=True)

    def stop(self) -> None:
        if self._call.running:
            self._call.stop()

    def _beat(self) -> None:
        if self._in_flight:  # the last message is still on its way (a slow master): do not pile up threads
            log.warn("DC_CHILDALIVE to {target}: the previous message is still being sent; skipping this one",
                     target=self.sender.target)
            return
        self._send(self.sender)

    def _send(self, sender: Sender) -> None:
        self._in_flight = True
        sent = maybeDeferred(sender.send, self.pid, self.timeout)
        sent.addCallbacks(self._delivered, self._failed, errbackArgs=(sender,))

    def _delivered(self, _: object) -> None:
        self._in_flight = False
        self.sent += 1
        log.debug("sent DC_CHILDALIVE to {target}", target=self.sender.target)

    def _failed(self, failure: Failure, sender: Sender) -> None:
        self._in_flight = False
        reason = failure.getErrorMessage()
        if sender is self.sender and self.fallback is not None:
            fallback, self.fallback = self.fallback, None
            log.warn("DC_CHILDALIVE by {means} to {target} failed ({reason}); sending it by {fallback_means} to "
                     "{fallback} from now on", means=sender.means, target=sender.target, reason=reason,
                     fallback_means=fallback.means, fallback=fallback.target)
            self.sender = fallback
            self._send(fallback)
            return
        log.warn("DC_CHILDALIVE to {target} by {means} failed: {reason}", target=sender.target, means=sender.means,
                 reason=reason)
