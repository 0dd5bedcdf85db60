"""The ``local`` backend: a schedd that keeps its queue in SQLite, its spool under the state directory, and runs
jobs on this machine.

Transactions collect their changes in memory and write them in one durable SQLite transaction at commit, so an
uncommitted job is invisible to every query and an aborted or expired one leaves nothing behind.  Every queue
change goes through :meth:`LocalBackend._write`, which also moves finished jobs into the history, writes the
user-log events and tells the executor.
"""

from __future__ import annotations

import getpass
import os
import platform
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import classad2
from twisted.logger import Logger

from backends.interface import BackendError, BackendInfo, FileInfo, UnknownJob
from gateway import __version__
from gateway.core.classads import matches
from gateway.core.jobs import HoldCode, JobAction, JobStatus, Universe

from . import jobspec, lifecycle, sandbox
from .executor import Executor, ExecutorOptions
from .lifecycle import Event, RunResult, Transition, Updates, status_of, updated
from .machine import machine_ad
from .sandbox import ExecuteDir
from .spool import Spool
from .store import JobKey, JobStore
from .userlog import UserLog, log_path

log = Logger()

#: the HTCondor release whose SOAP interface the gateway reproduces (the last one that had it)
INTERFACE_VERSION = "8.6.13"


@dataclass(eq=False)
class LocalTransaction:
    next_proc: dict[int, int] = field(default_factory=dict)  # clusters created in this transaction
    new_jobs: dict[JobKey, classad2.ClassAd | None] = field(default_factory=dict)
    updates: dict[JobKey, Updates] = field(default_factory=dict)  # changes to committed jobs, in order
    events: list[tuple[JobKey, Event]] = field(default_factory=list)
    open: bool = True


@dataclass(frozen=True)
class Launch:
    """A job the executor should start now: its execute directory holds the launcher's spec."""

    key: JobKey
    directory: ExecuteDir
    cpus: int


class LocalBackend:
    threads = 1  # one SQLite connection, one writer: every call runs on the same worker thread

    def __init__(self, state_dir: Path, *, schedd_name: str | None = None, clock: Callable[[], float] = time.time,
                 slots: int | None = None, kill_grace: float = 10.0, periodic_interval: float = 60.0) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir = state_dir
        self._clock = clock
        self._store = JobStore(state_dir / "queue.sqlite3")
        self._spool = Spool(state_dir / "spool")
        self._spool.preen(lambda cluster, proc: (cluster, proc) in self._store)
        self._execute = state_dir / "execute"
        self._execute.mkdir(exist_ok=True)
        self._info = BackendInfo(
            name="local",
            version=f"$CondorVersion: {INTERFACE_VERSION} {time.strftime('%b %d %Y')} "
                    f"BuildID: birdbath-gateway-{__version__} $",
            platform=f"$CondorPlatform: {platform.machine().upper()}-{platform.system()} $",
            schedd_name=schedd_name or socket.getfqdn(),
        )
        self.options = ExecutorOptions(slots=os.cpu_count() or 1 if slots is None else slots, kill_grace=kill_grace,
                                       periodic_interval=periodic_interval)
        self._machine = machine_ad(self.options.slots, state_dir, self._info.version)
        self._active: set[JobKey] = set()  # jobs whose process is (or may be) running
        self._listener: Callable[[dict[JobKey, tuple[JobStatus, str]]], None] | None = None
        self._executor: Executor | None = None

    def info(self) -> BackendInfo:
        return self._info

    # -- running inside the gateway ---------------------------------------------------------------------
    def start(self, reactor: Any, call: Callable[..., Any]) -> None:
        """Start the executor in the gateway's reactor (``call`` runs a function on the backend's thread)."""
        self._executor = Executor(reactor, call, self, self.options)
        self._listener = lambda changes: reactor.callFromThread(self._executor.changed, changes)
        self._executor.start()

    async def stop(self) -> None:
        if self._executor is not None:
            await self._executor.stop()

    def close(self) -> None:
        self._store.close()

    # -- transactions -------------------------------------------------------------------------------
    def begin(self) -> LocalTransaction:
        return LocalTransaction()

    def commit(self, txn: LocalTransaction) -> None:
        self._check_open(txn)
        now = self._now()
        ads: dict[JobKey, classad2.ClassAd] = {}
        events: list[tuple[JobKey, Event]] = []
        host = f"<127.0.0.1:0?alias={self._info.schedd_name}>"
        for key, ad in txn.new_jobs.items():
            if ad is None:
                self._spool.discard(*key)  # a proc that never got a job ad is not a job
                continue
            ads[key] = self._enqueue(key, ad, now)
            self._spool.sync(*key)
            events.append((key, lambda user_log: user_log.submitted(host)))
        for key, updates in txn.updates.items():
            base = ads[key] if key in ads else self._store.get(key)
            if base is not None:
                ads[key] = updated(base, updates)
        self._write(ads, events + txn.events)
        txn.open = False

    def abort(self, txn: LocalTransaction) -> None:
        if not txn.open:
            return
        txn.open = False
        for key in txn.new_jobs:
            self._spool.discard(*key)

    # -- building jobs ------------------------------------------------------------------------------
    def new_cluster(self, txn: LocalTransaction) -> int:
        self._check_open(txn)
        cluster = self._store.next_cluster_id()
        txn.next_proc[cluster] = 0
        return cluster

    def new_proc(self, txn: LocalTransaction, cluster: int) -> int:
        self._check_open(txn)
        if cluster not in txn.next_proc:
            raise BackendError(f"cluster {cluster} was not created in this transaction")
        proc = txn.next_proc[cluster]
        txn.next_proc[cluster] = proc + 1
        self._spool.create(cluster, proc)
        txn.new_jobs[(cluster, proc)] = None
        return proc

    def spool_directory(self, cluster: int, proc: int) -> str:
        return str(self._spool.directory(cluster, proc))

    def submit(self, txn: LocalTransaction, cluster: int, proc: int, ad: classad2.ClassAd) -> None:
        self._new_job(txn, cluster, proc)
        for name, expected in (("ClusterId", cluster), ("ProcId", proc)):
            if name in ad and ad.eval(name) != expected:
                raise BackendError(f"{name} must be {expected}, the id of this job")
        txn.new_jobs[(cluster, proc)] = updated(ad, {})

    def _enqueue(self, key: JobKey, ad: classad2.ClassAd, now: int) -> classad2.ClassAd:
        """Fill in what a schedd sets when a job enters the queue."""
        cluster, proc = key
        ad["ClusterId"] = cluster
        ad["ProcId"] = proc
        ad["QDate"] = now
        if ad.get("JobStatus") not in (JobStatus.IDLE, JobStatus.HELD):
            ad["JobStatus"] = int(JobStatus.IDLE)
        ad["EnteredCurrentStatus"] = now
        ad["GlobalJobId"] = f"{self._info.schedd_name}#{cluster}.{proc}#{now}"
        defaults: dict[str, object] = {
            "JobUniverse": int(Universe.VANILLA), "JobPrio": 0, "NumJobStarts": 0, "NumRestarts": 0,
            "CompletionDate": 0, "RemoteWallClockTime": 0.0, "RemoteUserCpu": 0.0, "RemoteSysCpu": 0.0,
            "Owner": getpass.getuser(),
        }
        for name, value in defaults.items():
            if name not in ad:
                ad[name] = value
        if "User" not in ad and isinstance(ad.get("Owner"), str):
            ad["User"] = f"{ad['Owner']}@{self._info.schedd_name}"
        return ad

    # -- files ----------------------------------------------------------------------------------------
    def stage_file(self, txn: LocalTransaction, cluster: int, proc: int, name: str) -> None:
        self._new_job(txn, cluster, proc)
        self._spool.stage(cluster, proc, name)

    def write_file(self, txn: LocalTransaction, cluster: int, proc: int, name: str, offset: int,
                   data: bytes) -> None:
        self._new_job(txn, cluster, proc)
        self._spool.write(cluster, proc, name, offset, data)

    def file_md5(self, txn: LocalTransaction, cluster: int, proc: int, name: str) -> str:
        self._new_job(txn, cluster, proc)
        return self._spool.md5(cluster, proc, name)

    def list_files(self, txn: LocalTransaction | None, cluster: int, proc: int) -> Sequence[FileInfo]:
        return self._spool.list(cluster, proc)

    def read_file(self, txn: LocalTransaction | None, cluster: int, proc: int, name: str, offset: int,
                  length: int) -> bytes:
        return self._spool.read(cluster, proc, name, offset, length)

    # -- queue ----------------------------------------------------------------------------------------
    def query(self, constraint: classad2.ExprTree | None,
              projection: Sequence[str] | None = None) -> list[classad2.ClassAd]:
        found = [ad for _, ad in self._store.ads() if matches(constraint, ad)]
        if projection:
            return [_projected(ad, projection) for ad in found]
        return found

    def history(self, constraint: classad2.ExprTree | None, limit: int | None = None) -> list[classad2.ClassAd]:
        """Jobs that left the queue (completed or removed), newest first."""
        found = []
        for ad in self._store.history():
            if matches(constraint, ad):
                found.append(ad)
                if limit is not None and len(found) >= limit:
                    break
        return found

    def get_job(self, cluster: int, proc: int) -> classad2.ClassAd | None:
        return self._store.get((cluster, proc))

    def act(self, txn: LocalTransaction | None, action: JobAction, cluster: int, proc: int | None,
            reason: str | None, *, system: bool = False) -> int:
        own = txn is None
        txn = txn or self.begin()
        self._check_open(txn)
        keys = self._cluster_keys(txn, cluster) if proc is None else [(cluster, proc)]
        changed = 0
        for key in keys:
            current = self._view(txn, key)
            if current is None:
                raise UnknownJob(f"job {key[0]}.{key[1]} is not in the queue")
            try:
                transition = lifecycle.user_action(action, current, reason, system, self._now())
            except BackendError:
                if proc is None:
                    continue  # a cluster removal skips the jobs that are already gone
                raise
            self._record(txn, key, transition)
            changed += 1
        if own:
            self.commit(txn)
        return changed

    def set_attribute(self, txn: LocalTransaction | None, cluster: int, proc: int, name: str,
                      value: str | classad2.ExprTree) -> None:
        own = txn is None
        txn = txn or self.begin()
        self._check_open(txn)
        if self._view(txn, (cluster, proc)) is None:
            raise UnknownJob(f"job {cluster}.{proc} is not in the queue")
        self._record(txn, (cluster, proc), Transition({name: value}))
        if own:
            self.commit(txn)

    def reschedule(self) -> None:
        if self._listener is not None:
            self._listener({})

    # -- the executor's side (called on the backend thread) ------------------------------------------
    def start_jobs(self, free_cpus: int, running: set[JobKey]) -> list[Launch]:
        """Choose idle jobs that match this machine and fit the free slots, in priority order, prepare their
        execute directories and mark them running; jobs that cannot run are put on hold."""
        now = self._now()
        ads: dict[JobKey, classad2.ClassAd] = {}
        events: list[tuple[JobKey, Event]] = []
        launches: list[Launch] = []
        for key, ad in self._idle_jobs(running):
            cpus = jobspec.request_cpus(ad) if jobspec.uses_slot(ad) else 0
            if cpus > free_cpus or not self._matches_machine(ad):
                continue
            directory = ExecuteDir.of(self._execute, *key)
            try:
                plan = jobspec.plan(ad, directory.sandbox, dict(os.environ))
                sandbox.prepare(plan, directory, ad, self._machine)
            except jobspec.BadJob as bad:
                directory.remove()
                transition = lifecycle.hold(ad, bad.reason, bad.code, now)
            else:
                transition = lifecycle.started(ad, now, self._info.schedd_name)
                launches.append(Launch(key, directory, cpus))
                self._active.add(key)
                free_cpus -= cpus
            ads[key] = updated(ad, transition.updates)
            events.extend((key, event) for event in transition.events)
        self._write(ads, events, notify=False)
        return launches

    def finish_job(self, key: JobKey, interruption: str | None = None) -> None:
        """Record the end of a run: how it ended (from the launcher's result file), the output it made, and
        what OnExitHold/OnExitRemove decide; a run the gateway ended (``interruption``) goes back to idle."""
        self._active.discard(key)
        directory = ExecuteDir.of(self._execute, *key)
        ad = self._store.get(key)
        if ad is None:
            directory.remove()
            return
        result = _run_result(directory.result(), ad, self._now())
        transition = self._ended(ad, result, directory, interruption)
        self._write({key: updated(ad, transition.updates)}, [(key, event) for event in transition.events])
        directory.remove()

    def _ended(self, ad: classad2.ClassAd, result: RunResult, directory: ExecuteDir,
               interruption: str | None) -> Transition:
        now = self._now()
        if status_of(ad) is not JobStatus.RUNNING:  # held or removed meanwhile: we stopped it on purpose
            return Transition(lifecycle.run_accounting(ad, result))
        if interruption is not None or directory.result() is None:
            return lifecycle.interrupted(ad, result, interruption or "The job's launcher was killed", now)
        try:
            sandbox.collect(directory)
        except jobspec.BadJob as bad:
            ended = lifecycle.exited(ad, result, now)
            if status_of(updated(ad, ended.updates)) is JobStatus.HELD:
                return ended
            held = lifecycle.hold(updated(ad, ended.updates), bad.reason, bad.code, now)
            return Transition(ended.updates | held.updates, ended.events + held.events)
        return lifecycle.exited(ad, result, now)

    def recover(self) -> None:
        """At start-up: jobs the queue says are running were cut off by a crash.  A run that finished while
        the gateway was down is recorded as finished (never run twice); any other is stopped and requeued."""
        for key, ad in self._store.ads():
            directory = ExecuteDir.of(self._execute, *key)
            if status_of(ad) is JobStatus.RUNNING:
                if directory.result() is None:
                    _kill_leftover(directory)
                    self.finish_job(key, "The gateway restarted while the job was running; it will run again")
                else:
                    self.finish_job(key)
            elif directory.root.exists():
                _kill_leftover(directory)
                directory.remove()

    def evaluate_periodic(self) -> None:
        """PeriodicHold/Remove/Release, and finished jobs whose LeaveJobInQueue turned false."""
        now = self._now()
        ads: dict[JobKey, classad2.ClassAd] = {}
        events: list[tuple[JobKey, Event]] = []
        for key, ad in self._store.ads():
            transition = lifecycle.periodic(ad, now)
            if transition is not None:
                ads[key] = updated(ad, transition.updates)
                events.extend((key, event) for event in transition.events)
            elif key not in self._active and lifecycle.leaves_queue(ad):
                ads[key] = ad
        self._write(ads, events)

    # -- writing queue changes ------------------------------------------------------------------------
    def _write(self, ads: dict[JobKey, classad2.ClassAd], events: Iterable[tuple[JobKey, Event]],
               notify: bool = True) -> None:
        """Store changed ads durably (finished jobs go to the history), then write their user-log events and
        tell the executor."""
        if not ads:
            return
        leaving = [key for key, ad in ads.items() if key not in self._active and lifecycle.leaves_queue(ad)]
        self._store.apply(ads, leaving)
        for key, event in events:
            self._log_event(ads.get(key), key, event)
        for key in leaving:
            self._spool.discard(*key)
        if notify and self._listener is not None:
            self._listener({key: (status_of(ad), _kill_signal(ad)) for key, ad in ads.items()})

    def _log_event(self, ad: classad2.ClassAd | None, key: JobKey, event: Event) -> None:
        path = log_path(ad) if ad is not None else None
        if path is None:
            return
        try:
            event(UserLog(path, *key, clock=self._clock))
        except OSError as exc:
            log.warn("cannot write to the user log {path} of job {job}: {error}", path=path, job=key, error=exc)

    # -- helpers ------------------------------------------------------------------------------------
    def _now(self) -> int:
        return int(self._clock())

    def _idle_jobs(self, running: set[JobKey]) -> list[tuple[JobKey, classad2.ClassAd]]:
        idle = [(key, ad) for key, ad in self._store.ads()
                if key not in running and key not in self._active and status_of(ad) is JobStatus.IDLE]
        return sorted(idle, key=lambda item: (-_number(item[1], "JobPrio"), _number(item[1], "QDate"), item[0]))

    def _matches_machine(self, ad: classad2.ClassAd) -> bool:
        if "Requirements" not in ad:
            return True
        try:
            return bool(ad.symmetricMatch(self._machine))
        except classad2.ClassAdException:
            return False

    @staticmethod
    def _check_open(txn: LocalTransaction) -> None:
        if not txn.open:
            raise BackendError("the transaction is no longer open")

    def _new_job(self, txn: LocalTransaction, cluster: int, proc: int) -> None:
        self._check_open(txn)
        if (cluster, proc) not in txn.new_jobs:
            raise UnknownJob(f"job {cluster}.{proc} was not created in this transaction")

    def _cluster_keys(self, txn: LocalTransaction, cluster: int) -> list[JobKey]:
        pending = [key for key, ad in txn.new_jobs.items() if key[0] == cluster and ad is not None]
        return sorted(set(self._store.keys_in_cluster(cluster)) | set(pending))

    def _view(self, txn: LocalTransaction, key: JobKey) -> classad2.ClassAd | None:
        """A job as this transaction sees it: committed or created here, with the transaction's changes."""
        base = txn.new_jobs.get(key)
        if base is None:
            base = self._store.get(key)
        if base is None:
            return None
        return updated(base, txn.updates.get(key, {}))

    @staticmethod
    def _record(txn: LocalTransaction, key: JobKey, transition: Transition) -> None:
        if txn.new_jobs.get(key) is not None:
            txn.new_jobs[key] = updated(txn.new_jobs[key], transition.updates)
        else:
            txn.updates.setdefault(key, {}).update(transition.updates)
        txn.events.extend((key, event) for event in transition.events)


def _number(ad: classad2.ClassAd, name: str) -> float:
    value = jobspec.value(ad, name, 0)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _kill_signal(ad: classad2.ClassAd) -> str:
    """The signal that stops a job for its new state: RemoveKillSig/HoldKillSig, else KillSig, else SIGTERM."""
    status = status_of(ad)
    specific = {JobStatus.REMOVED: "RemoveKillSig", JobStatus.HELD: "HoldKillSig"}.get(status)
    for name in (specific, "KillSig"):
        if name:
            value = jobspec.string(ad, name)
            if value:
                return value
    return "SIGTERM"


def _run_result(result: dict | None, ad: classad2.ClassAd, now: int) -> RunResult:
    if result is None:  # the launcher itself was killed: the job died with it
        started = _number(ad, "JobCurrentStartDate") or now
        return RunResult(exit_code=None, signal=int(signal.SIGKILL), wall_seconds=max(0.0, now - started))
    return RunResult(exit_code=result.get("exit_code"), signal=result.get("signal"),
                     user_cpu=float(result.get("user_cpu", 0.0)), sys_cpu=float(result.get("sys_cpu", 0.0)),
                     max_rss_kb=int(result.get("max_rss_kb", 0)), wall_seconds=float(result.get("wall_seconds", 0.0)),
                     exec_error=result.get("exec_error"))


def _kill_leftover(directory: ExecuteDir) -> None:
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


def _projected(ad: classad2.ClassAd, projection: Sequence[str]) -> classad2.ClassAd:
    out = classad2.ClassAd()
    for name in projection:
        if name in ad:
            out[name] = ad.lookup(name)
    return out
