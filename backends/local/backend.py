"""The ``local`` backend: a schedd that keeps its queue in SQLite, its spool under the state directory, and runs
jobs on this machine.

This module only assembles the parts, each in its own module: the queue (``queue.py`` over ``store.py``), the
scheduler (``scheduler.py``, with the rules of ``lifecycle.py``), the executor in the reactor (``executor.py``,
``launcher.py``, ``sandbox.py``), the DAG runner (``dag/``), and crash recovery (``recovery.py``).
"""

from __future__ import annotations

import functools
import os
import platform
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import classad2
from twisted.logger import Logger

from backends.interface import (
    BackendError,
    BackendInfo,
    Batch,
    Capability,
    Changes,
    FileInfo,
    JobKey,
    UnknownJob,
)
from backends.spool import Spool
from jobmodel import __version__
from jobmodel.classads import parse_constraint
from jobmodel.figures import BackendFigures, ExecutionFigures
from jobmodel.pool import CLASSAD_LIFETIME, AdType

from . import cgroups, jobtools, topdir
from .advertised import AdvertisedAds
from .chirp import ChirpService, QueueJobs
from .dag.nodes import NodeJobs
from .executor import Executor, ExecutorOptions
from .family import ControlConfig
from .launchers import ForkServer
from .machine import machine_ad
from .owners import PASSWD_CACHE_REFRESH, Accounts
from .pool import LocalPool, PoolFacts
from .queue import JobQueue
from .scheduler import Scheduler
from .store import JobStore
from .trash import Trash

log = Logger()
T = TypeVar("T")

#: the HTCondor release whose SOAP interface the gateway reproduces (the last one that had it)
INTERFACE_VERSION = "8.6.13"


class LocalBackend:
    #: worker threads: commits run one at a time (``serially``), but as many as this can wait for their writes to
    #: reach the disk together, so that commits made at once share one sync (group commit); staging and reading
    #: files run beside them
    threads = 8
    call_timeout = None  # a local call always answers
    capabilities = frozenset({Capability.SERVICES, Capability.HISTORY, Capability.POOL, Capability.FIGURES,
                              Capability.CHANGES})

    """Options (``[backends.local]``): ``schedd_name``; ``slots``, ``kill_grace``, ``periodic_interval`` for running
    jobs; ``uid_domain``, the domain of every job's ``User`` (``Owner@uid_domain``, default the schedd's name);
    ``denied_owners``, owners whose jobs never run here (held when they would start), e.g. ``["root"]``;
    HTCondor's ``passwd_cache_refresh``, seconds an owner's account is used once looked up (a change to
    ``/etc/passwd`` or ``/etc/group`` drops it at once);
    ``classad_lifetime`` and ``max_advertised_ads`` for the ads others advertise to its collector (``pool.py``);
    HTCondor's ``execute``, where running jobs' directories go (default ``<state-dir>/execute``: a faster file
    system there speeds short jobs up, each of which makes and removes a few directories and files in it; on
    ext2/3/4 the gateway marks it as the top of unrelated directories, ``topdir.py``);
    HTCondor's ``starter_update_interval``, ``cgroup_memory_limit_policy`` and ``base_cgroup`` for keeping running
    jobs under control (``family.py``, ``cgroups.py``).

    When the gateway runs as root, every job runs as its owner's local account and every file its ad names is
    opened with that account's rights (``owners.py``); otherwise everything runs as the gateway's user."""

    def __init__(self, state_dir: Path, *, schedd_name: str | None = None, clock: Callable[[], float] = time.time,
                 slots: int | None = None, kill_grace: float = 10.0, periodic_interval: float = 60.0,
                 uid_domain: str | None = None, denied_owners: Sequence[str] = (),
                 classad_lifetime: int = CLASSAD_LIFETIME, max_advertised_ads: int = 10000,
                 starter_update_interval: float = 300.0, cgroup_memory_limit_policy: str = cgroups.MemoryPolicy.HARD,
                 base_cgroup: str = "htcondor", execute: str | None = None,
                 passwd_cache_refresh: float = PASSWD_CACHE_REFRESH) -> None:
        if isinstance(denied_owners, str) or not all(isinstance(owner, str) for owner in denied_owners):
            raise ValueError(f"denied_owners must be a list of owner names, not {denied_owners!r}")
        if not isinstance(passwd_cache_refresh, (int, float)) or isinstance(passwd_cache_refresh, bool) \
                or passwd_cache_refresh < 0:
            raise ValueError(f"passwd_cache_refresh must be a number of seconds >= 0, not {passwd_cache_refresh!r}")
        control = _control_config(starter_update_interval, cgroup_memory_limit_policy, base_cgroup, kill_grace)
        state_dir.mkdir(parents=True, exist_ok=True)
        execute_root = _execute_root(state_dir, execute)
        # first: a crash on a full disk may have left the space the rest needs there; one trash per file system
        # (a directory is moved into the trash: a rename cannot cross file systems)
        trash = Trash(state_dir / "trash", *(() if _same_file_system(execute_root, state_dir)
                                             else (execute_root / ".trash",)))
        self.state_dir = state_dir
        self.accounts = Accounts(denied_owners, cache_refresh=float(passwd_cache_refresh))
        self._info = BackendInfo(
            name="local",
            version=f"$CondorVersion: {INTERFACE_VERSION} {time.strftime('%b %d %Y')} "
                    f"BuildID: birdbath-gateway-{__version__} $",
            platform=f"$CondorPlatform: {platform.machine().upper()}-{platform.system()} $",
            schedd_name=schedd_name or socket.getfqdn(),
            pool=socket.getfqdn(),  # the pool is this machine: its collector is the gateway
        )
        store = JobStore(state_dir / "queue.sqlite3")
        spool = Spool(state_dir / "spool")
        spool.preen(lambda cluster, proc: (cluster, proc) in store)
        self._queue = JobQueue(store, spool, self._info.schedd_name, clock, self.accounts, uid_domain,
                               trash)
        jobtools.install(jobtools.libexec(execute_root), self._info.version, self._info.platform)
        if self.accounts.switching:
            _reachable_by_jobs(state_dir, execute_root, spool.root)
        self.options = ExecutorOptions(slots=os.cpu_count() or 1 if slots is None else slots, kill_grace=kill_grace,
                                       periodic_interval=periodic_interval, update_interval=starter_update_interval)
        machine = machine_ad(self.options.slots, state_dir, self._info.version, self._queue.uid_domain)
        self._scheduler = Scheduler(self._queue, execute_root, machine, control)
        self._control = control
        self._pool = LocalPool(PoolFacts(self._info, machine, self.options.slots, self._queue.uid_domain, int(clock())),
                               lambda: self.query(None), clock,
                               AdvertisedAds(clock, classad_lifetime, max_advertised_ads))
        self._dags = NodeJobs(self._queue, state_dir, control)
        self._executor: Executor | None = None
        self._one_at_a_time = threading.RLock()

    def serially(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``function`` alone (nothing else changes the queue meanwhile: the backend's code is written for one
        thread), then, outside, wait until what it wrote is on disk: the caller hears of its change only once it is
        durable, and the next call does not wait for this one's sync."""
        store = self._queue.store
        with self._one_at_a_time:
            if self._queue.within_synced_work:  # called from within a call (a method of ours): part of it
                return function(*args, **kwargs)
            before = store.written
            try:
                with self._queue.synced_by_caller() as after_sync:
                    result = function(*args, **kwargs)
            finally:
                after = store.written
        if after > before:
            try:
                store.durable(after)
            except OSError as exc:
                raise BackendError(f"the job queue could not be synced to disk: {exc}") from None
        if after_sync:
            with self._one_at_a_time:
                for action in after_sync:
                    action()
        return result

    def info(self) -> BackendInfo:
        return self._info

    # -- running inside the gateway ---------------------------------------------------------------------
    def start(self, reactor: Any, call: Callable[..., Any]) -> None:
        """Start the executor in the gateway's reactor (``call`` runs a function on the backend's thread)."""
        serial = functools.partial(call, self.serially)  # calls from the reactor run one at a time, as the clients'
        executor = Executor(reactor, serial, self._scheduler, self._dags, self.options, ForkServer(reactor),
                            ChirpService(reactor, serial, QueueJobs(self._queue)))
        self._executor = executor
        store = self._queue.store
        self._queue.listener = lambda changes: reactor.callFromThread(executor.changed, changes, store.written)
        executor.start()

    async def stop(self, fast: bool = False) -> None:
        if self._executor is not None:
            await self._executor.stop(fast)

    def close(self) -> None:
        self._queue.store.close()
        if self._control.hierarchy is not None:
            self._control.hierarchy.close()
        if self._queue.trash is not None:
            self._queue.trash.close()

    # -- the backend interface, answered by the queue ----------------------------------------------------
    def reserve_clusters(self) -> range:
        return self._queue.reserve_clusters()

    def release_clusters(self, unused: range) -> None:
        self._queue.store.release_clusters(unused)

    def commit(self, batch: Batch) -> None:
        self.serially(self._queue.commit, batch)

    def check_changes(self, batch: Batch) -> None:
        self._queue.check_changes(batch)

    def spool_directory(self, cluster: int, proc: int) -> str:
        return str(self._queue.spool.directory(cluster, proc))

    def stage_file(self, cluster: int, proc: int, name: str) -> None:
        self._queue.stage_file(cluster, proc, name)

    def write_file(self, cluster: int, proc: int, name: str, offset: int, data: bytes) -> None:
        self._queue.write_file(cluster, proc, name, offset, data)

    def file_md5(self, cluster: int, proc: int, name: str) -> str:
        return self._queue.file_md5(cluster, proc, name)

    def discard(self, jobs: Sequence[JobKey]) -> None:
        self._queue.discard_jobs(jobs)

    def list_files(self, cluster: int, proc: int) -> Sequence[FileInfo]:
        return self._queue.list_files(cluster, proc)

    def read_file(self, cluster: int, proc: int, name: str, offset: int, length: int) -> bytes:
        return self._queue.read_file(cluster, proc, name, offset, length)

    def read_job_file(self, cluster: int, proc: int, path: str, offset: int, length: int) -> tuple[int, bytes]:
        if not os.path.isabs(path):
            return self._queue.spool.read_job_file(cluster, proc, path, offset, length)
        ad = self._queue.get_job(cluster, proc)
        if ad is None:
            found = self._queue.history(parse_constraint(f"ClusterId == {cluster} && ProcId == {proc}"), 1)
            ad = found[0] if found else None
        if ad is None:
            raise UnknownJob(f"job {cluster}.{proc} is not in the queue nor in the history")
        return self._queue.read_owner_file(ad, path, offset, length)

    def query(self, constraint: classad2.ExprTree | None, projection: Sequence[str] | None = None, *,
              budget: float | None = None) -> list[classad2.ClassAd]:
        return self._queue.query(constraint, projection, budget=budget)

    def history(self, constraint: classad2.ExprTree | None, limit: int | None = None, *,
                budget: float | None = None) -> list[classad2.ClassAd]:
        return self._queue.history(constraint, limit, budget=budget)

    def get_job(self, cluster: int, proc: int) -> classad2.ClassAd | None:
        return self._queue.get_job(cluster, proc)

    def job_in_memory(self, cluster: int, proc: int) -> classad2.ClassAd | None:
        return self._queue.job_in_memory(cluster, proc)

    def changes_since(self, number: int) -> Changes:
        return self._queue.changes_since(number)

    def watch_changes(self, observer: Callable[[int], None]) -> None:
        self._queue.watch_changes(observer)

    def reschedule(self) -> None:
        self.serially(self._queue.reschedule)

    # -- the pool, as a collector answers it -------------------------------------------------------------------
    def pool_ads(self, ad_type: AdType, constraint: classad2.ExprTree | None, *, budget: float | None = None,
                 contact: str | None = None) -> list[classad2.ClassAd]:
        return self._pool.pool_ads(ad_type, constraint, budget=budget, contact=contact)

    def advertise(self, ad_type: AdType, ad: classad2.ClassAd) -> bool:
        return self._pool.advertise(ad_type, ad)

    # -- the operators' figures ---------------------------------------------------------------------------------
    def figures(self) -> BackendFigures:
        """The queue as the Scheduler ad counts it, and how jobs run (from the query pool: nothing here waits for
        the queue's writes, and what the executor keeps is copied, never locked)."""
        execution = ExecutionFigures(slots=self.options.slots,
                                     unmatchable_idle=self._queue.store.idle.unmatched,
                                     spool_bytes=self._queue.spool.size())
        executor = self._executor
        if executor is not None:
            execution.busy_slots = executor.busy_cpus
            execution.cycles = executor.cycle_times.copy()
            execution.launcher_starts = executor.launcher_starts.copy()
        return BackendFigures(self._pool.queue_figures(), execution)


def _reachable_by_jobs(state_dir: Path, *ours: Path) -> None:
    """Jobs that run as their owners must reach their sandbox and spool: the directories the backend made are
    opened to traversal (not listing by others: each job's own directory is its owner's alone); a state directory
    that others cannot traverse is said in the log, as every job would fail."""
    for directory in ours:
        directory.chmod(0o755)
    blocked = [str(path) for path in (state_dir.resolve(), *state_dir.resolve().parents)
               if not os.stat(path).st_mode & 0o001]
    if blocked:
        log.warn("jobs run as their owners but cannot reach the state directory {state_dir}: {blocked} cannot be "
                 "traversed by other users (chmod o+x)", state_dir=str(state_dir), blocked=", ".join(blocked))


def _execute_root(state_dir: Path, execute: str | None) -> Path:
    """The directory running jobs' directories go in, made if missing.  It must be the gateway's: whoever else could
    write in it could swap a job's directory for one of theirs (HTCondor refuses such an ``EXECUTE`` too); one of
    the gateway's that others may write in is tightened, as the rest of the state directory is."""
    if execute is None:
        root = state_dir / "execute"
    elif isinstance(execute, str) and os.path.isabs(execute):
        root = Path(execute)
    else:
        raise ValueError(f"execute must be an absolute directory path, not {execute!r}")
    try:
        root.mkdir(mode=0o755, parents=True, exist_ok=True)
        status = os.lstat(root)
        if not stat.S_ISDIR(status.st_mode):
            raise ValueError(f"cannot use {root} as the execute directory: it is not a directory")
        if status.st_uid != os.geteuid():
            raise ValueError(f"cannot use {root} as the execute directory: it belongs to uid {status.st_uid}, who "
                             f"could replace the jobs' directories in it (use a directory of the gateway's user)")
        if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            root.chmod(stat.S_IMODE(status.st_mode) & ~(stat.S_IWGRP | stat.S_IWOTH))
    except OSError as exc:
        raise ValueError(f"cannot use {root} as the execute directory: {exc.strerror or exc}") from None
    try:  # (a hint to the file system: the gateway runs the same without it)
        topdir.mark_top(root)
    except OSError as exc:
        log.warn("the execute directory {root} could not be marked as the top of unrelated directories: {error}",
                 root=root, error=exc.strerror or exc)
    return root


def _same_file_system(first: Path, second: Path) -> bool:
    return os.stat(first).st_dev == os.stat(second).st_dev


def _control_config(update_interval: float, policy: str, base_cgroup: str, kill_grace: float) -> ControlConfig:
    """The knobs for keeping jobs under control, checked, and the cgroups this machine gives (logged)."""
    if not isinstance(update_interval, (int, float)) or isinstance(update_interval, bool) or update_interval <= 0:
        raise ValueError(f"starter_update_interval must be a number of seconds > 0, not {update_interval!r}")
    if policy not in cgroups.MemoryPolicy.ALL:
        raise ValueError(f"cgroup_memory_limit_policy must be one of {', '.join(cgroups.MemoryPolicy.ALL)}, "
                         f"not {policy!r}")
    if not isinstance(base_cgroup, str) or ".." in base_cgroup.split("/"):
        raise ValueError(f"base_cgroup must be a cgroup name (\"\" switches cgroups off), not {base_cgroup!r}")
    hierarchy = cgroups.detect(base_cgroup.strip("/"))
    if hierarchy is None:
        log.info("jobs are tracked by their launchers as subreapers (no cgroups: {why}); memory is checked by polling",
                 why="base_cgroup is empty" if not base_cgroup else "not root, or no usable cgroup hierarchy")
    else:
        log.info("jobs run in cgroups: {hierarchy}", hierarchy=hierarchy)
    return ControlConfig(policy, float(update_interval), kill_grace, hierarchy)
