"""The local backend's job lifecycle rules (backends/local/lifecycle.py) as pure functions: the exact attribute
updates and user-log events of every transition, and the states each one refuses.  No process, no clock."""

from __future__ import annotations

import classad2
import pytest

from backends.interface import InvalidState
from backends.local import lifecycle
from backends.local.lifecycle import RunResult, StarterHold, Transition, updated
from jobmodel.jobs import HoldCode, JobAction, JobStatus

NOW = 1_700_000_000
IDLE, RUNNING, REMOVED, COMPLETED, HELD, SUSPENDED = (JobStatus.IDLE, JobStatus.RUNNING, JobStatus.REMOVED,
                                                       JobStatus.COMPLETED, JobStatus.HELD, JobStatus.SUSPENDED)


def job(status: JobStatus = IDLE, text: str = "", **attributes) -> classad2.ClassAd:
    """A job ad in ``status``; ``text`` adds attributes in ClassAd syntax (expressions), keywords add values."""
    ad = classad2.parseOne(f"[ClusterId = 12; ProcId = 3; JobStatus = {int(status)}; {text}]")
    for name, value in attributes.items():
        ad[name] = value
    return ad


class RecordingLog:
    """Stands in for backends.local.userlog.UserLog: records which events a transition writes, with their
    arguments."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def __getattr__(self, name: str):
        return lambda *args: self.events.append((name, *args))


def events(transition: Transition) -> list[tuple]:
    log = RecordingLog()
    for event in transition.events:
        event(log)
    return log.events


def entering(previous: JobStatus, status: JobStatus) -> dict:
    return {"LastJobStatus": int(previous), "JobStatus": int(status), "EnteredCurrentStatus": NOW}


# -- hold ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("status", [IDLE, RUNNING, SUSPENDED])
def test_a_user_hold(status):
    held = lifecycle.hold(job(status), "pause please", HoldCode.USER_REQUEST, NOW)
    assert held.updates == entering(status, HELD) | {"HoldReason": "pause please", "HoldReasonCode": 1,
                                                     "HoldReasonSubCode": 0}
    assert "NumSystemHolds" not in held.updates  # a user's hold is not a system hold
    assert events(held) == [("held", "pause please", 1, 0)]


def test_a_system_hold_counts_in_num_system_holds_and_carries_its_subcode():
    first = lifecycle.hold(job(RUNNING), "no input", HoldCode.TRANSFER_INPUT_ERROR, NOW, subcode=2)
    assert first.updates["HoldReasonCode"] == 13 and first.updates["HoldReasonSubCode"] == 2
    assert first.updates["NumSystemHolds"] == 1
    assert events(first) == [("held", "no input", 13, 2)]
    again = lifecycle.hold(job(IDLE, NumSystemHolds=2), "policy", HoldCode.JOB_POLICY, NOW)
    assert again.updates["NumSystemHolds"] == 3 and again.updates["HoldReasonCode"] == 3


@pytest.mark.parametrize("status, words", [(HELD, "job 12.3 is held and cannot be held"),
                                           (REMOVED, "job 12.3 is removed and cannot be held"),
                                           (COMPLETED, "job 12.3 is completed and cannot be held")])
def test_hold_refuses_finished_and_held_jobs(status, words):
    with pytest.raises(InvalidState, match=words):
        lifecycle.hold(job(status), "again", HoldCode.USER_REQUEST, NOW)


# -- release and remove -------------------------------------------------------------------------------------
def test_release_keeps_the_last_hold_and_clears_the_current_one():
    held = updated(job(RUNNING), lifecycle.hold(job(RUNNING), "pause", HoldCode.USER_REQUEST, NOW - 60).updates)
    released = lifecycle.release(held, "go on", NOW)
    assert released.updates == entering(HELD, IDLE) | {
        "LastHoldReason": "pause", "LastHoldReasonCode": 1, "ReleaseReason": "go on",
        "HoldReason": None, "HoldReasonCode": None, "HoldReasonSubCode": None}
    after = updated(held, released.updates)
    assert "HoldReason" not in after and "HoldReasonCode" not in after and after["LastHoldReason"] == "pause"
    assert events(released) == [("released", "go on")]


@pytest.mark.parametrize("status", [IDLE, RUNNING, REMOVED, COMPLETED, SUSPENDED])
def test_only_held_jobs_are_released(status):
    with pytest.raises(InvalidState, match=f"job 12.3 is {status.name.lower()}, not held"):
        lifecycle.release(job(status), "go", NOW)


@pytest.mark.parametrize("status", [IDLE, RUNNING, HELD, SUSPENDED])
def test_remove(status):
    removed = lifecycle.remove(job(status), "enough", NOW)
    assert removed.updates == entering(status, REMOVED) | {"RemoveReason": "enough"}
    assert events(removed) == [("aborted", "enough")]


@pytest.mark.parametrize("status", [REMOVED, COMPLETED])
def test_finished_jobs_cannot_be_removed_again(status):
    with pytest.raises(InvalidState, match=f"job 12.3 is already {status.name.lower()}"):
        lifecycle.remove(job(status), "again", NOW)


# -- suspend and resume -------------------------------------------------------------------------------------
def test_suspend_and_resume_count_suspensions_and_their_time():
    suspended = lifecycle.suspend(job(RUNNING, TotalSuspensions=1, CumulativeSuspensionTime=5), NOW)
    assert suspended.updates == entering(RUNNING, SUSPENDED) | {"TotalSuspensions": 2, "LastSuspensionTime": NOW}
    assert suspended.events == []  # no user-log event, as the local backend writes none for a suspension
    ad = updated(job(RUNNING, CumulativeSuspensionTime=5), suspended.updates)
    resumed = lifecycle.resume(ad, NOW + 40)
    assert resumed.updates == {"LastJobStatus": int(SUSPENDED), "JobStatus": int(RUNNING),
                               "EnteredCurrentStatus": NOW + 40, "CumulativeSuspensionTime": 45}
    first = lifecycle.suspend(job(RUNNING), NOW)
    assert first.updates["TotalSuspensions"] == 1


@pytest.mark.parametrize("status", [IDLE, HELD, SUSPENDED, REMOVED, COMPLETED])
def test_only_running_jobs_suspend(status):
    with pytest.raises(InvalidState, match="not running: only running jobs suspend"):
        lifecycle.suspend(job(status), NOW)


@pytest.mark.parametrize("status", [IDLE, RUNNING, HELD, REMOVED, COMPLETED])
def test_only_suspended_jobs_resume(status):
    with pytest.raises(InvalidState, match=f"is {status.name.lower()}, not suspended"):
        lifecycle.resume(job(status), NOW)


# -- what a client asks for ---------------------------------------------------------------------------------
@pytest.mark.parametrize("action, status, reason", [
    (JobAction.HOLD, RUNNING, "Held via Birdbath SOAP"),
    (JobAction.RELEASE, HELD, "Released via Birdbath SOAP"),
    (JobAction.REMOVE, IDLE, "Removed via Birdbath SOAP"),
])
def test_user_actions_have_default_reasons(action, status, reason):
    ad = job(status, HoldReason="x", HoldReasonCode=1) if status is HELD else job(status)
    for given in (None, ""):
        transition = lifecycle.user_action(action, ad, given, False, NOW)
        written = {JobAction.HOLD: "HoldReason", JobAction.RELEASE: "ReleaseReason",
                   JobAction.REMOVE: "RemoveReason"}[action]
        assert transition.updates[written] == reason
    assert lifecycle.user_action(action, ad, "mine", False, NOW).updates[written] == "mine"


def test_a_hold_by_the_system_is_unspecified_and_counted():
    by_user = lifecycle.user_action(JobAction.HOLD, job(IDLE), "r", False, NOW).updates
    by_system = lifecycle.user_action(JobAction.HOLD, job(IDLE), "r", True, NOW).updates
    assert by_user["HoldReasonCode"] == int(HoldCode.USER_REQUEST) and "NumSystemHolds" not in by_user
    assert by_system["HoldReasonCode"] == int(HoldCode.UNSPECIFIED) and by_system["NumSystemHolds"] == 1


def test_suspend_and_continue_as_user_actions_ignore_the_reason():
    suspended = lifecycle.user_action(JobAction.SUSPEND, job(RUNNING), "why", False, NOW)
    assert suspended.updates["JobStatus"] == int(SUSPENDED) and "why" not in suspended.updates.values()
    resumed = lifecycle.user_action(JobAction.CONTINUE, job(SUSPENDED, LastSuspensionTime=NOW - 3), None, False, NOW)
    assert resumed.updates["JobStatus"] == int(RUNNING) and resumed.updates["CumulativeSuspensionTime"] == 3
    with pytest.raises(InvalidState):
        lifecycle.user_action(JobAction.CONTINUE, job(RUNNING), None, False, NOW)


# -- runs ---------------------------------------------------------------------------------------------------
def test_the_first_start_sets_job_start_date_and_later_ones_keep_it():
    first = lifecycle.started(job(IDLE), NOW, "gw.example")
    assert first.updates == entering(IDLE, RUNNING) | {"JobCurrentStartDate": NOW, "NumJobStarts": 1,
                                                       "RemoteHost": "gw.example", "JobStartDate": NOW}
    assert events(first) == [("executing", "<127.0.0.1:0?alias=gw.example>")]
    again = lifecycle.started(job(IDLE, JobStartDate=NOW - 100, NumJobStarts=1), NOW, "gw.example")
    assert again.updates["NumJobStarts"] == 2 and "JobStartDate" not in again.updates


def test_run_accounting_adds_up_and_tracks_memory():
    ad = job(RUNNING, RemoteWallClockTime=10.0, RemoteUserCpu=1.0, RemoteSysCpu=0.5, ImageSize=5000)
    result = RunResult(exit_code=0, signal=None, user_cpu=2.0, sys_cpu=0.25, max_rss_kb=3000, wall_seconds=4.0)
    assert lifecycle.run_accounting(ad, result) == {
        "RemoteWallClockTime": 14.0, "RemoteUserCpu": 3.0, "RemoteSysCpu": 0.75, "LastRemoteWallClockTime": 4.0,
        "ImageSize": 5000, "ResidentSetSize": 3000, "MemoryUsage": 3}  # ImageSize keeps its maximum
    grown = lifecycle.run_accounting(job(RUNNING), RunResult(0, None, max_rss_kb=1025))
    assert grown["ImageSize"] == 1025 and grown["MemoryUsage"] == 2  # MB, rounded up
    assert "ImageSize" not in lifecycle.run_accounting(job(RUNNING), RunResult(0, None))  # nothing measured


def test_usage_while_running_adds_the_runs_cpu_once_and_logs_memory_changes():
    ad = job(RUNNING, RemoteUserCpu=10.0, RemoteSysCpu=1.0, ImageSize=1000)  # 10 s from earlier runs
    sample = {"rss_kb": 2000, "peak_rss_kb": 3000, "user_cpu": 2.0, "sys_cpu": 0.5, "disk_kb": 40}
    first = lifecycle.usage_update(ad, sample, (0.0, 0.0))
    assert first.updates == {"ImageSize": 3000, "ResidentSetSize": 2000, "MemoryUsage": 3, "RemoteUserCpu": 12.0,
                             "RemoteSysCpu": 1.5, "DiskUsage": 40}
    assert events(first) == [("image_size", 3000, 3, 2000)]
    ad = updated(ad, first.updates)
    again = lifecycle.usage_update(ad, sample | {"user_cpu": 3.0, "rss_kb": 1500}, (2.0, 0.5))
    assert again.updates["RemoteUserCpu"] == 13.0 and again.updates["RemoteSysCpu"] == 1.5  # not 15.0
    assert events(again) == []  # the memory did not change
    ended = lifecycle.run_accounting(updated(ad, again.updates), RunResult(0, None, user_cpu=3.5, sys_cpu=0.5,
                                                                           reported=(3.0, 0.5)))
    assert ended["RemoteUserCpu"] == 13.5 and ended["RemoteSysCpu"] == 1.5  # the run counted once in all


def test_a_job_over_its_memory_is_held_with_code_34_after_an_image_size_event():
    reason = "Error from starter: Job has gone over cgroup memory limit of 64 megabytes. Peak usage: 65 megabytes."
    result = RunResult(None, 9, max_rss_kb=66000, memory_failure=StarterHold(reason, HoldCode.JOB_OUT_OF_RESOURCES))
    held = lifecycle.exited(job(RUNNING), result, NOW)
    assert held.updates["JobStatus"] == int(HELD) and held.updates["HoldReasonCode"] == 34
    assert held.updates["HoldReason"] == reason and held.updates["HoldReasonSubCode"] == 0
    assert events(held) == [("image_size", 66000, 65, 66000), ("held", reason, 34, 0)]


def test_a_normal_exit_completes_the_job():
    ad = job(RUNNING, RemoteUserCpu=1.0, RemoteSysCpu=1.0, NumJobCompletions=0)
    done = lifecycle.exited(ad, RunResult(7, None, user_cpu=0.5, sys_cpu=0.25, wall_seconds=2.0), NOW)
    assert done.updates == {
        "RemoteWallClockTime": 2.0, "RemoteUserCpu": 1.5, "RemoteSysCpu": 1.25, "LastRemoteWallClockTime": 2.0,
        "ExitCode": 7, "ExitStatus": 7, "ExitBySignal": False, "ExitSignal": None,
        **entering(RUNNING, COMPLETED), "CompletionDate": NOW, "NumJobCompletions": 1}
    assert events(done) == [("terminated", 7, None, 0.5, 0.25, 1.5, 1.25)]


def test_an_exit_by_signal_has_no_exit_code():
    ad = job(RUNNING, ExitCode=3)  # from an earlier run
    done = lifecycle.exited(ad, RunResult(None, 9), NOW)
    assert done.updates["ExitBySignal"] is True and done.updates["ExitSignal"] == 9
    assert done.updates["ExitCode"] is None and "ExitCode" not in updated(ad, done.updates)
    assert done.updates["JobStatus"] == int(COMPLETED)
    assert events(done) == [("terminated", None, 9, 0.0, 0.0, 0.0, 0.0)]


def test_a_program_that_cannot_start_is_held_without_a_termination():
    held = lifecycle.exited(job(RUNNING), RunResult(None, None, wall_seconds=0.1, exec_error="/no/prog: gone"), NOW)
    assert held.updates["JobStatus"] == int(HELD) and held.updates["LastJobStatus"] == int(RUNNING)
    assert held.updates["HoldReason"] == "Error from starter: Failed to execute '/no/prog: gone'"
    assert held.updates["HoldReasonCode"] == 6 and held.updates["NumSystemHolds"] == 1
    assert held.updates["RemoteWallClockTime"] == 0.1 and "ExitCode" not in held.updates
    assert [name for name, *_ in events(held)] == ["held"]


def test_a_starter_failure_before_the_program_holds_with_its_reason_and_code():
    failure = StarterHold("Transfer input files failure: cannot read '/etc/shadow'", HoldCode.TRANSFER_INPUT_ERROR)
    held = lifecycle.exited(job(RUNNING), RunResult(127, None, wall_seconds=0.2, setup_failure=failure), NOW)
    assert held.updates["JobStatus"] == int(HELD) and held.updates["HoldReason"] == failure.reason
    assert held.updates["HoldReasonCode"] == 13 and held.updates["NumSystemHolds"] == 1
    assert held.updates["RemoteWallClockTime"] == 0.2 and "ExitCode" not in held.updates  # the program never ran
    assert [name for name, *_ in events(held)] == ["held"]


@pytest.mark.parametrize("policy", ["", "OnExitRemove = false", "OnExitHold = true"])
def test_an_output_transfer_failure_holds_the_job_with_its_exit_recorded(policy):
    failure = StarterHold("Transfer output files failure: 'x' was not created by the job",
                          HoldCode.TRANSFER_OUTPUT_ERROR)
    held = lifecycle.exited(job(RUNNING, policy), RunResult(0, None, output_failure=failure), NOW)
    assert held.updates["JobStatus"] == int(HELD) and held.updates["ExitCode"] == 0  # not completed, whatever policy
    assert (held.updates["HoldReason"], held.updates["HoldReasonCode"]) == (failure.reason, 12)
    assert [name for name, *_ in events(held)] == ["held"]


@pytest.mark.parametrize("status", [RUNNING, SUSPENDED])
def test_an_output_transfer_failure_holds_the_job_while_it_is_still_running(status):
    """The hold is computed from the ad as the run left it (running), never from a completed one: a completed job
    cannot be held, and a refused hold would leave the job running for ever."""
    failure = StarterHold("Transfer output files failure: '../x' was not created by the job",
                          HoldCode.TRANSFER_OUTPUT_ERROR)
    held = lifecycle.exited(job(status, "OnExitRemove = true"), RunResult(0, None, output_failure=failure), NOW)
    assert held.updates["LastJobStatus"] == int(status) and held.updates["JobStatus"] == int(HELD)
    assert "CompletionDate" not in held.updates and "NumJobCompletions" not in held.updates


HOSTILE_COUNTERS = {"NumJobStarts": "many", "RemoteWallClockTime": "oops", "RemoteUserCpu": "x", "RemoteSysCpu": "",
                    "ImageSize": "big", "NumJobCompletions": "none", "NumSystemHolds": "?", "TotalSuspensions": "t",
                    "CumulativeSuspensionTime": "c", "LastSuspensionTime": "l"}


def test_counters_a_client_set_to_non_numbers_count_from_zero():
    """Clients may set any attribute to anything: a job's transitions never fail on its counters (a start or an
    end that cannot be recorded would leave the job idle or running for ever)."""
    assert lifecycle.started(job(IDLE, **HOSTILE_COUNTERS), NOW, "gw").updates["NumJobStarts"] == 1
    done = lifecycle.exited(job(RUNNING, **HOSTILE_COUNTERS), RunResult(0, None, wall_seconds=2.0, max_rss_kb=10), NOW)
    assert (done.updates["RemoteWallClockTime"], done.updates["RemoteUserCpu"], done.updates["RemoteSysCpu"],
            done.updates["ImageSize"], done.updates["NumJobCompletions"]) == (2.0, 0.0, 0.0, 10, 1)
    assert lifecycle.hold(job(RUNNING, **HOSTILE_COUNTERS), "r", HoldCode.JOB_POLICY, NOW).updates[
        "NumSystemHolds"] == 1
    suspended = lifecycle.suspend(job(RUNNING, **HOSTILE_COUNTERS), NOW)
    assert suspended.updates["TotalSuspensions"] == 1
    resumed = lifecycle.resume(job(SUSPENDED, **HOSTILE_COUNTERS), NOW)
    assert resumed.updates["CumulativeSuspensionTime"] == 0  # (an unknown suspension time counts as now)


@pytest.mark.parametrize("text", ["RemoteWallClockTime = 1e308 * 10", "RemoteWallClockTime = true",
                                  "RemoteWallClockTime = undefined", "RemoteWallClockTime = {1, 2}"])
def test_counters_that_are_not_finite_numbers_count_from_zero(text):
    assert lifecycle.run_accounting(job(RUNNING, text), RunResult(0, None, wall_seconds=3.0))[
        "RemoteWallClockTime"] == 3.0


@pytest.mark.parametrize("status", [IDLE, RUNNING, SUSPENDED])
def test_a_job_the_gateway_cannot_move_on_is_held_with_the_reason(status):
    held = lifecycle.unsettled(job(status), "The gateway could not record the end of the job's run: E: x", NOW)
    assert held is not None
    assert held.updates == entering(status, HELD) | {
        "HoldReason": "The gateway could not record the end of the job's run: E: x",
        "HoldReasonCode": int(HoldCode.UNSPECIFIED), "HoldReasonSubCode": 0, "NumSystemHolds": 1}
    assert [name for name, *_ in events(held)] == ["held"]


@pytest.mark.parametrize("status", [HELD, REMOVED, COMPLETED])
def test_a_job_already_held_removed_or_completed_is_left_as_it_is(status):
    assert lifecycle.unsettled(job(status), "reason", NOW) is None


def test_on_exit_hold_sees_the_new_exit_code():
    ad = job(RUNNING, "OnExitHold = ExitCode != 0")
    assert lifecycle.exited(ad, RunResult(0, None), NOW).updates["JobStatus"] == int(COMPLETED)
    held = lifecycle.exited(ad, RunResult(2, None), NOW)
    assert held.updates["JobStatus"] == int(HELD) and held.updates["ExitCode"] == 2
    assert held.updates["HoldReason"] == "The job attribute OnExitHold expression 'ExitCode != 0' evaluated to TRUE"
    assert held.updates["HoldReasonCode"] == 3 and held.updates["NumSystemHolds"] == 1
    assert "CompletionDate" not in held.updates
    assert [name for name, *_ in events(held)] == ["terminated", "held"]


@pytest.mark.parametrize("expression, completes", [
    ("NumJobStarts >= 3", False), ("false", False), ("0", False),  # numbers count as booleans
    ("NumJobStarts >= 2", True), ('"not a boolean"', True), ("undefined", True),  # not a boolean: the default
])
def test_on_exit_remove_decides_between_completed_and_requeued(expression, completes):
    ad = job(RUNNING, f"OnExitRemove = {expression}", NumJobStarts=2)
    ended = lifecycle.exited(ad, RunResult(0, None), NOW)
    if completes:
        assert ended.updates["JobStatus"] == int(COMPLETED) and ended.updates["NumJobCompletions"] == 1
    else:
        assert ended.updates["JobStatus"] == int(IDLE) and "CompletionDate" not in ended.updates
        assert "NumJobCompletions" not in ended.updates
    assert [name for name, *_ in events(ended)] == ["terminated"]


def test_an_interrupted_run_goes_back_to_idle():
    back = lifecycle.interrupted(job(RUNNING), RunResult(None, 9, wall_seconds=3.0), "gateway restarted", NOW)
    assert back.updates == {"RemoteWallClockTime": 3.0, "RemoteUserCpu": 0.0, "RemoteSysCpu": 0.0,
                            "LastRemoteWallClockTime": 3.0, **entering(RUNNING, IDLE), "LastVacateTime": NOW}
    assert events(back) == [("shadow_exception", "gateway restarted")]


# -- periodic policy ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("status", [IDLE, RUNNING])
def test_periodic_hold(status):
    held = lifecycle.periodic(job(status, "PeriodicHold = NumJobStarts > 0", NumJobStarts=1), NOW)
    assert held.updates["JobStatus"] == int(HELD) and held.updates["HoldReasonCode"] == 3
    assert held.updates["HoldReason"] == ("The job attribute PeriodicHold expression 'NumJobStarts > 0' "
                                          "evaluated to TRUE")
    assert held.updates["NumSystemHolds"] == 1


def test_periodic_hold_wins_over_periodic_remove():
    ad = job(RUNNING, "PeriodicHold = true; PeriodicRemove = true")
    assert lifecycle.periodic(ad, NOW).updates["JobStatus"] == int(HELD)


@pytest.mark.parametrize("status", [IDLE, RUNNING, HELD, SUSPENDED])
def test_periodic_remove(status):
    removed = lifecycle.periodic(job(status, "PeriodicRemove = true"), NOW)
    assert removed.updates == entering(status, REMOVED) | {
        "RemoveReason": "The job attribute PeriodicRemove expression 'TRUE' evaluated to TRUE"}


def test_periodic_release_only_releases_held_jobs():
    ad = job(HELD, "PeriodicRelease = NumJobStarts < 2; PeriodicHold = true", HoldReason="h", HoldReasonCode=3,
             NumJobStarts=1)
    released = lifecycle.periodic(ad, NOW)
    assert released.updates["JobStatus"] == int(IDLE) and released.updates["LastHoldReasonCode"] == 3
    assert released.updates["ReleaseReason"].startswith("The job attribute PeriodicRelease expression")
    assert lifecycle.periodic(job(IDLE, "PeriodicRelease = true"), NOW) is None


@pytest.mark.parametrize("status", [SUSPENDED, COMPLETED, REMOVED])
def test_periodic_hold_does_not_apply_to_suspended_or_finished_jobs(status):
    assert lifecycle.periodic(job(status, "PeriodicHold = true; PeriodicRelease = true"), NOW) is None


def test_finished_jobs_are_not_removed_again_and_false_policies_do_nothing():
    assert lifecycle.periodic(job(COMPLETED, "PeriodicRemove = true"), NOW) is None
    assert lifecycle.periodic(job(REMOVED, "PeriodicRemove = true"), NOW) is None
    assert lifecycle.periodic(job(RUNNING, "PeriodicHold = false; PeriodicRemove = 0"), NOW) is None
    assert lifecycle.periodic(job(RUNNING), NOW) is None


# -- leaving the queue and stopping -------------------------------------------------------------------------
@pytest.mark.parametrize("status, text, leaves", [
    (COMPLETED, "", True), (REMOVED, "", True), (IDLE, "", False), (HELD, "", False), (RUNNING, "", False),
    (COMPLETED, "LeaveJobInQueue = true", False), (REMOVED, "LeaveJobInQueue = true", False),
    (COMPLETED, "LeaveJobInQueue = FilesRetrieved =!= true", False),
    (COMPLETED, "LeaveJobInQueue = FilesRetrieved =!= true; FilesRetrieved = true", True),
    (COMPLETED, "LeaveJobInQueue = 0", True),
])
def test_leaves_queue(status, text, leaves):
    assert lifecycle.leaves_queue(job(status, text)) is leaves


@pytest.mark.parametrize("status, text, signal", [
    (REMOVED, 'RemoveKillSig = "SIGUSR1"; HoldKillSig = "SIGHUP"; KillSig = "SIGINT"', "SIGUSR1"),
    (HELD, 'RemoveKillSig = "SIGUSR1"; HoldKillSig = "SIGHUP"; KillSig = "SIGINT"', "SIGHUP"),
    (HELD, 'RemoveKillSig = "SIGUSR1"; KillSig = "SIGINT"', "SIGINT"),  # the other state's signal is not used
    (REMOVED, 'RemoveKillSig = ""; KillSig = "SIGQUIT"', "SIGQUIT"),  # empty: not a signal
    (IDLE, 'KillSig = "SIGINT"', "SIGINT"),
    (REMOVED, "RemoveKillSig = 10", "SIGTERM"),  # not a string: ignored
    (REMOVED, "", "SIGTERM"),
])
def test_kill_signal(status, text, signal):
    assert lifecycle.kill_signal(job(status, text)) == signal


def test_updated_copies_sets_and_deletes():
    ad = job(HELD, HoldReason="x")
    after = updated(ad, {"HoldReason": None, "JobStatus": 1, "New": "v", "Absent": None})
    assert "HoldReason" not in after and after["JobStatus"] == 1 and after["New"] == "v"
    assert ad["HoldReason"] == "x" and ad["JobStatus"] == int(HELD)  # the original is untouched
