"""The core process's side of the workers (``workers = N``): it binds every port, accepts each connection, admits it
through the one :class:`~gateway.connections.ConnectionGate` (so that the limits per caller hold across workers)
and passes its socket to the worker serving the fewest connections, which does all the protocol work.  It starts
the workers, restarts one that dies, and stops them with the gateway.

The core serves a connection itself, with the same protocols as one process (``workers = 0``), in two cases.
When no worker serves (they are starting, all died at once, or could not start), rather than closing it or keeping
it waiting.  And with ``lone_connection_in_core`` (the default), when it arrives while no other is open on the
workers' ports: every
call of a worker that needs the core crosses between the processes, some 300 us of CPU each way, five times in a
Birdbath submit flow, which made a lone client's submissions a third slower than in one process, while a lone
client gains nothing from the workers (one connection's requests come one after another).  Connections that arrive
while others are open go to the workers, and the core's own connection, once it is not alone, answers its next
request with ``Connection: close`` (``Gateway._keep_in_core``): its client connects again, to a worker.  So the core serves one
client's calls only while that client is alone, and a connection it took while no worker served goes back to
the workers when they are.

The core keeps its own copy of each passed socket, not read, until the worker says it closed it: when a worker
dies, the core closes the copies of its connections, so their clients see them end (never a half-served request
kept open) and the gate's counts stay right.  What a worker was doing in the core (an open transaction, a staging
area) lives on in the core: a client may carry on over another connection, which another worker serves.
"""

from __future__ import annotations

import enum
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, DeferredList, fail
from twisted.internet.error import ConnectionLost, ProcessDone, ProcessTerminated
from twisted.internet.protocol import Factory, ProcessProtocol, Protocol
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from gateway.core.auth import Caller
from gateway.core.grants import Grants
from gateway.monitoring.events import RequestTally
from gateway.monitoring.processes import WorkerFigures
from gateway.workers.changenumber import PublishedNumber
from gateway.workers.inputs import EXIT_REFUSED
from gateway.workers.link import CoreCalls, Link, Message
from gateway.workers.wire import MessageTooLarge, error_fields

log = Logger(namespace="birdbath.workers")

#: seconds before a worker that died is started again (doubling, up to the last, while they die young)
RESTART_DELAYS = (0.2, 1.0, 5.0)
#: a worker that served this many seconds died of something else than its start
YOUNG = 10.0
#: seconds the workers get to end at shutdown before they are killed
STOP_GRACE = 10.0
#: seconds a scrape of /metrics waits for each worker's figures
FIGURES_WAIT = 5.0
#: how often the core asks each worker for its figures to know it still answers, and how long a worker may hear
#: nothing: one whose reactor is stuck is killed and started again, as condor_master does to a gateway that stops
#: sending its keepalive (the core's keepalive goes on whatever a worker does)
PING_INTERVAL, NOT_RESPONDING = 10.0, 60.0


class Front(enum.Enum):
    """Which of the worker's factories serves a connection: the site (plain port, local socket, shared port), the
    SSL port's TLS, or the collector's own port."""

    SITE = "site"
    TLS = "tls"
    COLLECTOR = "collector"


class HandOff(Protocol):
    """A connection the core accepted and passed on: it is not read here; closing it ends it for the worker too."""

    def __init__(self, pool: WorkerPool, front: Front) -> None:
        self.pool = pool
        self.front = front
        self.id = 0

    def connectionMade(self) -> None:
        self.transport.stopReading()
        self.pool.hand(self)

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.pool.forget(self)


class HandOffFactory(Factory):
    """A port's connections for the workers; with ``own`` (this process's protocols for the front), those the pool
    says the core serves are served here (:meth:`WorkerPool.serves_here`)."""

    noisy = False

    def __init__(self, pool: WorkerPool, front: Front, own: Factory | None = None) -> None:
        self.pool = pool
        self.front = front
        self.own = own

    def buildProtocol(self, addr: Any) -> Protocol | None:
        if self.own is not None and self.pool.serves_here():
            return self.own.buildProtocol(addr)
        return HandOff(self.pool, self.front)

    def doStart(self) -> None:
        """As a port starts the factory it serves with (the sites' access log is opened there)."""
        super().doStart()
        if self.own is not None:
            self.own.doStart()

    def doStop(self) -> None:
        super().doStop()
        if self.own is not None:
            self.own.doStop()


class CoreLink(Link):
    """The core's end of one worker's link: runs its calls, passes it connections, hears which it closed."""

    def __init__(self, worker: Worker) -> None:
        super().__init__()
        self.worker = worker
        self.ready = False
        #: when the worker last said anything (it answers the pings, :data:`PING_INTERVAL`); None: not since the
        #: first ping
        self.heard: float | None = None
        self.connections: dict[int, HandOff] = {}
        #: what the core asked the worker (SCRAPE, SYNC, RECLAIM) and waits for, by the id the answer carries
        self._asked: dict[int, Deferred[Any]] = {}
        self._next_ask = 0

    def connectionMade(self) -> None:
        super().connectionMade()
        self.send(Message.CONSTANTS, self.worker.pool.calls.constants())

    def handle_call(self, call_id: int, service: str, method: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        answer = self.worker.pool.calls.run(service, method, args, kwargs)
        answer.addCallbacks(self._answer, self._failed, callbackArgs=(call_id,), errbackArgs=(call_id,))

    def _answer(self, value: Any, call_id: int) -> None:
        if not self.alive:
            return  # the worker died meanwhile: what the call did is done, as for a client gone
        try:
            self.send(Message.RESULT, call_id, True, value)
        except MessageTooLarge as exc:  # the call fails, the link stays: said once, not as a bug of ours
            log.warn("a worker's call into the core answered more than the link carries: {reason}", reason=exc)
            self._failed(Failure(), call_id)
        except Exception:  # noqa: BLE001 - a value that cannot cross: the call fails, logged
            self._failed(Failure(), call_id)

    def _failed(self, failure: Failure, call_id: int) -> None:
        if error_fields(failure.value)[0] == "RemoteFailure":
            log.failure("a worker's call into the core failed", failure)
        if self.alive:
            self.send(Message.RESULT, call_id, False, failure.value)

    def dataReceived(self, data: bytes) -> None:
        self.heard = None  # (heard now: counted again from the next ping)
        super().dataReceived(data)

    def _ask(self, kind: Message, *fields: Any) -> Deferred[Any]:
        """Send ``[kind, id, *fields]``; the worker's answer with that id fires it (the link lost: ConnectionLost)."""
        self._next_ask += 1
        ask_id = self._next_ask
        answer: Deferred[Any] = Deferred()
        self._asked[ask_id] = answer

        def asked(result: Any) -> Any:  # answered, cancelled (a worker that does not answer in time) or lost
            self._asked.pop(ask_id, None)
            return result

        answer.addBoth(asked)
        self.send(kind, ask_id, *fields)
        return answer

    def _answered(self, ask_id: int, value: Any) -> None:
        answer = self._asked.pop(ask_id, None)
        if answer is not None:
            answer.callback(value)

    def ask_figures(self) -> Deferred[WorkerFigures]:
        """The worker's figures (its requests' tally, memory, CPU time), asked for now."""
        return self._ask(Message.SCRAPE)

    def handle_figures(self, scrape_id: int, figures: WorkerFigures) -> None:
        self.worker.figures = figures
        self._answered(scrape_id, figures)

    # -- transactions begun in the worker (gateway.core.grants: this link is the worker's Grantee) ----------------
    @property
    def _grants(self) -> Grants:
        grants = self.worker.pool.calls.grants()
        assert grants is not None  # (a worker that begins transactions has a core with a schedd)
        return grants

    def handle_ids(self, call_id: int) -> None:
        self._answer(self._grants.ids(self), call_id)

    def handle_allow(self, call_id: int, caller: Caller) -> None:
        Deferred.fromCoroutine(self._grants.allow(self, caller)).addCallbacks(
            self._answer, self._failed, callbackArgs=(call_id,), errbackArgs=(call_id,))

    def handle_begun(self, txn_id: int, caller: Caller, duration: int) -> None:
        self._grants.begun(self, txn_id, caller, duration)

    def sync(self) -> Deferred[None]:
        return self._ask(Message.SYNC) if self.alive else fail(ConnectionLost("the worker is gone"))

    def handle_synced(self, sync_id: int) -> None:
        self._answered(sync_id, None)

    def reclaim(self, caller: Caller) -> Deferred[int]:
        return self._ask(Message.RECLAIM, caller) if self.alive else fail(ConnectionLost("the worker is gone"))

    def handle_reclaimed(self, reclaim_id: int, count: int) -> None:
        self._answered(reclaim_id, count)

    def handle_ready(self) -> None:
        self.ready = True
        log.info("worker {index} (pid {pid}) serving", index=self.worker.index, pid=self.worker.pid)
        self.worker.settle()

    def handle_closed(self, connection_id: int) -> None:
        handed = self.connections.pop(connection_id, None)
        if handed is not None:
            handed.transport.loseConnection()

    def pass_connection(self, handed: HandOff) -> None:
        """The CONNECTION message is encoded before its socket is sent: one that fails to encode raises with no
        socket sent, so the worker's next CONNECTION never takes this one's socket."""
        transport = handed.transport
        message = self.encoded(Message.CONNECTION, handed.id, handed.front.value, int(transport.socket.family),
                               transport.peer_owner)
        self.connections[handed.id] = handed
        self.transport.sendFileDescriptor(transport.fileno())
        self.write(message)

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        super().connectionLost(reason)
        connections, self.connections = self.connections, {}
        for handed in connections.values():
            handed.transport.loseConnection()
        grants = self.worker.pool.calls.grants()
        if grants is not None:  # (before the asks fail: a sync then finds the id unknown, as it stays)
            grants.retire(self)
        asked, self._asked = self._asked, {}
        for answer in asked.values():
            answer.errback(Failure(ConnectionLost("the worker is gone")))


class Worker(ProcessProtocol):
    """One worker process and its link."""

    def __init__(self, pool: WorkerPool, index: int) -> None:
        self.pool = pool
        self.index = index
        self.link: CoreLink | None = None
        self.pid = 0
        self.started = 0.0
        self.ended: Deferred[None] = Deferred()
        #: fired once the worker serves or has ended, whichever comes first
        self.settled: Deferred[None] = Deferred()
        self.killed = False  # for not answering (the core's SIGKILL)
        #: what the worker last said of itself (at the last scrape)
        self.figures: WorkerFigures | None = None

    def spawn(self) -> None:
        """Start the process and make its link; raises what failed (no socket pair, no fork), with no link left."""
        reactor = self.pool.reactor
        self.started = reactor.seconds()  # (a start that fails is a worker that died young: the next waits longer)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.link = CoreLink(self)
            reactor.adoptStreamConnection(ours.fileno(), socket.AF_UNIX, Factory.forProtocol(lambda: self.link))
            checked = [] if self.pool.digest is None else ["--inputs-digest", self.pool.digest]
            command = [sys.executable, "-m", "gateway.workers.worker", "--link-fd", "3", "--changes-fd", "4",
                       "--index", str(self.index), *checked, "--", *self.pool.command_line]
            process = reactor.spawnProcess(self, sys.executable, command, env=os.environ.copy(),
                                           childFDs={1: 1, 2: 2, 3: theirs.fileno(),
                                                     4: self.pool.changes.descriptor})  # type: ignore[union-attr]
            self.pid = process.pid
        except BaseException:
            link, self.link = self.link, None
            if link is not None and link.transport is not None:
                link.transport.loseConnection()
            raise
        finally:
            ours.close()
            theirs.close()

    def processEnded(self, reason: Failure) -> None:
        link, self.link = self.link, None
        if link is not None and link.transport is not None:
            link.transport.loseConnection()
        self.pool.ended(self, reason)
        self.settle()
        self.ended.callback(None)

    def settle(self) -> None:
        if not self.settled.called:
            self.settled.callback(None)


class WorkerPool:
    """``count`` workers, started with the gateway's own command line (``command_line``: its flags and
    configuration file; each worker reads the same configuration)."""

    def __init__(self, reactor: Any, count: int, command_line: list[str],
                 services: Callable[[], dict[str, Any]], alone: Callable[[], bool] = lambda: False) -> None:
        self.reactor = reactor
        self.count = count
        #: whether a connection arriving now would be the gateway's only one open (the core then serves it:
        #: ``lone_connection_in_core``; always false when that is off)
        self.alone = alone
        #: the digest of what the core read (``inputs.inputs_digest``), given to each worker to check its own
        #: reading against (None: not checked); set by :meth:`start`
        self.digest: str | None = None
        #: the indexes of the workers that refused to start because what they read is not the core's (an edited
        #: configuration): their slots stay empty until the gateway restarts
        self.refused: set[int] = set()
        self.command_line = command_line
        self.calls = CoreCalls(services)
        self.workers: list[Worker] = []
        self._first: list[Worker] = []
        self._next_id = 0
        self._stopping = False
        self._failures = [0] * count
        self._watch = LoopingCall(self._ping)
        #: the requests counted by workers that have ended, as they last said (so that the sums never go back)
        self.retired = RequestTally()
        #: the backend's change number, published to the workers (the gateway has the backend write it); made by
        #: :meth:`start`
        self.changes: PublishedNumber | None = None

    def factory(self, front: Front, own: Factory | None = None) -> HandOffFactory:
        """The factory of a front's ports; ``own``: the core's protocols for it, for the lone connection."""
        return HandOffFactory(self, front, own)

    def start(self, digest: str | None = None) -> PublishedNumber:
        """Start the workers, which check that they read what the core read (``digest``); the page their change
        number is published in (0 until something publishes it)."""
        self.digest = digest
        self.changes = PublishedNumber.create()
        self.workers = [Worker(self, index) for index in range(self.count)]
        self._first = list(self.workers)  # (what settled() waits for: not their replacements)
        for worker in self.workers:
            worker.spawn()
        self._watch.clock = self.reactor
        self._watch.start(PING_INTERVAL, now=False)
        log.info("{count} worker processes serve the front ends (workers)", count=self.count)
        return self.changes

    def settled(self) -> Deferred[None]:
        """Fired once each worker :meth:`start` started serves or has ended (refused what it read, or could not
        start: a replacement is not waited for), or at the latest after :data:`NOT_RESPONDING` seconds (one that
        never says it serves is said in the log; the core serves while none does): what the gateway waits for before
        it says it is ready."""
        def late(result: Any, seconds: float) -> None:
            log.warn("a worker has not said it serves {seconds:g} s after its start; the gateway serves without it",
                     seconds=seconds)

        waited = DeferredList([worker.settled for worker in self._first], consumeErrors=True)
        return waited.addTimeout(NOT_RESPONDING, self.reactor, onTimeoutCancel=late).addCallback(lambda _: None)

    def _ping(self) -> None:
        """Ask each serving worker to answer; kill one that has said nothing for :data:`NOT_RESPONDING` seconds
        (its connections and calls hang with it, and nothing else would notice: the core's keepalive goes on)."""
        now = self.reactor.seconds()
        for worker in self.workers:
            link = worker.link  # (None for a worker that ended or could not start)
            if link is None or not link.alive or not link.ready:
                continue
            if link.heard is None:
                link.heard = now
            elif now - link.heard >= NOT_RESPONDING:
                if not worker.killed:
                    worker.killed = True
                    log.warn("worker {index} (pid {pid}) has not answered for {silent:.0f} s: killed, to be started "
                             "again", index=worker.index, pid=worker.pid, silent=now - link.heard)
                    _signal(worker.pid, signal.SIGKILL)
                continue
            link.ask_figures().addTimeout(PING_INTERVAL, self.reactor).addErrback(lambda failure: None)

    def serves_here(self) -> bool:
        """Whether the core serves a connection arriving now: the lone one (``alone``), or any while no worker serves
        (they are starting, all died at once, or cannot start): served at once, if slower, never refused nor kept
        waiting for a worker's start (seconds on a loaded machine).  ``Gateway._keep_in_core`` hands them back."""
        return self.alone() or not self.ready()

    def _links(self) -> list[CoreLink]:
        """The links of the workers alive (those starting among them)."""
        return [worker.link for worker in self.workers if worker.link is not None and worker.link.alive]

    def ready(self) -> bool:
        """Whether any worker serves (has said READY and is alive)."""
        return any(link.ready for link in self._links())

    def hand(self, handed: HandOff) -> None:
        """Pass a new connection to the worker serving the fewest (those ready first); none alive: close it."""
        links = self._links()
        if not links:
            handed.transport.loseConnection()
            return
        link = min(links, key=lambda link: (not link.ready, len(link.connections)))
        self._next_id += 1
        handed.id = self._next_id
        try:
            link.pass_connection(handed)
        except Exception:  # noqa: BLE001 - that connection is closed, the gateway carries on
            log.failure("passing a connection to worker {index} failed", index=link.worker.index)
            link.connections.pop(handed.id, None)
            handed.transport.loseConnection()

    def forget(self, handed: HandOff) -> None:
        for worker in self.workers:
            if worker.link is not None:
                worker.link.connections.pop(handed.id, None)

    async def figures(self) -> list[WorkerFigures]:
        """Each live worker's figures, asked for now (for /metrics); a worker that does not answer within
        :data:`FIGURES_WAIT` seconds is reported as it last answered."""
        asked = [link.ask_figures().addTimeout(FIGURES_WAIT, self.reactor) for link in self._links() if link.ready]
        await DeferredList(asked, consumeErrors=True)
        return [worker.figures for worker in self.workers if worker.figures is not None]

    def ended(self, worker: Worker, reason: Failure) -> None:
        if worker.figures is not None:
            self.retired = self.retired.merge(worker.figures.requests)
        if self._stopping:
            return
        lived = self.reactor.seconds() - worker.started
        if reason.check(ProcessTerminated) and reason.value.exitCode == EXIT_REFUSED:
            self.refused.add(worker.index)
            log.error("worker {index} (pid {pid}) refused to start: the configuration file, or a file it names, is not "
                      "what the gateway read at its start (an edit since; the worker said which on standard error); "
                      "the gateway serves on without it, and a restart applies the edit to every process",
                      index=worker.index, pid=worker.pid)
            return
        how = ("exited" if reason.check(ProcessDone) else f"ended ({reason.value})" if worker.pid
               else f"could not start ({reason.value})")
        if lived > YOUNG:
            self._failures[worker.index] = 0
        delay = RESTART_DELAYS[min(self._failures[worker.index], len(RESTART_DELAYS) - 1)]
        self._failures[worker.index] += 1
        log.warn("worker {index} (pid {pid}) {how} after {lived:.1f} s; its connections were closed, nothing "
                 "committed is lost; starting another in {delay:g} s", index=worker.index, pid=worker.pid, how=how,
                 lived=lived, delay=delay)
        replacement = Worker(self, worker.index)
        self.workers[worker.index] = replacement
        self.reactor.callLater(delay, self._respawn, replacement)

    def _respawn(self, worker: Worker) -> None:
        """Start the replacement; one that cannot start (a fork refused under memory pressure, no descriptors
        left) counts as a worker that died at once, and another is tried after the next delay."""
        if self._stopping or self.workers[worker.index] is not worker:
            return
        try:
            worker.spawn()
        except Exception:  # noqa: BLE001 - the slot must not stay empty: try again later
            self.ended(worker, Failure())

    async def stop(self) -> None:
        """End the workers (SIGTERM, then SIGKILL after :data:`STOP_GRACE` seconds)."""
        self._stopping = True
        if self._watch.running:
            self._watch.stop()
        running = [worker for worker in self.workers if worker.pid and not worker.ended.called]
        for worker in running:
            _signal(worker.pid, signal.SIGTERM)
        killer = self.reactor.callLater(STOP_GRACE, self._kill, running)
        for worker in running:
            await worker.ended
        if killer.active():
            killer.cancel()

    @staticmethod
    def _kill(workers: list[Worker]) -> None:
        """SIGKILL the workers that have not ended (one that has may have left its pid to another process)."""
        for worker in workers:
            if not worker.ended.called:
                _signal(worker.pid, signal.SIGKILL)


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass
