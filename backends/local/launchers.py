"""How the executor starts a job's launcher (``launcher.py``), signals it, and hears that the run ended.

:class:`ForkServer`, the gateway's: one long-lived ``launcher.py --serve`` process hands each job to a launcher of its
own, one that waits for its next job if there is one, else one it forks (starting an interpreter for every job took a
hundred milliseconds; a fork per job, and the launcher's first touch of every page, half of a trivial job's cost).
:class:`SpawnedLaunchers`: one ``python launcher.py SPEC`` process per job, started by the reactor (what the executor
does when given nothing else).

Either way the executor gets a handle (:class:`Launched`) to signal the run's launcher, or kill it, and ``ended`` is
called once the run is over.  A launcher may run another job after this one: a signal goes only to the launcher
that is still running this job's run (the server checks), never by pid alone.
"""

from __future__ import annotations

import os
import signal
import sys
from collections import deque
from pathlib import Path
from typing import Any, Callable, Protocol

from twisted.internet import protocol
from twisted.logger import Logger

from jobmodel.stacklimit import ORIGINAL_STACK_LIMIT

log = Logger()
LAUNCHER = Path(__file__).with_name("launcher.py")


class Launched(Protocol):
    """A run's launcher, as the executor sees it."""

    def signal(self, number: int) -> None:
        """Send ``number`` to the launcher, if it is still running this run (it passes it on to the job)."""

    def kill(self) -> None:
        """SIGKILL the launcher and any process of its own, if it is still running this run (not the job's process
        group: the executor kills that)."""


class Launchers(Protocol):
    def start(self, spec: Path, ended: Callable[[], None]) -> Launched:
        """Start the launcher of this spec; ``ended`` is called (in the reactor) once it is gone.  Raises OSError
        when it cannot be started."""

    def stop(self) -> None:
        """No more launchers will be started (the running ones go on)."""


def launcher_environment() -> dict[str, str]:
    """The launcher's environment: a PATH, and the stack limit the gateway was started with, which the launcher
    gives back to itself before it starts the job (jobs get their environment from their ad, not from this)."""
    environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if ORIGINAL_STACK_LIMIT in os.environ:
        environment[ORIGINAL_STACK_LIMIT] = os.environ[ORIGINAL_STACK_LIMIT]
    return environment


def _spawn(reactor: Any, process: protocol.ProcessProtocol, argument: str) -> Any:
    # no path (working directory): twisted then starts the process with posix_spawn, not by forking the whole
    # gateway (milliseconds with every thread stopped, then copy-on-write faults); the launcher goes to its
    # directory itself
    return reactor.spawnProcess(process, sys.executable, [sys.executable, "-S", "-s", str(LAUNCHER), argument],
                                env=launcher_environment())


class _Ended(protocol.ProcessProtocol):
    """A spawned launcher: its process is the run's (its session leader's pid is its process group's)."""

    def __init__(self, ended: Callable[[], None]) -> None:
        self._ended = ended
        self.pid: int | None = None
        self.gone = False

    def signal(self, number: int) -> None:
        if self.pid is not None and not self.gone:
            os.kill(self.pid, number)

    def kill(self) -> None:
        if self.pid is not None and not self.gone:
            os.killpg(self.pid, signal.SIGKILL)

    def processEnded(self, reason: Any) -> None:
        self.gone = True
        self._ended()


class SpawnedLaunchers:
    """A process of its own per launcher."""

    def __init__(self, reactor: Any) -> None:
        self._reactor = reactor

    def start(self, spec: Path, ended: Callable[[], None]) -> Launched:
        launched = _Ended(ended)
        launched.pid = _spawn(self._reactor, launched, str(spec)).pid
        return launched

    def stop(self) -> None:
        pass


class _Forked:
    """A run the server handed to a launcher: signalled through the server, which knows which launcher runs it."""

    def __init__(self, server: ForkServer, spec: Path, ended: Callable[[], None]) -> None:
        self._server = server
        self.spec = spec
        self.ended = ended

    def signal(self, number: int) -> None:
        self._server.order(f"signal {number} {self.spec}")

    def kill(self) -> None:
        self._server.order(f"kill {self.spec}")


class ForkServer(protocol.ProcessProtocol):
    """One ``launcher.py --serve`` process (started when the first job starts, and again if it ever dies) that runs
    every launcher.  If the server dies, the runs of its launchers are told ended (the executor then kills what is
    left of their jobs, and any launcher still in its run, and records their runs as cut off)."""

    def __init__(self, reactor: Any) -> None:
        self._reactor = reactor
        self._transport: Any = None
        self._buffer = b""
        self._asked: deque[_Forked] = deque()  # launchers asked for, in order, not yet said started
        self._started: dict[int, _Forked] = {}

    def start(self, spec: Path, ended: Callable[[], None]) -> Launched:
        if self._transport is None:
            self._buffer = b""
            self._transport = _spawn(self._reactor, self, "--serve")
        forked = _Forked(self, spec, ended)
        self._asked.append(forked)
        self.order(f"run {spec}")
        return forked

    def order(self, line: str) -> None:
        """One line to the server (none once it is gone: its launchers' runs are told ended)."""
        if self._transport is not None:
            self._transport.write(f"{line}\n".encode())

    def stop(self) -> None:
        if self._transport is not None:
            self._transport.closeStdin()

    # -- what the server says -----------------------------------------------------------------------------
    def outReceived(self, data: bytes) -> None:
        *lines, self._buffer = (self._buffer + data).split(b"\n")
        for line in lines:
            what, _, number = line.decode().partition(" ")
            if what == "started" and self._asked:
                self._launcher_started(self._asked.popleft(), int(number))
            elif what == "ended" and int(number) in self._started:
                self._started.pop(int(number)).ended()

    def _launcher_started(self, forked: _Forked, pid: int) -> None:
        if pid:
            self._started[pid] = forked
        else:  # the server could not fork
            log.error("the launcher server could not start a launcher")
            self._reactor.callLater(0, forked.ended)

    def errReceived(self, data: bytes) -> None:
        log.error("launcher server: {text}", text=data.decode(errors="replace").rstrip())

    def processEnded(self, reason: Any) -> None:
        self._transport = None
        orphans = [*self._asked, *self._started.values()]
        self._asked.clear()
        self._started.clear()
        if orphans:
            log.error("the launcher server ended with {count} launcher(s) running: {reason}", count=len(orphans),
                      reason=reason.getErrorMessage())
        for forked in orphans:
            forked.ended()
