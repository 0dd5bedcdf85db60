"""Who gets a connection and how long a request may take to arrive (gateway.connections), on a fake clock: the
gate's caps and reserve, the once-per-burst log, and the header and body deadlines of the real HTTP channel."""

from __future__ import annotations

import resource

import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.logger import capturedLogs
from twisted.python.failure import Failure
from twisted.web import resource as web_resource

from gateway.config import ConfigError, GatewayConfig, check_limits
from gateway.connections import (
    ConnectionGate,
    ConnectionGuard,
    ConnectionLimits,
    DeadlineChannel,
    Holder,
    Phase,
    RefusalLog,
    Refused,
    RequestClock,
    RequestDeadlines,
    holder_of,
    host_key,
    raise_descriptor_limit,
)
from gateway.core.auth import AccessPolicy, Authentication, Caller, HostList
from gateway.http import GatewaySite
from gateway.identity import peers
from gateway.identity.callers import Identification


# -- the descriptor limit and the limits computed from it -----------------------------------------------------
def test_the_soft_limit_is_raised_to_the_hard_one_or_to_the_knob():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
        raised = raise_descriptor_limit()
        assert raised.before == min(256, hard) and raised.soft == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert raised.soft == (hard if hard != resource.RLIM_INFINITY else 1 << 20)
        assert "raised from" in raised.describe() or raised.soft == raised.before
        assert raise_descriptor_limit(200).soft == min(200, hard)
        assert raise_descriptor_limit(10 ** 12).soft == raised.soft  # never above the hard limit
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("descriptors, limits", [
    (1024, ConnectionLimits(768, 96, 48)),
    (256, ConnectionLimits(192, 24, 12)),
    (1 << 20, ConnectionLimits(786432, 1024, 64)),
    (4, ConnectionLimits(3, 1, 1)),
])
def test_the_default_limits_follow_the_descriptor_limit(descriptors, limits):
    assert ConnectionLimits.computed(descriptors) == limits


def test_knobs_replace_the_computed_limits_and_are_checked():
    config = GatewayConfig(max_connections=100, max_connections_per_caller=10, reserved_connections=5)
    assert config.connection_limits(1024) == ConnectionLimits(100, 10, 5)
    assert GatewayConfig(max_connections_per_caller=7).connection_limits(1024) == ConnectionLimits(768, 7, 48)
    for bad in (GatewayConfig(max_connections=10, reserved_connections=10),
                GatewayConfig(max_connections=10, max_connections_per_caller=11)):
        with pytest.raises(ConfigError):
            check_limits(bad)


def test_remote_callers_are_keyed_by_address_ipv6_ones_by_their_64():
    assert host_key("192.0.2.7") == "192.0.2.7"
    assert host_key("::ffff:192.0.2.7") == "192.0.2.7"
    assert host_key("2001:db8:1:2:aaaa::1") == host_key("2001:db8:1:2:bbbb::2") == "2001:db8:1:2::/64"
    assert host_key("2001:db8:1:3::1") != host_key("2001:db8:1:2::1")


# -- the gate -----------------------------------------------------------------------------------------------
class Peer(StringTransport):
    """A transport whose holder the test names (the gate's identify function reads it)."""

    def __init__(self, holder: Holder, host: str = "127.0.0.1") -> None:
        super().__init__(peerAddress=IPv4Address("TCP", host, 40000), hostAddress=IPv4Address("TCP", host, 1984))
        self.holder = holder


def gate(limits: ConnectionLimits, clock: Clock, allow: tuple[str, ...] = ("*",)) -> ConnectionGate:
    return ConnectionGate(limits, AccessPolicy(allow_soap=HostList(allow)), RefusalLog(clock),
                          identify=lambda transport, _: transport.holder)


class Echo(web_resource.Resource):
    isLeaf = True

    def render_POST(self, request):
        return b"ok:" + request.content.read()


def guarded(gate_: ConnectionGate, clock: Clock) -> ConnectionGuard:
    return ConnectionGuard(GatewaySite(Echo(), max_body=1000, identification=Identification(), reactor=clock), gate_)


def connect(guard: ConnectionGuard, transport: Peer):
    """Accept a connection as twisted's port does: the protocol, or None (twisted closes the socket at once)."""
    protocol = guard.buildProtocol(transport.getPeer())
    if protocol is not None:
        protocol.makeConnection(transport)
    return protocol


def kept(guard: ConnectionGuard, transport: Peer) -> bool:
    """Whether a connection is kept once accepted (not closed before a byte is read)."""
    return connect(guard, transport) is not None and not transport.disconnecting


ALICE, BOB, ROOT = Holder("uid 1001 (alice)"), Holder("uid 1002 (bob)"), Holder("uid 0 (root)", operator=True)


def test_one_caller_gets_its_share_and_others_still_get_in():
    clock = Clock()
    gate_ = gate(ConnectionLimits(max_connections=10, per_caller=3, reserved=2), clock)
    guard = guarded(gate_, clock)
    assert [kept(guard, Peer(ALICE)) for _ in range(6)] == [True] * 3 + [False] * 3
    assert gate_.held_by(ALICE.key) == 3 and gate_.open == 3 and gate_.closing == 3
    assert kept(guard, Peer(BOB))


def test_the_reserve_is_for_operators_alone():
    clock = Clock()
    gate_ = gate(ConnectionLimits(max_connections=6, per_caller=100, reserved=2), clock)
    guard = guarded(gate_, clock)
    assert [kept(guard, Peer(Holder(f"host {n}"))) for n in range(5)] == [True] * 4 + [False]
    gate_.release(None)  # the refused one's descriptor is freed at the reactor's next turn
    assert [kept(guard, Peer(ROOT)) for _ in range(3)] == [True, True, False]  # the total is everyone's
    assert gate_.open == 6


class CountingKernel:
    """A kernel whose loopback clients on port 40000 are nobody's and on other ports unproven, counting the socket
    look-ups asked of it."""

    def __init__(self) -> None:
        self.lookups = 0

    def is_this_host(self, address) -> bool:
        return address.is_loopback

    def tcp_peer_owner(self, client: peers.Endpoint, server: peers.Endpoint, accepted) -> int:
        self.lookups += 1
        if client.port != 40000:
            raise peers.Unproven("its socket is FIN_WAIT2, no longer a process's")
        return 65534

    def unix_peer_owner(self, sock) -> int:
        raise AssertionError("no local-socket connection here")

    user_name = staticmethod(peers.user_name)


@pytest.mark.parametrize(("port", "holder", "caller", "refusal"), [
    (40000, "uid 65534 (nobody)", Caller("127.0.0.1", "nobody", Authentication.SOCKET), None),
    (40001, "an unidentified local user", None, "loopback connection could not be identified (its socket is FIN")])
def test_the_kernel_is_asked_once_per_connection_for_the_gate_and_the_caller(port, holder, caller, refusal):
    clock, kernel = Clock(), CountingKernel()
    gate_ = ConnectionGate(ConnectionLimits(max_connections=10, per_caller=3, reserved=1),
                           AccessPolicy(allow_soap=HostList(("*",))), RefusalLog(clock),
                           identify=lambda transport, super_users: holder_of(transport, super_users, kernel))
    transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", port),
                                hostAddress=IPv4Address("TCP", "127.0.0.1", 1984))
    protocol = connect(guarded(gate_, clock), transport)
    assert kernel.lookups == 1 and gate_.held_by(holder) == 1
    connection = protocol.wrappedProtocol.birdbath_connection  # the channel's: its caller made as it was accepted
    assert connection.caller == caller
    assert (connection.refusal is None) if refusal is None else (refusal in connection.refusal.message)


def test_connections_being_closed_count_until_their_descriptors_are_freed():
    """twisted accepts hundreds of connections in one turn of its loop; those refused hold their descriptors until
    the next: beyond max_connections the new ones get no protocol and are closed at once."""
    clock = Clock()
    gate_ = gate(ConnectionLimits(max_connections=10, per_caller=2, reserved=1), clock)
    guard = guarded(gate_, clock)
    results = [(connect(guard, transport) is not None, transport.disconnecting)
               for transport in (Peer(ALICE) for _ in range(20))]
    assert results == [(True, False)] * 2 + [(True, True)] * 8 + [(False, False)] * 10
    assert gate_.open + gate_.closing == 10


def test_a_closed_connection_gives_its_place_back():
    clock = Clock()
    gate_ = gate(ConnectionLimits(max_connections=10, per_caller=1, reserved=1), clock)
    guard = guarded(gate_, clock)
    protocol = connect(guard, Peer(ALICE))
    refused = connect(guard, Peer(ALICE))
    assert gate_.open == 1 and gate_.closing == 1
    for lost in (protocol, refused):
        lost.connectionLost(Failure(ConnectionDone()))
    assert gate_.open == gate_.closing == 0 and gate_.held_by(ALICE.key) == 0
    assert kept(guard, Peer(ALICE))


def test_a_host_outside_allow_soap_gets_no_protocol_at_all():
    clock = Clock()
    gate_ = gate(ConnectionLimits(10, 10, 1), clock, allow=("10.0.0.0/8",))
    guard = guarded(gate_, clock)
    assert guard.buildProtocol(IPv4Address("TCP", "127.0.0.1", 5000)) is None
    assert guard.buildProtocol(IPv4Address("TCP", "10.1.2.3", 5000)) is not None
    assert gate_.open == gate_.closing == 0  # counted only once connected


def test_refusals_are_logged_once_per_burst():
    clock = Clock()
    gate_ = gate(ConnectionLimits(max_connections=100, per_caller=1, reserved=1), clock)
    guard = guarded(gate_, clock)
    with capturedLogs() as events:
        for _ in range(50):
            connect(guard, Peer(ALICE))
        clock.advance(10)
        connect(guard, Peer(ALICE))
        clock.advance(10)
        clock.advance(10)  # a quiet window ends the burst
        connect(guard, Peer(ALICE))
    lines = [event["log_format"].format(**event) for event in events
             if "connections from" in event.get("log_format", "")]
    assert lines == [
        ("closing connections from uid 1001 (alice) as they are accepted: "
         "holds max_connections_per_caller connections"),
        "closed 48 more connections from uid 1001 (alice) in 10 s: holds max_connections_per_caller connections",
        "closed 1 more connections from uid 1001 (alice) in 10 s: holds max_connections_per_caller connections",
        ("closing connections from uid 1001 (alice) as they are accepted: "
         "holds max_connections_per_caller connections"),
    ]


def test_the_burst_log_follows_a_bounded_number_of_callers():
    clock = Clock()
    refusals = RefusalLog(clock, size=10)
    with capturedLogs() as events:
        for n in range(1000):
            refusals.refused(f"host {n}", Refused.GATEWAY_FULL)
    assert refusals.bursts == 11 and len(events) == 11
    assert events[-1]["log_format"].format(**events[-1]).startswith("closing connections from other callers")


# -- the deadlines ------------------------------------------------------------------------------------------
def test_the_request_clock_times_each_phase_once():
    clock = Clock()
    expired: list[Phase] = []
    timer = RequestClock(clock, RequestDeadlines(headers=30, body=120), expired.append)
    timer.headers_begin()
    clock.advance(29)
    timer.headers_begin()  # more bytes of the same headers: the deadline stays where it was
    clock.advance(1)
    assert expired == [Phase.HEADERS]
    timer.answered()
    timer.headers_begin()
    timer.body_begins()
    clock.advance(119)
    timer.received()
    clock.advance(1000)
    assert expired == [Phase.HEADERS] and not clock.getDelayedCalls()
    timer.answered()
    timer.headers_begin()
    timer.body_begins()
    clock.advance(120)
    assert expired == [Phase.HEADERS, Phase.BODY]


DEADLINES = RequestDeadlines(headers=30, body=120)


def channel(clock: Clock, deadlines: RequestDeadlines = DEADLINES):
    site = GatewaySite(Echo(), max_body=1000, identification=Identification(), deadlines=deadlines, reactor=clock)
    protocol = site.buildProtocol(IPv4Address("TCP", "192.0.2.7", 40000))
    assert isinstance(protocol, DeadlineChannel)
    transport = StringTransport(peerAddress=IPv4Address("TCP", "192.0.2.7", 40000))
    protocol.makeConnection(transport)
    return protocol, transport


def test_headers_sent_a_line_every_20_seconds_are_cut_off_at_the_deadline():
    clock = Clock()
    protocol, transport = channel(clock)
    protocol.dataReceived(b"POST / HTTP/1.1\r\nHost: x\r\n")
    clock.advance(20)
    protocol.dataReceived(b"X-Slow: 1\r\n")  # each byte resets twisted's idle time-out, not this deadline
    assert not transport.disconnecting
    clock.advance(10)
    assert transport.disconnecting
    assert transport.value().startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert b"max_header_seconds" in transport.value()


def test_a_silent_connection_is_closed_at_the_header_deadline():
    clock = Clock()
    _, transport = channel(clock, RequestDeadlines(headers=5, body=120))
    clock.advance(4.9)
    assert not transport.disconnecting
    clock.advance(0.1)
    assert transport.disconnecting


def test_a_body_trickling_in_is_cut_off_at_its_deadline():
    clock = Clock()
    protocol, transport = channel(clock)
    protocol.dataReceived(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
    clock.advance(29)  # the headers' deadline no longer applies
    for _ in range(4):
        protocol.dataReceived(b"x")
        clock.advance(20)
    assert not transport.disconnecting  # 109 s after the headers
    clock.advance(11)
    assert transport.disconnecting and b"max_body_seconds" in transport.value()


def test_keep_alive_requests_each_get_their_own_deadline_and_idle_is_as_before():
    clock = Clock()
    protocol, transport = channel(clock)
    for idle in (5, 50, 50):  # the first request's deadline counts from the connection, the others' from their
        clock.advance(idle)   # first byte: a keep-alive connection idles under twisted's time-out, as before
        protocol.dataReceived(b"POST / HTTP/1.1\r\nHost: x\r\n")
        clock.advance(20)
        protocol.dataReceived(b"Content-Length: 2\r\n\r\nhi")
        assert transport.value().endswith(b"ok:hi"), transport.value()
        transport.clear()
    assert not transport.disconnecting
    clock.advance(59)
    assert not transport.disconnecting
    clock.advance(1)  # twisted's idle time-out, as before
    assert transport.disconnecting and b"408" not in transport.value()


def test_pipelined_requests_are_answered_in_turn():
    clock = Clock()
    protocol, transport = channel(clock)
    protocol.dataReceived(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na"
                          b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nb")
    assert transport.value().count(b"HTTP/1.1 200") == 2 and transport.value().endswith(b"ok:b")
    clock.advance(30)
    assert not transport.disconnecting


class HostCountingTransport(StringTransport):
    """A transport that counts how often its own address is asked for (a ``getsockname`` on a real socket)."""

    def __init__(self) -> None:
        super().__init__(hostAddress=IPv4Address("TCP", "192.0.2.1", 1984),
                         peerAddress=IPv4Address("TCP", "192.0.2.7", 40000))
        self.host_asked = 0

    def getHost(self):
        self.host_asked += 1
        return super().getHost()


def test_the_connections_own_address_is_asked_of_the_socket_once_for_all_its_requests():
    """Not once per request: each asking is a system call."""
    site = GatewaySite(Echo(), max_body=1000, identification=Identification(), deadlines=DEADLINES, reactor=Clock())
    protocol = site.buildProtocol(IPv4Address("TCP", "192.0.2.7", 40000))
    transport = HostCountingTransport()
    protocol.makeConnection(transport)
    requests = []
    protocol.requestFactory = lambda *args, factory=protocol.requestFactory, **kwargs: requests.append(
        factory(*args, **kwargs)) or requests[-1]
    asked_at_connection = transport.host_asked  # (identification reads the connection's addresses once)
    for body in (b"a", b"b", b"c"):
        protocol.dataReceived(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n" + body)
    assert transport.value().count(b"HTTP/1.1 200") == 3
    assert [request.getHost() for request in requests] == [IPv4Address("TCP", "192.0.2.1", 1984)] * 3
    assert transport.host_asked == asked_at_connection + 1


class CountingClock(Clock):
    def __init__(self) -> None:
        super().__init__()
        self.scheduled = 0

    def callLater(self, delay, function, *args, **kwargs):
        if getattr(function, "__self__", None).__class__ is RequestClock:
            self.scheduled += 1
        return super().callLater(delay, function, *args, **kwargs)


def test_kept_alive_requests_do_not_schedule_a_timer_each():
    clock = CountingClock()
    protocol, transport = channel(clock)
    for _ in range(1000):
        protocol.dataReceived(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
        clock.advance(0.01)
    assert transport.value().count(b"ok:hi") == 1000
    assert clock.scheduled == 1  # in 10 s, the first request's; twisted's idle time-out makes one per request
    clock.advance(25)
    protocol.dataReceived(b"POST / HTTP/1.1\r\nHost: x\r\n")  # headers under way when the timer fires: once more
    clock.advance(30)
    assert clock.scheduled == 2 and transport.disconnecting


def test_a_connection_the_site_does_not_keep_ends_after_its_answer_with_connection_close():
    """GatewaySite.keep_open, asked as each request arrives (the core with workers keeps a connection only while it
    is alone): kept, the next request is served on it; not kept, the answer says Connection: close and it ends."""
    keep = [True]
    clock = Clock()
    protocol, transport = channel(clock)
    protocol.site.keep_open = lambda: keep[0]
    request = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na"
    protocol.dataReceived(request)
    assert transport.value().count(b"HTTP/1.1 200") == 1 and not transport.disconnecting
    assert b"Connection: close" not in transport.value()
    keep[0] = False
    protocol.dataReceived(request)
    assert transport.value().count(b"HTTP/1.1 200") == 2
    assert transport.value().split(b"HTTP/1.1 200")[2].count(b"Connection: close") == 1
    assert transport.disconnecting
