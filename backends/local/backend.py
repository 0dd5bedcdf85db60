"""The ``local`` backend: a schedd that keeps its queue in SQLite, its spool under the state directory, and runs
jobs on this machine.

Transactions collect their changes in memory and write them in one durable SQLite transaction at commit, so an
uncommitted job is invisible to every query and an aborted or expired one leaves nothing behind.  Every queue
change goes through :meth:`LocalBackend._write`, which also moves finished jobs into the history, writes the
user-log events and tells the executor.
"""

from __future__ import annotations

import getpass
import json
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
from gateway.core.classads import matches, projected
from gateway.core.jobs import JobAction, JobStatus, Universe

from . import joblog, jobspec, lifecycle, sandbox
from .dag import dagman, language
from .dag.language import Dag, DagSyntaxError
from .dag.submit import SubmitError, node_ads
from .executor import Executor, ExecutorOptions
from .lifecycle import Event, RunResult, Transition, Updates, status_of, updated
from .machine import machine_ad
from .sandbox import ExecuteDir
from backends.spool import Spool
from .store import JobKey, JobStore
from .userlog import UserLog, log_path

log = Logger()

#: states in which a job has a process (a suspended one is stopped, not gone)
ACTIVE = (JobStatus.RUNNING, JobStatus.SUSPENDED)

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
    """A job the executor should start now: a process (its execute directory holds the launcher's spec) or, for
    a DAGMan job, a DAG run inside the gateway."""

    key: JobKey
    directory: ExecuteDir
    cpus: int
    dag: bool = False


@dataclass
class DagSetup:
    """What a DAG run needs to start, read on the backend thread; ``error`` when the DAG cannot run at all."""

    log_path: Path
    dag: Dag | None = None
    options: dagman.DagmanOptions | None = None
    saved: dict[str, dict] = field(default_factory=dict)
    rescue: Path | None = None
    rescued: int = 0
    ignored: tuple[str, ...] = ()
    error: str | None = None


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
        self._listener: Callable[[dict[JobKey, classad2.ClassAd]], None] | None = None
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
            return [projected(ad, projection) for ad in found]
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
                launch = self._launch(key, ad, directory, cpus)
            except jobspec.BadJob as bad:
                directory.remove()
                transition = lifecycle.hold(ad, bad.reason, bad.code, now)
            else:
                transition = lifecycle.started(ad, now, self._info.schedd_name)
                launches.append(launch)
                self._active.add(key)
                free_cpus -= launch.cpus
            ads[key] = updated(ad, transition.updates)
            events.extend((key, event) for event in transition.events)
        self._write(ads, events, notify=False)
        return launches

    def _launch(self, key: JobKey, ad: classad2.ClassAd, directory: ExecuteDir, cpus: int) -> Launch:
        """A DAGMan job is run by the built-in DAG runner; any other job as a process from its execute directory."""
        if dagman.is_dagman(ad):
            return Launch(key, directory, 0, dag=True)
        sandbox.prepare(jobspec.plan(ad, directory.sandbox, dict(os.environ)), directory, ad, self._machine)
        return Launch(key, directory, cpus)

    def finish_job(self, key: JobKey, interruption: str | None = None) -> None:
        """Record the end of a run: how it ended (from the launcher's result file), the output it made, and
        what OnExitHold/OnExitRemove decide; a run the gateway ended (``interruption``) goes back to idle."""
        self._active.discard(key)
        directory = ExecuteDir.of(self._execute, *key)
        ad = self._store.get(key)
        if ad is None:
            directory.remove()
            return
        if interruption is None and directory.result() is None:  # the launcher died with the job
            interruption = "The job's launcher was killed"
        result = _run_result(directory.result(), ad, self._now())
        transition = self._ended(ad, result, directory, interruption)
        joblog.run_ended(key, ad, result, interruption)
        self._write({key: updated(ad, transition.updates)}, [(key, event) for event in transition.events])
        directory.remove()

    def _ended(self, ad: classad2.ClassAd, result: RunResult, directory: ExecuteDir,
               interruption: str | None) -> Transition:
        now = self._now()
        if status_of(ad) not in ACTIVE:  # held or removed meanwhile: we stopped it on purpose
            return Transition(lifecycle.run_accounting(ad, result))
        if interruption is not None:  # (finish_job names a launcher that left no result as one)
            return lifecycle.interrupted(ad, result, interruption, now)
        try:
            sandbox.collect(directory)
        except jobspec.BadJob as bad:
            ended = lifecycle.exited(ad, result, now)
            if status_of(updated(ad, ended.updates)) is JobStatus.HELD:
                return ended
            held = lifecycle.hold(updated(ad, ended.updates), bad.reason, bad.code, now)
            return Transition(ended.updates | held.updates, ended.events + held.events)
        return lifecycle.exited(ad, result, now)

    # -- the DAG runner's side (called on the backend thread) -------------------------------------------
    def dag_setup(self, key: JobKey) -> DagSetup:
        ad = self._store.get(key)
        iwd = Path(jobspec.string(ad, "Iwd") or self.state_dir) if ad is not None else self.state_dir
        fallback = DagSetup(log_path=iwd / f"dagman-{key[0]}.dagman.out")
        if ad is None:
            return fallback
        try:
            options = dagman.options(ad)
        except dagman.DagError as exc:
            fallback.error = str(exc)
            return fallback
        setup = DagSetup(log_path=dagman.dagman_log_path(ad, options.dag), options=options, ignored=options.ignored)
        for name in ("Out", "Err"):
            target = jobspec.string(ad, name)
            if target and target != jobspec.NULL_FILE:
                (iwd / target).touch()
        saved = self._store.dag_state(key[0])
        try:
            setup.dag = language.read(options.dag)
            if saved:
                setup.saved = json.loads(saved)
            else:
                setup.rescue = dagman.rescue_to_use(options)
                if setup.rescue is not None:
                    setup.rescued = language.apply_done(setup.dag, setup.rescue)
        except (DagSyntaxError, dagman.DagError) as exc:
            setup.error = str(exc)
        if options.lock_file is not None:
            options.lock_file.write_text(f"{os.getpid()}\n")
        return setup

    def submit_node(self, dag_key: JobKey, dag: Dag, name: str, retry: int) -> tuple[int, int]:
        """Submit a node's job(s) into the queue as one cluster; returns (cluster, number of procs)."""
        dag_ad = self._store.get(dag_key)
        node = dag.nodes[name]
        directory = dag.directory_of(node)
        macros = {**node.variables, "JOB": name, "DAG_NODE_NAME": name, "RETRY": str(retry)}
        txn = self.begin()
        cluster = self.new_cluster(txn)
        try:
            ads = node_ads(_under(directory, node.submit_file), directory, macros, cluster)
            for job in ads:
                proc = self.new_proc(txn, cluster)
                job["ProcId"] = proc
                job["DAGManJobId"] = dag_key[0]
                job["DAGNodeName"] = name
                job["DAGParentNodeNames"] = ",".join(node.parents)
                job["DAGNodeRetry"] = retry
                job["UserLog"] = str(dag.path.with_name(dag.path.name + ".nodes.log"))
                for inherited in ("Owner", "Submission"):
                    if dag_ad is not None and isinstance(dag_ad.get(inherited), str):
                        job[inherited] = dag_ad[inherited]
                self.submit(txn, cluster, proc, job)
        except (SubmitError, BackendError) as exc:
            self.abort(txn)
            raise SubmitError(f"node {name}: {exc}") from None
        self.commit(txn)
        return cluster, len(ads)

    def node_job_states(self, cluster: int) -> tuple[int, dict[int, classad2.ClassAd]]:
        """How many procs a node job has, and the final ads of those that finished (queue or history)."""
        finished: dict[int, classad2.ClassAd] = {}
        procs = 0
        for key in self._store.keys_in_cluster(cluster):
            procs += 1
            ad = self._store.get(key)
            if ad is not None and status_of(ad) in (JobStatus.COMPLETED, JobStatus.REMOVED):
                finished[key[1]] = ad
        for ad in self.history(classad2.ExprTree(f"ClusterId == {cluster}")):
            procs += 1
            finished[int(ad.get("ProcId", 0))] = ad
        return procs, finished

    def remove_node_jobs(self, dag_cluster: int, reason: str) -> int:
        """Remove every queued job of a DAG (what OtherJobRemoveRequirements does for condor_dagman)."""
        txn = self.begin()
        removed = 0
        for key, ad in self._store.ads():
            if ad.get("DAGManJobId") == dag_cluster and status_of(ad) not in (JobStatus.REMOVED, JobStatus.COMPLETED):
                self._record(txn, key, lifecycle.remove(ad, reason, self._now()))
                removed += 1
        self.commit(txn)
        return removed

    def save_dag_state(self, dag_cluster: int, state: str) -> None:
        self._store.save_dag_state(dag_cluster, state)

    def clear_dag_state(self, dag_cluster: int) -> None:
        self._store.save_dag_state(dag_cluster, None)

    def write_rescue(self, dag: Dag, done: list[str], failed: list[str]) -> Path:
        return dagman.write_rescue(dag, done, failed)

    def finish_dag(self, key: JobKey, exit_code: int | None, interruption: str | None = None) -> None:
        """Record the end of a DAG run: its exit code, or (``None``) that it only stopped."""
        self._active.discard(key)
        ad = self._store.get(key)
        if ad is None:
            return
        now = self._now()
        started = _number(ad, "JobCurrentStartDate") or now
        result = RunResult(exit_code=exit_code, signal=None, wall_seconds=max(0.0, now - started))
        stopped = None if exit_code is not None else interruption or "The DAG runner stopped"
        if status_of(ad) is not JobStatus.RUNNING:
            transition = Transition(lifecycle.run_accounting(ad, result))
        elif stopped is not None:
            transition = lifecycle.interrupted(ad, result, stopped, now)
        else:
            transition = lifecycle.exited(ad, result, now)
        joblog.run_ended(key, ad, result, stopped)
        try:
            options = dagman.options(ad)
            if options.lock_file is not None and exit_code is not None:
                options.lock_file.unlink(missing_ok=True)
        except (dagman.DagError, OSError):
            pass
        self._write({key: updated(ad, transition.updates)}, [(key, event) for event in transition.events])

    def recover(self) -> None:
        """At start-up: jobs the queue says are running were cut off by a crash.  A run that finished while
        the gateway was down is recorded as finished (never run twice); any other is stopped and requeued."""
        for key, ad in self._store.ads():
            directory = ExecuteDir.of(self._execute, *key)
            if status_of(ad) in ACTIVE:
                joblog.recovered(key, ad, finished=directory.result() is not None)
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
        before = {key: joblog.status_before(self._store.get(key)) for key in ads}
        self._store.apply(ads, leaving)
        for key, ad in ads.items():
            joblog.status_changed(key, before[key], ad)
        for key, event in events:
            self._log_event(ads.get(key), key, event)
        for key in leaving:
            self._spool.discard(*key)
        if notify and self._listener is not None:
            self._listener(dict(ads))

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


def _under(base: Path, name: str) -> Path:
    return Path(name) if os.path.isabs(name) else base / name


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
