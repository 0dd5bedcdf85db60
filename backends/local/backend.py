"""The ``local`` backend: a schedd that keeps its queue in SQLite and its spool under the state directory.

Transactions collect their changes in memory and write them in one durable SQLite transaction at commit, so an
uncommitted job is invisible to every query and an aborted or expired one leaves nothing behind.
"""

from __future__ import annotations

import getpass
import platform
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import classad2

from backends.interface import BackendError, BackendInfo, FileInfo, InvalidState, UnknownJob
from gateway import __version__
from gateway.core.classads import matches
from gateway.core.jobs import JobAction, JobStatus, Universe

from .spool import Spool
from .store import JobKey, JobStore

#: the HTCondor release whose SOAP interface the gateway reproduces (the last one that had it)
INTERFACE_VERSION = "8.6.13"

Updates = dict[str, object]  # attribute -> new value (None deletes the attribute)


@dataclass(eq=False)
class LocalTransaction:
    next_proc: dict[int, int] = field(default_factory=dict)  # clusters created in this transaction
    new_jobs: dict[JobKey, classad2.ClassAd | None] = field(default_factory=dict)
    updates: dict[JobKey, Updates] = field(default_factory=dict)  # changes to committed jobs, in order
    open: bool = True


class LocalBackend:
    threads = 1  # one SQLite connection, one writer: every call runs on the same worker thread

    def __init__(self, state_dir: Path, *, schedd_name: str | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir = state_dir
        self._clock = clock
        self._store = JobStore(state_dir / "queue.sqlite3")
        self._spool = Spool(state_dir / "spool")
        self._spool.preen(lambda cluster, proc: (cluster, proc) in self._store)
        self._info = BackendInfo(
            name="local",
            version=f"$CondorVersion: {INTERFACE_VERSION} {time.strftime('%b %d %Y')} "
                    f"BuildID: birdbath-gateway-{__version__} $",
            platform=f"$CondorPlatform: {platform.machine().upper()}-{platform.system()} $",
            schedd_name=schedd_name or socket.getfqdn(),
        )

    def info(self) -> BackendInfo:
        return self._info

    def close(self) -> None:
        self._store.close()

    # -- transactions -------------------------------------------------------------------------------
    def begin(self) -> LocalTransaction:
        return LocalTransaction()

    def commit(self, txn: LocalTransaction) -> None:
        self._check_open(txn)
        now = int(self._clock())
        ads: dict[JobKey, classad2.ClassAd] = {}
        for key, ad in txn.new_jobs.items():
            if ad is None:
                self._spool.discard(*key)  # a proc that never got a job ad is not a job
                continue
            ads[key] = self._enqueue(key, ad, now)
        for key, updates in txn.updates.items():
            base = ads[key] if key in ads else self._store.get(key)
            if base is not None:
                ads[key] = _updated(base, updates)
        for key in ads:
            self._spool.sync(*key)
        self._store.apply(ads)
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
        copy = classad2.ClassAd()
        copy.update(ad)
        txn.new_jobs[(cluster, proc)] = copy

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
                updates = _transition(action, current, reason, system, int(self._clock()))
            except InvalidState:
                if proc is None:
                    continue  # a cluster removal skips the jobs that are already gone
                raise
            self._record(txn, key, updates)
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
        self._record(txn, (cluster, proc), {name: value})
        if own:
            self.commit(txn)

    def reschedule(self) -> None:
        """Nothing to do until the executor exists: idle jobs stay queued."""

    # -- helpers ------------------------------------------------------------------------------------
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
        return _updated(base, txn.updates.get(key, {}))

    @staticmethod
    def _record(txn: LocalTransaction, key: JobKey, updates: Updates) -> None:
        if txn.new_jobs.get(key) is not None:
            txn.new_jobs[key] = _updated(txn.new_jobs[key], updates)
        else:
            txn.updates.setdefault(key, {}).update(updates)


def _updated(ad: classad2.ClassAd, updates: Updates) -> classad2.ClassAd:
    copy = classad2.ClassAd()
    copy.update(ad)
    for name, value in updates.items():
        if value is None:
            copy.pop(name, None)
        else:
            copy[name] = value
    return copy


def _projected(ad: classad2.ClassAd, projection: Sequence[str]) -> classad2.ClassAd:
    out = classad2.ClassAd()
    for name in projection:
        if name in ad:
            out[name] = ad.lookup(name)
    return out


def _transition(action: JobAction, ad: classad2.ClassAd, reason: str | None, system: bool,
                now: int) -> Updates:
    """The attribute changes that hold, release or remove make, as a schedd records them."""
    status = JobStatus(ad.get("JobStatus", JobStatus.IDLE))
    job = f"job {ad.get('ClusterId')}.{ad.get('ProcId')}"
    common: Updates = {"LastJobStatus": int(status), "EnteredCurrentStatus": now}
    if action is JobAction.HOLD:
        if status in (JobStatus.HELD, JobStatus.REMOVED, JobStatus.COMPLETED):
            raise InvalidState(f"{job} is {status.name.lower()} and cannot be held")
        held: Updates = {"JobStatus": int(JobStatus.HELD), "HoldReason": reason or "Held via Birdbath SOAP",
                         "HoldReasonCode": 0 if system else 1, "HoldReasonSubCode": 0}
        if system:
            held["NumSystemHolds"] = int(ad.get("NumSystemHolds", 0)) + 1
        return common | held
    if action is JobAction.RELEASE:
        if status is not JobStatus.HELD:
            raise InvalidState(f"{job} is {status.name.lower()}, not held")
        return common | {"JobStatus": int(JobStatus.IDLE), "LastHoldReason": ad.get("HoldReason"),
                         "ReleaseReason": reason or "Released via Birdbath SOAP",
                         "HoldReason": None, "HoldReasonCode": None, "HoldReasonSubCode": None}
    if status in (JobStatus.REMOVED, JobStatus.COMPLETED):
        raise InvalidState(f"{job} is already {status.name.lower()}")
    return common | {"JobStatus": int(JobStatus.REMOVED), "RemoveReason": reason or "Removed via Birdbath SOAP"}
