"""Crash recovery for the local backend: settling, at start-up, the runs that a crash or kill -9 cut off.

A run that finished while the gateway was down (its launcher left a result file) is recorded as finished and never
run twice; any other is stopped (what is left of its process group is killed) and its job requeued.  Execute
directories of jobs that are not running are leftovers and go.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Protocol

from jobmodel.classads import job_status

from . import joblog
from .lifecycle import WITH_PROCESS
from .sandbox import ExecuteDir
from .store import JobKey, JobStore

RESTARTED = "The gateway restarted while the job was running; it will run again"


class FinishJob(Protocol):
    """Records how a run ended (the scheduler's ``finish_job``)."""

    def __call__(self, key: JobKey, interruption: str | None = None) -> None: ...


def recover(store: JobStore, execute_root: Path, finish_job: FinishJob) -> None:
    for key, ad in store.ads():
        directory = ExecuteDir.of(execute_root, *key)
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
    """Kill what is left of a job's process group after a crash, if it is still ours: a member's command line
    names our launcher spec, or its environment names our job ad (so a recycled group id is never hit)."""
    pgid = directory.pgid()
    if not pgid:
        return
    marks = (str(directory.spec_file).encode(), f"_CONDOR_JOB_AD={directory.control / '.job.ad'}".encode())
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            if any(mark in (proc / name).read_bytes() for mark in marks for name in ("cmdline", "environ")):
                os.killpg(pgid, signal.SIGKILL)
                return
        except (OSError, ValueError, IndexError):
            continue
