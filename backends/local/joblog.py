"""What the local backend logs about jobs: one event per state a job enters, one per run that ends, and one per
job found cut off by a restart.

Each event names the job (``cluster``, ``proc``, ``owner``) and what explains it (``reason``, ``exit_code``,
``signal``) as twisted.logger fields, so an operator can follow a job through the gateway's log and a program
can filter on them.  The lines are written after the change is durable, on the backend's thread.
"""

from __future__ import annotations

from typing import Any

import classad2
from twisted.logger import Logger

from jobmodel.classads import evaluate, job_status
from jobmodel.jobs import JobStatus

from .lifecycle import RunResult

log = Logger(namespace="birdbath.jobs")

JobKey = tuple[int, int]

#: the line for a job that enters a state, and the attribute that says why (None: nothing to say)
_ENTERED: dict[JobStatus, tuple[str, str | None]] = {
    JobStatus.IDLE: ("job {cluster}.{proc} requeued", None),
    JobStatus.RUNNING: ("job {cluster}.{proc} of {owner} started (start number {starts})", None),
    JobStatus.SUSPENDED: ("job {cluster}.{proc} suspended", None),
    JobStatus.HELD: ("job {cluster}.{proc} held: {reason}", "HoldReason"),
    JobStatus.REMOVED: ("job {cluster}.{proc} removed: {reason}", "RemoveReason"),
    JobStatus.COMPLETED: ("job {cluster}.{proc} completed", None),
}

#: lines that depend on the state left as well: (left, entered) -> as in _ENTERED
_MOVED: dict[tuple[JobStatus, JobStatus], tuple[str, str | None]] = {
    (JobStatus.HELD, JobStatus.IDLE): ("job {cluster}.{proc} released: {reason}", "ReleaseReason"),
    (JobStatus.SUSPENDED, JobStatus.RUNNING): ("job {cluster}.{proc} continued", None),
}


def job_fields(key: JobKey, ad: classad2.ClassAd) -> dict[str, Any]:
    """The fields every job event carries."""
    return {"cluster": key[0], "proc": key[1], "owner": evaluate(ad, "Owner")}


def status_before(ad: classad2.ClassAd | None) -> JobStatus | None:
    """A job's state before a change; None for a job not yet in the queue."""
    return None if ad is None else job_status(ad)


def status_changed(key: JobKey, before: JobStatus | None, ad: classad2.ClassAd) -> None:
    """Log the state ``ad`` is in if the job was not in it ``before`` (None: the job was just submitted)."""
    after = job_status(ad)
    if after is before:
        return
    fields = job_fields(key, ad) | {"status": after.name.lower()}
    if before is None:
        log.info("job {cluster}.{proc} submitted by {owner}: {cmd} ({status})", cmd=evaluate(ad, "Cmd"), **fields)
        return
    text, reason = _MOVED.get((before, after)) or _ENTERED.get(after, ("job {cluster}.{proc} {status}", None))
    log.info(text, previous=before.name.lower(), reason=evaluate(ad, reason) if reason else None,
             starts=evaluate(ad, "NumJobStarts"), **fields)


def run_ended(key: JobKey, ad: classad2.ClassAd, result: RunResult, interruption: str | None) -> None:
    """Log how a run ended: by itself (exit code or signal), cut off by the gateway (``interruption``), or
    stopped because the job was held or removed (``ad`` is the job as it was when the run ended)."""
    fields = job_fields(key, ad) | {"exit_code": result.exit_code, "signal": result.signal,
                                    "wall_seconds": round(result.wall_seconds, 3)}
    if job_status(ad) not in (JobStatus.RUNNING, JobStatus.SUSPENDED):
        log.info("job {cluster}.{proc} stopped, as it was {status}", status=job_status(ad).name.lower(), **fields)
    elif interruption is not None:
        log.warn("job {cluster}.{proc} interrupted: {reason}", reason=interruption, **fields)
    elif result.exec_error is not None:
        log.info("job {cluster}.{proc} could not execute {program}", program=result.exec_error, **fields)
    elif result.signal is not None:
        log.info("job {cluster}.{proc} ended by signal {signal} after {wall_seconds} s", **fields)
    else:
        log.info("job {cluster}.{proc} ended with exit code {exit_code} after {wall_seconds} s", **fields)


def recovered(key: JobKey, ad: classad2.ClassAd, finished: bool) -> None:
    """Log what a restart found of a job the queue says was running: it finished while the gateway was down
    (recorded as finished, never run again), or it was cut off (stopped and requeued)."""
    if finished:
        log.info("recovery: job {cluster}.{proc} finished while the gateway was down; recorded as finished",
                 requeued=False, **job_fields(key, ad))
    else:
        log.info("recovery: job {cluster}.{proc} was cut off by the restart; requeued", requeued=True,
                 **job_fields(key, ad))
