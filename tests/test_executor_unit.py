"""The executor's decisions in isolation: slots, negotiation cycles, kill signals and grace, periodic evaluation,
shutdown, suspend/continue, and DAG runs -- on a fake reactor (``MemoryReactorClock`` with a recording
``spawnProcess``), a synchronous ``call`` and a fake ``Scheduling``.  No process is started, no time passes."""

from __future__ import annotations

import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import classad2
import pytest
from twisted.internet import defer
from twisted.internet.error import ProcessDone
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure

from backends.local import executor as executor_module
from backends.local import runfile
from backends.local.dag.dagman import DagmanOptions
from backends.local.dag.language import read as read_dag
from backends.local.dag.runner import DagSetup
from backends.local.executor import LAUNCHER_GRACE, Executor, ExecutorOptions, Launch
from backends.local.sandbox import ExecuteDir
from jobmodel.jobs import JobStatus, Universe

SHUTDOWN = "The gateway shut down while the job was running; it will run again"


# -- fakes ----------------------------------------------------------------------------------------------
class FakeProcess:
    """What ``spawnProcess`` returns: an ``IProcessTransport`` with a pid."""

    def __init__(self, pid: int) -> None:
        self.pid = pid


@dataclass
class Spawned:
    protocol: Any
    executable: str
    args: list[str]
    env: dict | None
    path: str | None
    process: FakeProcess

    @property
    def directory(self) -> str:
        """The execute directory of the launcher's spec (``<directory>/run.jsonl``)."""
        return str(Path(self.args[-1]).parent)

    def end(self) -> None:
        """The launcher exits (what the reactor tells the protocol)."""
        self.protocol.processEnded(Failure(ProcessDone(0)))


class ProcessReactor(MemoryReactorClock):
    """MemoryReactorClock has no ``spawnProcess``: this one records each call and hands out fake processes."""

    def __init__(self) -> None:
        super().__init__()
        self.spawned: list[Spawned] = []
        self.spawn_error: Exception | None = None
        self._pid = 1000

    def spawnProcess(self, processProtocol, executable, args=(), env=None, path=None, uid=None, gid=None,
                     usePTY=False, childFDs=None):
        if self.spawn_error is not None:
            raise self.spawn_error
        self._pid += 1
        process = FakeProcess(self._pid)
        self.spawned.append(Spawned(processProtocol, executable, list(args), env, path, process))
        return process


class FakeScheduling:
    """Hands out the launches it was offered, as many as fit the free CPUs (as the real scheduler does)."""

    def __init__(self) -> None:
        self.offered: list[Launch] = []
        self.start_calls: list[tuple[int, set]] = []
        self.finished: list[tuple] = []
        self.dags_finished: list[tuple] = []
        self.recovered = 0
        self.periodic = 0
        self.usage_calls: list[list] = []
        self.failure: Exception | None = None  # what recover/finish_job/finish_dag raise, if set

    def recover(self) -> None:
        self.recovered += 1
        self._fail()

    def _fail(self) -> None:
        if self.failure is not None:
            raise self.failure

    def start_jobs(self, free_cpus: int, running: set) -> list[Launch]:
        self.start_calls.append((free_cpus, set(running)))
        chosen = []
        for launch in list(self.offered):
            if launch.cpus <= free_cpus:
                chosen.append(launch)
                self.offered.remove(launch)
                free_cpus -= launch.cpus
        return chosen

    def cycle(self, ended: dict, free_cpus, running: set) -> list[Launch]:
        """As the scheduler's: every end recorded (one that fails does not stop the others), then the starts."""
        for key, interruption in ended.items():
            try:
                self.finish_job(key, interruption)
            except Exception:
                pass  # (the real scheduler holds such a job: recording an end never raises)
        return [] if free_cpus is None else self.start_jobs(free_cpus, running)

    def finish_job(self, key, interruption=None) -> None:
        self.finished.append((key, interruption))
        self._fail()

    def finish_dag(self, key, exit_code, interruption=None) -> None:
        self.dags_finished.append((key, exit_code, interruption))
        self._fail()

    def evaluate_periodic(self) -> None:
        self.periodic += 1

    def record_usage(self, keys) -> None:
        self.usage_calls.append(sorted(keys))


class NoDags:
    """A DagHost for tests that start no DAG."""

    def __getattr__(self, name):
        raise AssertionError(f"a DAG host call ({name}) was not expected")


def call(function, *args, **kwargs):
    """The backend's thread, made synchronous."""
    return defer.maybeDeferred(function, *args, **kwargs)


class ReactorCall:
    """A ``call`` that answers on a later reactor turn, as the backend's thread does (``reactor.advance(0)``)."""

    def __init__(self, reactor) -> None:
        self._reactor = reactor

    def __call__(self, function, *args, **kwargs):
        answer: defer.Deferred = defer.Deferred()
        self._reactor.callLater(0, lambda: defer.maybeDeferred(function, *args, **kwargs).chainDeferred(answer))
        return answer


class HeldCall:
    """A ``call`` whose ``cycle`` answers only when the test says so (the backend thread is busy)."""

    def __init__(self) -> None:
        self.pending: list[tuple[Any, tuple, defer.Deferred]] = []

    def __call__(self, function, *args, **kwargs):
        if getattr(function, "__name__", "") != "cycle":
            return defer.maybeDeferred(function, *args, **kwargs)
        answer: defer.Deferred = defer.Deferred()
        self.pending.append((function, args, answer))
        return answer

    def answer(self) -> None:
        function, args, answer = self.pending.pop(0)
        answer.callback(function(*args))


@pytest.fixture(autouse=True)
def sent(monkeypatch):
    """Every os.kill / os.killpg the executor makes, instead of making it (no test may signal a real pid)."""
    signals: list[tuple[str, int, int]] = []
    monkeypatch.setattr(executor_module.os, "kill", lambda pid, number: signals.append(("kill", pid, number)))
    monkeypatch.setattr(executor_module.os, "killpg", lambda pgid, number: signals.append(("killpg", pgid, number)))
    return signals


@pytest.fixture
def reactor() -> ProcessReactor:
    return ProcessReactor()


@pytest.fixture
def scheduling() -> FakeScheduling:
    return FakeScheduling()


def executor(reactor, scheduling, *, slots=4, kill_grace=10.0, periodic_interval=60.0, update_interval=300.0,
             dags=None, call_function=call) -> Executor:
    return Executor(reactor, call_function, scheduling, dags or NoDags(),
                    ExecutorOptions(slots=slots, kill_grace=kill_grace, periodic_interval=periodic_interval,
                                    update_interval=update_interval))


def launch(tmp_path: Path, key, cpus=1, pgid: int | None = None, dag=False, kill_signal="SIGTERM") -> Launch:
    """A launch whose execute directory exists; ``pgid``: the launcher has already started the job in this process
    group (and said so in the run's file)."""
    directory = ExecuteDir.of(tmp_path, *key)
    directory.create()
    if pgid is not None:
        started(directory, pgid)
    return Launch(key, directory, cpus, dag=dag, kill_signal=kill_signal)


def started(directory: ExecuteDir, pgid: int) -> None:
    """What the launcher writes once the job's first process exists: its process group, and the launcher's pid
    (only recovery reads the latter)."""
    if not directory.run_file.exists():
        directory.run_file.write_text("{}\n")  # (the spec's line: the gateway's)
    runfile.append(directory.run_file, {runfile.STARTED: [pgid, 4000], "at": time.time()})


def ad(status: JobStatus, **attributes) -> classad2.ClassAd:
    result = classad2.ClassAd()
    result["JobStatus"] = int(status)
    for name, value in attributes.items():
        result[name] = value
    return result


def start_cycles(reactor, ex: Executor) -> None:
    ex.wake()
    reactor.advance(0)


# -- negotiation and slots ------------------------------------------------------------------------------
def test_start_recovers_first_then_offers_every_slot(reactor, scheduling, tmp_path, sent):
    scheduling.offered = [launch(tmp_path, (1, 0), cpus=1), launch(tmp_path, (2, 0), cpus=2)]
    ex = executor(reactor, scheduling, slots=4)
    started = ex.start()
    assert started.called and scheduling.recovered == 1
    assert scheduling.start_calls == []  # the first cycle is scheduled, not run inline
    reactor.advance(0)
    assert scheduling.start_calls == [(4, set())]
    assert ex.busy_cpus == 3
    first = reactor.spawned[0]
    assert first.executable == sys.executable
    assert first.args == [sys.executable, "-S", "-s", str(executor_module.LAUNCHER),
                          str(tmp_path / "dir_1.0" / "run.jsonl")]
    assert first.path is None  # (twisted spawns, rather than forks, only a process without a working directory)
    assert set(first.env) == {"PATH"}
    assert [s.directory for s in reactor.spawned] == [str(tmp_path / "dir_1.0"), str(tmp_path / "dir_2.0")]


def test_jobs_start_even_when_recovery_failed(reactor, scheduling, tmp_path, sent):
    """(The scheduler holds the jobs it cannot recover; whatever escapes it must not stop the queue for good.)"""
    scheduling.failure = RuntimeError("recovery broke")
    scheduling.offered = [launch(tmp_path, (1, 0))]
    ex = executor(reactor, scheduling, periodic_interval=5.0)
    ex.start()
    reactor.advance(0)
    assert scheduling.recovered == 1 and scheduling.start_calls == [(4, set())] and len(reactor.spawned) == 1
    reactor.advance(5.0)
    assert scheduling.periodic == 1  # and the periodic evaluation runs


def test_the_next_cycle_offers_only_the_free_slots(reactor, scheduling, tmp_path, sent):
    scheduling.offered = [launch(tmp_path, (1, 0), cpus=1), launch(tmp_path, (2, 0), cpus=2),
                          launch(tmp_path, (3, 0), cpus=2)]
    ex = executor(reactor, scheduling, slots=4)
    start_cycles(reactor, ex)
    assert [s.directory.rsplit("/", 1)[1] for s in reactor.spawned] == ["dir_1.0", "dir_2.0"]
    start_cycles(reactor, ex)
    assert scheduling.start_calls[-1] == (1, {(1, 0), (2, 0)})
    assert len(reactor.spawned) == 2  # (3, 0) needs 2 CPUs, 1 is free


def test_wake_ups_coalesce_into_one_cycle(reactor, scheduling, sent):
    ex = executor(reactor, scheduling)
    ex.wake()
    ex.wake()
    ex.changed({})
    ex.changed({(9, 0): ad(JobStatus.IDLE)})
    assert len(reactor.getDelayedCalls()) == 1
    reactor.advance(0)
    assert len(scheduling.start_calls) == 1
    ex.wake()  # a later wake-up is a new cycle
    reactor.advance(0)
    assert len(scheduling.start_calls) == 2


def test_a_wake_during_a_cycle_runs_one_more_pass_never_a_concurrent_one(reactor, scheduling, tmp_path, sent):
    held = HeldCall()
    ex = executor(reactor, scheduling, slots=2, call_function=held)
    start_cycles(reactor, ex)
    assert len(held.pending) == 1
    scheduling.offered = [launch(tmp_path, (1, 0))]
    start_cycles(reactor, ex)
    start_cycles(reactor, ex)
    assert len(held.pending) == 1  # still the first question
    held.answer()
    assert len(reactor.spawned) == 1
    assert len(held.pending) == 1  # the wake-ups asked for one more pass, with the slot now taken
    held.answer()
    assert held.pending == []
    assert scheduling.start_calls == [(2, set()), (1, {(1, 0)})]


def test_changes_that_make_nothing_idle_do_not_look_for_work(reactor, scheduling, sent):
    ex = executor(reactor, scheduling)
    ex.changed({(9, 0): ad(JobStatus.COMPLETED), (9, 1): ad(JobStatus.HELD)})
    assert reactor.getDelayedCalls() == []
    ex.changed({(9, 0): ad(JobStatus.COMPLETED), (9, 1): ad(JobStatus.IDLE)})
    assert len(reactor.getDelayedCalls()) == 1


def test_an_idle_job_that_needs_a_slot_does_not_wake_a_cycle_while_every_slot_is_taken(reactor, scheduling,
                                                                                        tmp_path, sent):
    scheduling.offered = [launch(tmp_path, (1, 0), cpus=1)]
    ex = executor(reactor, scheduling, slots=1)
    start_cycles(reactor, ex)
    calls = len(scheduling.start_calls)
    for universe in (None, int(Universe.VANILLA), int(Universe.PARALLEL)):
        attributes = {} if universe is None else {"JobUniverse": universe}
        ex.changed({(9, 0): ad(JobStatus.IDLE, **attributes)})
        assert reactor.getDelayedCalls() == []
    reactor.advance(0)
    assert len(scheduling.start_calls) == calls
    for universe in (Universe.SCHEDULER, Universe.LOCAL):  # these take no slot: a cycle may start them
        ex.changed({(9, 0): ad(JobStatus.IDLE, JobUniverse=int(universe))})
        assert len(reactor.getDelayedCalls()) == 1
        reactor.advance(0)
    expression = ad(JobStatus.IDLE)
    expression["JobUniverse"] = classad2.ExprTree("5 + 2")
    ex.changed({(9, 0): expression})  # an expression is left to the cycle to evaluate
    assert len(reactor.getDelayedCalls()) == 1


def test_a_job_made_idle_by_the_end_of_its_run_wakes_the_next_cycle(reactor, scheduling, tmp_path, sent):
    """The end being recorded frees its slot: the job it made idle again (OnExitRemove false) starts in the cycle
    after the one that recorded it."""
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=501)]
    held = HeldCall()
    ex = executor(reactor, scheduling, slots=1, call_function=held)
    start_cycles(reactor, ex)
    held.answer()
    reactor.spawned[0].end()
    reactor.advance(0)
    assert len(held.pending) == 1  # the cycle recording the end
    ex.changed({(1, 0): ad(JobStatus.IDLE, JobUniverse=int(Universe.VANILLA))})  # its write, heard before its answer
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=502)]
    held.answer()
    reactor.advance(0)
    assert len(held.pending) == 1  # one more pass, which the slot is offered to
    held.answer()
    assert len(reactor.spawned) == 2


def test_with_no_slot_at_all_only_slotless_jobs_wake_a_cycle(reactor, scheduling, sent):
    ex = executor(reactor, scheduling, slots=0)
    ex.changed({(9, 0): ad(JobStatus.IDLE, JobUniverse=int(Universe.VANILLA))})
    assert reactor.getDelayedCalls() == []
    ex.changed({(9, 0): ad(JobStatus.IDLE, JobUniverse=int(Universe.SCHEDULER))})
    assert len(reactor.getDelayedCalls()) == 1


def test_a_job_end_calls_finish_job_and_frees_its_slot(reactor, scheduling, tmp_path, sent):
    """The end is recorded by the next cycle, which fills the slot it freed in the same backend call."""
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=501), launch(tmp_path, (2, 0), pgid=502),
                          launch(tmp_path, (3, 0), pgid=503)]
    ex = executor(reactor, scheduling, slots=2)
    start_cycles(reactor, ex)
    assert len(reactor.spawned) == 2 and ex.busy_cpus == 2
    calls = len(scheduling.start_calls)
    reactor.spawned[0].end()
    assert sent == [("killpg", 501, signal.SIGKILL)]  # nothing of its session outlives the launcher
    reactor.advance(0)  # the end woke the executor
    assert scheduling.finished == [((1, 0), None)]
    assert scheduling.start_calls[calls:] == [(1, {(2, 0)})]
    assert reactor.spawned[2].directory == str(tmp_path / "dir_3.0")
    assert ex.busy_cpus == 2


def test_a_job_whose_end_cannot_be_recorded_still_frees_its_slot(reactor, scheduling, tmp_path, sent):
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=501), launch(tmp_path, (2, 0), pgid=502)]
    ex = executor(reactor, scheduling, slots=1)
    start_cycles(reactor, ex)
    scheduling.failure = OSError(28, "No space left on device")
    reactor.spawned[0].end()
    reactor.advance(0)
    assert scheduling.finished == [((1, 0), None)]
    assert [s.directory for s in reactor.spawned] == [str(tmp_path / "dir_1.0"), str(tmp_path / "dir_2.0")]


def test_ends_heard_together_are_recorded_by_one_call_that_fills_their_slots(reactor, scheduling, tmp_path, sent):
    scheduling.offered = [launch(tmp_path, (n, 0), pgid=500 + n) for n in range(1, 5)]
    ex = executor(reactor, scheduling, slots=2)
    start_cycles(reactor, ex)
    calls = len(scheduling.start_calls)
    reactor.spawned[0].end()
    reactor.spawned[1].end()
    reactor.advance(0)
    assert scheduling.finished == [((1, 0), None), ((2, 0), None)]
    assert scheduling.start_calls[calls:] == [(2, set())]  # one call: both ends, then both slots
    assert [s.directory for s in reactor.spawned[2:]] == [str(tmp_path / "dir_3.0"), str(tmp_path / "dir_4.0")]


def test_a_cycle_that_fails_still_frees_the_slots_of_its_ended_runs(reactor, scheduling, tmp_path, sent):
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=501)]
    ex = executor(reactor, scheduling, slots=1)
    start_cycles(reactor, ex)
    scheduling.offered = [launch(tmp_path, (2, 0), pgid=502)]
    real_start_jobs = scheduling.start_jobs

    def refused(free_cpus, running):
        scheduling.start_jobs = real_start_jobs
        raise OSError(28, "No space left on device")

    scheduling.start_jobs = refused
    reactor.spawned[0].end()
    reactor.advance(0)  # a cycle records the end and fails to start; the next one offers the slot again
    assert scheduling.finished == [((1, 0), None)]
    assert [s.directory for s in reactor.spawned] == [str(tmp_path / "dir_1.0"), str(tmp_path / "dir_2.0")]
    assert scheduling.start_jobs is real_start_jobs and ex.busy_cpus == 1


def test_a_run_whose_launcher_ended_is_never_signalled(reactor, scheduling, tmp_path, sent):
    """The change that records a run's end (or any other) can be heard after its launcher ended and before the end
    is recorded: the launcher's pid may be another process's by then, so nothing is sent to it, and no timer waits
    for it."""
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=501)]
    ex = executor(reactor, scheduling, slots=1)
    start_cycles(reactor, ex)
    reactor.spawned[0].end()
    assert sent == [("killpg", 501, signal.SIGKILL)]
    ex.changed({(1, 0): ad(JobStatus.COMPLETED)})
    ex.changed({(1, 0): ad(JobStatus.HELD)})
    assert sent == [("killpg", 501, signal.SIGKILL)]
    reactor.advance(0)
    assert scheduling.finished == [((1, 0), None)] and reactor.getDelayedCalls() == []


def test_a_launcher_that_cannot_be_started_ends_at_once(reactor, scheduling, tmp_path, sent):
    scheduling.offered = [launch(tmp_path, (1, 0))]
    reactor.spawn_error = OSError(24, "Too many open files")
    ex = executor(reactor, scheduling, slots=1)
    ex.wake()
    reactor.advance(0)
    assert scheduling.finished == [((1, 0), None)]
    assert ex.busy_cpus == 0
    assert scheduling.start_calls[-1] == (1, set())  # and its slot was offered again


# -- stopping held and removed jobs -----------------------------------------------------------------------
def test_a_held_job_gets_its_kill_signal_then_sigkill_after_the_grace(reactor, scheduling, tmp_path, sent):
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=4242)]
    ex = executor(reactor, scheduling, kill_grace=10)
    start_cycles(reactor, ex)
    pid = reactor.spawned[0].process.pid
    ex.changed({(1, 0): ad(JobStatus.HELD, HoldKillSig="SIGUSR1", KillSig="SIGHUP")})
    assert sent == [("kill", pid, signal.SIGUSR1)]  # to the launcher, which passes it on to the job
    ex.changed({(1, 0): ad(JobStatus.HELD, HoldKillSig="SIGUSR1")})
    assert len(sent) == 1  # a second notice does not signal again
    reactor.advance(10 + LAUNCHER_GRACE - 1)  # (the launcher kills the job after the grace: it may need a moment)
    assert len(sent) == 1
    reactor.advance(1)  # ... after which what is left of the job's process group is killed, and the launcher
    assert sent[1:] == [("killpg", 4242, signal.SIGKILL), ("killpg", pid, signal.SIGKILL)]
    reactor.spawned[0].end()
    reactor.advance(0)
    assert scheduling.finished == [((1, 0), None)]  # the scheduler sees the job is held: no interruption
    assert ex.busy_cpus == 0


def test_a_hold_heard_before_the_choice_that_started_the_job_stops_it(reactor, scheduling, tmp_path, sent):
    """The backend's calls answer in any order: a hold written just after start_jobs chose the job may reach the
    executor before start_jobs's answer; the job is then stopped as soon as it is started."""
    held = HeldCall()
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=4242)]
    ex = executor(reactor, scheduling, call_function=held)
    start_cycles(reactor, ex)  # start_jobs has chosen (1, 0) ...
    ex.changed({(1, 0): ad(JobStatus.HELD)})  # ... and the hold that came after it is heard first
    ex.changed({(2, 0): ad(JobStatus.HELD)})  # (a job it did not choose is nothing to stop)
    assert sent == []
    held.answer()
    assert sent == [("kill", reactor.spawned[0].process.pid, signal.SIGTERM)]


def test_a_change_written_before_the_choice_and_heard_after_it_is_not_followed(reactor, scheduling, tmp_path, sent):
    held = HeldCall()
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=4242)]  # (its start is the queue's write 0)
    ex = executor(reactor, scheduling, call_function=held)
    start_cycles(reactor, ex)
    ex.changed({(1, 0): ad(JobStatus.IDLE)}, written=0)  # e.g. its submission, heard late: long over
    held.answer()
    assert sent == [] and ex.busy_cpus == 1


@pytest.mark.parametrize("status, attributes, expected", [
    (JobStatus.REMOVED, {"RemoveKillSig": "SIGQUIT", "HoldKillSig": "SIGUSR1"}, signal.SIGQUIT),
    (JobStatus.HELD, {"KillSig": "SIGHUP"}, signal.SIGHUP),
    (JobStatus.REMOVED, {}, signal.SIGTERM),
    (JobStatus.HELD, {"HoldKillSig": "usr2"}, signal.SIGUSR2),
    (JobStatus.REMOVED, {"RemoveKillSig": "2"}, signal.SIGINT),
    (JobStatus.HELD, {"HoldKillSig": "NOSUCHSIGNAL"}, signal.SIGTERM),
], ids=["remove-kill-sig", "kill-sig", "default", "lowercase-name", "number", "unknown-name"])
def test_which_signal_stops_a_job(reactor, scheduling, tmp_path, sent, status, attributes, expected):
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=77)]
    ex = executor(reactor, scheduling)
    start_cycles(reactor, ex)
    ex.changed({(1, 0): ad(status, **attributes)})
    assert sent == [("kill", reactor.spawned[0].process.pid, expected)]


def test_a_job_that_stops_in_time_is_not_sigkilled(reactor, scheduling, tmp_path, sent):
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=88)]
    ex = executor(reactor, scheduling, kill_grace=10)
    start_cycles(reactor, ex)
    ex.changed({(1, 0): ad(JobStatus.REMOVED)})
    reactor.advance(3)
    reactor.spawned[0].end()
    reactor.advance(0)
    assert reactor.getDelayedCalls() == []  # the SIGKILL timer was cancelled
    reactor.advance(30)
    assert sent == [("kill", reactor.spawned[0].process.pid, signal.SIGTERM), ("killpg", 88, signal.SIGKILL)]
    assert scheduling.finished == [((1, 0), None)]


def test_a_launcher_that_has_not_started_its_job_yet_is_signalled_once_it_has(reactor, scheduling, tmp_path, sent):
    job = launch(tmp_path, (1, 0), pgid=None)
    scheduling.offered = [job]
    ex = executor(reactor, scheduling, kill_grace=10)
    start_cycles(reactor, ex)
    ex.changed({(1, 0): ad(JobStatus.HELD)})
    reactor.advance(0.02)
    reactor.advance(0.02)
    assert sent == []  # (the launcher passes signals on only once the job's process group exists)
    started(job.directory, 999)
    reactor.advance(0.02)
    assert sent == [("kill", reactor.spawned[0].process.pid, signal.SIGTERM)]
    reactor.advance(10 + LAUNCHER_GRACE)  # the grace counts from the hold, not from the delivery
    assert sent[1:] == [("killpg", 999, signal.SIGKILL), ("killpg", reactor.spawned[0].process.pid, signal.SIGKILL)]


# -- suspend and continue -------------------------------------------------------------------------------
def test_suspend_and_continue_are_sent_to_the_launcher(reactor, scheduling, tmp_path, sent):
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=321)]
    ex = executor(reactor, scheduling)
    start_cycles(reactor, ex)
    pid = reactor.spawned[0].process.pid
    ex.changed({(1, 0): ad(JobStatus.SUSPENDED)})
    ex.changed({(1, 0): ad(JobStatus.SUSPENDED)})
    assert sent == [("kill", pid, signal.SIGTSTP)]  # the launcher freezes every process of the job
    ex.changed({(1, 0): ad(JobStatus.RUNNING)})
    ex.changed({(1, 0): ad(JobStatus.RUNNING)})
    assert sent == [("kill", pid, signal.SIGTSTP), ("kill", pid, signal.SIGCONT)]
    assert ex.busy_cpus == 1  # a suspended job keeps its slot


def test_a_suspended_job_is_told_to_stop_and_its_launcher_thaws_it(reactor, scheduling, tmp_path, sent):
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=321)]
    ex = executor(reactor, scheduling)
    start_cycles(reactor, ex)
    pid = reactor.spawned[0].process.pid
    ex.changed({(1, 0): ad(JobStatus.SUSPENDED)})
    ex.changed({(1, 0): ad(JobStatus.REMOVED, RemoveKillSig="SIGINT")})
    assert sent == [("kill", pid, signal.SIGTSTP), ("kill", pid, signal.SIGINT)]


def test_a_suspend_right_after_the_start_waits_for_the_launcher_and_keeps_its_order(reactor, scheduling, tmp_path,
                                                                                    sent):
    """A suspend heard before the launcher has set up its session is not lost (nor is what follows it)."""
    job = launch(tmp_path, (1, 0), pgid=None)
    scheduling.offered = [job]
    ex = executor(reactor, scheduling)
    start_cycles(reactor, ex)
    ex.changed({(1, 0): ad(JobStatus.SUSPENDED)})
    ex.changed({(1, 0): ad(JobStatus.RUNNING)})
    ex.changed({(1, 0): ad(JobStatus.SUSPENDED)})
    reactor.advance(0.02)
    assert sent == []
    started(job.directory, 555)
    reactor.advance(0.02)
    pid = reactor.spawned[0].process.pid
    assert sent == [("kill", pid, signal.SIGTSTP), ("kill", pid, signal.SIGCONT), ("kill", pid, signal.SIGTSTP)]


def test_usage_is_recorded_every_update_interval_for_the_running_jobs(reactor, scheduling, tmp_path, sent):
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=1), launch(tmp_path, (2, 0), pgid=2)]
    ex = executor(reactor, scheduling, update_interval=5)
    ex.start()
    reactor.advance(0)
    reactor.advance(4.9)
    assert scheduling.usage_calls == []
    reactor.advance(0.1)
    assert scheduling.usage_calls == [[(1, 0), (2, 0)]]
    reactor.spawned[0].end()
    reactor.advance(5)
    assert scheduling.usage_calls[-1] == [(2, 0)]  # (a run that ended has nothing more to report)


# -- periodic policy and shutdown -----------------------------------------------------------------------
def test_periodic_evaluation_runs_every_interval(reactor, scheduling, sent):
    ex = executor(reactor, scheduling, periodic_interval=60)
    ex.start()
    assert scheduling.periodic == 0  # not at start
    reactor.advance(59)
    assert scheduling.periodic == 0
    reactor.advance(1)
    assert scheduling.periodic == 1
    reactor.advance(60)
    reactor.advance(60)
    assert scheduling.periodic == 3


def test_stop_requeues_the_running_jobs_and_waits_for_them(reactor, scheduling, tmp_path, sent):
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=11), launch(tmp_path, (2, 0), pgid=22)]
    ex = executor(reactor, scheduling, slots=2, periodic_interval=60)
    ex.start()
    reactor.advance(0)
    ex.changed({(2, 0): ad(JobStatus.SUSPENDED)})
    stopped = defer.Deferred.fromCoroutine(ex.stop())
    first, second = (s.process.pid for s in reactor.spawned)
    assert sent == [("kill", second, signal.SIGTSTP), ("kill", first, signal.SIGTERM),
                    ("kill", second, signal.SIGTERM)]
    assert not stopped.called
    reactor.spawned[0].end()
    assert not stopped.called
    reactor.spawned[1].end()
    reactor.advance(0)  # (both ends recorded by one call, which starts nothing)
    assert stopped.called
    assert scheduling.finished == [((1, 0), SHUTDOWN), ((2, 0), SHUTDOWN)]
    calls = len(scheduling.start_calls)
    scheduling.offered = [launch(tmp_path, (3, 0))]
    ex.wake()
    reactor.advance(120)
    assert len(scheduling.start_calls) == calls  # nothing starts after stop()
    assert scheduling.periodic == 0 and reactor.getDelayedCalls() == []


def test_stop_sends_each_job_its_kill_sig(reactor, scheduling, tmp_path, sent):
    """A shut-down vacates the running jobs with their own KillSig, as a starter's soft kill does."""
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=11, kill_signal="SIGUSR2")]
    ex = executor(reactor, scheduling)
    start_cycles(reactor, ex)
    defer.Deferred.fromCoroutine(ex.stop())
    assert sent == [("kill", reactor.spawned[0].process.pid, signal.SIGUSR2)]


def test_a_fast_stop_has_the_launchers_kill_their_jobs_at_once(reactor, scheduling, tmp_path, sent):
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=11, kill_signal="SIGUSR2")]
    ex = executor(reactor, scheduling)
    start_cycles(reactor, ex)
    defer.Deferred.fromCoroutine(ex.stop(fast=True))
    assert sent == [("kill", reactor.spawned[0].process.pid, signal.SIGALRM)]  # (family.KILL_NOW)


def test_stop_with_nothing_running_returns_at_once(reactor, scheduling, sent):
    ex = executor(reactor, scheduling)
    ex.start()
    stopped = defer.Deferred.fromCoroutine(ex.stop())
    assert stopped.called and sent == []
    reactor.advance(0)  # the first cycle start() had scheduled
    assert scheduling.start_calls == [] and reactor.getDelayedCalls() == []


def test_stop_during_a_cycle_requeues_what_the_cycle_chose(reactor, scheduling, tmp_path, sent):
    held = HeldCall()
    ex = executor(reactor, scheduling, slots=2, call_function=held)
    start_cycles(reactor, ex)  # start_jobs is running on the backend's thread ...
    scheduling.offered = [launch(tmp_path, (1, 0), pgid=5)]
    stopped = defer.Deferred.fromCoroutine(ex.stop())  # ... when the gateway shuts down
    held.answer()
    for process in reactor.spawned:  # whatever was started ends
        process.end()
    assert stopped.called
    assert scheduling.finished == [((1, 0), SHUTDOWN)]  # the job it chose is requeued, as every running one is


# -- DAGMan jobs ------------------------------------------------------------------------------------------
class OneNodeDag:
    """A DagHost with a one-node DAG whose node job is cluster 50."""

    def __init__(self, tmp_path: Path) -> None:
        path = tmp_path / "one.dag"
        path.write_text("JOB A a.sub\n")
        self.setup = DagSetup(log_path=tmp_path / "one.dag.dagman.out", dag=read_dag(path),
                              options=DagmanOptions(dag=path))
        self.submitted: list[str] = []

    def dag_setup(self, key):
        return self.setup

    def submit_node(self, dag_key, dag, name, retry):
        self.submitted.append(name)
        return 50, 1

    def node_job_states(self, cluster):
        return 1, {}

    def remove_node_jobs(self, dag_cluster, reason):
        return 0

    def save_dag_state(self, dag_cluster, state):
        pass

    def clear_dag_state(self, dag_cluster):
        pass

    def write_rescue(self, dag, done, failed):
        return dag.path.with_name("one.dag.rescue001")


def test_a_dag_launch_runs_in_the_gateway_and_its_node_jobs_reach_it(reactor, scheduling, tmp_path, sent):
    # (answers on a later turn, as in the gateway: with a synchronous call the DAG would end inside changed()
    # and drop out of the executor's table while changed() iterates over it)
    host = OneNodeDag(tmp_path)
    scheduling.offered = [launch(tmp_path, (7, 0), cpus=0, dag=True)]
    ex = executor(reactor, scheduling, dags=host, call_function=ReactorCall(reactor))
    start_cycles(reactor, ex)
    assert reactor.spawned == [] and host.submitted == ["A"]
    ex.changed({(50, 0): ad(JobStatus.COMPLETED, ExitCode=0, DAGManJobId=99)})  # another DAG's node
    reactor.advance(0)
    assert scheduling.dags_finished == []
    ex.changed({(50, 0): ad(JobStatus.COMPLETED, ExitCode=0, DAGManJobId=7)})
    reactor.advance(0)
    assert scheduling.dags_finished == [((7, 0), 0, None)]
    assert scheduling.start_calls[-1] == (4, set())  # the run left the table and woke the executor
    assert "All jobs Completed!" in (tmp_path / "one.dag.dagman.out").read_text()


def test_a_held_dagman_job_stops_its_dag_run_without_an_exit_code(reactor, scheduling, tmp_path, sent):
    host = OneNodeDag(tmp_path)
    scheduling.offered = [launch(tmp_path, (7, 0), cpus=0, dag=True)]
    ex = executor(reactor, scheduling, dags=host)
    start_cycles(reactor, ex)
    ex.changed({(7, 0): ad(JobStatus.HELD)})
    assert scheduling.dags_finished == [((7, 0), None, None)]
    assert sent == []  # a DAG run has no process to signal


def test_stop_stops_dag_runs_as_a_shutdown(reactor, scheduling, tmp_path, sent):
    host = OneNodeDag(tmp_path)
    scheduling.offered = [launch(tmp_path, (7, 0), cpus=0, dag=True)]
    ex = executor(reactor, scheduling, dags=host)
    start_cycles(reactor, ex)
    stopped = defer.Deferred.fromCoroutine(ex.stop())
    assert stopped.called
    assert scheduling.dags_finished == [((7, 0), None, SHUTDOWN)]


def test_a_dag_that_cannot_be_read_ends_with_exit_1(reactor, scheduling, tmp_path, sent):
    host = OneNodeDag(tmp_path)
    host.setup = DagSetup(log_path=tmp_path / "bad.dagman.out", error="cannot read DAG file x.dag")
    scheduling.offered = [launch(tmp_path, (7, 0), cpus=0, dag=True)]
    ex = executor(reactor, scheduling, dags=host)
    start_cycles(reactor, ex)
    assert scheduling.dags_finished == [((7, 0), 1, None)]
    assert "ERROR: cannot read DAG file x.dag" in (tmp_path / "bad.dagman.out").read_text()


def test_a_dag_whose_end_cannot_be_recorded_leaves_the_executor(reactor, scheduling, tmp_path, sent):
    host = OneNodeDag(tmp_path)
    scheduling.offered = [launch(tmp_path, (7, 0), cpus=0, dag=True)]
    ex = executor(reactor, scheduling, dags=host)
    start_cycles(reactor, ex)
    scheduling.failure = OSError(28, "No space left on device")
    ex.changed({(50, 0): ad(JobStatus.COMPLETED, ExitCode=0, DAGManJobId=7)})
    assert scheduling.dags_finished == [((7, 0), 0, None)]
    stopped = defer.Deferred.fromCoroutine(ex.stop())
    assert stopped.called  # nothing left running
