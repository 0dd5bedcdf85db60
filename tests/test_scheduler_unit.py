"""The scheduler's decisions on a real queue (``tests/local_runs.py``: a JobStore on a fresh SQLite file, a real
Spool, a settable clock and a fixed machine ad).  Nothing runs: a "run" is the execute directory start_jobs prepares
plus the result the launcher would have appended to the run's file (``runfile.py``, the dict ``launcher.run``
returns); the owner's side of the launcher (``starter.py``) is called on the spec start_jobs wrote.

Jobs run as the gateway's user here (``Accounts(switching=False)``, a personal scheduler, what a gateway that is not
root does) with ``mallory`` a denied owner; running as the owner is tested in test_run_as_owner.py."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from backends.interface import ActionChange, Batch
from backends.local import scheduler as scheduler_module
from backends.local import starter
from backends.local.owners import Accounts
from backends.local.sandbox import ExecuteDir
from jobmodel.classads import copy_ad, evaluate, job_status
from jobmodel.jobs import HoldCode, JobAction, JobStatus, Universe
from tests.local_runs import SCHEDD, E, attributes, make_world


@pytest.fixture
def state_dir(tmp_path):
    """A fresh directory, in memory when the machine has /dev/shm (SQLite's fsyncs cost ~10 ms each on disk)."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    directory = Path(tempfile.mkdtemp(prefix="scheduler-unit-", dir=shm))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def world(state_dir):
    world = make_world(state_dir, Accounts(["mallory"], switching=False))
    yield world
    world.queue.store.close()


# -- choosing what starts ----------------------------------------------------------------------------------
def test_idle_jobs_start_by_job_prio_then_qdate_then_id(world):
    world.clock.now = 1000
    low_late = world.submit()[0]
    world.clock.now = 1010
    high = world.submit(JobPrio=5)[0]
    world.clock.now = 900
    low_early = world.submit()[0]
    pair = world.submit(procs=2)  # the same JobPrio and QDate as low_early, later ids
    negative = world.submit(JobPrio=-1)[0]
    world.clock.now = 1100
    assert world.start(free_cpus=2) == [high, low_early]
    assert world.start(free_cpus=100) == [*pair, low_late, negative]


def test_a_started_job_is_running_with_a_prepared_execute_directory(world):
    key = world.submit(Arguments="one 'two words'")[0]
    world.clock.now = 1234
    [launch] = world.scheduler.start_jobs(4, set())
    assert (launch.key, launch.cpus, launch.dag) == (key, 1, False)
    assert launch.directory == ExecuteDir.of(world.execute, *key)
    spec = launch.directory.run().spec
    assert (spec["executable"], spec["arguments"], spec["cwd"]) == ("/bin/true", ["one", "two words"], str(world.iwd))
    assert spec["run_file"] == str(launch.directory.run_file)
    assert attributes(world.job(key), "JobStatus", "LastJobStatus", "JobCurrentStartDate", "JobStartDate",
                      "NumJobStarts", "RemoteHost", "EnteredCurrentStatus") == {
        "JobStatus": 2, "LastJobStatus": 1, "JobCurrentStartDate": 1234, "JobStartDate": 1234, "NumJobStarts": 1,
        "RemoteHost": SCHEDD, "EnteredCurrentStatus": 1234}
    assert world.queue.active == {key}
    assert world.start() == []  # never started twice
    assert len(world.changes) == 1  # only the submission was announced: the executor acts on the launches itself


def test_jobs_the_executor_runs_are_not_offered_again(world):
    first, second = world.submit(procs=2)
    assert world.start(running={first}) == [second]


@pytest.mark.parametrize("requirements, starts", [
    ('TARGET.OpSys == "WINDOWS"', False),
    ("TARGET.Memory >= 1024 && TARGET.Cpus >= 2", True),
    ("TARGET.Memory > 4096", False),
    ("TARGET.NoSuchAttribute == 1", False),  # undefined is not true
])
def test_requirements_are_matched_against_the_machine_ad(world, requirements, starts):
    key = world.submit(Requirements=E(requirements))[0]
    assert world.start() == ([key] if starts else [])
    assert world.status(key) is (JobStatus.RUNNING if starts else JobStatus.IDLE)


def test_request_cpus_larger_than_the_free_slots_stays_idle_and_smaller_jobs_go_ahead(world):
    big = world.submit(RequestCpus=3, JobPrio=10)[0]
    small = world.submit(procs=3)
    assert world.start(free_cpus=2) == small[:2]
    assert world.status(big) is JobStatus.IDLE and world.status(small[2]) is JobStatus.IDLE
    [launch] = world.scheduler.start_jobs(3, set())
    assert (launch.key, launch.cpus) == (big, 3)


def test_scheduler_universe_jobs_need_no_slot(world):
    vanilla = world.submit()[0]
    scheduler = world.submit(JobUniverse=int(Universe.SCHEDULER))[0]
    [launch] = world.scheduler.start_jobs(0, set())
    assert (launch.key, launch.cpus) == (scheduler, 0)
    assert world.status(vanilla) is JobStatus.IDLE


@pytest.mark.parametrize("attributes_, reason, code", [
    ({"Iwd": "relative/iwd"}, "Iwd 'relative/iwd' is not an existing absolute directory", HoldCode.IWD_ERROR),
    ({"Cmd": ""}, "The job has no Cmd (executable)", HoldCode.FAILED_TO_CREATE_PROCESS),
    ({"Arguments": "'unclosed"}, "Invalid Arguments", HoldCode.FAILED_TO_CREATE_PROCESS),
    ({"JobUniverse": int(Universe.GRID)}, "JobUniverse 9 is not supported by the local backend",
     HoldCode.FAILED_TO_CREATE_PROCESS),
    ({"Owner": "mallory"}, "Jobs of 'mallory' may not run on this gateway (denied_owners)",
     HoldCode.FAILED_TO_CREATE_PROCESS),
])
def test_a_job_that_cannot_run_is_held_with_the_starters_reason(world, attributes_, reason, code):
    bad = world.submit(**attributes_)[0]
    good = world.submit()[0]
    world.clock.now = 1500
    assert world.start() == [good]
    ad = world.job(bad)
    assert evaluate(ad, "HoldReason").startswith(reason)
    assert attributes(ad, "JobStatus", "HoldReasonCode", "NumSystemHolds", "EnteredCurrentStatus") == {
        "JobStatus": 5, "HoldReasonCode": int(code), "NumSystemHolds": 1, "EnteredCurrentStatus": 1500}
    assert not ExecuteDir.of(world.execute, *bad).root.exists()
    assert world.queue.active == {good}


@pytest.mark.parametrize("attributes_, reason, code", [
    ({"Cmd": "/nonexistent/program"}, "Error from starter: Failed to execute '/nonexistent/program': No such file",
     HoldCode.FAILED_TO_CREATE_PROCESS),
    ({"Cmd": "a.txt"}, "Error from starter: Failed to execute '{iwd}/a.txt': Permission denied (not executable)",
     HoldCode.FAILED_TO_CREATE_PROCESS),
    ({"Iwd": "/nonexistent/iwd"}, "Iwd '/nonexistent/iwd' is not an existing absolute directory", HoldCode.IWD_ERROR),
    ({"In": "missing.txt"}, "Error from starter: cannot open standard input '{iwd}/missing.txt'",
     HoldCode.UNABLE_TO_OPEN_INPUT),
    ({"ShouldTransferFiles": "YES", "TransferInput": "a.txt, missing.dat"},
     "Transfer input files failure: cannot read '{iwd}/missing.dat'", HoldCode.TRANSFER_INPUT_ERROR),
])
def test_the_owners_side_checks_the_files_and_the_scheduler_holds_the_job(world, attributes_, reason, code):
    """What the ad names is only looked at by the launcher's owner side (starter.prepare, on the spec start_jobs
    wrote); its failure comes back in the run's result and holds the job, which never ran."""
    (world.iwd / "a.txt").write_text("input\n")
    (world.iwd / "a.txt").chmod(0o644)
    key = world.submit(**attributes_)[0]
    assert world.start() == [key]  # start_jobs itself opens nothing the ad names
    with pytest.raises(starter.BadJob) as failed:
        starter.prepare(world.spec(key))
    assert (failed.value.reason, failed.value.code) == (reason.format(iwd=world.iwd), code)
    world.result(key, exit_code=127, setup_failure={"reason": failed.value.reason, "code": int(code)})
    world.clock.now = 1500
    world.scheduler.finish_job(key)
    assert attributes(world.job(key), "JobStatus", "HoldReason", "HoldReasonCode", "NumSystemHolds", "ExitCode") == {
        "JobStatus": 5, "HoldReason": reason.format(iwd=world.iwd), "HoldReasonCode": int(code),
        "NumSystemHolds": 1, "ExitCode": None}


def test_the_owners_side_transfers_input_and_output_of_a_sandboxed_job(world):
    (world.iwd / "a.txt").write_text("input\n")
    key = world.submit(ShouldTransferFiles="YES", TransferInput="a.txt", Out="out.txt",
                       LeaveJobInQueue=True)[0]
    world.start()
    spec = world.spec(key)
    sandbox = Path(spec["cwd"])
    before = starter.prepare(spec)
    assert (sandbox / "a.txt").read_text() == "input\n" and os.access(sandbox / "true", os.X_OK)
    assert set(before) == {"a.txt", "true"}
    (sandbox / "_condor_stdout").write_text("printed\n")  # what the job did
    (sandbox / "made.dat").write_text("new\n")
    starter.collect(json.loads(json.dumps(spec)), json.loads(json.dumps(before)))  # as the launcher passes them
    assert (world.iwd / "out.txt").read_text() == "printed\n" and (world.iwd / "made.dat").read_text() == "new\n"
    assert not (world.iwd / "true").exists()  # unchanged input stays behind


def test_an_output_transfer_failure_holds_the_job_after_its_exit(world):
    key = world.submit(ShouldTransferFiles="YES", TransferOutput="never.dat", LeaveJobInQueue=True)[0]
    world.start()
    spec = world.spec(key)
    with pytest.raises(starter.BadJob) as failed:
        starter.collect(spec, starter.prepare(spec))
    assert failed.value.reason == "Transfer output files failure: 'never.dat' was not created by the job"
    world.result(key, exit_code=0, output_failure={"reason": failed.value.reason, "code": int(failed.value.code)})
    world.scheduler.finish_job(key)
    assert attributes(world.job(key), "JobStatus", "ExitCode", "HoldReason", "HoldReasonCode") == {
        "JobStatus": 5, "ExitCode": 0, "HoldReason": failed.value.reason,
        "HoldReasonCode": int(HoldCode.TRANSFER_OUTPUT_ERROR)}


def test_one_output_that_cannot_come_back_does_not_keep_the_others_from_it(world):
    key = world.submit(ShouldTransferFiles="YES", Out="missing/out.txt", TransferOutput="made.dat,never.dat")[0]
    world.start()
    spec = world.spec(key)
    before = starter.prepare(spec)
    (Path(spec["cwd"]) / "_condor_stdout").write_text("printed\n")
    (Path(spec["cwd"]) / "made.dat").write_text("new\n")
    with pytest.raises(starter.BadJob) as failed:
        starter.collect(spec, before)
    assert failed.value.reason == (f"Transfer output files failure: 'never.dat' was not created by the job; "
                                   f"cannot write '{world.iwd}/missing/out.txt': No such file or directory")
    assert (world.iwd / "made.dat").read_text() == "new\n"  # what could come back did


def test_the_user_attribute_is_always_owner_at_the_uid_domain(world):
    key = world.submit(Owner="alice", User="root@evil")[0]
    assert evaluate(world.job(key), "User") == f"alice@{SCHEDD}"


# -- how a run ends -------------------------------------------------------------------------------------
def test_a_run_that_exits_completes_the_job_with_its_exit_code(world):
    key = world.submit(LeaveJobInQueue=True)[0]
    world.start()
    world.result(key, exit_code=3, user_cpu=1.5, sys_cpu=0.5, max_rss_kb=4096, wall_seconds=12.0)
    world.clock.now = 1100
    world.scheduler.finish_job(key)
    assert attributes(world.job(key), "JobStatus", "ExitCode", "ExitStatus", "ExitBySignal", "CompletionDate",
                      "NumJobCompletions", "RemoteWallClockTime", "RemoteUserCpu", "RemoteSysCpu", "ImageSize",
                      "MemoryUsage") == {
        "JobStatus": 4, "ExitCode": 3, "ExitStatus": 3, "ExitBySignal": False, "CompletionDate": 1100,
        "NumJobCompletions": 1, "RemoteWallClockTime": 12.0, "RemoteUserCpu": 1.5, "RemoteSysCpu": 0.5,
        "ImageSize": 4096, "MemoryUsage": 4}
    assert not ExecuteDir.of(world.execute, *key).root.exists()
    assert world.queue.active == set()
    assert job_status(world.changes[-1][key]) is JobStatus.COMPLETED  # the executor hears of it


def test_a_completed_job_leaves_the_queue_for_the_history(world):
    key = world.submit()[0]
    world.start()
    world.result(key, exit_code=0)
    world.scheduler.finish_job(key)
    assert world.queue.get_job(*key) is None
    [ad] = world.queue.history(None)
    assert attributes(ad, "ClusterId", "ProcId", "JobStatus", "ExitCode") == {
        "ClusterId": key[0], "ProcId": key[1], "JobStatus": 4, "ExitCode": 0}


def test_a_run_killed_by_a_signal(world):
    key = world.submit(LeaveJobInQueue=True)[0]
    world.start()
    world.result(key, exit_code=None, signal=9)
    world.scheduler.finish_job(key)
    assert attributes(world.job(key), "JobStatus", "ExitBySignal", "ExitSignal", "ExitCode") == {
        "JobStatus": 4, "ExitBySignal": True, "ExitSignal": 9, "ExitCode": None}


def test_a_program_that_cannot_be_executed_holds_the_job(world):
    key = world.submit()[0]
    world.start()
    world.result(key, exit_code=127, exec_error="/bin/true: Exec format error")
    world.scheduler.finish_job(key)
    assert attributes(world.job(key), "JobStatus", "HoldReason", "HoldReasonCode") == {
        "JobStatus": 5, "HoldReason": "Error from starter: Failed to execute '/bin/true: Exec format error'",
        "HoldReasonCode": int(HoldCode.FAILED_TO_CREATE_PROCESS)}


def test_a_missing_result_means_interrupted_and_the_job_runs_again(world):
    key = world.submit()[0]
    world.clock.now = 1000
    world.start()
    world.clock.now = 1030
    world.scheduler.finish_job(key)  # the launcher died with its job
    assert attributes(world.job(key), "JobStatus", "LastVacateTime", "NumJobStarts", "RemoteWallClockTime",
                      "ExitCode") == {
        "JobStatus": 1, "LastVacateTime": 1030, "NumJobStarts": 1, "RemoteWallClockTime": 30.0, "ExitCode": None}
    assert world.queue.active == set()
    assert world.start() == [key]
    assert evaluate(world.job(key), "NumJobStarts") == 2


def test_a_run_the_gateway_ended_goes_back_to_idle_even_with_a_result(world):
    key = world.submit()[0]
    world.start()
    world.result(key, exit_code=None, signal=15, wall_seconds=4.0)
    world.scheduler.finish_job(key, "The gateway shut down while the job was running; it will run again")
    assert attributes(world.job(key), "JobStatus", "RemoteWallClockTime", "ExitBySignal") == {
        "JobStatus": 1, "RemoteWallClockTime": 4.0, "ExitBySignal": None}


def test_on_exit_remove_false_requeues_the_job(world):
    key = world.submit(OnExitRemove=E("ExitCode == 0"))[0]
    world.start()
    world.result(key, exit_code=2, wall_seconds=1.0)
    world.scheduler.finish_job(key)
    assert attributes(world.job(key), "JobStatus", "ExitCode", "NumJobCompletions") == {
        "JobStatus": 1, "ExitCode": 2, "NumJobCompletions": None}
    assert world.start() == [key]
    world.result(key, exit_code=0)
    world.scheduler.finish_job(key)
    [ad] = world.queue.history(None)
    assert attributes(ad, "JobStatus", "ExitCode", "NumJobStarts", "RemoteWallClockTime") == {
        "JobStatus": 4, "ExitCode": 0, "NumJobStarts": 2, "RemoteWallClockTime": 1.0}


def test_on_exit_hold(world):
    key = world.submit(OnExitHold=E("ExitCode == 3"))[0]
    world.start()
    world.result(key, exit_code=3)
    world.scheduler.finish_job(key)
    assert attributes(world.job(key), "JobStatus", "ExitCode", "HoldReason", "HoldReasonCode") == {
        "JobStatus": 5, "ExitCode": 3,
        "HoldReason": "The job attribute OnExitHold expression 'ExitCode == 3' evaluated to TRUE",
        "HoldReasonCode": int(HoldCode.JOB_POLICY)}


@pytest.mark.parametrize("policies, status, reason", [
    ({"OnExitHold": True}, 5, "The job attribute OnExitHold expression 'TRUE' evaluated to TRUE"),
    ({"OnExitRemove": False}, 1, None),
    ({"OnExitHold": False, "OnExitRemove": True}, 4, None),
])
def test_literal_exit_policies_decide_as_expressions_do(world, policies, status, reason):
    """Literal policies are read from the ad as it is (no copy with the run's end applied): same decisions."""
    key = world.submit(**policies)[0]
    world.start()
    world.result(key, exit_code=0)
    world.scheduler.finish_job(key)
    ad = world.job(key) if status != 4 else world.queue.history(None)[0]
    assert attributes(ad, "JobStatus", "ExitCode", "HoldReason") == {
        "JobStatus": status, "ExitCode": 0, "HoldReason": reason}


def test_a_run_stopped_because_the_job_was_held_only_adds_its_accounting(world):
    key = world.submit()[0]
    world.start()
    world.queue.commit(Batch(changes=[ActionChange(JobAction.HOLD, *key, "not now")]))
    assert job_status(world.changes[-1][key]) is JobStatus.HELD  # what makes the executor signal it
    assert world.queue.active == {key}
    world.result(key, exit_code=None, signal=15, wall_seconds=5.0)
    world.scheduler.finish_job(key)
    assert attributes(world.job(key), "JobStatus", "HoldReason", "HoldReasonCode", "RemoteWallClockTime",
                      "ExitBySignal") == {
        "JobStatus": 5, "HoldReason": "not now", "HoldReasonCode": int(HoldCode.USER_REQUEST),
        "RemoteWallClockTime": 5.0, "ExitBySignal": None}
    assert world.queue.active == set()


def test_a_removed_job_leaves_the_queue_once_its_run_ended(world):
    key = world.submit()[0]
    world.start()
    world.queue.commit(Batch(changes=[ActionChange(JobAction.REMOVE, *key, None)]))
    assert world.status(key) is JobStatus.REMOVED  # still queued while its process may run
    world.result(key, exit_code=None, signal=15)
    world.scheduler.finish_job(key)
    assert world.queue.get_job(*key) is None
    assert [evaluate(ad, "JobStatus") for ad in world.queue.history(None)] == [3]


# -- periodic policy, DAGMan jobs, recovery ---------------------------------------------------------------
def test_evaluate_periodic_applies_periodic_hold(world):
    policy = E("NumJobStarts >= 1")
    running = world.submit(PeriodicHold=policy)[0]
    world.start()
    idle = world.submit(PeriodicHold=policy)[0]
    world.clock.now = 1600
    world.scheduler.evaluate_periodic()
    assert attributes(world.job(running), "JobStatus", "HoldReason", "HoldReasonCode", "EnteredCurrentStatus") == {
        "JobStatus": 5, "HoldReason": "The job attribute PeriodicHold expression 'NumJobStarts >= 1' evaluated to TRUE",
        "HoldReasonCode": int(HoldCode.JOB_POLICY), "EnteredCurrentStatus": 1600}
    assert world.status(idle) is JobStatus.IDLE
    assert set(world.changes[-1]) == {running}  # the executor is told, and stops the run
    count = len(world.changes)
    world.scheduler.evaluate_periodic()
    assert len(world.changes) == count  # nothing more to do: nothing written, nobody told


def test_a_periodic_round_over_a_long_queue_goes_a_chunk_of_jobs_per_call(world, monkeypatch):
    monkeypatch.setattr(scheduler_module, "PERIODIC_CHUNK", 2)
    held = [world.submit(PeriodicHold=E("true"))[0] for _ in range(5)]
    calls = 1
    while world.scheduler.evaluate_periodic():  # (the executor calls again at once, other calls in between)
        calls += 1
    assert calls == 3 and all(world.status(key) is JobStatus.HELD for key in held)


def test_evaluate_periodic_applies_periodic_release_and_remove(world):
    released = world.submit(PeriodicRelease=E("HoldReasonCode == 1"))[0]
    removed = world.submit(PeriodicRemove=E("JobPrio < 0"), JobPrio=-3)[0]
    world.queue.commit(Batch(changes=[ActionChange(JobAction.HOLD, *released, "for a moment")]))
    world.scheduler.evaluate_periodic()
    assert attributes(world.job(released), "JobStatus", "LastHoldReason", "ReleaseReason") == {
        "JobStatus": 1, "LastHoldReason": "for a moment",
        "ReleaseReason": "The job attribute PeriodicRelease expression 'HoldReasonCode == 1' evaluated to TRUE"}
    assert world.queue.get_job(*removed) is None
    [gone] = world.queue.history(None)
    assert evaluate(gone, "RemoveReason") == \
        "The job attribute PeriodicRemove expression 'JobPrio < 0' evaluated to TRUE"


def test_a_dagman_job_is_launched_as_a_dag_and_finish_dag_records_its_end(world):
    dagman = {"Cmd": "/usr/bin/condor_dagman", "JobUniverse": int(Universe.SCHEDULER),
              "Arguments": "-f -Dag diamond.dag", "LeaveJobInQueue": True}
    ended, stopped = world.submit(**dagman)[0], world.submit(**dagman)[0]
    launches = world.scheduler.start_jobs(0, set())
    assert [(launch.key, launch.dag, launch.cpus) for launch in launches] == [(ended, True, 0), (stopped, True, 0)]
    assert not launches[0].directory.root.exists()  # nothing to prepare: the gateway runs it
    world.clock.now = 1042
    world.scheduler.finish_dag(ended, 1)
    world.scheduler.finish_dag(stopped, None, "gateway shutdown")
    assert attributes(world.job(ended), "JobStatus", "ExitCode", "RemoteWallClockTime") == {
        "JobStatus": 4, "ExitCode": 1, "RemoteWallClockTime": 42.0}
    assert attributes(world.job(stopped), "JobStatus", "ExitCode", "LastVacateTime") == {
        "JobStatus": 1, "ExitCode": None, "LastVacateTime": 1042}
    assert world.queue.active == set()


def test_recover_finishes_runs_that_ended_and_requeues_the_others(world):
    finished, cut_off = world.submit(procs=2, LeaveJobInQueue=True)
    world.clock.now = 1000
    world.start()
    idle = world.submit()[0]
    leftover = ExecuteDir.of(world.execute, *idle)  # an idle job's execute directory (a crash mid-start)
    leftover.create()
    world.result(finished, exit_code=7)
    world.queue.active.clear()  # a new gateway process knows of no running job
    world.clock.now = 2000
    world.scheduler.recover()
    assert attributes(world.job(finished), "JobStatus", "ExitCode") == {"JobStatus": 4, "ExitCode": 7}
    assert attributes(world.job(cut_off), "JobStatus", "LastVacateTime", "RemoteWallClockTime") == {
        "JobStatus": 1, "LastVacateTime": 2000, "RemoteWallClockTime": 1000.0}
    assert world.status(idle) is JobStatus.IDLE
    assert ExecuteDir.keys_in(world.execute) == []


# -- one cycle: the ends of runs, then the starts -------------------------------------------------------------
def user_log_events(path: Path, key) -> list[str]:
    """The event numbers (``000``, ``001``, ``005`` ...) the user log holds for ``key``."""
    job = f"({key[0]:03d}.{key[1]:03d}.000)"
    return [line.split()[0] for line in path.read_text().splitlines() if line.split()[1:2] == [job]]


def test_a_cycle_records_every_run_that_ended_then_fills_the_freed_slots(world):
    """Several runs that ended together are recorded by one cycle, each with its user-log events, its job-log line
    and its row in the history, and the slots they freed go to the next jobs in the same call."""
    log = world.iwd / "jobs.log"
    first, second = world.submit(procs=2, UserLog=str(log))
    assert world.start(free_cpus=2) == [first, second]
    waiting = world.submit(procs=3, UserLog=str(log))
    world.result(first, exit_code=0)
    world.result(second, exit_code=3)
    world.clock.now = 1100
    launches = world.scheduler.cycle({first: None, second: None}, 2, set())
    assert [launch.key for launch in launches] == waiting[:2]
    history = {(ad["ClusterId"], ad["ProcId"]): ad for ad in world.queue.history(None)}
    assert attributes(history[first], "JobStatus", "ExitCode", "CompletionDate") == {
        "JobStatus": 4, "ExitCode": 0, "CompletionDate": 1100}
    assert attributes(history[second], "JobStatus", "ExitCode") == {"JobStatus": 4, "ExitCode": 3}
    assert first not in world.queue.store and second not in world.queue.store
    for key in (first, second):
        assert user_log_events(log, key) == ["000", "001", "005"]
        assert not ExecuteDir.of(world.execute, *key).root.exists()
    assert [world.status(key) for key in waiting] == [JobStatus.RUNNING, JobStatus.RUNNING, JobStatus.IDLE]
    assert world.queue.active == set(waiting[:2])


def test_a_job_its_end_made_idle_again_starts_only_in_a_later_cycle(world):
    """Its run's file must outlive the sync of its end: starting it again in the same call would make its
    execute directory anew before that sync, and a crash then would lose the end."""
    key = world.submit(OnExitRemove=E("ExitCode == 0"))[0]
    world.start()
    world.result(key, exit_code=2)
    assert world.scheduler.cycle({key: None}, 1, set()) == []
    assert world.status(key) is JobStatus.IDLE
    assert [launch.key for launch in world.scheduler.cycle({}, 1, set())] == [key]


def test_user_log_events_are_written_before_the_queue_shows_their_change(world):
    """(As HTCondor's shadow writes the user log before it updates the schedd: a client that sees a job's new state
    finds its event in the log.)"""
    key = world.submit(UserLog=str(world.iwd / "jobs.log"))[0]
    held = copy_ad(world.job(key))
    held["JobStatus"] = int(JobStatus.HELD)
    seen: list[JobStatus] = []
    world.queue.write({key: held}, [(key, lambda user_log: seen.append(world.status(key)))])
    assert seen == [JobStatus.IDLE] and world.status(key) is JobStatus.HELD


def test_a_cycle_writes_its_ends_and_starts_before_one_sync(world, monkeypatch):
    """The ends and the starts of a cycle are all on disk after one sync, which the backend's call makes once the
    cycle returned (``LocalBackend.serially``): the executor spawns only then."""
    ended = world.submit()[0]
    world.start(free_cpus=1)
    queued = world.submit()[0]
    world.result(ended)
    syncs: list[int] = []
    monkeypatch.setattr(world.queue.store, "durable", lambda written: syncs.append(written))
    before = world.queue.store.written
    with world.queue.synced_by_caller() as after_sync:  # (as serially runs it: the caller syncs, then runs these)
        [launch] = world.scheduler.cycle({ended: None}, 1, set())
    assert syncs == [] and world.queue.store.written > before and launch.key == queued
    assert launch.written == world.queue.store.written  # the start is the cycle's last write
    assert ExecuteDir.of(world.execute, *ended).root.exists()  # removed only once the end is on disk
    for action in after_sync:
        action()
    assert not ExecuteDir.of(world.execute, *ended).root.exists()


def test_a_run_whose_end_cannot_be_recorded_holds_its_job_and_the_cycle_goes_on(world):
    bad, good = world.submit(procs=2, LeaveJobInQueue=True)
    world.start(free_cpus=2)
    waiting = world.submit()[0]
    world.result(bad, user_cpu="lots")
    world.result(good, exit_code=0)
    launches = world.scheduler.cycle({bad: None, good: None}, 1, set())
    assert world.status(bad) is JobStatus.HELD and world.status(good) is JobStatus.COMPLETED
    assert [launch.key for launch in launches] == [waiting]


def test_a_stopping_cycle_records_the_ends_and_starts_nothing(world):
    running = world.submit()[0]
    world.start(free_cpus=1)
    idle = world.submit(JobUniverse=int(Universe.SCHEDULER))[0]  # (needs no slot)
    assert world.scheduler.cycle({running: "The gateway shut down while the job was running; it will run again"},
                                 None, set()) == []
    assert world.status(running) is JobStatus.IDLE and world.status(idle) is JobStatus.IDLE


def test_a_crash_after_a_cycle_recovers_its_ends_and_starts_as_before(world, state_dir):
    """A crash right after a cycle (the start of the next job on disk, its launcher never started): the ended run
    stays recorded and the started job is requeued by the next gateway's recovery."""
    ended = world.submit()[0]
    world.start(free_cpus=1)
    started = world.submit()[0]
    world.result(ended, exit_code=0)
    world.scheduler.cycle({ended: None}, 1, set())
    world.queue.store.close()
    restarted = make_world(state_dir, Accounts(["mallory"], switching=False))
    world.queue.store = restarted.queue.store  # (closed by the fixture)
    restarted.clock.now = 2000
    restarted.scheduler.recover()
    assert ended not in restarted.queue.store
    assert [(ad["ClusterId"], ad["ProcId"]) for ad in restarted.queue.history(None)] == [ended]
    assert attributes(restarted.job(started), "JobStatus", "NumJobStarts", "LastVacateTime") == {
        "JobStatus": 1, "NumJobStarts": 1, "LastVacateTime": 2000}
    assert ExecuteDir.keys_in(restarted.execute) == []


# -- no job is ever stuck ------------------------------------------------------------------------------------
def could_not(what: str, error: str) -> str:
    return f"The gateway could not {what}: {error}"


def held_by_the_gateway(world, key) -> dict:
    return attributes(world.job(key), "JobStatus", "HoldReason", "HoldReasonCode")


def test_a_run_whose_end_cannot_be_worked_out_holds_its_job_with_the_reason(world):
    key = world.submit(LeaveJobInQueue=True)[0]
    world.start()
    world.result(key, exit_code=0, user_cpu="lots")  # a result the gateway cannot read as one
    world.scheduler.finish_job(key)
    assert held_by_the_gateway(world, key) == {
        "JobStatus": 5, "HoldReasonCode": int(HoldCode.UNSPECIFIED),
        "HoldReason": could_not("record the end of the job's run",
                                "ValueError: could not convert string to float: 'lots'")}
    assert not ExecuteDir.of(world.execute, *key).root.exists() and world.queue.active == set()
    assert job_status(world.changes[-1][key]) is JobStatus.HELD  # the executor hears of it


def test_counters_a_client_set_to_anything_neither_keep_a_job_from_starting_nor_from_ending(world):
    key = world.submit(LeaveJobInQueue=True, NumJobStarts="many", RemoteWallClockTime="oops", ImageSize="big")[0]
    assert world.start() == [key]
    world.result(key, exit_code=0, wall_seconds=2.0)
    world.scheduler.finish_job(key)
    assert attributes(world.job(key), "JobStatus", "NumJobStarts", "RemoteWallClockTime") == {
        "JobStatus": 4, "NumJobStarts": 1, "RemoteWallClockTime": 2.0}


def test_a_job_that_cannot_be_prepared_is_held_and_the_others_start_in_the_same_cycle(world):
    blocked, fine = world.submit(procs=2)
    ExecuteDir.of(world.execute, *blocked).root.write_text("a file where its execute directory goes")
    assert world.start() == [fine]
    held = held_by_the_gateway(world, blocked)
    assert held["JobStatus"] == 5 and held["HoldReasonCode"] == int(HoldCode.UNSPECIFIED)
    assert held["HoldReason"].startswith(could_not("start the job", "FileExistsError: [Errno 17] File exists"))


def test_an_end_the_queue_refuses_to_write_holds_the_job(world):
    key = world.submit(LeaveJobInQueue=True)[0]
    world.start()
    world.result(key, exit_code=0)
    world.refuse_writes(key, "JobStatus = 4")  # the completion cannot be written, a hold can
    world.scheduler.finish_job(key)
    assert held_by_the_gateway(world, key) == {
        "JobStatus": 5, "HoldReasonCode": int(HoldCode.UNSPECIFIED),
        "HoldReason": could_not("record the end of the job's run", "BackendError: the job queue could not be written: disk I/O error")}
    assert not ExecuteDir.of(world.execute, *key).root.exists()


def test_an_end_that_cannot_be_written_at_all_is_recorded_at_the_next_periodic_evaluation(world):
    stuck, other = world.submit(procs=2, LeaveJobInQueue=True)
    world.start()
    world.result(stuck, exit_code=3)
    world.result(other, exit_code=0)
    lift = world.refuse_writes(stuck)  # neither its end nor a hold can be written
    world.scheduler.finish_job(stuck)  # (no exception: the executor goes on)
    world.scheduler.finish_job(other)
    assert world.status(stuck) is JobStatus.RUNNING and world.status(other) is JobStatus.COMPLETED
    assert ExecuteDir.of(world.execute, *stuck).result() is not None  # what the next try needs is kept
    world.scheduler.evaluate_periodic()
    assert world.status(stuck) is JobStatus.RUNNING  # still refused: tried again later
    lift()
    world.scheduler.evaluate_periodic()
    assert attributes(world.job(stuck), "JobStatus", "ExitCode") == {"JobStatus": 4, "ExitCode": 3}
    assert not ExecuteDir.of(world.execute, *stuck).root.exists()
    world.scheduler.evaluate_periodic()  # nothing left to try
    assert world.status(stuck) is JobStatus.COMPLETED


def test_a_dag_end_that_cannot_be_written_holds_the_dagman_job(world):
    key = world.submit(Cmd="/usr/bin/condor_dagman", JobUniverse=int(Universe.SCHEDULER),
                       Arguments="-f -Dag diamond.dag", LeaveJobInQueue=True)[0]
    world.scheduler.start_jobs(0, set())
    world.refuse_writes(key, "JobStatus = 4")
    world.scheduler.finish_dag(key, 0)
    assert held_by_the_gateway(world, key) == {
        "JobStatus": 5, "HoldReasonCode": int(HoldCode.UNSPECIFIED),
        "HoldReason": could_not("record the end of the DAG's run", "BackendError: the job queue could not be written: disk I/O error")}
    assert world.queue.active == set()


def crashed(world) -> None:
    """What a new gateway process knows after a kill -9: the queue, and no running job."""
    world.queue.active.clear()
    world.clock.now = 2000


def test_recovery_holds_a_job_it_cannot_recover_and_recovers_every_other(world):
    broken, finished, cut_off = world.submit(procs=3, LeaveJobInQueue=True)
    world.start()
    world.result(broken, exit_code=0, sys_cpu="much")  # the first job, so recovery must go on after it
    world.result(finished, exit_code=7)
    crashed(world)
    world.scheduler.recover()
    assert held_by_the_gateway(world, broken) == {
        "JobStatus": 5, "HoldReasonCode": int(HoldCode.UNSPECIFIED),
        "HoldReason": could_not("recover the job after a restart",
                                "ValueError: could not convert string to float: 'much'")}
    assert attributes(world.job(finished), "JobStatus", "ExitCode") == {"JobStatus": 4, "ExitCode": 7}
    assert world.status(cut_off) is JobStatus.IDLE
    assert ExecuteDir.keys_in(world.execute) == []


def test_recovery_goes_on_when_a_job_cannot_even_be_held_and_tries_it_again_later(world):
    refused, cut_off = world.submit(procs=2, LeaveJobInQueue=True)
    world.start()
    world.result(refused, exit_code=5)
    lift = world.refuse_writes(refused)
    crashed(world)
    world.scheduler.recover()
    assert world.status(refused) is JobStatus.RUNNING and world.status(cut_off) is JobStatus.IDLE
    lift()
    world.scheduler.evaluate_periodic()
    assert attributes(world.job(refused), "JobStatus", "ExitCode") == {"JobStatus": 4, "ExitCode": 5}
