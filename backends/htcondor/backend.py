"""The ``htcondor`` backend: Birdbath in front of a real condor_schedd, through HTCondor's Python bindings.

Jobs, queries and actions go to the schedd of a pool: ``htcondor2`` for queries, actions, edits, history, spooling
and output retrieval; the v1 ``htcondor.Schedd.submitMany`` for submission, because Birdbath hands the gateway raw
job ClassAds and only the v1 bindings submit raw ads (``htcondor2`` takes submit descriptions only).

**Ids.** A real schedd allocates a cluster id when the jobs are submitted, which the gateway does at
``commitTransaction``, but a Birdbath client needs the id at ``newCluster``.  The gateway therefore hands out its
own cluster ids, from 1,000,000,000 up and never reused, records each job's gateway id in the job ad
(``BirdbathClusterId``/``BirdbathProcId``) and in a mapping table, and shows gateway-submitted jobs under those ids:
``ClusterId``/``ProcId`` in answers are the gateway's, ``SchedulerClusterId`` is the schedd's.  Constraints are
evaluated by the gateway on the translated ads, so ``ClusterId == 1000000007`` finds the job.  Jobs submitted by
other means keep their own ids.

**Transactions** are kept by the gateway until commit, then submitted as one cluster per Birdbath cluster; changes
to existing jobs made inside a transaction are applied after the submission.  **Files** are staged in the state
directory, which is the jobs' ``Iwd`` on the submit side, spooled to the schedd after submission, and their output
comes back there with ``retrieve``.  Every bindings call runs on the backend's thread; a failure (the pool is
unreachable, the schedd refused) is a :class:`BackendUnavailable` naming the call.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import classad2

from backends.interface import (
    BackendError,
    BackendInfo,
    BackendUnavailable,
    Capability,
    FileInfo,
    InvalidState,
    UnknownJob,
)
from backends.spool import Spool
from jobmodel.classads import copy_ad, matches, projected
from jobmodel.jobs import JobAction

FIRST_GATEWAY_CLUSTER = 1_000_000_000
_ACTIONS = {JobAction.HOLD: "Hold", JobAction.RELEASE: "Release", JobAction.REMOVE: "Remove",
            JobAction.SUSPEND: "Suspend", JobAction.CONTINUE: "Continue"}


@dataclass(eq=False)
class PoolTransaction:
    clusters: dict[int, list[classad2.ClassAd | None]] = field(default_factory=dict)
    changes: list[tuple[str, int, int, Any]] = field(default_factory=list)  # (kind, cluster, proc, detail)
    open: bool = True


class IdMap:
    """Gateway cluster ids (allocated durably, never reused) and the schedd's cluster for each."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS ids (gateway INTEGER PRIMARY KEY, schedd INTEGER)")

    def allocate(self) -> int:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            row = self._db.execute("SELECT MAX(gateway) FROM ids").fetchone()
            cluster = max(row[0] or 0, FIRST_GATEWAY_CLUSTER - 1) + 1
            self._db.execute("INSERT INTO ids (gateway, schedd) VALUES (?, NULL)", (cluster,))
            self._db.execute("COMMIT")
        return cluster

    def record(self, gateway: int, schedd: int) -> None:
        with self._lock:
            self._db.execute("UPDATE ids SET schedd = ? WHERE gateway = ?", (schedd, gateway))

    def schedd_cluster(self, cluster: int) -> int | None:
        """The schedd's cluster for a gateway id; a schedd id (below the gateway range) is itself."""
        if cluster < FIRST_GATEWAY_CLUSTER:
            return cluster
        with self._lock:
            row = self._db.execute("SELECT schedd FROM ids WHERE gateway = ?", (cluster,)).fetchone()
        return row[0] if row else None

    def close(self) -> None:
        self._db.close()


class HTCondorBackend:
    threads = 1  # one bindings call at a time keeps a transaction's calls in order
    capabilities = frozenset({Capability.HISTORY})

    def __init__(self, state_dir: Path, *, collector: str | None = None, schedd_name: str | None = None,
                 timeout: float = 30.0, schedd: Any = None, submitter: Any = None,
                 location: classad2.ClassAd | None = None) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.call_timeout = timeout  # the gateway stops waiting for a bindings call after this many seconds
        if schedd is None or submitter is None or location is None:
            location, schedd, submitter = _connect(collector, schedd_name)
        self._schedd = schedd
        self._submitter = submitter
        self._ids = IdMap(state_dir / "htcondor-ids.sqlite3")
        self._spool = Spool(state_dir / "spool")  # the submit side of the jobs' files
        self._info = BackendInfo(
            name="htcondor",
            version=str(location.get("CondorVersion", "$CondorVersion: unknown $")),
            platform=str(location.get("CondorPlatform", "$CondorPlatform: unknown $")),
            schedd_name=str(location.get("Name", schedd_name or "schedd")))

    def info(self) -> BackendInfo:
        return self._info

    def close(self) -> None:
        self._ids.close()

    def _call(self, operation: str, function: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Exception as exc:  # the bindings raise their own types for an unreachable or refusing schedd
            raise BackendUnavailable(f"the schedd did not complete {operation}: {exc}") from None

    # -- transactions -------------------------------------------------------------------------------
    def begin(self) -> PoolTransaction:
        return PoolTransaction()

    def commit(self, txn: PoolTransaction) -> None:
        self._check_open(txn)
        for cluster, ads in txn.clusters.items():
            procs = [(proc, ad) for proc, ad in enumerate(ads) if ad is not None]
            if procs:
                self._submit_cluster(cluster, procs)
        for kind, cluster, proc, detail in txn.changes:
            if kind == "act":
                self._act_now(detail[0], cluster, proc, detail[1])
            else:
                self._edit_now(cluster, proc, detail[0], detail[1])
        txn.open = False

    def _submit_cluster(self, cluster: int, procs: list[tuple[int, classad2.ClassAd]]) -> None:
        import classad  # v1 ClassAds, what submitMany takes

        proc_ads = []
        for proc, ad in procs:
            ad = copy_ad(ad)
            ad["BirdbathClusterId"] = cluster
            ad["BirdbathProcId"] = proc
            for name in ("ClusterId", "ProcId"):
                ad.pop(name, None)
            proc_ads.append((classad.parseOne(str(ad)), 1))
        spool = any(self._spool.list(cluster, proc) for proc, _ in procs)
        results: list[Any] = []
        schedd_cluster = self._call("submit", self._submitter.submitMany, classad.ClassAd(), proc_ads, spool=spool,
                                    ad_results=results)
        self._ids.record(cluster, int(schedd_cluster))
        if spool:
            self._call("spool", self._submitter.spool, results)

    def abort(self, txn: PoolTransaction) -> None:
        if not txn.open:
            return
        txn.open = False
        for cluster, procs in txn.clusters.items():
            for proc in range(len(procs)):
                self._spool.discard(cluster, proc)

    # -- building jobs ------------------------------------------------------------------------------
    def new_cluster(self, txn: PoolTransaction) -> int:
        self._check_open(txn)
        cluster = self._ids.allocate()
        txn.clusters[cluster] = []
        return cluster

    def new_proc(self, txn: PoolTransaction, cluster: int) -> int:
        self._check_open(txn)
        if cluster not in txn.clusters:
            raise BackendError(f"cluster {cluster} was not created in this transaction")
        txn.clusters[cluster].append(None)
        proc = len(txn.clusters[cluster]) - 1
        self._spool.create(cluster, proc)
        return proc

    def spool_directory(self, cluster: int, proc: int) -> str:
        return str(self._spool.directory(cluster, proc))

    def submit(self, txn: PoolTransaction, cluster: int, proc: int, ad: classad2.ClassAd) -> None:
        self._new_job(txn, cluster, proc)
        txn.clusters[cluster][proc] = copy_ad(ad)

    # -- files ----------------------------------------------------------------------------------------
    def stage_file(self, txn: PoolTransaction, cluster: int, proc: int, name: str) -> None:
        self._new_job(txn, cluster, proc)
        self._spool.stage(cluster, proc, name)

    def write_file(self, txn: PoolTransaction, cluster: int, proc: int, name: str, offset: int,
                   data: bytes) -> None:
        self._new_job(txn, cluster, proc)
        self._spool.write(cluster, proc, name, offset, data)

    def file_md5(self, txn: PoolTransaction, cluster: int, proc: int, name: str) -> str:
        self._new_job(txn, cluster, proc)
        return self._spool.md5(cluster, proc, name)

    def list_files(self, txn: PoolTransaction | None, cluster: int, proc: int) -> Sequence[FileInfo]:
        self._retrieve(cluster, proc)
        return self._spool.list(cluster, proc)

    def read_file(self, txn: PoolTransaction | None, cluster: int, proc: int, name: str, offset: int,
                  length: int) -> bytes:
        if name not in {info.name for info in self._spool.list(cluster, proc)}:
            self._retrieve(cluster, proc)
        return self._spool.read(cluster, proc, name, offset, length)

    def read_job_file(self, cluster: int, proc: int, path: str, offset: int, length: int) -> tuple[int, bytes]:
        if not path.startswith("/"):  # a spool file: the output of a spooled job comes back with retrieve
            self._retrieve(cluster, proc)
        return self._spool.read_job_file(cluster, proc, path, offset, length)

    def _retrieve(self, cluster: int, proc: int) -> None:
        """Bring a finished spooled job's output back into its submit-side directory."""
        ad = self.get_job(cluster, proc)
        if ad is not None and ad.get("JobStatus") == 4 and ad.get("StageOutFinish") is None:
            self._call("retrieve", self._schedd.retrieve, self._spec(cluster, proc))

    # -- queue ----------------------------------------------------------------------------------------
    def query(self, constraint: classad2.ExprTree | None,
              projection: Sequence[str] | None = None) -> list[classad2.ClassAd]:
        ads = [_translated(ad) for ad in self._call("query", self._schedd.query, "true")]
        found = [ad for ad in ads if matches(constraint, ad)]
        if projection:
            return [projected(ad, projection) for ad in found]
        return found

    def history(self, constraint: classad2.ExprTree | None, limit: int | None = None) -> list[classad2.ClassAd]:
        ads = [_translated(ad) for ad in self._call("history", self._schedd.history, "true", [], -1)]
        found = [ad for ad in ads if matches(constraint, ad)]
        return found[:limit] if limit is not None else found

    def get_job(self, cluster: int, proc: int) -> classad2.ClassAd | None:
        real = self._ids.schedd_cluster(cluster)
        if real is None:
            return None
        found = self._call("query", self._schedd.query, self._spec(cluster, proc))
        return _translated(found[0]) if found else None

    def act(self, txn: PoolTransaction | None, action: JobAction, cluster: int, proc: int | None,
            reason: str | None, *, system: bool = False) -> int:
        keys = [(cluster, proc)] if proc is not None else [
            (cluster, ad.eval("ProcId")) for ad in self.query(classad2.ExprTree(f"ClusterId == {cluster}"))]
        if txn is None:
            return sum(self._act_now(action, c, p, reason, skip_bad=proc is None) for c, p in keys)
        self._check_open(txn)
        for c, p in keys:
            if self.get_job(c, p) is None:
                raise UnknownJob(f"job {c}.{p} is not in the queue")
            txn.changes.append(("act", c, p, (action, reason)))
        return len(keys)

    def _act_now(self, action: JobAction, cluster: int, proc: int, reason: str | None, skip_bad: bool = False) -> int:
        import htcondor2

        result = self._call(action.value, self._schedd.act, getattr(htcondor2.JobAction, _ACTIONS[action]),
                            self._spec(cluster, proc), reason)
        if result.get("TotalNotFound", 0) or result.get("TotalSuccess", 0) + result.get("TotalBadStatus", 0) == 0:
            raise UnknownJob(f"job {cluster}.{proc} is not in the queue")
        if result.get("TotalBadStatus", 0) and not skip_bad:
            raise InvalidState(f"job {cluster}.{proc} cannot be {action.value}d in its state")
        return int(result.get("TotalSuccess", 0))

    def set_attribute(self, txn: PoolTransaction | None, cluster: int, proc: int, name: str,
                      value: str | classad2.ExprTree) -> None:
        text = classad2.quote(value) if isinstance(value, str) else str(value)
        if txn is None:
            self._edit_now(cluster, proc, name, text)
            return
        self._check_open(txn)
        if self.get_job(cluster, proc) is None:
            raise UnknownJob(f"job {cluster}.{proc} is not in the queue")
        txn.changes.append(("edit", cluster, proc, (name, text)))

    def _edit_now(self, cluster: int, proc: int, name: str, text: str) -> None:
        if self.get_job(cluster, proc) is None:
            raise UnknownJob(f"job {cluster}.{proc} is not in the queue")
        self._call("edit", self._schedd.edit, self._spec(cluster, proc), name, text)

    def reschedule(self) -> None:
        self._call("reschedule", self._schedd.reschedule)

    # -- helpers ------------------------------------------------------------------------------------
    def _spec(self, cluster: int, proc: int) -> str:
        """The schedd-side constraint for a job the gateway knows by its (possibly gateway) id."""
        if cluster >= FIRST_GATEWAY_CLUSTER:
            return f"BirdbathClusterId == {cluster} && BirdbathProcId == {proc}"
        return f"ClusterId == {cluster} && ProcId == {proc}"

    @staticmethod
    def _check_open(txn: PoolTransaction) -> None:
        if not txn.open:
            raise BackendError("the transaction is no longer open")

    def _new_job(self, txn: PoolTransaction, cluster: int, proc: int) -> None:
        self._check_open(txn)
        if proc >= len(txn.clusters.get(cluster, [])):
            raise UnknownJob(f"job {cluster}.{proc} was not created in this transaction")


def _connect(collector: str | None, schedd_name: str | None) -> tuple[classad2.ClassAd, Any, Any]:
    """Locate the schedd (through the collector when one is named) and open both bindings on it."""
    import htcondor
    import htcondor2

    try:
        location = htcondor2.Collector(collector).locate(htcondor2.DaemonType.Schedd, schedd_name) \
            if collector or schedd_name else htcondor2.Collector().locate(htcondor2.DaemonType.Schedd)
        v1_location = htcondor.Collector(collector).locate(htcondor.DaemonTypes.Schedd, schedd_name) \
            if collector or schedd_name else htcondor.Collector().locate(htcondor.DaemonTypes.Schedd)
    except Exception as exc:
        where = f"collector {collector}" if collector else "the local pool"
        raise BackendUnavailable(f"cannot locate the schedd {schedd_name or ''} in {where}: {exc}") from None
    return location, htcondor2.Schedd(location), htcondor.Schedd(v1_location)


def _translated(ad: classad2.ClassAd) -> classad2.ClassAd:
    """A schedd ad as the gateway shows it: gateway-submitted jobs under their gateway ids."""
    gateway_cluster = ad.get("BirdbathClusterId")
    if not isinstance(gateway_cluster, int):
        return ad
    shown = copy_ad(ad)
    shown["SchedulerClusterId"] = ad.get("ClusterId")
    shown["ClusterId"] = gateway_cluster
    shown["ProcId"] = ad.get("BirdbathProcId", ad.get("ProcId"))
    return shown
