"""The ``htcondor`` backend: Birdbath in front of a real condor_schedd, through HTCondor's Python bindings.

Jobs, queries and actions go to the schedd of a pool: ``htcondor2`` for queries, actions, edits, history and output
retrieval; the v1 ``htcondor.Schedd.submitMany`` and ``spool`` for submission, because Birdbath hands the gateway
raw job ClassAds and only the v1 bindings submit raw ads (``htcondor2`` takes submit descriptions only).

**Ids.** A real schedd allocates a cluster id when the jobs are submitted, which the gateway does at
``commitTransaction``, but a Birdbath client needs the id at ``newCluster``.  The gateway therefore hands out its
own cluster ids, from 1,000,000,000 up and never reused (reserved a hundred at a time, :class:`IdMap`), records each
job's gateway id in the job ad (``BirdbathClusterId``/``BirdbathProcId``), and shows gateway-submitted jobs under
those ids: ``ClusterId``/``ProcId`` in answers are the gateway's, ``SchedulerClusterId`` is the schedd's.  Jobs
submitted by other means keep their own ids.

**Queries** go to the schedd with the constraint and projection: a constraint that names none of ``ClusterId``,
``ProcId`` and ``SchedulerClusterId`` as it is, one that does with those references rewritten into what the gateway
shows (``ifThenElse(isInteger(BirdbathClusterId), BirdbathClusterId, ClusterId)``, ...); only a constraint the
rewrite cannot handle (a scoped reference other than ``MY.``) fetches every ad.  The gateway then evaluates a
rewritten constraint again, in its original form, on the translated ads, which carry every attribute it names; one
sent as it is was the schedd's to evaluate, and its answer stands.

**Transactions** are kept by the gateway until commit, then submitted as one schedd cluster per Birdbath cluster,
followed by the changes to existing jobs (a change outside a transaction is a commit of that change alone); :meth:`HTCondorBackend.commit` says what is atomic and what is rolled
back.  **Files** are staged in the state directory, which is the jobs' ``Iwd`` on the submit side, spooled to the
schedd after submission, and their output comes back there with ``retrieve``.  Every bindings call runs on the
backend's thread; a failure (the pool is unreachable, the schedd refused) is a :class:`BackendUnavailable` naming
the call.

**Revisions.** The schedd numbers no change of a job's ad, so an ad's revision (``backends.interface.Revision``) is
a 64-bit digest of what it holds (its text and kept expression texts): equal for equal ads, and for different ones
only by a 2**-64 chance; it costs printing each ad once more per query.

**Reasons** go to ``htcondor2.Schedd.act`` as a ``(reason, 0)`` tuple: the 24.0 bindings keep a reason only in that
form (or ``None``, for their default "Python-initiated action") and silently drop a plain string.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import classad2

from backends import evaluation
from backends.interface import (
    ActionChange,
    BackendError,
    BackendInfo,
    BackendUnavailable,
    Batch,
    Capability,
    Change,
    FileInfo,
    InvalidState,
    JobKey,
    NewJob,
    UnknownJob,
    stamp,
)
from backends.spool import Spool
from jobmodel.classads import copy_ad, projected
from jobmodel.exprtext import old_syntax, source_text, texts_record
from jobmodel.jobs import JobAction, Universe
from jobmodel.pool import AdType

from .pool import CollectorPool

FIRST_GATEWAY_CLUSTER = 1_000_000_000
_ACTIONS = {JobAction.HOLD: "Hold", JobAction.RELEASE: "Release", JobAction.REMOVE: "Remove",
            JobAction.SUSPEND: "Suspend", JobAction.CONTINUE: "Continue"}
#: how a change already applied in a failed commit is undone (a removal cannot be)
_INVERSE = {JobAction.HOLD: JobAction.RELEASE, JobAction.RELEASE: JobAction.HOLD,
            JobAction.SUSPEND: JobAction.CONTINUE, JobAction.CONTINUE: JobAction.SUSPEND}
ROLLBACK_REASON = "Birdbath transaction rolled back"
#: the universes whose jobs the schedd runs itself, matching their Requirements against its own ad
_ON_THE_SCHEDD = frozenset({Universe.SCHEDULER, Universe.LOCAL})

#: the attributes the gateway shows differently from the schedd, and what each is in the schedd's terms
_GATEWAY_VIEW = {
    "clusterid": "ifThenElse(isInteger(BirdbathClusterId), BirdbathClusterId, ClusterId)",
    "procid": "ifThenElse(isInteger(BirdbathClusterId) && BirdbathProcId isnt undefined, BirdbathProcId, ProcId)",
    "schedulerclusterid": "ifThenElse(isInteger(BirdbathClusterId), ClusterId, SchedulerClusterId)",
}
#: what translating a schedd ad needs besides what the caller asked for
_ID_ATTRIBUTES = ("ClusterId", "ProcId", "BirdbathClusterId", "BirdbathProcId")
_TOKEN = re.compile(r"""(?P<string>"(?:[^"\\]|\\.)*")|(?P<quoted>'(?:[^'\\]|\\.)*')|(?P<number>\d[\w.]*)"""
                    r"""|(?P<name>[A-Za-z_]\w*)|(?P<space>\s+)|(?P<other>.)""", re.S)


class IdMap:
    """Gateway cluster ids, handed out in blocks and never again (one durable write per block), and the clusters a
    failed commit rolled back (removed from the schedd, hidden from the gateway's answers).  Which schedd cluster a
    gateway cluster became is the schedd's to say (``BirdbathClusterId`` in its ads), not kept here."""

    BLOCK = 100

    def __init__(self, path: Path, last_used: Callable[[], int]) -> None:
        """``last_used``: the highest gateway id the schedd knows, asked when the state directory is new."""
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS handed_out (one INTEGER PRIMARY KEY CHECK (one = 1), "
                         "high INTEGER NOT NULL)")
        self._db.execute("CREATE TABLE IF NOT EXISTS rolled_back (gateway INTEGER PRIMARY KEY)")
        self._rolled_back = {row[0] for row in self._db.execute("SELECT gateway FROM rolled_back")}
        self._last_block: range | None = None
        row = self._db.execute("SELECT high FROM handed_out").fetchone()
        if row is None:
            # a new state directory, or one of an earlier release that kept a row per id: go on after both
            earlier = self._db.execute("SELECT name FROM sqlite_master WHERE name = 'ids'").fetchone()
            kept = self._db.execute("SELECT MAX(gateway) FROM ids").fetchone()[0] if earlier else None
            self._store(max(kept or 0, last_used(), FIRST_GATEWAY_CLUSTER - 1))

    def _store(self, high: int) -> None:
        self._db.execute("INSERT OR REPLACE INTO handed_out (one, high) VALUES (1, ?)", (high,))

    def reserve(self) -> range:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            high = self._db.execute("SELECT high FROM handed_out").fetchone()[0]
            self._store(high + self.BLOCK)
            self._db.execute("COMMIT")
            self._last_block = range(high + 1, high + 1 + self.BLOCK)
        return self._last_block

    def release(self, unused: range) -> None:
        """Take back the unused end of the last block (the gateway stops); any other range is kept handed out."""
        with self._lock:
            last = self._last_block
            if last is None or not unused or unused.stop != last.stop or unused.start < last.start:
                return
            self._store(unused.start - 1)
            self._last_block = range(last.start, unused.start)

    def roll_back(self, gateway: int) -> None:
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO rolled_back (gateway) VALUES (?)", (gateway,))
            self._rolled_back.add(gateway)

    def rolled_back(self, gateway: int) -> bool:
        return gateway in self._rolled_back

    def close(self) -> None:
        self._db.close()


class HTCondorBackend:
    threads = 1  # one bindings call at a time keeps a transaction's calls in order
    capabilities = frozenset({Capability.HISTORY, Capability.POOL})

    def __init__(self, state_dir: Path, *, collector: str | None = None, schedd_name: str | None = None,
                 timeout: float = 30.0, schedd: Any = None, submitter: Any = None,
                 location: classad2.ClassAd | None = None, pool_collector: Any = None) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.call_timeout = timeout  # the gateway stops waiting for a bindings call after this many seconds
        if schedd is None or submitter is None or location is None:
            location, schedd, submitter = _connect(collector, schedd_name)
        self._schedd = schedd
        self._submitter = submitter
        self._ids = IdMap(state_dir / "htcondor-ids.sqlite3", self._last_gateway_cluster)
        # the condorCollector service's answers: the pool's collector (``pool_collector`` in tests)
        self._pool = CollectorPool(lambda: pool_collector if pool_collector is not None else _collector(collector))
        self._spool = Spool(state_dir / "spool")  # the submit side of the jobs' files
        self._info = BackendInfo(
            name="htcondor",
            version=str(location.get("CondorVersion", "$CondorVersion: unknown $")),
            platform=str(location.get("CondorPlatform", "$CondorPlatform: unknown $")),
            schedd_name=str(location.get("Name", schedd_name or "schedd")),
            pool=str(location.get("CollectorHost") or collector or _collector_host()))

    def info(self) -> BackendInfo:
        return self._info

    def _last_gateway_cluster(self) -> int:
        """The highest gateway cluster id the schedd knows, in its queue or its history (0 if none): asked once, when
        the state directory is new, so that its ids continue after those of an earlier state directory."""
        constraint, projection = "BirdbathClusterId isnt undefined", ["BirdbathClusterId"]
        ads = [*self._call("query", self._schedd.query, constraint, projection),
               *self._call("history", self._schedd.history, constraint, projection, -1)]
        return max((ad.get("BirdbathClusterId") for ad in ads if isinstance(ad.get("BirdbathClusterId"), int)),
                   default=0)

    def close(self) -> None:
        self._ids.close()

    def _call(self, operation: str, function: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Exception as exc:  # the bindings raise their own types for an unreachable or refusing schedd
            raise BackendUnavailable(f"the schedd did not complete {operation}: {_reason(exc)}") from None

    # -- transactions -------------------------------------------------------------------------------
    def reserve_clusters(self) -> range:
        return self._ids.reserve()

    def release_clusters(self, unused: range) -> None:
        self._ids.release(unused)

    def commit(self, batch: Batch) -> None:
        """Submit the batch's clusters, then apply its changes to existing jobs; on failure, undo what was done and
        raise.

        A schedd has no transaction spanning several clusters and actions, so this is as close to "all or nothing"
        as the schedd allows, and no closer:

        - Nothing reaches the schedd until every job the transaction changes was found still in the queue
          (otherwise :class:`UnknownJob`, and nothing changed).
        - Each Birdbath cluster is one ``submitMany`` call, which the v1 bindings run in one schedd queue
          transaction: all of its procs are queued or none.
        - Clusters are submitted in order (and spooled, when they have files).  If a submission or spooling fails,
          every cluster this commit already submitted is removed (``act(Remove)`` on ``ClusterId == <its schedd
          id>``, and on ``BirdbathClusterId == <gateway id>`` for the one that failed, in case the schedd queued it
          before the error), and the gateway no longer shows those jobs.
        - Changes to existing jobs follow, in the transaction's order except that removals come last.  If one
          fails, the submitted clusters are removed as above and the changes already applied are undone in
          reverse order: a hold by a release, a release by a hold (with the earlier hold reason), suspend and
          continue by each other, an attribute edit by setting the previous expression again (``undefined`` where
          the attribute was absent).  A removal cannot be undone, hence removals last: only a failure among the
          removals themselves leaves earlier removals of the same commit in place.
        - The error raised is the original one (same type), its message saying what was rolled back; if part of
          the rollback itself failed (the schedd went away mid-commit), the message names the clusters left in
          the schedd and the changes not undone, and those clusters stay visible through the gateway.

        Not guaranteed: other clients of the schedd (``condor_q``, the negotiator) can see the intermediate
        states, so a job of an earlier cluster may even start before it is removed; rolled-back jobs remain in
        the schedd's history as removed (with RemoveReason "Birdbath transaction rolled back"); undone holds and
        releases leave their traces (``LastHoldReason``, ``NumHolds``, the job's event log).
        """
        problems = [problem for problem in map(NewJob.id_problem, batch.jobs) if problem is not None]
        if problems:
            raise BackendError(problems[0])
        changes = self._each_job(batch.changes)
        before = self._changed_jobs(changes)  # raises UnknownJob before anything is sent
        submitted: list[tuple[int, int | None]] = []  # (gateway cluster, schedd cluster; None: unknown)
        undo: list[tuple[str, Callable[[], Any]]] = []
        clusters: dict[int, list[tuple[int, classad2.ClassAd]]] = {}
        for job in batch.jobs:
            clusters.setdefault(job.cluster, []).append((job.proc, job.ad))
        try:
            for cluster, procs in clusters.items():
                self._submit_cluster(cluster, procs, submitted)
            for change, key in sorted(changes, key=lambda c: isinstance(c[0], ActionChange) and
                                      c[0].action is JobAction.REMOVE):
                if isinstance(change, ActionChange):
                    self._act_in_commit(change, *key, before[key], undo)
                else:
                    self._edit_in_commit(*key, change.name, _text(change.value), before[key], undo)
        except Exception as exc:
            if not submitted and not undo and isinstance(exc, BackendError):
                raise  # nothing reached the schedd: the error as it is
            message = f"{exc}; {self._roll_back(submitted, undo)}"
            if isinstance(exc, BackendError):
                raise type(exc)(message) from None
            raise BackendError(message) from exc

    def check_changes(self, batch: Batch) -> None:
        self._changed_jobs(self._each_job(batch.changes))

    def _each_job(self, changes: Sequence[Change]) -> list[tuple[Change, JobKey]]:
        """The changes, one per job they touch (a cluster's jobs are those queued now)."""
        each = []
        for change in changes:
            if change.proc is not None:
                each.append((change, (change.cluster, change.proc)))
                continue
            found = self.query(classad2.ExprTree(f"ClusterId == {change.cluster}"), ["ProcId"])
            each += [(change, (change.cluster, ad.eval("ProcId"))) for ad in found]
        return each

    def _changed_jobs(self, changes: list[tuple[Change, JobKey]]) -> dict[JobKey, classad2.ClassAd]:
        """The current ads of the jobs the changes touch; every one must still be in the queue."""
        before: dict[JobKey, classad2.ClassAd] = {}
        for _, key in changes:
            if key not in before:
                ad = self.get_job(*key)
                if ad is None:
                    raise UnknownJob(f"job {key[0]}.{key[1]} is not in the queue; nothing was committed")
                before[key] = ad
        return before

    def _submit_cluster(self, cluster: int, procs: list[tuple[int, classad2.ClassAd]],
                        submitted: list[tuple[int, int | None]]) -> None:
        import classad  # v1 ClassAds, what submitMany takes

        proc_ads = []
        for proc, ad in procs:
            ad = copy_ad(ad)
            ad["BirdbathClusterId"] = cluster
            ad["BirdbathProcId"] = proc
            for name in ("ClusterId", "ProcId"):
                ad.pop(name, None)
            proc_ads.append((classad.parseOne(str(ad)), 1))
        spool = any(self._spooled(cluster, proc, ad) for proc, ad in procs)
        results: list[Any] = []
        submitted.append((cluster, None))
        schedd_cluster = int(self._call("submit", self._submitter.submitMany, _cluster_ad(procs), proc_ads,
                                        spool=spool, ad_results=results))
        submitted[-1] = (cluster, schedd_cluster)
        self._keep_requirements(schedd_cluster, proc_ads, results)
        if spool:
            self._call("spool", self._submitter.spool, results)
            self._wait_for_spooled(schedd_cluster)

    def _wait_for_spooled(self, schedd_cluster: int) -> None:
        """Waits until the schedd has released the cluster from its spooling hold (``HoldReasonCode`` 16, "Spooling
        input data files"), which it does on its own shortly after ``spool`` returns: a Birdbath client sees its
        jobs idle once ``commitTransaction`` answers, and may hold or remove them at once."""
        spooling = f"ClusterId == {schedd_cluster} && JobStatus == 5 && HoldReasonCode == 16"
        deadline = time.monotonic() + self.call_timeout
        pause = 0.02
        while self._call("query", self._schedd.query, spooling, ["ProcId"]):
            if time.monotonic() > deadline:
                raise BackendUnavailable(f"the schedd did not release cluster {schedd_cluster} from its spooling hold "
                                         f"within {self.call_timeout:.0f} s")
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def _spooled(self, cluster: int, proc: int, ad: classad2.ClassAd) -> bool:
        """Whether a job goes to the schedd with its files (``spool=True``): when it has staged files, or when its
        ``Iwd`` is the gateway's directory for it, as Birdbath jobs' is by default.  Such a job runs from the
        schedd's spool, never from the gateway's disk (which the execute side need not share, nor the job's account
        be able to write), and its output comes back with ``retrieve`` when a client asks for it."""
        return bool(self._spool.list(cluster, proc)) or ad.get("Iwd") == self.spool_directory(cluster, proc)

    def _keep_requirements(self, schedd_cluster: int, sent_ads: list[tuple[Any, int]], results: list[Any]) -> None:
        """Sets a scheduler or local universe job's ``Requirements`` back to the client's where the bindings
        changed it.

        The v1 ``submitMany`` appends machine clauses to every job's ``Requirements`` (``TARGET.OPSYS``, ``ARCH``,
        ``Disk``, ``Memory``, ``Cpus``, ``FileSystemDomain`` or ``HasFileTransfer``), as condor_submit does for a
        job that runs on a machine, where they are harmless.  A scheduler or local universe job is matched against
        the schedd's own ad, where those clauses cannot evaluate ("StartSchedulerUniverse policy failed to
        evaluate"), so such a job would never start.  ``sent_ads`` are ``submitMany``'s (v1 ad, count 1) pairs,
        ``results`` its result ads, in the same order."""
        wanted: dict[str, list[int]] = {}
        for (sent, _), (schedd_proc, result) in zip(sent_ads, enumerate(results)):
            if "Requirements" not in sent or sent.get("JobUniverse") not in _ON_THE_SCHEDD:
                continue
            text = str(sent.lookup("Requirements"))
            if str(result.lookup("Requirements")) != text:
                wanted.setdefault(text, []).append(schedd_proc)
        for text, schedd_procs in wanted.items():
            spec = f"ClusterId == {schedd_cluster}" if len(schedd_procs) == len(sent_ads) else \
                f"ClusterId == {schedd_cluster} && member(ProcId, {{{', '.join(map(str, schedd_procs))}}})"
            self._call("edit", self._schedd.edit, spec, "Requirements", text)

    def _act_in_commit(self, change: ActionChange, cluster: int, proc: int, before: classad2.ClassAd,
                       undo: list[tuple[str, Callable[[], Any]]]) -> None:
        action = change.action
        if not self._act_now(action, cluster, proc, change.reason, skip_bad=change.proc is None):
            return  # a job of the cluster the action does not apply to
        inverse = _INVERSE.get(action)
        if inverse is None:
            return
        undo_reason = ROLLBACK_REASON
        if inverse is JobAction.HOLD:
            held_for = before.get("HoldReason")
            undo_reason = held_for if isinstance(held_for, str) and held_for else ROLLBACK_REASON
        undo.append((f"{action.value} of job {cluster}.{proc}",
                     lambda: self._act_now(inverse, cluster, proc, undo_reason)))

    def _edit_in_commit(self, cluster: int, proc: int, name: str, text: str, before: classad2.ClassAd,
                        undo: list[tuple[str, Callable[[], Any]]]) -> None:
        spec = self._spec(cluster, proc)
        self._call("edit", self._schedd.edit, spec, name, text)
        previous = old_syntax(str(before.lookup(name))) if name in before else "undefined"
        undo.append((f"the change of {name} of job {cluster}.{proc}",
                     lambda: self._call("edit", self._schedd.edit, spec, name, previous)))

    def _roll_back(self, submitted: list[tuple[int, int | None]], undo: list[tuple[str, Callable[[], Any]]]) -> str:
        """Remove the clusters a failed commit submitted and undo the changes it applied; says what happened."""
        import htcondor2

        removed, left = [], []
        for cluster, schedd_cluster in submitted:
            spec = f"ClusterId == {schedd_cluster}" if schedd_cluster is not None else f"BirdbathClusterId == {cluster}"
            try:
                self._call("remove", self._schedd.act, htcondor2.JobAction.Remove, spec, (ROLLBACK_REASON, 0))
            except BackendError as exc:
                left.append(f"cluster {cluster}" + (f" (schedd cluster {schedd_cluster})" if schedd_cluster else "")
                            + f" is still in the schedd ({exc})")
                continue
            self._ids.roll_back(cluster)
            if schedd_cluster is not None:
                removed.append(f"{cluster} (schedd cluster {schedd_cluster})")
        undone = 0
        for what, function in reversed(undo):
            try:
                function()
                undone += 1
            except BackendError as exc:
                left.append(f"{what} was not undone ({exc})")
        done = []
        if removed:
            done.append("removed the submitted cluster" + ("s " if len(removed) > 1 else " ") + ", ".join(removed))
        if undone:
            done.append(f"undid {undone} change{'s' if undone > 1 else ''} to existing jobs")
        summary = "the commit was rolled back" + (f" ({'; '.join(done)})" if done else "")
        if left:
            return summary + " incompletely: " + "; ".join(left)
        return summary

    def spool_directory(self, cluster: int, proc: int) -> str:
        return str(self._spool.directory(cluster, proc))

    # -- files ----------------------------------------------------------------------------------------
    def stage_file(self, cluster: int, proc: int, name: str) -> None:
        self._spool.create(cluster, proc)
        self._spool.stage(cluster, proc, name)

    def write_file(self, cluster: int, proc: int, name: str, offset: int, data: bytes) -> None:
        self._spool.write(cluster, proc, name, offset, data)

    def file_md5(self, cluster: int, proc: int, name: str) -> str:
        return self._spool.md5(cluster, proc, name)

    def discard(self, jobs: Sequence[JobKey]) -> None:
        for cluster, proc in jobs:
            if not self._known_to_schedd(cluster):  # (never one of a committed cluster)
                self._spool.discard(cluster, proc)

    def _known_to_schedd(self, cluster: int) -> bool:
        spec, one = f"BirdbathClusterId == {cluster}", ["ProcId"]
        return bool(self._call("query", self._schedd.query, spec, one) or
                    self._call("history", self._schedd.history, spec, one, 1))

    def list_files(self, cluster: int, proc: int) -> Sequence[FileInfo]:
        self._retrieve(cluster, proc)
        return self._spool.list(cluster, proc)

    def read_file(self, cluster: int, proc: int, name: str, offset: int, length: int) -> bytes:
        if name not in {info.name for info in self._spool.list(cluster, proc)}:
            self._retrieve(cluster, proc)
        return self._spool.read(cluster, proc, name, offset, length)

    def read_job_file(self, cluster: int, proc: int, path: str, offset: int, length: int) -> tuple[int, bytes]:
        """A file of the job's submit-side spool (the output of a spooled job comes back with retrieve); read with
        the spool's confinement, as ``read_file`` and ``list_files`` are."""
        self._retrieve(cluster, proc)
        return self._spool.read_job_file(cluster, proc, path, offset, length)

    def _retrieve(self, cluster: int, proc: int) -> None:
        """Bring a finished spooled job's output back into its submit-side directory."""
        ad = self.get_job(cluster, proc)
        if ad is not None and ad.get("JobStatus") == 4 and ad.get("StageOutFinish") is None:
            self._spool.create(cluster, proc)  # where the output comes back (a job with no input has none yet)
            self._call("retrieve", self._schedd.retrieve, self._spec(cluster, proc))

    # -- queue ----------------------------------------------------------------------------------------
    def query(self, constraint: classad2.ExprTree | None, projection: Sequence[str] | None = None, *,
              budget: float | None = None) -> list[classad2.ClassAd]:
        text, _ = schedd_constraint(constraint)
        ads = self._call("query", self._schedd.query, text, schedd_projection(projection, constraint))
        found = self._answer(ads, _left_to_check(constraint), projection, budget)
        return found if projection else [revised(ad) for ad in found]

    def history(self, constraint: classad2.ExprTree | None, limit: int | None = None,
                projection: Sequence[str] | None = None, *, budget: float | None = None) -> list[classad2.ClassAd]:
        """Jobs that left the queue, newest first.  The schedd applies ``limit`` when it evaluates the constraint
        itself (otherwise the gateway does, after filtering)."""
        if limit is not None and limit <= 0:
            return []
        text, exact = schedd_constraint(constraint)
        match = limit if limit is not None and exact else -1
        ads = self._call("history", self._schedd.history, text, schedd_projection(projection, constraint), match)
        found = self._answer(ads, _left_to_check(constraint), projection, budget)
        return found[:limit] if limit is not None else found

    def _answer(self, ads: Sequence[classad2.ClassAd], constraint: classad2.ExprTree | None,
                projection: Sequence[str] | None, budget: float | None = None) -> list[classad2.ClassAd]:
        """Schedd ads as the gateway shows them, checked against the original constraint and projected (a client's
        constraint, with a ``budget``, in a forked worker: ``backends.evaluation``)."""
        shown = evaluation.filtered([ad for ad in map(self._translated, ads) if ad is not None], constraint, budget)
        return [projected(ad, projection) if projection else ad for ad in shown]

    def get_job(self, cluster: int, proc: int) -> classad2.ClassAd | None:
        found = self._call("query", self._schedd.query, self._spec(cluster, proc))
        shown = [ad for ad in map(self._translated, found) if ad is not None]
        return revised(shown[0]) if shown else None

    def job_in_memory(self, cluster: int, proc: int) -> classad2.ClassAd | None:
        return None  # every ad is the schedd's: asked on a thread

    def _act_now(self, action: JobAction, cluster: int, proc: int, reason: str | None, skip_bad: bool = False) -> int:
        """One ``Schedd.act`` on one job.  The reason goes as ``(reason, 0)``: ``htcondor2.Schedd.act`` (24.0) keeps
        a reason only when given as a (text, hold subcode) tuple or ``None``, and sends none for a plain string."""
        import htcondor2

        result = self._call(action.value, self._schedd.act, getattr(htcondor2.JobAction, _ACTIONS[action]),
                            self._spec(cluster, proc), None if reason is None else (reason, 0))
        done = int(result.get("TotalSuccess", 0)) if result is not None else 0
        if done:
            return done
        # Acting by constraint, the schedd adds a clause on the job's status (no release unless held, no hold of a
        # completed job, ...), so a job in the wrong state simply does not match: find out which case this is.
        if result is not None and result.get("TotalPermissionDenied", 0):
            raise BackendError(f"the schedd refused to {action.value} job {cluster}.{proc}: permission denied")
        if self.get_job(cluster, proc) is None:
            raise UnknownJob(f"job {cluster}.{proc} is not in the queue")
        if skip_bad:
            return 0
        raise InvalidState(f"job {cluster}.{proc} cannot be {action.done} in its state")

    def reschedule(self) -> None:
        self._call("reschedule", self._schedd.reschedule)

    # -- the pool, as its collector answers it ---------------------------------------------------------------
    def pool_ads(self, ad_type: AdType, constraint: classad2.ExprTree | None, *, budget: float | None = None,
                 contact: str | None = None) -> list[classad2.ClassAd]:
        return self._pool.pool_ads(ad_type, constraint, budget=budget, contact=contact)

    def advertise(self, ad_type: AdType, ad: classad2.ClassAd) -> bool:
        return self._pool.advertise(ad_type, ad)

    # -- helpers ------------------------------------------------------------------------------------
    def _spec(self, cluster: int, proc: int) -> str:
        """The schedd-side constraint for a job the gateway knows by its (possibly gateway) id."""
        if cluster >= FIRST_GATEWAY_CLUSTER:
            return f"BirdbathClusterId == {cluster} && BirdbathProcId == {proc}"
        return f"ClusterId == {cluster} && ProcId == {proc}"

    def _translated(self, ad: classad2.ClassAd) -> classad2.ClassAd | None:
        """A schedd ad as the gateway shows it (gateway-submitted jobs under their gateway ids), or ``None`` for a
        job of a rolled-back commit."""
        if "ServerTime" in ad:
            # the time of the answer, which the bindings ask the schedd to add to every ad: not the job's, and
            # Birdbath's answers never carried it (it would give an unchanged job a new revision every second)
            del ad["ServerTime"]
        gateway_cluster = ad.get("BirdbathClusterId")
        if not isinstance(gateway_cluster, int) or isinstance(gateway_cluster, bool):
            return ad
        if self._ids.rolled_back(gateway_cluster):
            return None
        shown = copy_ad(ad)
        shown["SchedulerClusterId"] = ad.get("ClusterId")
        shown["ClusterId"] = gateway_cluster
        shown["ProcId"] = ad.get("BirdbathProcId", ad.get("ProcId"))
        return shown


def _cluster_ad(procs: list[tuple[int, classad2.ClassAd]]) -> Any:
    """The cluster ad ``submitMany`` starts from: the procs' ``Owner`` when they share one.  The schedd sets a new
    cluster's owner at once, to the submitter's name unless the cluster ad names another, and refuses a proc that
    changes it ("Setting owner to ... when previously set to ... is not permitted")."""
    import classad

    owners = {ad.get("Owner") for _, ad in procs}
    owner = owners.pop() if len(owners) == 1 else None
    return classad.ClassAd({"Owner": owner} if isinstance(owner, str) else {})


def _reason(exc: BaseException) -> str:
    """What the schedd said.  The v1 bindings' ``submitMany`` raises a ``SystemError`` ("... returned a result with
    an exception set") whose cause holds the schedd's words (``Setting job owner to "root" is not permitted``)."""
    while isinstance(exc, SystemError) and (exc.__cause__ or exc.__context__) is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return str(exc)


def revised(ad: classad2.ClassAd) -> classad2.ClassAd:
    """``ad`` stamped with its revision: a 64-bit digest of its text and kept texts (the schedd's ads are new objects
    at every query; the digest is what lets the gateway know an unchanged one)."""
    content = f"{ad}\0{texts_record(ad) or ''}".encode("utf-8", "surrogatepass")
    digest = int.from_bytes(hashlib.blake2b(content, digest_size=8).digest(), "big")
    return stamp(ad, (ad.get("ClusterId"), ad.get("ProcId")), digest)


def _text(value: str | classad2.ExprTree) -> str:
    """An attribute's new value as the schedd's edit takes it: a string quoted, an expression as the client wrote it."""
    return classad2.quote(value) if isinstance(value, str) else source_text(value)


def schedd_constraint(constraint: classad2.ExprTree | None) -> tuple[str, bool]:
    """The constraint to send to the schedd for one the gateway evaluates on its translated ads, and whether it
    selects the same jobs (``False``: it could not be translated, and ``"true"`` fetches every ad).

    A constraint that does not name ``ClusterId``, ``ProcId`` or ``SchedulerClusterId`` goes as it is; one that
    does has each such reference (bare or ``MY.``) replaced by the expression computing, on the schedd's ad, the
    value the gateway shows.  "The same jobs" holds unless an attribute the constraint uses is itself an expression
    over those ids: the schedd evaluates that with its own ids (the gateway's check cannot bring such a job back).
    """
    if constraint is None:
        return "true", True
    if not _names_ids(constraint):
        return str(constraint), True
    check: list[str] = []  # the constraint with placeholders, to verify that no reference to an id is left
    final: list[str] = []
    significant: list[tuple[str, str, int]] = []  # (kind, text, position in check/final) of non-space tokens
    for match in _TOKEN.finditer(str(constraint)):
        kind, token = match.lastgroup or "other", match.group()
        if kind == "quoted" and token[1:-1].lower() in _GATEWAY_VIEW:
            return "true", False
        if kind == "name" and token.lower() in _GATEWAY_VIEW:
            if significant and significant[-1][1] == ".":  # a scoped reference: only MY.<id> is the job's own
                scope = significant[-2] if len(significant) >= 2 else None
                if scope is None or scope[0] != "name" or scope[1].lower() != "my" or (
                        len(significant) >= 3 and significant[-3][1] == "."):
                    return "true", False
                del check[scope[2]:], final[scope[2]:]
                del significant[-2:]
            check.append(f"BirdbathGatewayView{token}")
            final.append(f"({_GATEWAY_VIEW[token.lower()]})")
        else:
            check.append(token)
            final.append(token)
        if kind != "space":
            significant.append((kind, token, len(check) - 1))
    try:
        if _names_ids(classad2.ExprTree("".join(check))):
            return "true", False
        return str(classad2.ExprTree("".join(final))), True
    except classad2.ClassAdException:
        return "true", False


def _left_to_check(constraint: classad2.ExprTree | None) -> classad2.ExprTree | None:
    """The constraint the gateway must still evaluate on the schedd's answer: none when the schedd evaluated the
    client's own (one that names no id the gateway shows differently), which selected exactly those ads; a
    rewritten or untranslatable one is checked again on the translated ads."""
    return constraint if constraint is not None and _names_ids(constraint) else None


def schedd_projection(projection: Sequence[str] | None, constraint: classad2.ExprTree | None) -> list[str]:
    """The attributes to ask the schedd for: all (``[]``) without a projection, otherwise the projection, the
    attributes the constraint names (the gateway evaluates it again) and those the id translation needs."""
    if not projection:
        return []
    wanted = list(projection) + (_referenced(constraint) if constraint is not None else []) + list(_ID_ATTRIBUTES)
    seen: set[str] = set()
    names = []
    for name in wanted:
        if name.lower() not in seen:
            seen.add(name.lower())
            names.append(name)
    return names


def _references(constraint: classad2.ExprTree) -> list[str]:
    return list(classad2.ClassAd().externalRefs(constraint))


def _names_ids(constraint: classad2.ExprTree) -> bool:
    return any(ref.split(".")[-1].lower() in _GATEWAY_VIEW for ref in _references(constraint))


def _referenced(constraint: classad2.ExprTree) -> list[str]:
    """The job attributes a constraint reads: ``A``, ``MY.A``, and ``A`` of ``A.b`` (TARGET is no job attribute)."""
    names = []
    for ref in _references(constraint):
        parts = ref.split(".")
        if len(parts) == 1:
            names.append(ref)
        elif parts[0].lower() == "my":
            names.append(parts[1])
        elif parts[0].lower() != "target":
            names.append(parts[0])
    return names


def _collector(address: str | None) -> Any:
    import htcondor2

    return htcondor2.Collector(address)


def _collector_host() -> str:
    """The pool's central manager as HTCondor's configuration names it (``COLLECTOR_HOST``)."""
    import htcondor2

    return str(htcondor2.param.get("COLLECTOR_HOST", ""))


def _connect(collector: str | None, schedd_name: str | None) -> tuple[classad2.ClassAd, Any, Any]:
    """Locate the schedd (through the collector when one is named) and open both bindings on it."""
    import htcondor
    import htcondor2

    try:
        named = (schedd_name,) if schedd_name else ()  # v1's locate takes no None for "the default schedd"
        location = htcondor2.Collector(collector).locate(htcondor2.DaemonType.Schedd, *named)
        v1_location = htcondor.Collector(collector).locate(htcondor.DaemonTypes.Schedd, *named)
    except Exception as exc:
        where = f"collector {collector}" if collector else "the local pool"
        raise BackendUnavailable(f"cannot locate the schedd {schedd_name or ''} in {where}: {exc}") from None
    return location, htcondor2.Schedd(location), htcondor.Schedd(v1_location)
