"""The local backend's scheduler: which idle jobs run now, and what a run's end does to its job.

It decides; the executor (in the reactor) acts.  Every method runs on the backend's thread, reads the queue and
writes its decisions through :meth:`JobQueue.write`; the rules for each transition are the pure functions of
``lifecycle.py``.

No failure leaves a job stuck: a job that cannot be started, whose run's end cannot be recorded, or that cannot be
recovered after a restart is held with a reason that says what failed (``_settle``), and the other jobs go on.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
from functools import partial
from pathlib import Path
from typing import Callable

import classad2
from twisted.logger import Logger

from backends.interface import BackendError
from jobmodel import matchtime
from jobmodel.classads import evaluate_number, evaluate_string, job_status
from jobmodel.jobs import HoldCode, JobStatus

from . import dedicated, family, joblog, jobspec, lifecycle, parallel, recovery, sandbox
from .dag import dagman
from .executor import Launch
from .family import ControlConfig
from .lifecycle import WITH_PROCESS, RunResult, StarterHold, Transition
from .owners import NoAccount, to_switch
from .queue import JobQueue
from .sandbox import ExecuteDir
from .store import JobKey

log = Logger()

#: jobs the periodic evaluation looks at in one call
PERIODIC_CHUNK = 2000
#: what could not be done, in a hold reason ("The gateway could not ...: <error>")
START = "start the job"
RECORD_END = "record the end of the job's run"
RECORD_DAG_END = "record the end of the DAG's run"


class Scheduler:
    """Matches idle jobs against this machine's slots, prepares them, and records how their runs end.

    A job runs as the account of its ``Owner`` (the queue's ``accounts``); an owner who has none here, or who may not
    run jobs, has the job held when it would start, as a starter that cannot switch user does."""

    def __init__(self, queue: JobQueue, execute_root: Path, machine: classad2.ClassAd,
                 control: ControlConfig | None = None) -> None:
        self._queue = queue
        self._execute = execute_root
        self._machine = machine
        sandbox.write_machine_ad(execute_root, machine)
        self._control = control if control is not None else ControlConfig()
        #: jobs that could be neither settled nor held (the queue refused every write): retried periodically
        self._retries: dict[JobKey, Callable[[], None]] = {}
        #: the jobs the periodic evaluation in progress has still to look at (taken from the end)
        self._periodic_round: list[JobKey] = []

    # -- a cycle -------------------------------------------------------------------------------------------
    def cycle(self, ended: dict[JobKey, str | None], free_cpus: int | None, running: set[JobKey]) -> list[Launch]:
        """Record the end of each run in ``ended`` (``finish_job``, with its interruption), then start jobs in the
        ``free_cpus`` (None: start nothing, the executor is stopping).  One backend call: the ends and the starts are
        made durable by one sync, and a slot a run freed is filled at once, without a call of its own."""
        for key, interruption in ended.items():
            self.finish_job(key, interruption)
        return [] if free_cpus is None else self.start_jobs(free_cpus, running | ended.keys())

    # -- starting -------------------------------------------------------------------------------------
    def start_jobs(self, free_cpus: int, running: set[JobKey]) -> list[Launch]:
        """Choose idle jobs that match this machine and fit the free slots, in priority order, prepare their
        execute directories and mark them running; jobs that cannot run are put on hold (and the slots they would
        have taken go to the next jobs)."""
        launches: list[Launch] = []
        while True:
            chosen = self._next_jobs(free_cpus - sum(launch.cpus for launch in launches), running)
            started = self._start(chosen)
            launches += started
            if len(started) == len(chosen):
                return launches

    def _start(self, chosen: list[tuple[JobKey, classad2.ClassAd, int]]) -> list[Launch]:
        """Prepare the chosen jobs and record that they started, or hold those that cannot."""
        now = self._queue.now()
        transitions: dict[JobKey, tuple[classad2.ClassAd, Transition]] = {}
        launches: list[Launch] = []
        for key, ad, cpus in chosen:
            directory = ExecuteDir.of(self._execute, *key)
            try:
                launch = self._prepare(key, ad, directory, cpus)
                start = lifecycle.started(ad, now, self._queue.schedd_name)
                if parallel.is_parallel(ad):
                    start = parallel.started(ad, start)
            except (jobspec.BadJob, NoAccount) as bad:
                self._queue.discard(directory.root)
                transitions[key] = ad, lifecycle.hold(ad, bad.reason, bad.code, now)
            except Exception as exc:  # one job that cannot be prepared must not keep every other job from starting
                log.failure("cannot start job {job}; holding it", job=key)
                self._queue.discard(directory.root)
                transitions[key] = ad, lifecycle.hold(ad, could_not(START, exc), HoldCode.UNSPECIFIED, now)
            else:
                transitions[key] = ad, start
                launches.append(launch)
                self._queue.active.add(key)
        self._queue.write_transitions(transitions, notify=False)
        return [dataclasses.replace(launch, written=self._queue.store.written) for launch in launches]

    def _next_jobs(self, free_cpus: int, running: set[JobKey]) -> list[tuple[JobKey, classad2.ClassAd, int]]:
        """The jobs to start now, given ``free_cpus``: idle jobs not starting already, in priority order (the store's
        index), that match this machine and fit what is still free.  Reads no more of the index than it takes: the
        jobs that take no slot, then those that do until the slots are full; jobs found not to match are set aside
        in the index (matched again when they change, or at the periodic evaluation)."""
        store, active = self._queue.store, self._queue.active
        chosen: list[tuple[JobKey, classad2.ClassAd, int]] = []
        unmatched: list[JobKey] = []
        for key, cpus in store.idle.in_order(free_cpus):
            if cpus and free_cpus <= 0:
                break  # (the jobs that take a slot come last)
            if key in running or key in active:
                continue
            if cpus > free_cpus:
                if self._keeps_slots(store.get(key), cpus):
                    free_cpus = 0  # a parallel job waits for its slots: nothing ranked after it takes them
                continue
            ad = store.get(key)
            if ad is None:
                continue
            if not self._matches_machine(ad):
                unmatched.append(key)
                continue
            chosen.append((key, ad, cpus))
            free_cpus -= cpus
        for key in unmatched:
            store.idle.set_aside(key)
        return chosen

    def _prepare(self, key: JobKey, ad: classad2.ClassAd, directory: ExecuteDir, cpus: int) -> Launch:
        """A DAGMan job is run by the built-in DAG runner; any other job as a process from its execute directory, as
        its owner's account (raises NoAccount when there is none)."""
        account = self._queue.accounts.of(evaluate_string(ad, "Owner") or None)
        try:
            self._queue.ensure_spool(key, account, evaluate_string(ad, "Iwd"))
        except BackendError as exc:  # (its default Iwd: the job is held saying why, as for an Iwd it cannot reach)
            raise jobspec.BadJob(str(exc), HoldCode.UNSPECIFIED) from None
        if dagman.is_dagman(ad):
            return Launch(key, directory, 0, dag=True)
        try:  # the schedd fills $$() references from the slot it matched the job with
            ad = matchtime.expand(ad, self._machine)
        except matchtime.UnexpandedReference as exc:
            raise jobspec.BadJob(str(exc), HoldCode.UNSPECIFIED) from None
        switched = to_switch(account)
        # a job of another user never sees the gateway's environment (GetEnv gets its owner's login environment)
        environment = switched.environment() if switched is not None else dict(os.environ)
        memory = _request_memory(ad)  # (per node: a parallel job's one cgroup holds every node)
        nodes = parallel.node_count(ad) if parallel.is_parallel(ad) else 1
        control = self._control.for_job(directory.root, memory * nodes if memory else None, max(1, cpus),
                                        [directory.sandbox])
        if parallel.is_parallel(ad):
            chirp = parallel.prepare(ad, directory, control, account, environment)
        else:
            chirp = sandbox.prepare(jobspec.plan(ad, directory.sandbox, environment), directory, ad, control, account)
        return Launch(key, directory, cpus, chirp=chirp, kill_signal=lifecycle.kill_signal(ad), control=control)

    def _keeps_slots(self, ad: classad2.ClassAd | None, cpus: int) -> bool:
        """Whether an idle job that does not fit the free slots keeps them from the jobs after it (``dedicated``)."""
        return ad is not None and dedicated.keeps_slots(ad, cpus, self._machine) and self._matches_machine(ad)

    def _matches_machine(self, ad: classad2.ClassAd) -> bool:
        if "Requirements" not in ad:
            return True
        try:
            return bool(ad.symmetricMatch(self._machine))
        except classad2.ClassAdException:
            return False

    # -- ending ---------------------------------------------------------------------------------------
    def finish_job(self, key: JobKey, interruption: str | None = None) -> None:
        """Record the end of a run: how it ended (from the launcher's result in the run's file), the output it made, and
        what OnExitHold/OnExitRemove decide; a run the gateway ended (``interruption``) goes back to idle.  A run
        whose end cannot be recorded holds its job (``_settle``)."""
        self._queue.active.discard(key)
        self._settle(key, RECORD_END, partial(self._record_end, key, interruption))

    def _record_end(self, key: JobKey, interruption: str | None = None) -> None:
        directory = ExecuteDir.of(self._execute, *key)
        ad = self._queue.store.get(key)
        if ad is None:
            directory.remove()
            return
        recorded = directory.result()  # what the launcher wrote of the run (read once: a file to parse)
        if interruption is None and recorded is None:  # the launcher died with the job
            interruption = "The job's launcher was killed"
        result = dataclasses.replace(run_result(recorded, ad, self._queue.now()), reported=_reported(directory))
        transition = self._run_ended(ad, result, directory, interruption)
        if parallel.is_parallel(ad):
            transition = parallel.ended(ad, recorded, transition)
        joblog.run_ended(key, ad, result, interruption)
        self._queue.write_transitions({key: (ad, transition)})
        self._queue.once_durable(partial(self._remove_spent, key, directory))  # (the run's end is on disk before its
        # result goes: a crash never runs it again)

    def _remove_spent(self, key: JobKey, directory: ExecuteDir) -> None:
        """Remove the execute directory of a run whose end is on disk, unless the job started again meanwhile."""
        if key not in self._queue.active:
            self._queue.discard(directory.root)

    def _run_ended(self, ad: classad2.ClassAd, result: RunResult, directory: ExecuteDir,
                   interruption: str | None) -> Transition:
        now = self._queue.now()
        if job_status(ad) not in WITH_PROCESS:  # held or removed meanwhile: we stopped it on purpose
            return Transition(lifecycle.run_accounting(ad, result))
        if interruption is not None:  # (finish_job names a launcher that left no result as one)
            return lifecycle.interrupted(ad, result, interruption, now)
        return lifecycle.exited(ad, result, now)

    def finish_dag(self, key: JobKey, exit_code: int | None, interruption: str | None = None) -> None:
        """Record the end of a DAG run: its exit code, or (``None``) that it only stopped; one whose end cannot be
        recorded holds its DAGMan job."""
        self._queue.active.discard(key)
        self._settle(key, RECORD_DAG_END, partial(self._record_dag_end, key, exit_code, interruption))

    def _record_dag_end(self, key: JobKey, exit_code: int | None, interruption: str | None) -> None:
        ad = self._queue.store.get(key)
        if ad is None:
            return
        now = self._queue.now()
        started = evaluate_number(ad, "JobCurrentStartDate") or now
        result = RunResult(exit_code=exit_code, signal=None, wall_seconds=max(0.0, now - started))
        stopped = None if exit_code is not None else interruption or "The DAG runner stopped"
        if job_status(ad) is not JobStatus.RUNNING:
            transition = Transition(lifecycle.run_accounting(ad, result))
        elif stopped is not None:
            transition = lifecycle.interrupted(ad, result, stopped, now)
        else:
            transition = lifecycle.exited(ad, result, now)
        joblog.run_ended(key, ad, result, stopped)
        if exit_code is not None:
            dagman.remove_lock_file(ad, self._queue.accounts)
        self._queue.write_transitions({key: (ad, transition)})

    # -- usage while running --------------------------------------------------------------------------
    def record_usage(self, keys: list[JobKey]) -> None:
        """Put in the ads of these running jobs the usage their launchers last sampled (``starter_update_interval``),
        with an image-size event when their memory changed.  A job whose run ended meanwhile is left alone."""
        transitions: dict[JobKey, tuple[classad2.ClassAd, Transition]] = {}
        for key in keys:
            ad = self._queue.store.get(key)
            if ad is None or key not in self._queue.active or job_status(ad) not in WITH_PROCESS:
                continue
            directory = ExecuteDir.of(self._execute, *key)
            sample = family.read_usage(directory.control)
            if sample is None:
                continue
            transitions[key] = ad, lifecycle.usage_update(ad, sample, _reported(directory))
            _write_reported(directory, (float(sample.get("user_cpu", 0.0)), float(sample.get("sys_cpu", 0.0))))
        self._queue.write_transitions(transitions)

    # -- what cannot be done --------------------------------------------------------------------------
    def _settle(self, key: JobKey, what: str, work: Callable[[], None]) -> None:
        """Do ``work`` for a job; if it fails, whatever the failure, hold the job with a reason saying ``what`` could
        not be done and why, so that it is never left running without a process.  When even the hold cannot be
        written (the queue's file refuses writes: a full disk), both are tried again at the next periodic
        evaluation.  Never raises: the caller goes on with the other jobs."""
        self._retries.pop(key, None)
        try:
            work()
            return
        except Exception as exc:  # the job must move on, whatever went wrong
            log.failure("could not {what} of job {job}; holding it", what=what, job=key)
            reason = could_not(what, exc)
        try:
            self._hold_unsettled(key, reason)
        except Exception:
            log.failure("could not hold job {job} either; trying again at the next periodic evaluation", job=key)
            self._retries[key] = partial(self._settle, key, what, work)

    def _hold_unsettled(self, key: JobKey, reason: str) -> None:
        ad = self._queue.store.get(key)
        transition = None if ad is None else lifecycle.unsettled(ad, reason, self._queue.now())
        if transition is not None:
            self._queue.write_transitions({key: (ad, transition)})
        directory = ExecuteDir.of(self._execute, *key)  # its run is over: what is left of it goes
        recovery.kill_leftover(directory)
        self._queue.once_durable(partial(self._remove_spent, key, directory))

    # -- policies and restarts ------------------------------------------------------------------------
    def evaluate_periodic(self) -> bool:
        """Jobs that could not be settled before, PeriodicHold/Remove/Release, and finished jobs whose
        LeaveJobInQueue turned false.  A round over a long queue is done :data:`PERIODIC_CHUNK` jobs a call, so that
        no other call waits for all of it: returns whether the round has jobs left (call again)."""
        if not self._periodic_round:
            for retry in list(self._retries.values()):
                retry()
            self._queue.store.idle.reconsider()
            self._periodic_round = self._queue.store.keys()
        chunk = self._periodic_round[-PERIODIC_CHUNK:]
        del self._periodic_round[-PERIODIC_CHUNK:]
        now = self._queue.now()
        transitions: dict[JobKey, tuple[classad2.ClassAd, Transition]] = {}
        for key in chunk:
            ad = self._queue.store.get(key)
            if ad is None:
                continue
            transition = lifecycle.periodic(ad, now)
            if transition is not None:
                transitions[key] = ad, transition
            elif key not in self._queue.active and lifecycle.leaves_queue(ad):
                transitions[key] = ad, Transition({})
        self._queue.write_transitions(transitions)
        return bool(self._periodic_round)

    def recover(self) -> None:
        """At start-up, settle the jobs a crash cut off (see ``recovery.py``), each on its own: a job that cannot be
        recovered is held, and the others are recovered all the same."""
        recovery.recover(self._queue.store, self._execute, self._record_end, self._settle)


def could_not(what: str, error: Exception) -> str:
    """The hold reason of a job the gateway could not move on: what it could not do, and the error."""
    return f"The gateway could not {what}: {type(error).__name__}: {error}"


def run_result(result: dict | None, ad: classad2.ClassAd, now: int) -> RunResult:
    """How a run ended, from the launcher's result (``None``: the launcher itself was killed)."""
    if result is None:  # the job died with its launcher
        started = evaluate_number(ad, "JobCurrentStartDate") or now
        return RunResult(exit_code=None, signal=int(signal.SIGKILL), wall_seconds=max(0.0, now - started))
    return RunResult(exit_code=result.get("exit_code"), signal=result.get("signal"),
                     user_cpu=float(result.get("user_cpu", 0.0)), sys_cpu=float(result.get("sys_cpu", 0.0)),
                     max_rss_kb=int(result.get("max_rss_kb", 0)), wall_seconds=float(result.get("wall_seconds", 0.0)),
                     exec_error=result.get("exec_error"), setup_failure=_starter_hold(result.get("setup_failure")),
                     output_failure=_starter_hold(result.get("output_failure")),
                     memory_failure=_starter_hold(result.get("memory_failure")), disk_kb=int(result.get("disk_kb", 0)))


MAX_MEMORY_MB = 1 << 32  # (a larger request is no limit: the kernel takes no larger one)
REPORTED = "reported.json"  # the run's CPU seconds its ad already counts, beside the launcher's usage file


def _reported(directory: ExecuteDir) -> tuple[float, float]:
    try:
        user, system = json.loads((directory.control / REPORTED).read_text())
        return float(user), float(system)
    except (OSError, ValueError, TypeError):
        return 0.0, 0.0


def _write_reported(directory: ExecuteDir, cpu: tuple[float, float]) -> None:
    try:
        (directory.control / REPORTED).write_text(json.dumps(cpu))
    except OSError:  # (its run ended and its directory went)
        pass


#: a partitionable slot gives a job its ``RequestMemory`` rounded up to this many MiB (HTCondor's default
#: ``MODIFY_REQUEST_EXPR_REQUESTMEMORY = quantize(RequestMemory, {128})``): the memory it is provisioned and limited to
MEMORY_QUANTUM_MB = 128


def _request_memory(ad: classad2.ClassAd) -> int | None:
    """The memory the job's slot is provisioned with, in MiB: its ``RequestMemory`` quantized as a partitionable slot
    does (condor_submit's default request follows the image size, a few MiB, which no real job fits in), None when
    the job asks for none (or for nothing a number can say)."""
    value = evaluate_number(ad, "RequestMemory")
    if not (math.isfinite(value) and value > 0):
        return None
    return min(MAX_MEMORY_MB, math.ceil(value / MEMORY_QUANTUM_MB) * MEMORY_QUANTUM_MB)


def _starter_hold(reported: object) -> StarterHold | None:
    """A hold the launcher's owner side reported (``{"reason": ..., "code": ...}``), if any."""
    if not isinstance(reported, dict):
        return None
    try:
        code = HoldCode(int(reported.get("code", HoldCode.UNSPECIFIED)))
    except ValueError:
        code = HoldCode.UNSPECIFIED
    return StarterHold(str(reported.get("reason", "Error from starter")), code)
