"""A local backend's queue and scheduler in the test process, on a fresh SQLite file, a real Spool, a settable clock
and a fixed machine ad; jobs are started by the scheduler and, when a test asks, really run by the launcher
(``World.run``: the command line the executor uses, waited for, then ``finish_job``).  The executor itself, with its
reactor and timers, is left out (test_executor_unit.py tests it)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import classad2

from backends.interface import Batch, NewJob
from backends.local import runfile
from backends.local.executor import LAUNCHER
from backends.local.owners import Accounts
from backends.local.queue import JobQueue
from backends.local.sandbox import ExecuteDir
from backends.local.scheduler import Scheduler
from backends.local.store import JobStore
from backends.spool import Spool
from jobmodel.classads import evaluate, job_status
from jobmodel.jobs import JobStatus, Universe

SCHEDD = "unit.schedd"
E = classad2.ExprTree


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class World:
    queue: JobQueue
    scheduler: Scheduler
    clock: Clock
    execute: Path
    iwd: Path
    changes: list[dict]

    def submit(self, procs: int = 1, files: dict[str, bytes] | None = None, spooled: bool = False,
               **attributes) -> list[tuple[int, int]]:
        """One cluster of ``procs`` jobs (a shared-file-system /bin/true of alice unless told otherwise), committed;
        ``files`` are staged in each job's spool, which is its Iwd when ``spooled``."""
        cluster = self.queue.store.next_cluster_id()
        jobs = []
        for proc in range(procs):
            for name, data in (files or {}).items():
                self.queue.stage_file(cluster, proc, name)
                self.queue.write_file(cluster, proc, name, 0, data)
            iwd = self.queue.spool.directory(cluster, proc) if spooled else self.iwd
            ad = classad2.ClassAd()
            values = {"Cmd": "/bin/true", "Iwd": str(iwd), "JobUniverse": int(Universe.VANILLA),
                      "Requirements": E("TRUE"), "Owner": "alice"} | attributes
            for name, value in values.items():
                ad[name] = value
            jobs.append(NewJob(cluster, proc, ad, tuple(files or ())))
        self.queue.commit(Batch(jobs))
        return [job.key for job in jobs]

    def job(self, key) -> classad2.ClassAd:
        ad = self.queue.get_job(*key)
        assert ad is not None, f"job {key} is not in the queue"
        return ad

    def status(self, key) -> JobStatus:
        return job_status(self.job(key))

    def start(self, free_cpus: int = 100, running=frozenset()) -> list[tuple[int, int]]:
        return [launch.key for launch in self.scheduler.start_jobs(free_cpus, set(running))]

    def result(self, key, **values) -> None:
        """Append the launcher's result to a started job's run file."""
        result = {"exit_code": 0, "signal": None, "user_cpu": 0.0, "sys_cpu": 0.0, "max_rss_kb": 0,
                  "wall_seconds": 0.0, "exec_error": None, "setup_failure": None, "output_failure": None} | values
        runfile.append(ExecuteDir.of(self.execute, *key).run_file, {runfile.ENDED: result})

    def refuse_writes(self, key, containing: str = "") -> Callable[[], None]:
        """See :func:`refuse_writes` (this world's queue file)."""
        return refuse_writes(self.execute.parent / "queue.sqlite3", key, containing)

    def spec(self, key) -> dict:
        """The launcher's spec start_jobs wrote for a started job."""
        spec = ExecuteDir.of(self.execute, *key).run().spec
        assert spec is not None
        return spec

    def run(self, key) -> classad2.ClassAd:
        """Start ``key`` (it must be the only idle job that starts), run its launcher as the executor would, record
        the end of the run; the job's ad afterwards.  A job held before it started is returned as it is."""
        started = self.start()
        if key not in started:
            return self.job(key)
        assert started == [key], f"other jobs started too: {started}"
        directory = ExecuteDir.of(self.execute, *key)
        subprocess.run([sys.executable, "-S", "-s", str(LAUNCHER), str(directory.run_file)], check=True,
                       cwd=directory.root, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, timeout=60)
        self.scheduler.finish_job(key)
        return self.job(key)


def refuse_writes(queue_file: Path, key, containing: str = "") -> Callable[[], None]:
    """Make a local backend's SQLite file refuse every write of job ``key`` whose ad text contains ``containing``
    (e.g. ``"JobStatus = 4"``), as a full disk or an I/O error refuses it: the store's own write fails with a real
    sqlite3 error (also in a gateway running in another process).  Returns what lifts the refusal."""
    names = [f"refuse_{key[0]}_{key[1]}_{table}" for table in ("jobs", "history")]
    text = containing.replace("'", "''")
    with closing(sqlite3.connect(queue_file, isolation_level=None)) as db:
        for name, table in zip(names, ("jobs", "history")):
            db.execute(f"CREATE TRIGGER {name} BEFORE INSERT ON {table} WHEN NEW.cluster = {key[0]} AND "
                       f"NEW.proc = {key[1]} AND instr(NEW.ad, '{text}') > 0 "
                       "BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END")

    def lift() -> None:
        with closing(sqlite3.connect(queue_file, isolation_level=None)) as db:
            for name in names:
                db.execute(f"DROP TRIGGER {name}")

    return lift


def attributes(ad: classad2.ClassAd, *names: str) -> dict:
    return {name: evaluate(ad, name) for name in names}


def make_world(state_dir: Path, accounts: Accounts) -> World:
    """A queue and scheduler with their state under ``state_dir`` (and ``iwd``, a directory for the jobs); on the
    state another world left there, what a restarted gateway finds."""
    store = JobStore(state_dir / "queue.sqlite3")
    clock = Clock(1000)
    queue = JobQueue(store, Spool(state_dir / "spool"), SCHEDD, clock, accounts)
    changes: list[dict] = []
    queue.listener = lambda changed: changes.append(dict(changed))
    execute = state_dir / "execute"
    execute.mkdir(exist_ok=True)
    iwd = state_dir / "iwd"
    iwd.mkdir(exist_ok=True)
    machine = classad2.ClassAd()
    for name, value in {"MyType": "Machine", "Cpus": 4, "Memory": 2048, "OpSys": "LINUX", "Arch": "X86_64",
                        "Requirements": E("true"), "Start": E("true")}.items():
        machine[name] = value
    return World(queue, Scheduler(queue, execute, machine), clock, execute, iwd, changes)
