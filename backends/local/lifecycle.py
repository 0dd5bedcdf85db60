"""How a job's ad changes as it moves through the queue: the attribute updates a schedd makes on hold,
release, remove, start, exit and periodic policy, plus the user-log event each transition writes.

Pure functions of (ad, facts, now): the backend applies the updates durably and then writes the events.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import classad2

from backends.interface import InvalidState
from jobmodel.classads import copy_ad, evaluate, job_status
from jobmodel.exprtext import expression_text
from jobmodel.jobs import HoldCode, JobAction, JobStatus

from .userlog import UserLog

Updates = dict[str, object]  # attribute -> new value (None deletes the attribute)
Event = Callable[[UserLog], None]


#: states in which a job has a process (a suspended one is stopped, not gone)
WITH_PROCESS = (JobStatus.RUNNING, JobStatus.SUSPENDED)


@dataclass
class Transition:
    updates: Updates
    events: list[Event] = field(default_factory=list)


@dataclass(frozen=True)
class StarterHold:
    """Why the owner's side of the launcher could not do its part: a starter's hold reason and code."""

    reason: str
    code: HoldCode


@dataclass(frozen=True)
class RunResult:
    """How a run ended, as the launcher reported it (``exit_code`` or ``signal``)."""

    exit_code: int | None
    signal: int | None
    user_cpu: float = 0.0
    sys_cpu: float = 0.0
    max_rss_kb: int = 0
    wall_seconds: float = 0.0
    exec_error: str | None = None  # the job's program could not be started at all
    setup_failure: StarterHold | None = None  # its files, streams or input transfer failed: it never started
    output_failure: StarterHold | None = None  # it ran, but its output could not be transferred back
    memory_failure: StarterHold | None = None  # it went over its memory request and was killed
    disk_kb: int = 0  # what its sandbox held at the end (DiskUsage)
    reported: tuple[float, float] = (0.0, 0.0)  # the run's user and system CPU the ad already counts (usage updates)


def _job(ad: classad2.ClassAd) -> str:
    return f"job {ad.get('ClusterId')}.{ad.get('ProcId')}"


def _entering(ad: classad2.ClassAd, status: JobStatus, now: int) -> Updates:
    return {"LastJobStatus": int(job_status(ad)), "JobStatus": int(status), "EnteredCurrentStatus": now}


def hold(ad: classad2.ClassAd, reason: str, code: HoldCode, now: int, *, subcode: int = 0) -> Transition:
    status = job_status(ad)
    if status in (JobStatus.HELD, JobStatus.REMOVED, JobStatus.COMPLETED):
        raise InvalidState(f"{_job(ad)} is {status.name.lower()} and cannot be held")
    # (a suspended job can be held or removed: the executor continues it before stopping it)
    updates = _entering(ad, JobStatus.HELD, now) | {
        "HoldReason": reason, "HoldReasonCode": int(code), "HoldReasonSubCode": subcode}
    if code != HoldCode.USER_REQUEST:
        updates["NumSystemHolds"] = int(_number(ad, "NumSystemHolds")) + 1
    return Transition(updates, [lambda log: log.held(reason, int(code), subcode)])


def release(ad: classad2.ClassAd, reason: str, now: int) -> Transition:
    status = job_status(ad)
    if status is not JobStatus.HELD:
        raise InvalidState(f"{_job(ad)} is {status.name.lower()}, not held")
    updates = _entering(ad, JobStatus.IDLE, now) | {
        "LastHoldReason": evaluate(ad, "HoldReason"), "LastHoldReasonCode": evaluate(ad, "HoldReasonCode"),
        "ReleaseReason": reason, "HoldReason": None, "HoldReasonCode": None, "HoldReasonSubCode": None}
    return Transition(updates, [lambda log: log.released(reason)])


def remove(ad: classad2.ClassAd, reason: str, now: int) -> Transition:
    status = job_status(ad)
    if status in (JobStatus.REMOVED, JobStatus.COMPLETED):
        raise InvalidState(f"{_job(ad)} is already {status.name.lower()}")
    return Transition(_entering(ad, JobStatus.REMOVED, now) | {"RemoveReason": reason},
                      [lambda log: log.aborted(reason)])


def suspend(ad: classad2.ClassAd, now: int) -> Transition:
    if job_status(ad) is not JobStatus.RUNNING:
        raise InvalidState(f"{_job(ad)} is {job_status(ad).name.lower()}, not running: only running jobs suspend")
    return Transition(_entering(ad, JobStatus.SUSPENDED, now) | {
        "TotalSuspensions": int(_number(ad, "TotalSuspensions")) + 1, "LastSuspensionTime": now})


def resume(ad: classad2.ClassAd, now: int) -> Transition:
    if job_status(ad) is not JobStatus.SUSPENDED:
        raise InvalidState(f"{_job(ad)} is {job_status(ad).name.lower()}, not suspended")
    suspended = now - int(_number(ad, "LastSuspensionTime", now))
    return Transition(_entering(ad, JobStatus.RUNNING, now) | {
        "CumulativeSuspensionTime": int(_number(ad, "CumulativeSuspensionTime")) + suspended})


USER_ACTION_DEFAULTS = {JobAction.HOLD: "Held via Birdbath SOAP", JobAction.RELEASE: "Released via Birdbath SOAP",
                        JobAction.REMOVE: "Removed via Birdbath SOAP"}


def user_action(action: JobAction, ad: classad2.ClassAd, reason: str | None, system: bool,
                now: int) -> Transition:
    if action is JobAction.SUSPEND:
        return suspend(ad, now)
    if action is JobAction.CONTINUE:
        return resume(ad, now)
    reason = reason or USER_ACTION_DEFAULTS[action]
    if action is JobAction.HOLD:
        return hold(ad, reason, HoldCode.UNSPECIFIED if system else HoldCode.USER_REQUEST, now)
    if action is JobAction.RELEASE:
        return release(ad, reason, now)
    return remove(ad, reason, now)


def started(ad: classad2.ClassAd, now: int, host: str) -> Transition:
    updates = _entering(ad, JobStatus.RUNNING, now) | {
        "JobCurrentStartDate": now, "NumJobStarts": int(_number(ad, "NumJobStarts")) + 1, "RemoteHost": host}
    if evaluate(ad, "JobStartDate") is None:
        updates["JobStartDate"] = now
    return Transition(updates, [lambda log: log.executing(f"<127.0.0.1:0?alias={host}>")])


def run_accounting(ad: classad2.ClassAd, result: RunResult) -> Updates:
    """What every run adds to the ad, whatever happens to the job next."""
    updates: Updates = {
        "RemoteWallClockTime": float(_number(ad, "RemoteWallClockTime")) + result.wall_seconds,
        "RemoteUserCpu": float(_number(ad, "RemoteUserCpu")) - result.reported[0] + result.user_cpu,
        "RemoteSysCpu": float(_number(ad, "RemoteSysCpu")) - result.reported[1] + result.sys_cpu,
        "LastRemoteWallClockTime": result.wall_seconds,
    }
    if result.disk_kb:
        updates["DiskUsage"] = result.disk_kb
    if result.max_rss_kb:
        updates["ImageSize"] = max(int(_number(ad, "ImageSize")), result.max_rss_kb)
        updates["ResidentSetSize"] = result.max_rss_kb
        updates["MemoryUsage"] = math.ceil(result.max_rss_kb / 1024)
    return updates


def usage_update(ad: classad2.ClassAd, sample: dict, reported: tuple[float, float]) -> Transition:
    """A running job's usage, as the launcher last sampled it (``family.Monitor``): memory, the run's CPU so far
    on top of earlier runs' (``reported``: what the ad already counts of this run), and its sandbox's size; an
    image-size event when its memory changed, as the shadow writes one."""
    peak, rss = int(sample.get("peak_rss_kb", 0)), int(sample.get("rss_kb", 0))
    image, memory = max(int(_number(ad, "ImageSize")), peak), math.ceil(peak / 1024)
    updates: Updates = {
        "ImageSize": image, "ResidentSetSize": rss, "MemoryUsage": memory,
        "RemoteUserCpu": float(_number(ad, "RemoteUserCpu")) - reported[0] + float(sample.get("user_cpu", 0.0)),
        "RemoteSysCpu": float(_number(ad, "RemoteSysCpu")) - reported[1] + float(sample.get("sys_cpu", 0.0)),
    }
    if sample.get("disk_kb"):
        updates["DiskUsage"] = int(sample["disk_kb"])
    changed = image != _number(ad, "ImageSize") or memory != _number(ad, "MemoryUsage")
    return Transition(updates, [lambda log: log.image_size(image, memory, rss)] if changed else [])


def exited(ad: classad2.ClassAd, result: RunResult, now: int) -> Transition:
    """A run ended by itself: record how, then let OnExitHold / OnExitRemove decide what happens next.  A program
    that never started, or whose output could not be transferred back, holds the job instead (as a starter's
    failure does)."""
    updates = run_accounting(ad, result)  # (a hold reads the job's state and NumSystemHolds: these leave them alone)
    failure = result.setup_failure
    if failure is None and result.exec_error is not None:
        failure = StarterHold(f"Error from starter: Failed to execute '{result.exec_error}'",
                              HoldCode.FAILED_TO_CREATE_PROCESS)
    if failure is not None:
        held = hold(ad, failure.reason, failure.code, now)
        return Transition(updates | held.updates, held.events)
    if result.memory_failure is not None:  # as the starter holds a job its memory limit ended
        held = hold(ad, result.memory_failure.reason, result.memory_failure.code, now)
        image = int(updates.get("ImageSize", _number(ad, "ImageSize")))
        memory, rss = int(updates.get("MemoryUsage", 0)), int(updates.get("ResidentSetSize", 0))
        return Transition(updates | held.updates, [lambda log: log.image_size(image, memory, rss), *held.events])
    if result.signal is None:
        updates |= {"ExitCode": result.exit_code, "ExitStatus": result.exit_code, "ExitBySignal": False,
                    "ExitSignal": None}
    else:
        updates |= {"ExitBySignal": True, "ExitSignal": result.signal, "ExitCode": None}
    if result.output_failure is not None:
        held = hold(ad, result.output_failure.reason, result.output_failure.code, now)
        return Transition(updates | held.updates, held.events)
    probe = _seen_by(ad, updates, EXIT_POLICIES)
    total_user, total_sys = float(updates["RemoteUserCpu"]), float(updates["RemoteSysCpu"])
    terminated: Event = lambda log: log.terminated(result.exit_code, result.signal, result.user_cpu,  # noqa: E731
                                                   result.sys_cpu, total_user, total_sys)
    if _policy(probe, "OnExitHold", False):  # (its text as the periodic policies': the client's, or old syntax)
        held = hold(probe, _policy_reason(probe, "OnExitHold"), HoldCode.JOB_POLICY, now)
        return Transition(updates | held.updates, [terminated, *held.events])
    if _policy(probe, "OnExitRemove", True):
        done = _entering(ad, JobStatus.COMPLETED, now) | {
            "CompletionDate": now, "NumJobCompletions": int(_number(ad, "NumJobCompletions")) + 1}
        return Transition(updates | done, [terminated])
    return Transition(updates | _entering(ad, JobStatus.IDLE, now), [terminated])


def interrupted(ad: classad2.ClassAd, result: RunResult, message: str, now: int) -> Transition:
    """A run that the gateway (not the job) ended: back to idle, like a shadow exception."""
    return Transition(run_accounting(ad, result) | _entering(ad, JobStatus.IDLE, now) | {"LastVacateTime": now},
                      [lambda log: log.shadow_exception(message)])


def unsettled(ad: classad2.ClassAd, reason: str, now: int) -> Transition | None:
    """A job the gateway could not move on (it could not start it, record the end of its run, or recover it after a
    restart): held with ``reason``, so that it is never left running without a process nor idle to fail again at
    every cycle, and a user can see why and release it.  A job already held, removed or completed stays as it is
    (None)."""
    if job_status(ad) in (JobStatus.HELD, JobStatus.REMOVED, JobStatus.COMPLETED):
        return None
    return hold(ad, reason, HoldCode.UNSPECIFIED, now)


def periodic(ad: classad2.ClassAd, now: int) -> Transition | None:
    """PeriodicHold / PeriodicRemove / PeriodicRelease, evaluated as the schedd does every interval."""
    status = job_status(ad)
    if status in (JobStatus.IDLE, JobStatus.RUNNING) and _policy(ad, "PeriodicHold", False):
        return hold(ad, _policy_reason(ad, "PeriodicHold"), HoldCode.JOB_POLICY, now)
    if status not in (JobStatus.REMOVED, JobStatus.COMPLETED) and _policy(ad, "PeriodicRemove", False):
        return remove(ad, _policy_reason(ad, "PeriodicRemove"), now)
    if status is JobStatus.HELD and _policy(ad, "PeriodicRelease", False):
        return release(ad, _policy_reason(ad, "PeriodicRelease"), now)
    return None


def kill_signal(ad: classad2.ClassAd) -> str:
    """The signal that stops a job for its new state: RemoveKillSig/HoldKillSig, else KillSig, else SIGTERM."""
    specific = {JobStatus.REMOVED: "RemoveKillSig", JobStatus.HELD: "HoldKillSig"}.get(job_status(ad))
    for name in (specific, "KillSig"):
        if name:
            result = evaluate(ad, name)
            if isinstance(result, str) and result:
                return result
    return "SIGTERM"


def leaves_queue(ad: classad2.ClassAd) -> bool:
    """Completed and removed jobs leave the queue unless ``LeaveJobInQueue`` is true."""
    return job_status(ad) in (JobStatus.COMPLETED, JobStatus.REMOVED) and not _policy(ad, "LeaveJobInQueue", False)


def _number(ad: classad2.ClassAd, name: str, default: float = 0) -> float:
    """A count or an amount the schedd adds to.  Clients may set any attribute to anything: a value that is not a
    finite number counts as ``default``, so a job's own attributes can never make its transition fail (a job whose
    start or end cannot be recorded would stay idle or running for ever)."""
    result = evaluate(ad, name, default)
    if isinstance(result, bool) or not isinstance(result, (int, float)) or not math.isfinite(result):
        return default
    return result


#: what decides a job's fate when its run ends by itself
EXIT_POLICIES = ("OnExitHold", "OnExitRemove")


def _seen_by(ad: classad2.ClassAd, updates: Updates, policies: tuple[str, ...]) -> classad2.ClassAd:
    """The ad the ``policies`` are evaluated against: ``ad`` with ``updates`` (a copy) when one of them is an
    expression, which may read what the updates change; else ``ad`` itself, as a literal or absent policy sees
    nothing of them (the common case: the copy was a tenth of the CPU recording a run's end takes)."""
    if any(isinstance(ad.get(name), classad2.ExprTree) for name in policies):
        return updated(ad, updates)
    return ad


def _policy(ad: classad2.ClassAd, name: str, default: bool) -> bool:
    result = evaluate(ad, name, default)
    if isinstance(result, bool):
        return result
    if isinstance(result, (int, float)):
        return result != 0
    return default


def _policy_reason(ad: classad2.ClassAd, name: str) -> str:
    return f"The job attribute {name} expression '{expression_text(ad, name, ad.lookup(name))}' evaluated to TRUE"


def updated(ad: classad2.ClassAd, updates: Updates) -> classad2.ClassAd:
    copy = copy_ad(ad)
    for name, new in updates.items():
        if new is None:
            copy.pop(name, None)
        else:
            copy[name] = new
    return copy

