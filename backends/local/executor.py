"""The local backend's executor: starts queued jobs as processes from the Twisted reactor and watches them.

It owns what lives in the reactor thread (processes, slots, timers); every queue change it causes runs in the
backend's worker thread through ``call`` (the store is only ever touched there).  Each job runs under a small
launcher (``launcher.py``) that keeps all of the job's processes (``family.py``): the executor tells the launcher,
by signals sent in the order they were decided, to stop the job (its kill signal), to suspend it (SIGTSTP) or to
continue it (SIGCONT), and every ``update_interval`` seconds has the usage the launchers sampled put in the ads.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import classad2
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from jobmodel.classads import job_status
from jobmodel.figures import CYCLE_BOUNDS, LAUNCHER_BOUNDS, Buckets
from jobmodel.jobs import JobStatus, Universe

from .chirp import ChirpService
from .chirpconfig import ChirpPlan
from .dag.runner import DagHost, DagRun, Outcome, StopReason
from .family import KILL_NOW, Control, end_cgroup
from .jobspec import SLOT_UNIVERSES
from .launchers import LAUNCHER, Launchers, SpawnedLaunchers
from .lifecycle import kill_signal
from .recovery import kill_launcher
from .sandbox import ExecuteDir

log = Logger()


def _takes_no_slot(idle: classad2.ClassAd) -> bool:
    """Whether an idle job may start with every slot taken (scheduler and local universe).  Only a literal
    JobUniverse is read: a client's expression is never evaluated on the reactor (it may need a deep stack), so a job
    whose universe is one is left to a cycle to look at."""
    universe = idle.get("JobUniverse", int(Universe.VANILLA))
    return not isinstance(universe, int) or isinstance(universe, bool) or universe not in SLOT_UNIVERSES
SHUT_DOWN = "The gateway shut down while the job was running; it will run again"
JobKey = tuple[int, int]
#: seconds a launcher gets, after the grace period it gives the job, to end it and record its end, before it is
#: killed itself (what is left of the job is then killed by the executor)
LAUNCHER_GRACE = 5.0


@dataclass(frozen=True)
class Launch:
    """A job the executor should start now: a process (its execute directory holds the launcher's spec) or, for
    a DAGMan job, a DAG run inside the gateway."""

    key: JobKey
    directory: ExecuteDir
    cpus: int
    dag: bool = False
    chirp: ChirpPlan | None = None  # the chirp servers the run gets (one per node), if any
    written: int = 0  # the queue's write that recorded its start (see Executor._follow)
    kill_signal: str = "SIGTERM"  # the job's KillSig, which a vacate (the gateway's shut-down) sends
    control: Control | None = None  # how its launcher keeps it (its cgroup, if any: what is left there goes at its end)


class Scheduling(Protocol):
    """The decisions the executor asks for (each call runs on the backend's thread, through ``call``)."""

    def recover(self) -> None: ...

    def cycle(self, ended: dict[JobKey, str | None], free_cpus: int | None, running: set[JobKey]) -> list[Launch]:
        ...

    def finish_job(self, key: JobKey, interruption: str | None = None) -> None: ...

    def finish_dag(self, key: JobKey, exit_code: int | None, interruption: str | None = None) -> None: ...

    def evaluate_periodic(self) -> bool | None: ...

    def record_usage(self, keys: list[JobKey]) -> None: ...


@dataclass(frozen=True)
class ExecutorOptions:
    slots: int = field(default_factory=lambda: os.cpu_count() or 1)
    kill_grace: float = 10.0  # seconds between the polite signal and SIGKILL
    periodic_interval: float = 60.0  # how often PeriodicHold/Remove/Release are evaluated
    update_interval: float = 300.0  # starter_update_interval: how often running jobs' usage goes into their ads


@dataclass
class _Running:
    launch: Launch
    transport: Any = None
    killer: Any = None
    stopping: str | None = None  # set when the gateway (not the job or a user) ends the run
    dag: DagRun | None = None
    suspended: bool = False
    ended: bool = False  # the launcher is gone; the run's end is being recorded
    outbox: list[int] = field(default_factory=list)  # signals for the launcher, until it can hear them
    spawned: float = 0.0  # when its launcher was asked for (time.time(), as the launcher's files are stamped)


class Executor:
    def __init__(self, reactor: Any, call: Callable[..., Deferred], scheduler: Scheduling, dags: DagHost,
                 options: ExecutorOptions, launchers: Launchers | None = None,
                 chirp: ChirpService | None = None) -> None:
        self._reactor = reactor
        self._launchers = launchers if launchers is not None else SpawnedLaunchers(reactor)
        self._chirp = chirp  # the chirp servers of runs that asked for them
        self._call = call
        self._scheduler = scheduler
        self._dags = dags
        self.options = options
        self._running: dict[JobKey, _Running] = {}
        self._wake_pending = False
        self._negotiating = False
        self._cycle_done: Deferred | None = None  # fires when the negotiation cycle in flight has ended
        self._again = False
        self._stopped = False
        self._periodic = LoopingCall(self._tick)
        self._periodic.clock = reactor
        self._usage = LoopingCall(self._record_usage)
        self._usage.clock = reactor
        self._drained: list[Deferred] = []
        #: changes of jobs not running here, heard while the scheduler chose (see _follow)
        self._heard: dict[JobKey, tuple[int | None, classad2.ClassAd]] = {}
        #: runs whose launcher is gone, to be recorded by the next cycle (with why the gateway ended them, if it did)
        self._ended: dict[JobKey, str | None] = {}
        #: for the operators: how long each negotiation cycle's call took, and each launcher to be ready
        self.cycle_times = Buckets(CYCLE_BOUNDS)
        self.launcher_starts = Buckets(LAUNCHER_BOUNDS)

    # -- life cycle ---------------------------------------------------------------------------------
    def start(self) -> Deferred:
        started = self._call(self._scheduler.recover)
        started.addErrback(lambda failure: log.failure("recovering running jobs failed", failure))
        started.addCallback(lambda _: self._begin_cycles())  # whatever recovery did: the queue must go on
        return started

    def _begin_cycles(self) -> None:
        if self._stopped:
            return
        looping = self._periodic.start(self.options.periodic_interval, now=False)  # fires only when stopped
        looping.addErrback(lambda failure: log.failure("periodic evaluation stopped", failure))
        updating = self._usage.start(self.options.update_interval, now=False)
        updating.addErrback(lambda failure: log.failure("usage updates stopped", failure))
        self.wake()

    async def stop(self, fast: bool = False) -> None:
        """Stop starting jobs, end the running ones (they go back to idle) and wait for them; ``fast`` (the
        gateway's SIGQUIT) kills them at once instead of giving them their stop signal and the grace period."""
        self._stopped = True
        for looping in (self._periodic, self._usage):
            if looping.running:
                looping.stop()
        if self._running:
            log.info("stopping {count} running job(s); they are requeued and run when the gateway next starts",
                     count=len(self._running))
        for key, running in list(self._running.items()):
            running.stopping = SHUT_DOWN
            if running.dag is not None:
                running.dag.stop(StopReason.SHUTDOWN)
            else:  # (a vacate: the job's KillSig, as a starter's soft kill sends)
                self._signal(key, KILL_NOW if fast else _signal_number(running.launch.kill_signal))
        if self._cycle_done is not None:  # the jobs a cycle in flight chooses are requeued, not started
            await self._cycle_done
        while self._running:
            waiter: Deferred = Deferred()
            self._drained.append(waiter)
            await waiter
        self._launchers.stop()

    # -- what the backend tells us ------------------------------------------------------------------
    def changed(self, changes: dict[JobKey, classad2.ClassAd], written: int | None = None) -> None:
        """Called (in the reactor thread) after queue changes (``written``: the queue's write that made them):
        stop runs that were held or removed, tell DAG runs about their node jobs, and look for work when something
        became idle."""
        for key, ad in changes.items():
            self._follow(key, ad, written)
            dag_cluster = ad.get("DAGManJobId")
            if isinstance(dag_cluster, int):
                for other in list(self._running.values()):  # a DAG run may end while told
                    if other.dag is not None and other.dag.cluster == dag_cluster:
                        other.dag.job_changed(key, ad)
        idle = [ad for ad in changes.values() if job_status(ad) is JobStatus.IDLE]
        if not changes or (idle and (self._free_cpus() > 0 or any(map(_takes_no_slot, idle)))):
            self.wake()

    def _free_cpus(self) -> int:
        """The CPUs no run holds, counting those of runs whose end is being recorded as free (the cycle that
        records an end fills its slot; a job it made idle again starts in the cycle after)."""
        return self.options.slots - sum(running.launch.cpus for running in self._running.values()
                                        if not running.ended)

    def _follow(self, key: JobKey, ad: classad2.ClassAd, written: int | None = None) -> None:
        """Suspend, continue or stop the run of a job that changed.  A change of a job that is not running here
        yet, while the scheduler is choosing jobs, is kept for the jobs it chooses: the backend's calls run one at a
        time but answer in any order, so a hold written just after a job was chosen may be heard before the choice
        (and one written before it, after)."""
        status = job_status(ad)
        running = self._running.get(key)
        if running is None:
            if self._negotiating:
                self._heard[key] = written, ad
            return
        if running.ended:  # its launcher is gone (its pid may be another process's now): nothing to signal
            return
        if running.dag is None and status in (JobStatus.SUSPENDED, JobStatus.RUNNING):
            if running.suspended != (status is JobStatus.SUSPENDED):
                running.suspended = status is JobStatus.SUSPENDED
                self._send(running, signal.SIGTSTP if running.suspended else signal.SIGCONT)
        elif status is not JobStatus.RUNNING:
            running.suspended = False  # (the launcher thaws the job before it passes the kill signal on)
            if running.dag is not None:
                running.dag.stop(StopReason.REMOVE if status is JobStatus.REMOVED else StopReason.HOLD)
            else:
                self._signal(key, _signal_number(kill_signal(ad)))

    def wake(self) -> None:
        """Schedule a negotiation cycle soon (many wake-ups coalesce into one)."""
        if (self._stopped and not self._ended) or self._wake_pending:
            return
        self._wake_pending = True
        self._reactor.callLater(0, self._start_cycle)

    @property
    def busy_cpus(self) -> int:
        """The CPUs runs hold (read from any thread: the runs are copied in one step first)."""
        return sum(running.launch.cpus for running in list(self._running.values()))

    # -- negotiation ----------------------------------------------------------------------------------
    def _start_cycle(self) -> None:
        self._wake_pending = False
        Deferred.fromCoroutine(self._negotiate()).addErrback(
            lambda failure: log.failure("negotiation cycle failed", failure))

    async def _negotiate(self) -> None:
        if self._negotiating:
            self._again = True
            return
        self._negotiating = True
        self._cycle_done = Deferred()
        try:
            while not self._stopped or self._ended:
                self._again = False
                began = time.perf_counter()
                launches = await self._choose()
                self.cycle_times.observe(time.perf_counter() - began)
                if self._stopped:  # stop() came while the scheduler chose: these jobs never start
                    await self._requeue(launches)
                    continue  # (runs that ended meanwhile are recorded all the same)
                for launch in launches:
                    self._spawn(launch)
                for launch in launches:  # changes made after the choice that started them, heard before it
                    written, ad = self._heard.get(launch.key, (0, None))
                    after = written is None or written > launch.written
                    if ad is not None and after and launch.key in self._running:
                        self._follow(launch.key, ad)
                if not self._again:
                    break
        finally:
            self._negotiating = False
            done, self._cycle_done = self._cycle_done, None
            done.callback(None)

    async def _choose(self) -> list[Launch]:
        """One call to the scheduler: record the runs that ended since the last one, then choose what to start in the
        slots that are free once they are (nothing, once stopping) -- one write and one sync for all of it.  The
        ended runs leave the executor whatever the call does (recording a run's end never fails: it holds the job)."""
        ended, self._ended = self._ended, {}
        running = set(self._running) - ended.keys()
        free = None if self._stopped else self.options.slots - sum(self._running[key].launch.cpus for key in running)
        self._heard = {}
        chosen = False
        try:
            launches = await self._call(self._scheduler.cycle, ended, free, running)
            chosen = True
            return launches
        finally:
            for key in ended:
                self._forget(key, wake=not chosen)  # (a call that failed: the next cycle offers their slots)

    async def _requeue(self, launches: list[Launch]) -> None:
        for launch in launches:
            if launch.dag:
                await self._call(self._scheduler.finish_dag, launch.key, None, SHUT_DOWN)
            else:
                await self._call(self._scheduler.finish_job, launch.key, SHUT_DOWN)

    def _spawn(self, launch: Launch) -> None:
        running = _Running(launch, spawned=time.time())
        self._running[launch.key] = running
        if launch.dag:
            self._run_dag(running)
            return
        if launch.chirp is not None and self._chirp is not None:
            self._chirp.open(launch.key, launch.chirp)  # before the job starts: it finds its .chirp.config
        try:
            running.transport = self._launchers.start(launch.directory.run_file,
                                                      lambda: self._process_ended(launch.key))
        except OSError as exc:
            log.error("cannot start the launcher for job {job}: {error}", job=launch.key, error=exc)
            self._reactor.callLater(0, self._process_ended, launch.key)

    def _run_dag(self, running: _Running) -> None:
        key = running.launch.key
        running.dag = DagRun(self._reactor, self._call, self._dags, key)
        outcome = Deferred.fromCoroutine(running.dag.run())

        def failed(failure: Any) -> Outcome:
            log.failure("the DAG of job {job} failed", failure, job=key)
            return Outcome(1)

        outcome.addErrback(failed)
        outcome.addCallback(lambda ended: self._call(self._scheduler.finish_dag, key, ended.exit_code,
                                                     running.stopping))
        outcome.addErrback(lambda failure: log.failure("recording the end of DAG job {job} failed", failure, job=key))
        outcome.addBoth(lambda _: self._forget(key))

    # -- ending runs --------------------------------------------------------------------------------
    def _signal(self, key: JobKey, number: int) -> None:
        """Send the job's stop signal to its launcher (which passes it to every process of the job and kills them
        after the grace period); if the launcher has not ended the job :data:`LAUNCHER_GRACE` seconds after that,
        it is killed with what is left of the job."""
        running = self._running.get(key)
        if running is None or running.transport is None or running.killer is not None:
            return
        running.killer = self._reactor.callLater(self.options.kill_grace + LAUNCHER_GRACE, self._kill, key)
        self._send(running, number)

    def _send(self, running: _Running, number: int) -> None:
        """Signal the launcher, after the signals sent before; a launcher that cannot hear them yet (not started, or
        the job's first process not there yet: the run's file says when it is) gets them as soon as it can, in order."""
        running.outbox.append(number)
        if len(running.outbox) == 1:
            self._deliver(running)

    def _deliver(self, running: _Running) -> None:
        if running.transport is None or running.ended or self._running.get(running.launch.key) is not running:
            running.outbox.clear()
            return
        if running.launch.directory.pgid() is None:
            self._reactor.callLater(0.02, self._deliver, running)
            return
        for number in running.outbox:
            try:
                running.transport.signal(number)
            except ProcessLookupError:
                break
        running.outbox.clear()

    def _kill(self, key: JobKey) -> None:
        """The launcher did not end the job in time: kill the job's process group, and the launcher."""
        running = self._running.get(key)
        if running is None or running.transport is None or running.ended:
            return
        log.info("job {job} did not stop within {grace}s: SIGKILL", job=key, grace=self.options.kill_grace)
        group = running.launch.directory.pgid()
        if group:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            running.transport.kill()

    def _process_ended(self, key: JobKey) -> None:
        running = self._running.get(key)
        if running is None or running.ended:
            return
        running.ended = True
        if running.killer is not None and running.killer.active():
            running.killer.cancel()
        started = running.launch.directory.started()
        if started is not None:  # (observed at the run's end, when the file is read anyway; none for a DAG run)
            self.launcher_starts.observe(max(0.0, started.at - running.spawned))
        if started is not None and started.group:  # the run is over: nothing the job left in its group may outlive it
            try:
                os.killpg(started.group, signal.SIGKILL)
            except OSError:
                pass
        end_cgroup(running.launch.control)  # (nor in its cgroup, if the launcher could not end it)
        kill_launcher(running.launch.directory, started)  # (a launcher still in the run: its server died)
        if self._chirp is not None:
            self._chirp.close(key)  # (its delayed updates are written before the run's end is)
        self._ended[key] = running.stopping  # recorded by the next cycle, with the ends that come with it
        self.wake()

    def _forget(self, key: JobKey, wake: bool = True) -> None:
        self._running.pop(key, None)
        if not self._running:
            drained, self._drained = self._drained, []
            for waiter in drained:
                waiter.callback(None)
        if wake:
            self.wake()

    def _record_usage(self) -> Deferred | None:
        """Have the usage the launchers sampled put in the running jobs' ads."""
        keys = [key for key, running in self._running.items() if running.dag is None and not running.ended]
        if not keys:
            return None
        recorded = self._call(self._scheduler.record_usage, keys)
        recorded.addErrback(lambda failure: log.failure("recording running jobs' usage failed", failure))
        return recorded

    def _tick(self) -> Deferred:
        ticked = Deferred.fromCoroutine(self._evaluate_periodic())
        ticked.addErrback(lambda failure: log.failure("periodic policy evaluation failed", failure))
        return ticked

    async def _evaluate_periodic(self) -> None:
        """A whole round of the periodic evaluation, a chunk of the queue per call (other calls go in between)."""
        while await self._call(self._scheduler.evaluate_periodic) and not self._stopped:
            pass


def _signal_number(name: str) -> int:
    text = name.upper().strip()
    if text.isdigit():
        return int(text)
    try:
        return int(getattr(signal, text if text.startswith("SIG") else f"SIG{text}"))
    except AttributeError:
        return int(signal.SIGTERM)


__all__ = ["Executor", "ExecutorOptions", "LAUNCHER", "Launch", "Scheduling"]
