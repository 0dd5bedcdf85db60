"""The core's pool of worker processes (gateway.workers.parent.WorkerPool) on a fake reactor: restarts after a
worker's death or a failed start, and the end at shutdown."""

from __future__ import annotations

import errno
import signal

import pytest
from twisted.internet.error import ProcessTerminated
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.logger import capturedLogs, formatEvent
from twisted.python.failure import Failure

from gateway.workers import parent
from gateway.workers.inputs import EXIT_REFUSED
from gateway.workers.link import Link, Message
from gateway.workers.parent import NOT_RESPONDING, PING_INTERVAL, RESTART_DELAYS, STOP_GRACE, WorkerPool


class Process:
    def __init__(self, pid: int) -> None:
        self.pid = pid


class Reactor(Clock):
    """A clock that starts processes by number and refuses the starts listed in ``refused`` (1 = the first)."""

    def __init__(self, refused: tuple[int, ...] = ()) -> None:
        super().__init__()
        self.starts = 0
        self.refused = refused
        self.links = []

    def adoptStreamConnection(self, fd, family, factory):
        link = factory.buildProtocol(None)
        link.connectionMade = lambda: None  # (a link's start sends the services' constants, which these have none of)
        link.makeConnection(StringTransport())
        self.links.append(link)

    def spawnProcess(self, protocol, executable, args, env=None, childFDs=None):
        self.starts += 1
        if self.starts in self.refused:
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
        return Process(1000 + self.starts)


def started(count: int, refused: tuple[int, ...] = ()) -> tuple[Reactor, WorkerPool]:
    reactor = Reactor(refused)
    pool = WorkerPool(reactor, count, [], dict)
    pool.start()
    return reactor, pool


@pytest.fixture
def signalled(monkeypatch) -> list[tuple[int, int]]:
    """The signals the pool sends, by pid (none is sent)."""
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(parent.os, "kill", lambda pid, number: sent.append((pid, number)))
    return sent


def killed(worker) -> None:
    worker.processEnded(Failure(ProcessTerminated(signal=signal.SIGKILL)))


def test_a_worker_that_dies_is_started_again():
    reactor, pool = started(2)
    reactor.advance(60)
    killed(pool.workers[1])
    reactor.advance(RESTART_DELAYS[0])
    assert reactor.starts == 3 and pool.workers[1].pid == 1003


def test_a_replacement_that_cannot_start_is_tried_again_later_never_left_empty():
    reactor, pool = started(1, refused=(2, 3))  # the first replacement's fork fails twice (memory pressure, say)
    reactor.advance(60)
    killed(pool.workers[0])
    reactor.advance(RESTART_DELAYS[0])  # refused
    assert pool.workers[0].pid == 0 and pool.workers[0].link is None
    assert reactor.links[-1].transport.disconnecting  # the link made for it is closed, not left open
    reactor.advance(RESTART_DELAYS[1])  # refused again: the delays grow as for workers dying young
    assert reactor.starts == 3 and pool.workers[0].link is None
    reactor.advance(RESTART_DELAYS[2])
    assert reactor.starts == 4 and pool.workers[0].pid == 1004 and pool.workers[0].link is not None


def test_shutdown_kills_only_the_workers_still_running(signalled):
    reactor, pool = started(2)
    stopping = pool.stop()
    stopping.send(None)  # (SIGTERM to both, then waits for them)
    pool.workers[0].processEnded(Failure(ProcessTerminated(signal=signal.SIGTERM)))  # the first ends at once
    reactor.advance(STOP_GRACE)  # the second hangs: killed, and only it (the first's pid may be another's now)
    assert signalled == [(1001, signal.SIGTERM), (1002, signal.SIGTERM), (1002, signal.SIGKILL)]
    pool.workers[1].processEnded(Failure(ProcessTerminated(signal=signal.SIGKILL)))
    with pytest.raises(StopIteration):
        stopping.send(None)


def test_a_scrape_a_hung_worker_never_answers_is_forgotten_when_its_wait_ends():
    reactor, pool = started(1)
    link = pool.workers[0].link
    link.transport, link.alive = StringTransport(), True
    for _ in range(3):  # three scrapes of /metrics while the worker is stuck
        asked = link.ask_figures().addTimeout(parent.FIGURES_WAIT, reactor)
        asked.addErrback(lambda failure: None)
        reactor.advance(parent.FIGURES_WAIT)
    assert link._asked == {}


def test_a_worker_that_stops_answering_is_killed_and_started_again(signalled):
    """Its connections and calls would hang with it, and nothing else notices: the core's keepalive goes on."""
    reactor, pool = started(2)
    hung, alive = pool.workers
    for worker in pool.workers:
        worker.link.ready = worker.link.alive = True  # (READY heard; the fake start sends no constants)
    framer = Link()
    framer.makeConnection(StringTransport())
    framer.send(Message.CLOSED, 999)  # (any message the worker sends says it is alive)
    said = framer.transport.value()
    for _ in range(int(NOT_RESPONDING / PING_INTERVAL) + 1):
        reactor.advance(PING_INTERVAL)
        alive.link.dataReceived(said)
    assert b"scrape" in hung.link.transport.value()  # it was asked, and never answered
    assert signalled == [(hung.pid, signal.SIGKILL)]
    reactor.advance(PING_INTERVAL)
    assert signalled == [(hung.pid, signal.SIGKILL)]  # once
    killed(hung)
    reactor.advance(RESTART_DELAYS[0])
    assert pool.workers[0] is not hung and pool.workers[0].pid == 1003


class Own(Factory):
    """The core's own protocols for a front (lone_connection_in_core), counting its starts."""

    protocol = Protocol

    def __init__(self) -> None:
        self.starts = 0

    def startFactory(self) -> None:
        self.starts += 1


@pytest.mark.parametrize("alive, ready, alone, served_by", [
    (True, True, False, "worker"), (True, True, True, "core"), (True, False, False, "core"),
    (False, False, False, "core"), (False, False, True, "core")],
    ids=["a worker's", "the lone one", "the workers starting", "none alive", "none alive and alone"])
def test_the_core_serves_the_lone_connection_and_any_while_no_worker_serves(alive, ready, alone, served_by):
    """A connection that arrives while the workers start is served at once, not kept waiting for their start."""
    reactor = Reactor()
    pool = WorkerPool(reactor, 2, [], dict, alone=lambda: alone)
    pool.start()
    for link in reactor.links:
        link.alive = alive
        link.ready = ready
    core = Own()
    factory = pool.factory(parent.Front.SITE, core)
    factory.doStart()  # (as its port does)
    assert core.starts == 1  # the core's protocols are started with the port (the access log is opened there)
    protocol = factory.buildProtocol(None)
    assert isinstance(protocol, parent.HandOff) == (served_by == "worker")
    factory.doStop()
    assert core.numPorts == 0


def test_without_the_cores_protocols_every_connection_is_handed_off():
    pool = WorkerPool(Reactor(), 2, [], dict, alone=lambda: True)
    assert isinstance(pool.factory(parent.Front.SITE).buildProtocol(None), parent.HandOff)


def test_a_worker_that_refuses_its_inputs_is_not_started_again(signalled):
    reactor, pool = started(2)
    first = pool.workers[0]
    first.processEnded(Failure(ProcessTerminated(exitCode=EXIT_REFUSED)))
    reactor.advance(max(RESTART_DELAYS) * 10)
    assert reactor.starts == 2  # not started again
    assert pool.workers[0] is first
    assert list(pool.refused) == [0]  # (counted by birdbath_workers_refused)
    pool.workers[1].processEnded(Failure(ProcessTerminated(exitCode=1)))
    reactor.advance(RESTART_DELAYS[0])
    assert reactor.starts == 3  # any other end is started again


def test_the_workers_are_given_the_digest_of_what_the_core_read():
    reactor = Reactor()
    commands = []
    spawn = reactor.spawnProcess
    reactor.spawnProcess = lambda protocol, executable, args, **kw: commands.append(args) or spawn(
        protocol, executable, args, **kw)
    WorkerPool(reactor, 1, ["--port", "1984"], dict).start("abc123")
    assert commands[0][-5:] == ["--inputs-digest", "abc123", "--", "--port", "1984"]


@pytest.mark.parametrize("lone, others, ready, kept", [
    (True, 0, True, True), (True, 1, True, False), (False, 0, True, False),
    (True, 1, False, True), (False, 0, False, True)],
    ids=["alone", "not alone", "policy off", "no worker ready", "policy off, no worker ready"])
def test_the_core_keeps_a_connection_while_it_is_alone_or_no_worker_serves(lone, others, ready, kept):
    """Gateway._keep_in_core, asked as each request on a connection the core serves arrives (the connection itself
    is one of the open ones): a worker starting may yet fail, so only one that serves takes the core's connections."""
    from types import SimpleNamespace

    from gateway.app import Gateway

    gateway = SimpleNamespace(config=SimpleNamespace(lone_connection_in_core=lone),
                              _open_on_fronts=lambda: 1 + others,
                              workers=SimpleNamespace(ready=lambda: ready))
    assert Gateway._keep_in_core(gateway) is kept


def test_a_worker_serves_once_it_said_ready():
    reactor, pool = started(2)
    for link in reactor.links:
        link.alive = True
    assert not pool.ready()
    reactor.links[1].ready = True
    assert pool.ready()


def test_the_gateway_serves_once_each_worker_serves_or_has_ended():
    """What the port files wait for (``--port-file``): a worker that died at its start counts as settled (the core
    serves in its stead), its replacement is not waited for; one still starting is."""
    reactor, pool = started(3)
    settled = pool.settled()
    reactor.links[0].handle_ready()
    killed(pool.workers[1])
    assert not settled.called  # the third is still starting
    reactor.advance(RESTART_DELAYS[0])  # (the second's replacement starts, and is not waited for)
    reactor.links[2].handle_ready()
    assert settled.called
    assert pool.settled().called  # (asked again: at once)


def test_a_worker_that_never_says_it_serves_is_waited_for_a_minute_at_most():
    reactor, pool = started(2)
    settled = pool.settled()
    reactor.links[0].handle_ready()
    reactor.advance(NOT_RESPONDING - 1)
    assert not settled.called
    with capturedLogs() as events:
        reactor.advance(1)
    assert settled.called and settled.result is None
    assert any("has not said it serves 60 s" in formatEvent(event) for event in events)
    reactor.links[1].handle_ready()  # (late: nothing more to fire)
    assert pool.settled().called
