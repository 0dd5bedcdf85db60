"""The local backend's scheduler: which idle jobs run now, and what a run's end does to its job.

It decides; the executor (in the reactor) acts.  Every method runs on the backend's thread, reads the queue and
writes its decisions through :meth:`JobQueue.write`; the rules for each transition are the pure functions of
``lifecycle.py``.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import classad2

from jobmodel.classads import evaluate_number, evaluate_string, job_status
from jobmodel.jobs import HoldCode, JobStatus

from . import joblog, jobspec, lifecycle, recovery, sandbox
from .dag import dagman
from .executor import Launch
from .lifecycle import WITH_PROCESS, RunResult, StarterHold, Transition
from .owners import NoAccount, to_switch
from .queue import JobQueue
from .sandbox import ExecuteDir
from .store import JobKey


class Scheduler:
    """Matches idle jobs against this machine's slots, prepares them, and records how their runs end.

    A job runs as the account of its ``Owner`` (the queue's ``accounts``); an owner who has none here, or who may not
    run jobs, has the job held when it would start, as a starter that cannot switch user does."""

    def __init__(self, queue: JobQueue, execute_root: Path, machine: classad2.ClassAd) -> None:
        self._queue = queue
        self._execute = execute_root
        self._machine = machine

    # -- starting -------------------------------------------------------------------------------------
    def start_jobs(self, free_cpus: int, running: set[JobKey]) -> list[Launch]:
        """Choose idle jobs that match this machine and fit the free slots, in priority order, prepare their
        execute directories and mark them running; jobs that cannot run are put on hold."""
        now = self._queue.now()
        transitions: dict[JobKey, tuple[classad2.ClassAd, Transition]] = {}
        launches: list[Launch] = []
        for key, ad in self._idle_jobs(running):
            cpus = jobspec.request_cpus(ad) if jobspec.uses_slot(ad) else 0
            if cpus > free_cpus or not self._matches_machine(ad):
                continue
            directory = ExecuteDir.of(self._execute, *key)
            try:
                launch = self._prepare(key, ad, directory, cpus)
            except (jobspec.BadJob, NoAccount) as bad:
                directory.remove()
                transitions[key] = ad, lifecycle.hold(ad, bad.reason, bad.code, now)
            else:
                transitions[key] = ad, lifecycle.started(ad, now, self._queue.schedd_name)
                launches.append(launch)
                self._queue.active.add(key)
                free_cpus -= launch.cpus
        self._queue.write_transitions(transitions, notify=False)
        return launches

    def _prepare(self, key: JobKey, ad: classad2.ClassAd, directory: ExecuteDir, cpus: int) -> Launch:
        """A DAGMan job is run by the built-in DAG runner; any other job as a process from its execute directory, as
        its owner's account (raises NoAccount when there is none)."""
        account = self._queue.accounts.of(evaluate_string(ad, "Owner") or None)
        if dagman.is_dagman(ad):
            return Launch(key, directory, 0, dag=True)
        switched = to_switch(account)
        # a job of another user never sees the gateway's environment (GetEnv gets its owner's login environment)
        plan = jobspec.plan(ad, directory.sandbox, switched.environment() if switched is not None else dict(os.environ))
        sandbox.prepare(plan, directory, ad, self._machine, account)
        return Launch(key, directory, cpus)

    def _idle_jobs(self, running: set[JobKey]) -> list[tuple[JobKey, classad2.ClassAd]]:
        idle = [(key, ad) for key, ad in self._queue.store.ads()
                if key not in running and key not in self._queue.active and job_status(ad) is JobStatus.IDLE]
        return sorted(idle, key=lambda item: (-evaluate_number(item[1], "JobPrio"),
                                              evaluate_number(item[1], "QDate"), item[0]))

    def _matches_machine(self, ad: classad2.ClassAd) -> bool:
        if "Requirements" not in ad:
            return True
        try:
            return bool(ad.symmetricMatch(self._machine))
        except classad2.ClassAdException:
            return False

    # -- ending ---------------------------------------------------------------------------------------
    def finish_job(self, key: JobKey, interruption: str | None = None) -> None:
        """Record the end of a run: how it ended (from the launcher's result file), the output it made, and
        what OnExitHold/OnExitRemove decide; a run the gateway ended (``interruption``) goes back to idle."""
        self._queue.active.discard(key)
        directory = ExecuteDir.of(self._execute, *key)
        ad = self._queue.store.get(key)
        if ad is None:
            directory.remove()
            return
        if interruption is None and directory.result() is None:  # the launcher died with the job
            interruption = "The job's launcher was killed"
        result = run_result(directory.result(), ad, self._queue.now())
        transition = self._run_ended(ad, result, directory, interruption)
        joblog.run_ended(key, ad, result, interruption)
        self._queue.write_transitions({key: (ad, transition)})
        directory.remove()

    def _run_ended(self, ad: classad2.ClassAd, result: RunResult, directory: ExecuteDir,
                   interruption: str | None) -> Transition:
        now = self._queue.now()
        if job_status(ad) not in WITH_PROCESS:  # held or removed meanwhile: we stopped it on purpose
            return Transition(lifecycle.run_accounting(ad, result))
        if interruption is not None:  # (finish_job names a launcher that left no result as one)
            return lifecycle.interrupted(ad, result, interruption, now)
        return lifecycle.exited(ad, result, now)

    def finish_dag(self, key: JobKey, exit_code: int | None, interruption: str | None = None) -> None:
        """Record the end of a DAG run: its exit code, or (``None``) that it only stopped."""
        self._queue.active.discard(key)
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

    # -- policies and restarts ------------------------------------------------------------------------
    def evaluate_periodic(self) -> None:
        """PeriodicHold/Remove/Release, and finished jobs whose LeaveJobInQueue turned false."""
        now = self._queue.now()
        transitions: dict[JobKey, tuple[classad2.ClassAd, Transition]] = {}
        for key, ad in self._queue.store.ads():
            transition = lifecycle.periodic(ad, now)
            if transition is not None:
                transitions[key] = ad, transition
            elif key not in self._queue.active and lifecycle.leaves_queue(ad):
                transitions[key] = ad, Transition({})
        self._queue.write_transitions(transitions)

    def recover(self) -> None:
        """At start-up, settle the jobs a crash cut off (see ``recovery.py``)."""
        recovery.recover(self._queue.store, self._execute, self.finish_job)


def run_result(result: dict | None, ad: classad2.ClassAd, now: int) -> RunResult:
    """How a run ended, from the launcher's result file (``None``: the launcher itself was killed)."""
    if result is None:  # the job died with its launcher
        started = evaluate_number(ad, "JobCurrentStartDate") or now
        return RunResult(exit_code=None, signal=int(signal.SIGKILL), wall_seconds=max(0.0, now - started))
    return RunResult(exit_code=result.get("exit_code"), signal=result.get("signal"),
                     user_cpu=float(result.get("user_cpu", 0.0)), sys_cpu=float(result.get("sys_cpu", 0.0)),
                     max_rss_kb=int(result.get("max_rss_kb", 0)), wall_seconds=float(result.get("wall_seconds", 0.0)),
                     exec_error=result.get("exec_error"), setup_failure=_starter_hold(result.get("setup_failure")),
                     output_failure=_starter_hold(result.get("output_failure")))


def _starter_hold(reported: object) -> StarterHold | None:
    """A hold the launcher's owner side reported (``{"reason": ..., "code": ...}``), if any."""
    if not isinstance(reported, dict):
        return None
    try:
        code = HoldCode(int(reported.get("code", HoldCode.UNSPECIFIED)))
    except ValueError:
        code = HoldCode.UNSPECIFIED
    return StarterHold(str(reported.get("reason", "Error from starter")), code)
