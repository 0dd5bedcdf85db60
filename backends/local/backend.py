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
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import classad2
from twisted.logger import Logger

from backends.interface import (
    BackendError,
    BackendInfo,
    Capability,
    FileInfo,
    UnknownJob,
    WouldBlock,
    answering_at_once,
    immediate,
)
from backends.spool import Spool
from jobmodel import __version__
from jobmodel.classads import parse_constraint
from jobmodel.jobs import JobAction
from jobmodel.pool import CLASSAD_LIFETIME, AdType

from . import jobtools
from .advertised import AdvertisedAds
from .chirp import ChirpService, QueueJobs
from .dag.nodes import NodeJobs
from .executor import Executor, ExecutorOptions
from .launchers import ForkServer
from .machine import machine_ad
from .owners import Accounts
from .pool import LocalPool, PoolFacts
from .queue import JobQueue, LocalTransaction
from .scheduler import Scheduler
from .store import JobStore
from .trash import Trash

log = Logger()
T = TypeVar("T")

#: the HTCondor release whose SOAP interface the gateway reproduces (the last one that had it)
INTERFACE_VERSION = "8.6.13"


def _serial(method: Callable[..., T]) -> Callable[..., T]:
    """An interface method that changes or reads the queue's writable state: run one at a time (see
    :meth:`LocalBackend.serially`)."""

    @functools.wraps(method)
    def serial(self: "LocalBackend", *args: Any, **kwargs: Any) -> T:
        return self.serially(method, self, *args, **kwargs)

    return serial


class LocalBackend:
    #: worker threads: calls run one at a time (``serially``), but as many as this can wait for their writes to
    #: reach the disk together, so that commits made at once share one sync (group commit)
    threads = 8
    call_timeout = None  # a local call always answers
    capabilities = frozenset({Capability.SERVICES, Capability.HISTORY, Capability.POOL})

    """Options (``[backends.local]``): ``schedd_name``; ``slots``, ``kill_grace``, ``periodic_interval`` for running
    jobs; ``uid_domain``, the domain of every job's ``User`` (``Owner@uid_domain``, default the schedd's name);
    ``denied_owners``, owners whose jobs never run here (held when they would start), e.g. ``["root"]``;
    ``classad_lifetime`` and ``max_advertised_ads`` for the ads others advertise to its collector (``pool.py``).

    When the gateway runs as root, every job runs as its owner's local account and every file its ad names is
    opened with that account's rights (``owners.py``); otherwise everything runs as the gateway's user."""

    def __init__(self, state_dir: Path, *, schedd_name: str | None = None, clock: Callable[[], float] = time.time,
                 slots: int | None = None, kill_grace: float = 10.0, periodic_interval: float = 60.0,
                 uid_domain: str | None = None, denied_owners: Sequence[str] = (),
                 classad_lifetime: int = CLASSAD_LIFETIME, max_advertised_ads: int = 10000) -> None:
        if isinstance(denied_owners, str) or not all(isinstance(owner, str) for owner in denied_owners):
            raise ValueError(f"denied_owners must be a list of owner names, not {denied_owners!r}")
        state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir = state_dir
        self.accounts = Accounts(denied_owners)
        self._info = BackendInfo(
            name="local",
            version=f"$CondorVersion: {INTERFACE_VERSION} {time.strftime('%b %d %Y')} "
                    f"BuildID: birdbath-gateway-{__version__} $",
            platform=f"$CondorPlatform: {platform.machine().upper()}-{platform.system()} $",
            schedd_name=schedd_name or socket.getfqdn(),
        )
        store = JobStore(state_dir / "queue.sqlite3")
        spool = Spool(state_dir / "spool")
        spool.preen(lambda cluster, proc: (cluster, proc) in store)
        self._queue = JobQueue(store, spool, self._info.schedd_name, clock, self.accounts, uid_domain,
                               Trash(state_dir / "trash"))
        execute = state_dir / "execute"
        execute.mkdir(exist_ok=True)
        jobtools.install(jobtools.libexec(execute), self._info.version, self._info.platform)
        if self.accounts.switching:
            _reachable_by_jobs(state_dir, execute, spool.root)
        self.options = ExecutorOptions(slots=os.cpu_count() or 1 if slots is None else slots, kill_grace=kill_grace,
                                       periodic_interval=periodic_interval)
        machine = machine_ad(self.options.slots, state_dir, self._info.version, self._queue.uid_domain)
        self._scheduler = Scheduler(self._queue, execute, machine)
        self._pool = LocalPool(PoolFacts(self._info, machine, self.options.slots, self._queue.uid_domain, int(clock())),
                               lambda: self.query(None), clock,
                               AdvertisedAds(clock, classad_lifetime, max_advertised_ads))
        self._dags = NodeJobs(self._queue, state_dir)
        self._executor: Executor | None = None
        self._one_at_a_time = threading.RLock()

    def serially(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``function`` alone (nothing else changes the queue meanwhile: the backend's code is written for one
        thread), then, outside, wait until what it wrote is on disk: the caller hears of its change only once it is
        durable, and the next call does not wait for this one's sync.

        Called at once (an :func:`immediate` method on the reactor) it never waits: while another call has the queue
        (a commit writing, a file being staged) it raises WouldBlock, and ``function`` itself declines what would
        write (so there is nothing to wait for after it)."""
        store = self._queue.store
        if not self._one_at_a_time.acquire(blocking=not answering_at_once()):
            raise WouldBlock("another call is changing the queue")
        try:
            if self._queue.deferred is not None:  # called from within a call (a method of ours): part of it
                return function(*args, **kwargs)
            before = store.written
            self._queue.deferred = []
            try:
                result = function(*args, **kwargs)
            finally:
                after, deferred, self._queue.deferred = store.written, self._queue.deferred, None
        finally:
            self._one_at_a_time.release()
        if after > before:
            try:
                store.durable(after)
            except OSError as exc:
                raise BackendError(f"the job queue could not be synced to disk: {exc}") from None
        if deferred:
            with self._one_at_a_time:
                for action in deferred:
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
        if self._queue.trash is not None:
            self._queue.trash.close()

    # -- the backend interface, answered by the queue ----------------------------------------------------
    @immediate
    def begin(self) -> LocalTransaction:
        """A new transaction object: nothing is written or shared until its first change."""
        return self._queue.begin()

    @_serial
    def commit(self, txn: LocalTransaction) -> None:
        self._queue.commit(txn)

    @immediate  # at once when nothing of it is on disk
    @_serial
    def abort(self, txn: LocalTransaction) -> None:
        self._queue.abort(txn)

    @immediate  # at once from the reserved block of ids
    @_serial
    def new_cluster(self, txn: LocalTransaction) -> int:
        return self._queue.new_cluster(txn)

    @immediate
    @_serial
    def new_proc(self, txn: LocalTransaction, cluster: int) -> int:
        """At once too, although it makes the job's spool directory: a directory entry, never a sync (tens of
        microseconds; measured at a few milliseconds at worst while the queue's syncs run)."""
        return self._queue.new_proc(txn, cluster)

    def spool_directory(self, cluster: int, proc: int) -> str:
        return str(self._queue.spool.directory(cluster, proc))

    @immediate
    @_serial
    def submit(self, txn: LocalTransaction, cluster: int, proc: int, ad: classad2.ClassAd) -> None:
        self._queue.submit(txn, cluster, proc, ad)

    @_serial
    def stage_file(self, txn: LocalTransaction, cluster: int, proc: int, name: str) -> None:
        self._queue.stage_file(txn, cluster, proc, name)

    @_serial
    def write_file(self, txn: LocalTransaction, cluster: int, proc: int, name: str, offset: int,
                   data: bytes) -> None:
        self._queue.write_file(txn, cluster, proc, name, offset, data)

    @_serial
    def file_md5(self, txn: LocalTransaction, cluster: int, proc: int, name: str) -> str:
        return self._queue.file_md5(txn, cluster, proc, name)

    @_serial
    def list_files(self, txn: LocalTransaction | None, cluster: int, proc: int) -> Sequence[FileInfo]:
        return self._queue.list_files(cluster, proc)

    @_serial
    def read_file(self, txn: LocalTransaction | None, cluster: int, proc: int, name: str, offset: int,
                  length: int) -> bytes:
        return self._queue.read_file(cluster, proc, name, offset, length)

    @_serial
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

    @immediate  # at once unless its ad is still to be read from disk
    def get_job(self, cluster: int, proc: int) -> classad2.ClassAd | None:
        return self._queue.get_job(cluster, proc)

    @_serial
    def act(self, txn: LocalTransaction | None, action: JobAction, cluster: int, proc: int | None,
            reason: str | None, *, system: bool = False) -> int:
        return self._queue.act(txn, action, cluster, proc, reason, system=system)

    @_serial
    def set_attribute(self, txn: LocalTransaction | None, cluster: int, proc: int, name: str,
                      value: str | classad2.ExprTree) -> None:
        self._queue.set_attribute(txn, cluster, proc, name, value)

    @_serial
    def reschedule(self) -> None:
        self._queue.reschedule()

    # -- the pool, as a collector answers it -------------------------------------------------------------------
    def pool_ads(self, ad_type: AdType, constraint: classad2.ExprTree | None, *, budget: float | None = None,
                 contact: str | None = None) -> list[classad2.ClassAd]:
        return self._pool.pool_ads(ad_type, constraint, budget=budget, contact=contact)

    def advertise(self, ad_type: AdType, ad: classad2.ClassAd) -> bool:
        return self._pool.advertise(ad_type, ad)


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
