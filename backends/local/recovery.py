"""Crash recovery for the local backend: settling, at start-up, the runs that a crash or kill -9 cut off.

A run that finished while the gateway was down (its launcher wrote its result) is recorded as finished and never
run twice; any other is stopped (what is left of its process group is killed) and its job requeued.  Execute
directories of jobs that are not running are leftovers and go.

Each job is recovered on its own: one whose recovery fails is held with the reason (the scheduler's ``settle``) and
the others are recovered all the same, so no job is left "running" without a process.
"""

from __future__ import annotations

import contextlib
import os
import signal
from functools import partial
from pathlib import Path
from typing import Callable, Protocol

from jobmodel.classads import job_status

from . import joblog
from .family import end_leftovers
from .lifecycle import WITH_PROCESS
from .runfile import Started
from .sandbox import ExecuteDir
from .store import JobKey, JobStore

RESTARTED = "The gateway restarted while the job was running; it will run again"
#: what could not be done, in the hold reason of a job whose recovery failed
RECOVER = "recover the job after a restart"


class FinishJob(Protocol):
    """Records how a run ended (the scheduler's ``finish_job``)."""

    def __call__(self, key: JobKey, interruption: str | None = None) -> None: ...


class Settle(Protocol):
    """Does ``work`` for a job and, if it fails, holds the job saying ``what`` failed; never raises (the
    scheduler's ``_settle``)."""

    def __call__(self, key: JobKey, what: str, work: Callable[[], None]) -> None: ...


def recover(store: JobStore, execute_root: Path, finish_job: FinishJob, settle: Settle) -> None:
    """Recover every job that has (or had) a process, each through ``settle``: the jobs running or suspended, and
    any whose execute directory is left (the others cost nothing at start-up, however many are queued);
    ``finish_job`` records a run's end and raises when it cannot (``settle`` then holds the job with the reason)."""
    for key in sorted(set(store.keys_with_status(WITH_PROCESS)) | set(ExecuteDir.keys_in(execute_root))):
        settle(key, RECOVER, partial(recover_job, store, key, ExecuteDir.of(execute_root, *key), finish_job))


def recover_job(store: JobStore, key: JobKey, directory: ExecuteDir, finish_job: FinishJob) -> None:
    """Settle one job as the restart finds it (read again: a retry may come after other changes)."""
    ad = store.get(key)
    if ad is None:  # it left the queue while the gateway was down: what is left of its run goes
        kill_leftover(directory)
        directory.remove()
        return
    if job_status(ad) in WITH_PROCESS:
        finished = directory.result() is not None
        joblog.recovered(key, ad, finished=finished)
        if finished:
            finish_job(key)
        else:
            kill_leftover(directory)
            finish_job(key, RESTARTED)
    elif directory.root.exists():
        kill_leftover(directory)
        directory.remove()


def kill_leftover(directory: ExecuteDir) -> None:
    """Kill what is left of a job's run after a crash, if it is still ours: its launcher, if it still works in the
    job's execute directory (it would write the run's result into the directory of the job's next run), and its
    process group, if a member's command line names our launcher spec, its environment names our job ad, or it
    works in the job's execute directory -- so a recycled pid or group id is never hit.  Whatever is left in the
    job's cgroup, if it had one, is killed too."""
    end_leftovers(directory.control)
    started = directory.started()
    kill_launcher(directory, started)
    pgid = started.group if started is not None else None
    if not pgid:
        return
    marks = (str(directory.run_file).encode(), f"_CONDOR_JOB_AD={directory.control / '.job.ad'}".encode())
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            if _works_in(proc, directory.root) or any(mark in (proc / name).read_bytes()
                                                      for mark in marks for name in ("cmdline", "environ")):
                os.killpg(pgid, signal.SIGKILL)
                return
        except (OSError, ValueError, IndexError):
            continue


def kill_launcher(directory: ExecuteDir, started: Started | None) -> None:
    """Kill the launcher of a run that is over for the gateway, if it still works in the run's directory (its server
    died, or the gateway restarted): it would write the run's end into the directory of the job's next run.  A
    launcher that ended the run works elsewhere (it may be running another job).  ``started``: what the run's file
    says of the start (its caller has read it)."""
    if started is not None and started.launcher:
        with contextlib.suppress(OSError):
            if _works_in(Path(f"/proc/{started.launcher}"), directory.root):
                os.kill(started.launcher, signal.SIGKILL)


def _works_in(proc: Path, root: Path) -> bool:
    cwd = os.readlink(proc / "cwd")
    return cwd == str(root) or cwd.startswith(f"{root}/")
