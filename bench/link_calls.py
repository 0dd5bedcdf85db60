"""The workers' link alone: what one call from a worker to the core costs, against a bare Twisted echo (issue #30).

A worker's end (``CallingLink``) calls a service of the core's end (``CoreLink`` with ``CoreCalls``, the gateway's
own classes) over a Unix socket pair, one call at a time, as the lone client's submit flow does: ``new_job``'s
arguments (a caller, a transaction, a cluster) and answer.  Each end in its own process, as in the gateway (so the
wake-ups count), and both ends in one process (one reactor: the link's own work and system calls alone).  The
baseline is a bare Twisted protocol echoing 50 bytes over the same kind of socket pair, in two processes.  Prints
the wall time per call, the CPU per call of each end, and the link's ratio to the echo.

``python bench/link_calls.py [--calls 20000] [--runs 3]``
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import Figure, print_figures

WARM_UP = 500


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _in_child(work: Callable[[], list[float]]) -> list[float]:
    """``work()`` in a forked process (each measurement needs a fresh reactor), its answer read back."""
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(reading)
        try:
            os.write(writing, " ".join(map(str, work())).encode())
        finally:
            os._exit(0)
    os.close(writing)
    with os.fdopen(reading) as answer:
        text = answer.read()
    os.waitpid(child, 0)
    return [float(value) for value in text.split()]


def _ends(echo: bool) -> tuple[Any, Any, Callable[[Any], Any]]:
    """The answering end, the calling end, and one call of the calling end (a Deferred)."""
    from twisted.internet import defer
    from twisted.internet.protocol import Protocol

    from gateway.core.auth import Authentication, Caller
    from gateway.core.transactions import TransactionRef
    from gateway.workers.link import CallingLink, CoreCalls, Link
    from gateway.workers.parent import CoreLink

    if echo:
        class Echo(Protocol):
            def dataReceived(self, data: bytes) -> None:
                self.transport.write(data)

        class Pinger(Protocol):
            waiting: defer.Deferred[None] | None = None

            def call(self) -> defer.Deferred[None]:
                self.waiting = defer.Deferred()
                self.transport.write(b"x" * 50)
                return self.waiting

            def dataReceived(self, data: bytes) -> None:
                waiting, self.waiting = self.waiting, None
                if waiting is not None:
                    waiting.callback(None)

        return Echo(), Pinger(), lambda end: end.call()

    class Schedd:
        async def new_job(self, caller: Caller, ref: TransactionRef, cluster: int) -> int:
            return 0

    class Pool:
        calls = CoreCalls(lambda: {"schedd": Schedd()})

    class Worker:
        pool = Pool()

    class CoreEnd(CoreLink):
        def connectionMade(self) -> None:
            Link.connectionMade(self)  # (no constants to send: this bench's worker reads none)

    caller, ref = Caller("127.0.0.1", "alice", Authentication.IDTOKEN), TransactionRef(5, 60)
    return CoreEnd(Worker()), CallingLink(), lambda end: end.call("schedd", "new_job", caller, ref, 12)


def _adopt(reactor: Any, sock: socket.socket, protocol: Any) -> None:
    from twisted.internet.protocol import Factory

    reactor.adoptStreamConnection(sock.fileno(), socket.AF_UNIX, Factory.forProtocol(lambda: protocol))
    sock.close()


def _serve(sock: socket.socket, answering: Any) -> list[float]:
    """The answering end alone, until the calling end closes: its CPU seconds."""
    from twisted.internet import reactor

    _adopt(reactor, sock, answering)
    lost = answering.connectionLost
    answering.connectionLost = lambda reason=None: (lost(reason), reactor.stop())
    started = _cpu()
    reactor.run()
    return [_cpu() - started]


def _measure(calls: int, two_processes: bool, echo: bool) -> list[float]:
    """[wall us per call, CPU us per call of the calling end, of the answering end (in two processes)]."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    answering, calling, call = _ends(echo)
    serving: list[float] = []
    if two_processes:  # (forked before either process installs its reactor)
        server = os.fork()
        if server == 0:
            ours.close()
            _report(_serve(theirs, answering))
            os._exit(0)
        theirs.close()
    from twisted.internet import defer, reactor

    if not two_processes:
        _adopt(reactor, theirs, answering)
    _adopt(reactor, ours, calling)
    measured: list[float] = []

    async def run() -> None:
        for _ in range(WARM_UP):
            await call(calling)
        wall, cpu = time.perf_counter(), _cpu()
        for _ in range(calls):
            await call(calling)
        measured.extend([(time.perf_counter() - wall) / calls * 1e6, (_cpu() - cpu) / calls * 1e6])
        calling.transport.loseConnection()
        reactor.callLater(0.1, reactor.stop)

    reactor.callWhenRunning(lambda: defer.ensureDeferred(run()))
    reactor.run()
    if two_processes:
        serving = [float(Path(REPORT).read_text()) / (calls + WARM_UP) * 1e6]
        os.waitpid(server, 0)
    return measured + (serving or [0.0])


#: where the answering end's process writes its CPU time (a file of the measuring process's own)
REPORT = f"/tmp/link_calls.{os.getpid()}"


def _report(values: list[float]) -> None:
    Path(REPORT).write_text(str(values[0]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000, help="calls per measurement")
    parser.add_argument("--runs", type=int, default=3, help="runs of each, interleaved")
    args = parser.parse_args()
    cases = {"echo, two processes": (True, True), "link, two processes": (True, False),
             "link, one process": (False, False)}
    figures = {name: [Figure(f"{name}: {what}", "us/call", higher_is_better=False)
                      for what in ("wall", "CPU of the calling end", "CPU of the answering end")]
               for name in cases}
    print(f"{args.calls} calls per measurement, {args.runs} runs, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    for _ in range(args.runs):
        for name, (two_processes, echo) in cases.items():
            values = _in_child(lambda two=two_processes, bare=echo: _measure(args.calls, two, bare))
            for figure, value in zip(figures[name], values):
                figure.add(value)
    echo = figures["echo, two processes"]
    print_figures("the link against the bare echo (two processes)",
                  [(figure, baseline) for figure, baseline in zip(figures["link, two processes"], echo)])
    print_figures("both ends in one process (the link's own work and system calls)",
                  [(figures["link, one process"][0], None), (figures["link, one process"][1], None)])
    Path(REPORT).unlink(missing_ok=True)


if __name__ == "__main__":
    main()
