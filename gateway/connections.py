"""Who gets a connection, and how long a request may take to arrive: the defences against starving the gateway.

Every connection holds a file descriptor, and a process has a fixed number of them (``RLIMIT_NOFILE``).  So:

- at start the soft limit is raised to the hard one (:func:`raise_descriptor_limit`, ``max_file_descriptors``);
- every port's factory is wrapped in a :class:`ConnectionGuard`, which decides when a connection is accepted,
  before anything is read from it: a host outside ``allow_soap`` is closed; a caller (the local user owning a
  loopback peer's socket, else the peer's host) that holds ``max_connections_per_caller`` is closed; and once the
  gateway holds ``max_connections`` less ``reserved_connections``, only operators (root and the queue super users,
  on this machine) get one of the reserved ones.  Refusals are logged once per burst, not once per connection;
- a request's headers must all arrive within ``max_header_seconds`` of its first byte (of the connection, for its
  first request, so that a TLS handshake counts too), and its body within ``max_body_seconds`` of its headers
  (:class:`DeadlineChannel`): a client sending a header line every 20 seconds, each byte resetting the idle
  time-out, is closed all the same.  Between requests a keep-alive connection is closed after twisted's idle
  time-out (a minute), as before.
"""

from __future__ import annotations

import enum
import ipaddress
import resource
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.address import UNIXAddress
from twisted.internet.interfaces import IAddress, IDelayedCall, IProtocol, IReactorTime, ITransport
from twisted.logger import Logger
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory
from twisted.python.failure import Failure
from twisted.web import http

from gateway.core.auth import LOCAL_SOCKET_HOST, AccessPolicy, peer_address
from gateway.identity import peers

log = Logger(namespace="birdbath.connections")


# -- the descriptor limit -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class DescriptorLimit:
    """The soft limit on open files before and after the start raised it, and the hard limit."""

    before: int
    soft: int
    hard: int

    def describe(self) -> str:
        if self.soft == self.before:
            return f"open files limited to {self.soft} (hard limit {_limit_text(self.hard)})"
        return f"open files limit raised from {self.before} to {self.soft} (hard limit {_limit_text(self.hard)})"


def _limit_text(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


#: the soft limit used when the hard one is unlimited (the kernel's own ceiling, fs.nr_open, is 1048576 by default)
UNLIMITED_SOFT = 1 << 20


def descriptor_limit() -> int:
    """The soft limit on open files now."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def raise_descriptor_limit(wanted: int = 0) -> DescriptorLimit:
    """Set the soft ``RLIMIT_NOFILE`` to ``wanted`` (``max_file_descriptors``; 0: the hard limit), never above
    the hard limit, as HTCondor's daemons do with ``MAX_FILE_DESCRIPTORS``."""
    before, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = UNLIMITED_SOFT if hard == resource.RLIM_INFINITY else hard
    soft = min(wanted, ceiling) if wanted > 0 else ceiling
    if soft != before:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        except (ValueError, OSError):  # above fs.nr_open: keep what we have
            soft = before
    return DescriptorLimit(before, soft, hard)


def log_descriptor_limit(limit: DescriptorLimit) -> None:
    log.info("{limit} (max_file_descriptors)", limit=limit.describe())


# -- who may hold how many connections -----------------------------------------------------------------------
@dataclass(frozen=True)
class ConnectionLimits:
    """How many connections the gateway serves at once, how many of them one caller may hold, and how many of
    them only operators may take."""

    max_connections: int
    per_caller: int
    reserved: int

    @classmethod
    def computed(cls, descriptors: int, max_connections: int = 0, per_caller: int = 0,
                 reserved: int = 0) -> ConnectionLimits:
        """The limits for a process allowed ``descriptors`` open files; a 0 knob takes its default: three
        quarters of the descriptors for connections (the rest for the queue, logs, jobs' pipes and workers), an
        eighth of those per caller (at most 1024), a sixteenth of them (at most 64) kept for operators."""
        total = max_connections or max(2, descriptors * 3 // 4)
        return cls(total, per_caller or max(1, min(total // 8, 1024)), reserved or max(1, min(total // 16, 64)))


@dataclass(frozen=True)
class Holder:
    """Who holds a connection, for the caps: ``key`` names the caller (a local user by uid, or a host);
    ``operator`` is true for root and the queue super users on this machine; ``owner`` is what the kernel said of
    the client (none: a holder a test names), which the caller of its requests is made from."""

    key: str
    operator: bool = False
    owner: peers.PeerOwner | None = field(default=None, compare=False)


def host_key(host: str) -> str:
    """A remote caller's key: its address, or for IPv6 its /64 (one site's hosts get a /64 each, to use at will)."""
    address = peer_address(host)
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address) if address is not None else host or "?"


def peer_owner(transport: ITransport, kernel: peers.PeerKernel = peers) -> peers.PeerOwner:  # type: ignore[assignment]
    """What the kernel says of a connection's client: the local user owning its socket on this machine (local
    socket, loopback or another address of this host), or that it is remote."""
    peer, local = transport.getPeer(), transport.getHost()
    return peers.owner_of(getattr(peer, "host", ""), getattr(peer, "port", 0), getattr(local, "host", ""),
                          getattr(local, "port", 0), isinstance(peer, UNIXAddress), getattr(transport, "socket", None),
                          kernel)


def holder_of(transport: ITransport, super_users: frozenset[str],
              kernel: peers.PeerKernel = peers) -> Holder:  # type: ignore[assignment]
    """Who holds a connection: the local user owning a peer's socket on this machine, else the peer's host.  The
    kernel is asked here, once per connection: the caller of its requests is made from the same answer
    (:func:`admitted_owner`)."""
    owner = peer_owner(transport, kernel)
    if not owner.local:
        return Holder(host_key(getattr(transport.getPeer(), "host", "")), owner=owner)
    if owner.uid is None:
        return Holder("an unidentified local user", owner=owner)
    return Holder(f"uid {owner.uid}" + (f" ({owner.name})" if owner.name else ""),
                  owner.uid == 0 or owner.name in super_users, owner)


def admitted_owner(transport: ITransport) -> peers.PeerOwner:
    """What the kernel said of a connection's client when the gate admitted it (passed along with the connection to
    a worker); asked now only for a connection no gate admitted (a site served on its own, in unit tests)."""
    owner = getattr(transport, "peer_owner", None)
    return owner if isinstance(owner, peers.PeerOwner) else peer_owner(transport)


class Refused(enum.Enum):
    """Why a connection was closed when it was accepted."""

    NOT_ALLOWED = "not in allow_soap"
    CALLER_FULL = "holds max_connections_per_caller connections"
    GATEWAY_FULL = "the gateway holds max_connections less the reserved_connections kept for operators"


class RefusalLog:
    """Refused connections, logged once per burst: the first refusal of a caller for a reason at once, then
    every ``window`` seconds the number refused since, until a window passes without one.  At most ``size``
    bursts are followed; more are counted together."""

    OTHERS = "other callers"

    def __init__(self, clock: IReactorTime, window: float = 10.0, size: int = 1024) -> None:
        self._clock = clock
        self._window = window
        self._size = size
        self._bursts: dict[tuple[str, Refused], int] = {}

    def refused(self, key: str, reason: Refused) -> None:
        burst = (key, reason)
        if burst not in self._bursts and len(self._bursts) >= self._size:
            burst = (self.OTHERS, reason)
        if burst in self._bursts:
            self._bursts[burst] += 1
            return
        self._bursts[burst] = 0
        log.warn("closing connections from {holder} as they are accepted: {reason}", holder=burst[0],
                 reason=reason.value)
        self._clock.callLater(self._window, self._end_of_window, burst)

    def _end_of_window(self, burst: tuple[str, Refused]) -> None:
        count = self._bursts.pop(burst)
        if count:
            log.warn("closed {count} more connections from {holder} in {window:g} s: {reason}", count=count,
                     holder=burst[0], window=self._window, reason=burst[1].value)
            self._bursts[burst] = 0
            self._clock.callLater(self._window, self._end_of_window, burst)

    @property
    def bursts(self) -> int:
        return len(self._bursts)


@dataclass
class ConnectionGate:
    """The gateway's open connections, counted per holder, and the rules that admit a new one.

    One gate serves every port: descriptors are the process's, whichever port a connection came in by."""

    limits: ConnectionLimits
    policy: AccessPolicy
    refusals: RefusalLog
    #: works out who holds a new connection (:func:`holder_of` in the gateway)
    identify: Callable[[ITransport, frozenset[str]], Holder] = holder_of
    open: int = 0
    #: connections refused once accepted, whose descriptors are freed at the reactor's next turn
    closing: int = 0
    _held: dict[str, int] = field(default_factory=dict)

    def may_accept(self, host: str) -> bool:
        """Whether to give a new connection a protocol at all: not for a host outside ``allow_soap``, nor when the
        connections open and those being closed fill ``max_connections`` (one turn of twisted's accept loop takes
        in hundreds at once: the refused ones still hold a descriptor until the next turn)."""
        reason = None
        if not self.policy.connection_allowed(host):
            reason = Refused.NOT_ALLOWED
        elif self.open + self.closing >= self.limits.max_connections:
            reason = Refused.GATEWAY_FULL
        if reason is None:
            return True
        self.refusals.refused(host_key(host), reason)
        return False

    def admit(self, transport: ITransport) -> Holder | None:
        """The holder of a connection just accepted, counted; None when it is to be closed (logged)."""
        holder = self.identify(transport, self.policy.queue_super_users)
        reason = self.refusal(holder)
        if reason is not None:
            self.refusals.refused(holder.key, reason)
            self.closing += 1
            return None
        self.open += 1
        self._held[holder.key] = self._held.get(holder.key, 0) + 1
        return holder

    def refusal(self, holder: Holder) -> Refused | None:
        limits = self.limits
        if holder.operator:
            return Refused.GATEWAY_FULL if self.open >= limits.max_connections else None
        if self._held.get(holder.key, 0) >= limits.per_caller:
            return Refused.CALLER_FULL
        if self.open >= limits.max_connections - limits.reserved:
            return Refused.GATEWAY_FULL
        return None

    def release(self, holder: Holder | None) -> None:
        """A connection is closed (``None``: one refused when it was accepted)."""
        if holder is None:
            self.closing -= 1
            return
        self.open -= 1
        left = self._held[holder.key] - 1
        if left:
            self._held[holder.key] = left
        else:
            del self._held[holder.key]

    def held_by(self, key: str) -> int:
        return self._held.get(key, 0)


class _Guarded(ProtocolWrapper):
    """A connection the gate decided on when it was accepted: refused ones are closed before anything is read."""

    holder: Holder | None = None

    @property
    def peer_owner(self) -> peers.PeerOwner | None:
        """What the kernel said of the client as the gate admitted it (:func:`admitted_owner`)."""
        return self.holder.owner if self.holder is not None else None

    def makeConnection(self, transport: ITransport) -> None:
        self.holder = self.factory.gate.admit(transport)
        if self.holder is None:
            self.transport = transport
            transport.loseConnection()
            return
        self.factory.open += 1
        super().makeConnection(transport)

    def connectionLost(self, reason: Failure) -> None:  # type: ignore[override]
        self.factory.gate.release(self.holder)
        if self.holder is not None:
            self.factory.open -= 1
            super().connectionLost(reason)


class ConnectionGuard(WrappingFactory):
    """A port's factory behind the gate: hosts outside ``allow_soap`` are never given a protocol (twisted closes
    their socket at once, as it does when the gateway is full), the others are admitted or closed by the gate when
    their transport is made (the caller of a loopback connection is found from both its ends)."""

    protocol = _Guarded
    noisy = False

    def __init__(self, wrapped: Any, gate: ConnectionGate) -> None:
        super().__init__(wrapped)
        self.gate = gate
        #: the connections of this factory's ports open now (the gate counts every port's)
        self.open = 0

    def buildProtocol(self, addr: IAddress) -> IProtocol | None:
        host = LOCAL_SOCKET_HOST if isinstance(addr, UNIXAddress) else getattr(addr, "host", "")
        if not self.gate.may_accept(host):
            return None
        return super().buildProtocol(addr)

    def registerProtocol(self, p: Any) -> None:
        """Connections are counted by the gate; the wrapper keeps no set of its own."""

    def unregisterProtocol(self, p: Any) -> None:
        pass


# -- how long a request may take to arrive -------------------------------------------------------------------
@dataclass(frozen=True)
class RequestDeadlines:
    """Seconds a request's headers (from its first byte) and its body (from its headers) may take to arrive."""

    headers: float = 30.0
    body: float = 120.0


DEFAULT_DEADLINES = RequestDeadlines()


class Phase(enum.Enum):
    """Where a connection is in its current request."""

    IDLE = "idle"  # between requests: twisted's idle time-out applies
    HEADERS = "headers"
    BODY = "body"
    ANSWERING = "answering"  # the request is read; it is being answered


#: the knob that sets each phase's deadline, for the log and the answer
KNOBS = {Phase.HEADERS: "max_header_seconds", Phase.BODY: "max_body_seconds"}


class RequestClock:
    """The deadline of one connection's current request, on a clock (a twisted ``Clock`` in tests).

    ``expired`` is called with the phase whose deadline passed; nothing else is timed here.  One timer serves the
    requests of a connection: a later deadline leaves it where it is (when it fires, it waits out the rest), a phase
    with no deadline lets it run out unheeded, so that a kept-alive connection's requests schedule a timer about
    once per ``headers`` seconds rather than twice per request (moving a reactor's timer earlier, or making one,
    costs more the more timers there are)."""

    def __init__(self, clock: IReactorTime, deadlines: RequestDeadlines, expired: Callable[[Phase], None]) -> None:
        self._clock = clock
        self._deadlines = deadlines
        self._expired = expired
        self.phase = Phase.IDLE
        self._due: float | None = None
        self._timer: IDelayedCall | None = None

    def headers_begin(self) -> None:
        """A request's first byte arrived (or its connection was made)."""
        if self.phase is Phase.IDLE:
            self._enter(Phase.HEADERS, self._deadlines.headers)

    def body_begins(self) -> None:
        if self.phase is Phase.HEADERS:
            self._enter(Phase.BODY, self._deadlines.body)

    def received(self) -> None:
        """The whole request arrived: it is answered with no deadline of ours."""
        self._enter(Phase.ANSWERING, None)

    def answered(self) -> None:
        self._enter(Phase.IDLE, None)

    def stop(self) -> None:
        self._enter(Phase.IDLE, None)
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def _enter(self, phase: Phase, seconds: float | None) -> None:
        self.phase = phase
        if not seconds:
            self._due = None
            return
        self._due = self._clock.seconds() + seconds
        if self._timer is not None and self._timer.active():
            if self._timer.getTime() <= self._due:
                return  # it fires first, and waits out the rest
            self._timer.cancel()
        self._timer = self._clock.callLater(seconds, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if self._due is None:
            return
        left = self._due - self._clock.seconds()
        if left > 0:
            self._timer = self._clock.callLater(left, self._fire)
        else:
            self._due = None
            self._expired(self.phase)


class DeadlineChannel(http.HTTPChannel):
    """twisted's HTTP/1.1 channel with a total deadline for each request's headers and for its body.

    A request whose deadline passes gets ``408 Request Timeout`` and its connection is closed (and aborted if the
    client does not read the answer within twisted's ``abortTimeout``)."""

    def __init__(self, deadlines: RequestDeadlines) -> None:
        super().__init__()
        self._deadlines = deadlines
        self.request_clock: RequestClock | None = None
        self._host: IAddress | None = None

    def getHost(self) -> IAddress:
        """The connection's own address, asked of the socket once: twisted's ``Request`` records it for every request,
        and each asking is a ``getsockname`` system call (about 5 % of a small request's CPU)."""
        if self._host is None:
            self._host = super().getHost()
        return self._host

    def connectionMade(self) -> None:
        super().connectionMade()
        self.request_clock = RequestClock(self.site.reactor, self._deadlines, self._too_slow)
        self.request_clock.headers_begin()

    def dataReceived(self, data: bytes) -> None:
        if self.request_clock is not None:
            self.request_clock.headers_begin()
        super().dataReceived(data)

    def lineReceived(self, line: bytes) -> None:
        if self.request_clock is not None:  # a pipelined request, played back from the buffer
            self.request_clock.headers_begin()
        super().lineReceived(line)

    def allHeadersReceived(self) -> None:
        if self.request_clock is not None and self.length != 0:  # no body: all of it is received at once
            self.request_clock.body_begins()
        super().allHeadersReceived()

    def allContentReceived(self) -> None:
        if self.request_clock is not None:
            self.request_clock.received()
        super().allContentReceived()

    def requestDone(self, request: http.Request) -> None:
        if self.request_clock is not None:
            self.request_clock.answered()
        super().requestDone(request)

    def connectionLost(self, reason: Failure) -> None:  # type: ignore[override]
        if self.request_clock is not None:
            self.request_clock.stop()
        super().connectionLost(reason)

    def _too_slow(self, phase: Phase) -> None:
        seconds = self._deadlines.headers if phase is Phase.HEADERS else self._deadlines.body
        message = f"The request's {phase.value} did not arrive within {seconds:g} s ({KNOBS[phase]})"
        log.info("closing the connection from {client}: {message}", client=getattr(self.getPeer(), "host", "?"),
                 message=message)
        body = (message + "\n").encode()
        self.transport.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain; charset=utf-8\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        self.setTimeout(None)
        if self.abortTimeout is not None:
            self._abortingCall = self.callLater(self.abortTimeout, self.forceAbortClient)
        self.loseConnection()
