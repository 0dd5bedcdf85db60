"""condor_master's keepalive: DC_CHILDALIVE with our pid and timeout every timeout/3 seconds, from the reactor.

The master is :class:`gateway.testing_daemons.MasterStandIn`, written from HTCondor's source.  Cadence is driven by
a fake clock in the unit tests; the end-to-end tests run real gateway processes, one of them with its reactor
blocked for a while by the test's own driver (no hook in the gateway): the messages stop while the reactor is
blocked and resume after, which a timer thread of its own could not show."""

from __future__ import annotations

import os
import signal
import socket
import struct
import sys
import time

import pytest
from twisted.internet.task import Clock

from gateway.daemon import inherit, keepalive
from gateway.daemon.service import keepalive_for
from gateway.testing import GatewayProcess
from gateway.testing_daemons import DC_CHILDALIVE, MasterStandIn, read_connect_request
from tests.test_execution import wait_until

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = pytest.mark.gateway


@pytest.fixture
def master():
    with MasterStandIn() as standin:
        yield standin


def test_the_datagram_is_the_2009_recipes(master):
    assert keepalive.childalive(4321, 30) == struct.pack("!qqq", 60008, 4321, 30)
    clock = Clock()
    beats = keepalive.KeepAlive(clock, keepalive.DatagramSender("127.0.0.1", master.port), timeout=30, pid=4321)
    beats.start()
    for _ in range(5):
        clock.advance(10)  # timeout/3
    clock.advance(9)  # not yet the next one
    wait_until(lambda: len(master.messages) == 6)
    beats.stop()
    assert {(m.transport, m.pid, m.timeout) for m in master.messages} == {("udp", 4321, 30)}
    clock.advance(100)
    time.sleep(0.2)
    assert len(master.messages) == 6


@pytest.mark.parametrize("timeout, period", [(3600, 1200), (30, 10), (2, 1), (1, 1)])
def test_the_period_is_a_third_of_the_timeout(timeout, period):
    assert keepalive.period_of(timeout) == period


def test_the_timeout_comes_from_our_knob_then_htcondors_per_daemon_form_then_the_general_one():
    knobs = {"NOT_RESPONDING_TIMEOUT": "600", "BIRDBATH_NOT_RESPONDING_TIMEOUT": "120"}
    assert keepalive.resolve_timeout(45, knobs.get) == 45
    assert keepalive.resolve_timeout(0, knobs.get) == 120
    assert keepalive.resolve_timeout(0, {"NOT_RESPONDING_TIMEOUT": 600}.get) == 600
    assert keepalive.resolve_timeout(0, {"BIRDBATH_NOT_RESPONDING_TIMEOUT": "soon"}.get) == 3600
    assert keepalive.resolve_timeout(0, {}.get) == keepalive.DEFAULT_TIMEOUT


def test_condor_inherit_names_the_parent():
    parent = inherit.parse("4242 <10.0.0.5:9618?addrs=10.0.0.5-9618&sock=master_4242_1a2b> 0 0")
    assert (parent.pid, parent.address.host, parent.address.port) == (4242, "10.0.0.5", 9618)
    assert parent.address.shared_port_id == "master_4242_1a2b"
    assert inherit.parent({}) is None
    assert inherit.Sinful.parse("<[::1]:1234>").host == "::1"
    for bad in ("", "abc <1.2.3.4:5>", "12", "12 1.2.3.4:5", "12 <host>", "0 <1.2.3.4:5>"):
        with pytest.raises(ValueError):
            inherit.parse(bad)


def test_which_keepalive(master):
    clock = Clock()
    assert keepalive_for(clock, "", 30, environ={}) is None
    assert keepalive_for(clock, "", 30, environ={"CONDOR_INHERIT": "garbage"}) is None
    explicit = keepalive_for(clock, f"127.0.0.1:{master.port}", 30, environ={})
    assert explicit.sender.means == "UDP datagram" and explicit.fallback is None
    under_master = keepalive_for(clock, "", 0, environ={"CONDOR_INHERIT": f"1 {master.sinful} 0 0"},
                                 condor_param={"NOT_RESPONDING_TIMEOUT": "90"}.get)
    assert under_master.sender.means == "htcondor2.send_alive" and under_master.timeout == 90
    assert under_master.fallback.means == "raw CEDAR command over TCP"


def test_the_tcp_message_goes_through_the_shared_port_when_the_parent_is_behind_one():
    sender = keepalive.StreamSender(Clock(), inherit.Sinful.parse("<127.0.0.1:9618?sock=master_1_ab>"))
    ours, shared_port = socket.socketpair()
    with ours, shared_port:
        ours.sendall(sender.message(77, 300))
        request = read_connect_request(shared_port)  # as the condor_shared_port stand-in reads it
        assert (request.shared_port_id, request.client_name) == ("master_1_ab", f"BIRDBATH {os.getpid()}")
        assert shared_port.recv(100) == struct.pack("!BIqqq", 1, 24, DC_CHILDALIVE, 77, 300)


class WedgedGateway(GatewayProcess):
    """The real gateway, run by a driver that blocks its reactor thread for ``seconds`` after ``after`` seconds."""

    def __init__(self, *args, after: float, seconds: float, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.after, self.seconds = after, seconds

    def command(self, port_files):
        args = super().command(port_files)
        driver = ("import sys, time; from twisted.internet import reactor; "
                  f"reactor.callLater({self.after}, time.sleep, {self.seconds}); "
                  "from gateway.cli import main; sys.exit(main(sys.argv[1:]))")
        return [sys.executable, "-c", driver, *args[3:]]


def test_the_keepalive_stops_while_the_reactor_is_blocked(master, tmp_path):
    gateway = WedgedGateway(tmp_path / "state", "[daemon]\nnot_responding_timeout = 3\n", tmp_path,
                            ("--master-keepalive", f"127.0.0.1:{master.port}"), after=4.0, seconds=4.0).start()
    try:
        wait_until(lambda: len(master.messages) >= 10, 30)
        assert {(m.transport, m.pid, m.timeout) for m in master.messages} == {("udp", gateway.process.pid, 3)}
        gaps = [b.received - a.received for a, b in zip(master.messages, master.messages[1:])]
        assert max(gaps) >= 3.5  # nothing while the reactor was blocked for 4 s...
        assert sorted(gaps)[len(gaps) // 2] < 1.6  # ...and a message a second otherwise
        assert "sending DC_CHILDALIVE to 127.0.0.1:" in gateway.log()
    finally:
        gateway.stop()


def test_under_a_master_the_bindings_are_tried_then_the_raw_command(master, tmp_path, monkeypatch):
    monkeypatch.setenv("CONDOR_INHERIT", f"{os.getpid()} {master.sinful} 0 0")
    gateway = GatewayProcess(tmp_path / "state", "[daemon]\nnot_responding_timeout = 3\n", tmp_path).start()
    try:
        wait_until(lambda: len(master.messages) >= 3, 60)
        assert master.negotiations >= 1  # htcondor2.send_alive started a security negotiation
        assert {(m.transport, m.pid, m.timeout) for m in master.messages} == {("tcp", gateway.process.pid, 3)}
        log = gateway.log()
        assert "by htcondor2.send_alive" in log and "from now on" in log
    finally:
        gateway.stop()


def test_sigquit_is_a_fast_shutdown(tmp_path):
    gateway = GatewayProcess(tmp_path / "state", None, tmp_path).start()
    gateway.process.send_signal(signal.SIGQUIT)
    assert gateway.process.wait(timeout=30) == 0
    assert "fast shutdown" in gateway.log()
