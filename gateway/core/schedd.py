"""The Birdbath condorSchedd semantics (HTCondor 6.8-8.6) over any backend, free of XML.

Each public coroutine is one operation.  It runs the original's prologue (the caller's own transaction and its
lease, then permission, then for an existing job the owner check), does its work, and either returns plain Python
values or raises :class:`~gateway.core.status.BirdbathError` with the status code and message the original used.

A transaction is built here, on the reactor (``transactions.py``): beginTransaction, newCluster, newJob and submit
call no backend (a new cluster takes an id from a block the backend reserved); the backend stages the declared
files and gets the rest whole at commit.  :meth:`BirdbathSchedd.submit_transaction` takes a whole transaction in
one call (the other front ends' way to submit); it and commitTransaction end in the same
:class:`~gateway.core.transactions.QueueWriter`.  What blocks (staging, commits, reads the backend cannot answer from
memory) runs off the reactor thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

import classad2
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.threads import deferToThread
from twisted.logger import Logger, LogLevel

from backends import evaluation
from backends.interface import (
    ActionChange,
    AttributeChange,
    BackendError,
    Batch,
    Capability,
    Change,
    Changes,
    FileInfo,
    JobKey,
    QueryFailed,
    ScheddBackend,
    revision,
)
from jobmodel.classads import job_status, parse_constraint
from jobmodel.expressions import ExpressionLimits, ExpressionRefused
from jobmodel.exprtext import TextedAd
from jobmodel.files import transfer_name_problem
from jobmodel.jobs import JobAction, JobStatus, Universe
from jobmodel.values import excerpt

from .adstruct import Attr, BadAttribute, JobAdStruct, ad_to_struct, struct_to_values
from .auth import AccessPolicy, Caller, NotOwner, Permission
from .grants import Grants, InProcess, asked_lease
from .queries import QueryRunner
from .status import BirdbathError, StatusCode
from .templates import TemplateError, input_files, job_template
from .transactions import (
    AdRules,
    ClusterIds,
    Committed,
    Input,
    JobSource,
    NewCluster,
    QueueWriter,
    StagedFile,
    StagedJob,
    Transaction,
    TransactionRef,
    TransactionTable,
    WholeTransaction,
    client_ad,
    fill_defaults,
    needs_input,
)

log = Logger()

Struct = list[Attr]


@dataclass(frozen=True)
class JobAdStructs(Sequence[JobAdStruct]):
    """The answer of a job query: the matching ads, each a :class:`JobAdStruct` converted for the wire only when it is
    read (the SOAP writer writes them from the ads themselves).

    An answer of 100,000 jobs converted at once would hold millions of ``Attr`` at the same time; read in order
    (as the SOAP writer streams it), one ad's are alive at a time."""

    ads: Sequence[classad2.ClassAd]
    now: int

    def __len__(self) -> int:
        return len(self.ads)

    def __getitem__(self, index: int) -> JobAdStruct:  # type: ignore[override]
        return JobAdStruct(self.ads[index], self.now)

    def __iter__(self) -> Iterator[JobAdStruct]:
        now = self.now
        for ad in self.ads:
            yield JobAdStruct(ad, now)


@dataclass(frozen=True)
class ViewAnswer:
    """get_job_ads_among's answer: the matching ads, and what brings the asking worker's view of the jobs up to date
    (``gateway/workers/jobview.py``): the backend's change number the view then reflects, and for each job changed
    since the view's number (every job when ``reset``: the view starts again from these) ``[cluster, proc,
    values, revision]``: its ``backends.evaluation.literal_values`` and the number of the revision they were read
    from (``backends.interface.Revision``), read after that number; ``[cluster, proc, None, 0]`` when it left the
    queue."""

    ads: JobAdStructs
    number: int
    reset: bool
    changes: list[list[Any]]


CallInThread = Callable[..., Any]  # (function, *args) -> Deferred
T = TypeVar("T")

#: stub_prefix step 5's answer when a caller acts on a committed job of an owner it may not use
NOT_JOB_OWNER = "Not job owner"


def readable_job(policy: AccessPolicy, caller: Caller, ad: classad2.ClassAd | None) -> classad2.ClassAd | None:
    """stub_prefix step 5 for a job read or acted on: the ad (or None for no job) once the caller may act on its
    owner, else ``FAIL "Not job owner"`` (the core's check, and a worker's answering getJobAd from its view)."""
    if ad is not None and not policy.may_act(caller, ad.get("Owner")):
        raise BirdbathError.fail(NOT_JOB_OWNER)
    return ad


def _input_files(new: NewCluster) -> dict[str, bytes]:
    """A new cluster's input files by name, refused (FAIL) as declareFile refuses a name or a second file of it."""
    files: dict[str, bytes] = {}
    for file in new.files:
        problem = transfer_name_problem(file.name)
        if problem is not None:
            raise BirdbathError.fail(f"Failed to open {file.name!r} for writing, reason: {problem}")
        if file.name in files:
            raise BirdbathError(StatusCode.ALREADYEXISTS, f"File '{file.name}' already declared.")
        files[file.name] = file.data
    return files


def _received(data: bytes) -> StagedFile:
    """A file the core holds whole (a whole transaction's): nothing missing, nothing to check."""
    file = StagedFile(len(data), verified=True)
    file.received.add(0, len(data))
    return file


def view_rows(current: Iterable[tuple[JobKey, classad2.ClassAd | None]]) -> list[list[Any]]:
    """A view's update (:attr:`ViewAnswer.changes`) for jobs and their current ads (None: gone)."""
    return [[*key, None, 0] if ad is None
            else [*key, evaluation.literal_values(ad), revision(ad).number]  # type: ignore[union-attr]
            for key, ad in current]


@dataclass(frozen=True)
class ScheddSettings:
    max_transaction_duration: int = -1  # MAX_SOAP_TRANSACTION_DURATION; <= 0 means no limit
    leave_in_queue: str | None = None  # SOAP_LEAVE_IN_QUEUE
    max_transactions_per_caller: int = 20  # open transactions one caller (host, user, authentication) may hold
    limits: ExpressionLimits = ExpressionLimits()  # on the expression text of job ads and templates
    #: the most one getFile reads (max_request_bytes: what a client may send in one request, it may read in one)
    max_read_bytes: int = 16 * 1024 * 1024


@dataclass(frozen=True)
class TemplateResult:
    """createJobTemplate's answer: the ad, and the failure message when it could be built only partly."""

    ad: Struct
    error: str | None = None


class BirdbathSchedd:
    def __init__(self, backend: ScheddBackend, call: CallInThread, policy: AccessPolicy, clock: IReactorTime,
                 settings: ScheddSettings = ScheddSettings(), *, queries: QueryRunner | None = None,
                 clusters: ClusterIds | None = None, writer: QueueWriter | None = None) -> None:
        self.backend = backend
        self._call = call
        #: what commits (shared with the submission API)
        self.writer = writer or QueueWriter(backend, call)
        self.queries = queries or QueryRunner(call)  # without a pool of their own, queries share the backend's
        self.policy = policy
        self._clock = clock
        self.settings = settings
        self.transactions = TransactionTable(clock, self._expired)
        #: the ids and allowances granted to each process that begins transactions, and those they announce
        self.grants = Grants(self.transactions, settings.max_transactions_per_caller,
                             settings.max_transaction_duration)
        #: this process's own begins (the connections the core serves, whole transactions left open for input)
        self.begins = InProcess(self.grants, policy, settings.max_transaction_duration).begins
        #: the ids of new clusters, from blocks the backend reserved (shared with the submission API)
        self.clusters = clusters or ClusterIds.of(backend, call)
        #: the backend's version and platform texts (getVersionString, getPlatformString), read once: a front end
        #: answers them without a call (with worker processes, without crossing to the core)
        self.backend_info = backend.info()
        #: whether the backend tells which jobs changed (``Capability.CHANGES``): worker processes then keep views of
        #: the jobs' literals and ask :meth:`get_job_ads_among` (read by front ends, a constant for workers)
        self.job_views = Capability.CHANGES in backend.capabilities

    # -- the prologue -------------------------------------------------------------------------------
    async def _enter(self, caller: Caller, ref: TransactionRef | None, permission: Permission,
                     required: bool) -> Transaction | None:
        announced = self.grants.pending(ref)  # (an id begun in a worker whose "begun" the core has not read yet)
        if announced is not None:
            await announced
        txn = self.transactions.enter(ref, required, caller)
        self.policy.check(caller, permission)
        return txn

    # -- the owner check (stub_prefix step 5) --------------------------------------------------------
    def _owned(self, caller: Caller, cluster: int, proc: int) -> classad2.ClassAd | None:
        """On the backend's thread: the committed job (None when there is none), once the caller may act on its
        owner; else ``FAIL "Not job owner"``."""
        return self._may_act(caller, self.backend.get_job(cluster, proc))

    def _may_act(self, caller: Caller, ad: classad2.ClassAd | None) -> classad2.ClassAd | None:
        return readable_job(self.policy, caller, ad)

    async def _owned_job(self, caller: Caller, cluster: int, proc: int,
                         lane: CallInThread | None = None) -> classad2.ClassAd | None:
        """Step 5 alone: from the backend's memory where it can answer so, else on a thread (``lane``, by default the
        backend's)."""
        ad = self.backend.job_in_memory(cluster, proc)
        if ad is None:
            return await (lane or self._call)(self._owned, caller, cluster, proc)
        return self._may_act(caller, ad)

    def _as_owner(self, caller: Caller, cluster: int, proc: int, function: Callable[..., T], *args: Any) -> T:
        """On the backend's thread: step 5, then ``function``, in one backend call, so that no job can enter the
        queue between the check and the work."""
        self._owned(caller, cluster, proc)
        return function(*args)

    async def _change(self, caller: Caller, txn: Transaction | None, change: Change, failure: str) -> None:
        """A change to a job (or with ``proc=None`` to a cluster): outside a transaction committed at once; inside
        one checked now against the transaction as it stands and applied at its commit.  After step 5 (for a
        cluster, on each of its committed jobs) unless the transaction created the job."""
        work = (self.backend.commit, Batch(changes=[change])) if txn is None else \
            (self.backend.check_changes, txn.batch(change))
        try:
            if change.proc is None:
                created = txn is not None and any(cluster == change.cluster for cluster, _ in txn.jobs)
                await self._call(self._as_cluster_owner, caller, change.cluster, created, *work)
            elif txn is not None and (change.cluster, change.proc) in txn.jobs:
                await self._call(*work)
            else:
                await self._call(self._as_owner, caller, change.cluster, change.proc, *work)
        except BackendError as exc:
            raise BirdbathError.fail(f"{failure} ({exc})") from None
        if txn is not None:
            txn.changes.append(change)

    def _spool_call(self, caller: Caller, txn: Transaction | None, cluster: int, proc: int,
                    function: Callable[..., T], *args: Any) -> "Deferred[T]":
        """Read a job's spool off the reactor: a job of this transaction, or a committed one after step 5; any
        other is UNKNOWNJOB, since its files are another client's until that client commits (step 5 alone would
        pass, finding no committed job to own)."""
        if txn is not None and (cluster, proc) in txn.jobs:
            return self._call(function, *args)
        return self._call(self._from_committed, caller, cluster, proc, function, *args)

    def _from_committed(self, caller: Caller, cluster: int, proc: int, function: Callable[..., T], *args: Any) -> T:
        if self._owned(caller, cluster, proc) is None:
            raise BirdbathError(StatusCode.UNKNOWNJOB, "Unknown job")
        return function(*args)

    def _as_cluster_owner(self, caller: Caller, cluster: int, created: bool, function: Callable[..., T],
                          *args: Any) -> T:
        """On the backend's thread: refuse unless the caller may act on every committed job of the cluster, then
        ``function``.  A cluster without committed jobs (nor jobs of the caller's transaction, ``created``) is
        ``FAIL "Cluster not found"`` for an identified caller and nothing to do for an anonymous one: HTCondor's
        stub looked for its first job only when the caller had authenticated (``soap->user``)."""
        jobs = self.backend.query(parse_constraint(f"ClusterId == {int(cluster)}"), ["ClusterId", "ProcId", "Owner"])
        if not jobs and not created and self.policy.identified(caller):
            raise BirdbathError.fail("Cluster not found")
        for ad in jobs:
            if not self.policy.may_act(caller, ad.get("Owner")):
                raise BirdbathError.fail(
                    f"Not cluster owner: job {cluster}.{ad.get('ProcId')} of cluster {cluster} has another owner")
        return function(*args)

    def _expired(self, txn: Transaction) -> None:
        """Roll back what ``txn`` staged.  An empty transaction (begun and left: a client that gave up, or one that
        begins and never uses them) is said at debug level only: at info, its line cost the core more than the whole
        begin (bench/README.md, session 17)."""
        level = LogLevel.info if txn.jobs or txn.changes else LogLevel.debug
        log.emit(level, "transaction {id} expired after {duration}s idle; rolling back", id=txn.id,
                 duration=txn.duration)
        self._discard(txn.staged()).addErrback(
            lambda failure: log.failure("rolling back expired transaction {id}", failure, id=txn.id))

    def _discard(self, jobs: list[tuple[int, int]]) -> "Deferred[object]":
        return self.writer.discard(jobs)

    def _now(self) -> int:
        return int(self._clock.seconds())

    async def abort_all(self) -> None:
        """Roll back every open transaction (at shutdown: an uncommitted transaction never survives), and give the
        cluster ids not handed out back to the backend (the next start goes on from the last one used)."""
        for txn in self.transactions.close_all():
            await self._discard(txn.staged())
        await self.clusters.give_back()

    # -- information --------------------------------------------------------------------------------
    # -- transactions -------------------------------------------------------------------------------
    async def begin_transaction(self, caller: Caller, duration: int) -> Transaction:
        """Begun in this process as in a worker (``grants.Begins``): the core is one more process granted ids."""
        return await self.begins.begin(caller, duration)

    async def commit_transaction(self, caller: Caller, ref: TransactionRef | None) -> None:
        txn = await self._enter(caller, ref, Permission.WRITE, required=True)
        for (cluster, proc), staged in txn.jobs.items():
            if staged.submitted:
                await self._check_files(cluster, proc, staged, "Commit refused (the transaction is still open: "
                                        "send what is missing and commit again, or abort it)")
        self.transactions.close(txn)
        await self._commit(txn)

    async def _commit(self, txn: Transaction, inputs: Sequence[Input] = ()) -> None:
        try:
            await self.writer.commit(txn, inputs)
        except BackendError as exc:
            raise BirdbathError.fail(f"Commit failed, transaction rolled back: {exc}") from None

    async def submit_transaction(self, caller: Caller, whole: WholeTransaction) -> Committed:
        """A whole transaction in one call, the way every front end but Birdbath's own submits: its clusters (each
        job's ad made as ``submit`` makes it, with the cluster's input files in its spool) and its changes (checked
        as ``setAttribute`` and the job actions check them), committed at once, atomic and durable.  With
        ``whole.input_lease``, jobs that read files the client has not sent yet leave the transaction open for
        them, as the caller's Birdbath transaction (``Committed.transaction``).  Refused with nothing left behind:
        a BirdbathError as those operations' (SubmitDescriptionError for a description condor_submit refuses)."""
        self.policy.check(caller, Permission.WRITE)
        txn = Transaction(0, 0, caller)  # not in the table (no client can name it) unless it stays open
        inputs: list[Input] = []
        awaiting: list[tuple[int, int]] = []
        for new in whole.clusters:
            files = _input_files(new)
            cluster = await self._new_cluster_id()
            jobs = new.jobs if new.described is None else await deferToThread(new.described.ads, cluster)
            if not jobs:
                raise BirdbathError.fail(f"Could not create new cluster: cluster {cluster} has no job")
            for proc, source in enumerate(jobs):
                staged = txn.jobs[(cluster, proc)] = StagedJob({name: _received(data) for name, data in files.items()})
                staged.ad = self._job_ad(caller, cluster, proc, staged, source, new)
                inputs += [((cluster, proc), name, data) for name, data in files.items()]
                if whole.input_lease > 0 and needs_input(staged.ad):
                    awaiting.append((cluster, proc))
        for change in whole.changes:
            where = f"{change.cluster}" if change.proc is None else f"{change.cluster}.{change.proc}"
            await self._change(caller, txn, change, f"Failed to change {where}")
        if not awaiting:
            await self._commit(txn, inputs)
            return Committed(list(txn.jobs))
        held = await self.begins.begin(caller, whole.input_lease, "a submission awaiting input")
        held.jobs, held.changes = txn.jobs, txn.changes  # (the table's own: opened in this process)
        try:
            await self.writer.stage(held, inputs)
        except BackendError as exc:
            self.transactions.close(held)
            await self._discard(held.staged())
            raise BirdbathError.fail(f"Could not stage the input files: {exc}") from None
        return Committed(list(held.jobs), awaiting, TransactionRef(held.id, held.duration))

    async def _new_cluster_id(self) -> int:
        try:
            return await self.clusters.next()
        except BackendError as exc:
            raise BirdbathError.fail(f"Could not create new cluster: {exc}") from None

    async def abort_transaction(self, caller: Caller, ref: TransactionRef | None) -> None:
        txn = await self._enter(caller, ref, Permission.WRITE, required=True)
        self.transactions.close(txn)
        await self._discard(txn.staged())

    async def extend_transaction(self, caller: Caller, ref: TransactionRef | None, duration: int) -> Transaction:
        txn = await self._enter(caller, ref, Permission.WRITE, required=True)
        txn.duration = asked_lease(caller, "extendTransaction", duration, self.settings.max_transaction_duration)
        return txn

    # -- clusters and jobs --------------------------------------------------------------------------
    async def new_cluster(self, caller: Caller, ref: TransactionRef | None) -> int:
        txn = await self._enter(caller, ref, Permission.WRITE, required=True)
        cluster = await self._new_cluster_id()
        txn.active_cluster, txn.next_proc = cluster, 0
        return cluster

    async def new_job(self, caller: Caller, ref: TransactionRef | None, cluster: int) -> int:
        txn = await self._enter(caller, ref, Permission.WRITE, required=True)
        if cluster != txn.active_cluster:
            raise BirdbathError.fail(
                f"Could not create new job: cluster {cluster} is not the cluster this transaction created")
        proc = txn.next_proc
        txn.next_proc += 1
        txn.jobs[(cluster, proc)] = StagedJob()
        return proc

    async def submit(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int,
                     attrs: Iterable[Attr] | None) -> None:
        txn = await self._enter(caller, ref, Permission.WRITE, required=True)
        staged = txn.jobs.get((cluster, proc))
        if staged is None:
            raise BirdbathError(StatusCode.UNKNOWNJOB, "Unknown cluster or job")
        await self._check_files(cluster, proc, staged, f"Failed to submit job {cluster}.{proc}")
        staged.ad = self._job_ad(caller, cluster, proc, staged, list(attrs or ()))

    def _job_ad(self, caller: Caller, cluster: int, proc: int, staged: StagedJob, source: JobSource,
                new: NewCluster = NewCluster()) -> classad2.ClassAd:
        """The job ad ``submit`` builds (§5.2): the client's attributes (``transactions.client_ad``), the defaults
        of ``new``'s rules (``transactions.fill_defaults``: Birdbath's unless a whole transaction's cluster says
        the submission API's), then the Owner rules."""
        try:
            ad, client_iwd = client_ad(source, self.settings.limits)
        except BadAttribute as exc:
            raise BirdbathError.fail(f"Failed to set job {cluster}.{proc}'s {exc.name} attribute: {exc}") from None
        group = f"{self.backend_info.schedd_name}#{cluster}" if new.rules is AdRules.SUBMISSION_API else None
        fill_defaults(ad, new.rules, self.backend.spool_directory(cluster, proc), list(staged.files),
                      client_iwd=client_iwd, retention=new.retention, submission=group)
        self._apply_owner(caller, cluster, proc, ad)
        return ad

    def _apply_owner(self, caller: Caller, cluster: int, proc: int, ad: classad2.ClassAd) -> None:
        try:
            ad["Owner"] = self.policy.submit_owner(caller, ad.get("Owner"))
        except NotOwner as exc:
            raise BirdbathError.fail(f"Failed to set job {cluster}.{proc}'s Owner attribute: {exc}") from None

    async def _check_files(self, cluster: int, proc: int, staged: StagedJob, failure: str) -> None:
        """Refuse (FAIL, naming the file) a job whose declared files have not fully arrived or do not match their
        declared MD5; a file verified once is read again only after another chunk was written to it."""
        for name, file in staged.files.items():
            if file.missing:
                raise BirdbathError.fail(
                    f"{failure}: file '{name}' of job {cluster}.{proc} is incomplete: {file.missing} of its "
                    f"{file.size} declared bytes have not been received")
            if file.md5 is None or file.verified:
                continue
            try:
                actual = await self._call(self.backend.file_md5, cluster, proc, name)
            except BackendError as exc:
                raise BirdbathError.fail(f"{failure}: {exc}") from None
            if actual.lower() != file.md5.lower():
                raise BirdbathError.fail(
                    f"{failure}: file '{name}' of job {cluster}.{proc} does not match its declared MD5 hash "
                    f"(declared {file.md5}, received {actual})")
            file.verified = True

    async def remove_cluster(self, caller: Caller, ref: TransactionRef | None, cluster: int,
                             reason: str | None) -> None:
        txn = await self._enter(caller, ref, Permission.WRITE, required=False)
        await self._act(caller, txn, JobAction.REMOVE, cluster, None, reason, "Failed to abort jobs in the cluster")

    async def remove_job(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int,
                         reason: str | None) -> None:
        txn = await self._enter(caller, ref, Permission.WRITE, required=False)
        if txn is None or (cluster, proc) not in txn.jobs:
            ad = await self._owned_job(caller, cluster, proc)
            if ad is not None and job_status(ad) in (JobStatus.REMOVED, JobStatus.COMPLETED):
                log.info("removeJob from {host} ({user}): job {cluster}.{proc} is {status} already; SUCCESS and "
                         "left as it is (HTCondor's abortJob marked any job removed)", host=caller.host,
                         user=caller.user or "anonymous", cluster=cluster, proc=proc,
                         status=job_status(ad).name.lower())
                return
        await self._act(caller, txn, JobAction.REMOVE, cluster, proc, reason, "Failed to abort job")

    async def hold_job(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int,
                       reason: str | None, system_hold: bool) -> None:
        txn = await self._enter(caller, ref, Permission.WRITE, required=False)
        await self._act(caller, txn, JobAction.HOLD, cluster, proc, reason, "Failed to hold job.",
                        system=system_hold)

    async def release_job(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int,
                          reason: str | None) -> None:
        txn = await self._enter(caller, ref, Permission.WRITE, required=False)
        await self._act(caller, txn, JobAction.RELEASE, cluster, proc, reason, "Failed to release job.")

    async def _act(self, caller: Caller, txn: Transaction | None, action: JobAction, cluster: int, proc: int | None,
                   reason: str | None, failure: str, system: bool = False) -> None:
        await self._change(caller, txn, ActionChange(action, cluster, proc, reason, system), failure)

    # -- queries ------------------------------------------------------------------------------------
    async def get_job_ads(self, caller: Caller, ref: TransactionRef | None, constraint: str | None) -> "JobAdStructs":
        ads = await self._query_jobs(caller, ref, constraint, self.backend.query)
        return JobAdStructs(ads, self._now())

    async def get_job_ads_among(self, caller: Caller, ref: TransactionRef | None, constraint: str | None,
                                candidates: Sequence[JobKey], seen: int) -> ViewAnswer:
        """getJobAds for a worker that evaluated ``constraint`` over its view of the jobs as of change number
        ``seen``: the ads of the jobs among ``candidates`` (those its view found true, and those it cannot evaluate)
        and among the jobs changed since ``seen`` for which ``constraint`` is true now, evaluated on their current
        ads; with a backend that cannot tell what changed since then, over the whole queue as :meth:`get_job_ads`.
        The answer carries the view's update (:class:`ViewAnswer`).  The checks, limits and failures are
        get_job_ads'."""
        number, reset, ads, changes = await self._query_jobs(caller, ref, constraint, self._among,
                                                             [tuple(key) for key in candidates], seen,
                                                             logged=False)  # (the asking worker logged it)
        return ViewAnswer(JobAdStructs(ads, self._now()), number, reset, changes)

    async def _query_jobs(self, caller: Caller, ref: TransactionRef | None, constraint: str | None,
                          function: Callable[..., T], *args: Any, logged: bool = True) -> T:
        """A client's job query: READ permission, its constraint parsed within the limits (an unparsable one
        logged unless ``logged`` is false), then ``function(constraint, *args, budget=...)`` on the query pool in the
        caller's turn."""
        await self._enter(caller, ref, Permission.READ, required=False)
        try:
            parsed = self.queries.constraint(constraint, blank_is_every=False, logged=logged)
            return await self.queries.run(caller, function, parsed, *args)
        except (ExpressionRefused, QueryFailed) as exc:
            raise BirdbathError.fail(f"Query failed: {exc}") from None

    def _among(self, constraint: classad2.ExprTree | None, candidates: list[JobKey], seen: int, *,
               budget: float) -> tuple[int, bool, list[classad2.ClassAd], list[list[Any]]]:
        """On the query pool: what changed since ``seen`` is asked first, so every job read after it is at least as
        new as the number answered (the backend publishes a change before counting it)."""
        changes = self._changes_since(seen)
        if changes.keys is None:
            return changes.number, True, self.backend.query(constraint, budget=budget), self._every_row()
        current = [(key, self.backend.get_job(*key)) for key in sorted(changes.keys.union(candidates))]
        ads = evaluation.filtered([ad for _, ad in current if ad is not None], constraint, budget)
        return changes.number, False, ads, view_rows((key, ad) for key, ad in current if key in changes.keys)

    def _changes_since(self, seen: int) -> Changes:
        return self.backend.changes_since(seen) if self.job_views else Changes(0, None)

    def _every_row(self) -> list[list[Any]]:
        return view_rows((revision(ad).key, ad) for ad in self.backend.query(None))  # type: ignore[union-attr]

    async def view_since(self, seen: int) -> ViewAnswer:
        """A worker's view brought up to date from change number ``seen``, without a query (no ads): asked when the
        worker finds its view behind the number the core publishes (``gateway/workers/changenumber.py``), so that
        its next reads are answered from the view.  Not a client's operation: it takes no caller's turn."""
        number, reset, rows = await self.queries.read(self._view_since, seen)
        return ViewAnswer(JobAdStructs([], self._now()), number, reset, rows)

    def _view_since(self, seen: int) -> tuple[int, bool, list[list[Any]]]:
        changes = self._changes_since(seen)
        if changes.keys is None:
            return changes.number, True, self._every_row()
        return changes.number, False, view_rows((key, self.backend.get_job(*key)) for key in sorted(changes.keys))

    async def get_job_ad(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int) -> JobAdStruct:
        await self._enter(caller, ref, Permission.READ, required=False)
        ad = await self._owned_job(caller, cluster, proc, self.queries.read)
        if ad is None:
            raise BirdbathError(StatusCode.UNKNOWNJOB, "Specified job is unknown")
        return JobAdStruct(ad, self._now())

    # -- files --------------------------------------------------------------------------------------
    async def declare_file(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int,
                           name: str | None, size: int, md5: str | None) -> None:
        txn = await self._enter(caller, ref, Permission.WRITE, required=True)
        staged = await self._staged(caller, txn, cluster, proc)
        name = name or ""
        problem = transfer_name_problem(name)
        if problem is not None:
            raise BirdbathError.fail(f"Failed to open {name!r} for writing, reason: {problem}")
        if size < 0:
            raise BirdbathError.fail(f"Invalid size {size} for file '{name}': a size must not be negative")
        if name in staged.files:
            raise BirdbathError(StatusCode.ALREADYEXISTS, f"File '{name}' already declared.")
        staged.staged = True
        try:
            await self._call(self.backend.stage_file, cluster, proc, name)
        except BackendError as exc:
            raise BirdbathError.fail(f"Failed to open '{name}' for writing, reason: {exc}") from None
        staged.files[name] = StagedFile(size, md5 or None)

    async def send_file(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int,
                        name: str | None, offset: int, data: bytes | None) -> None:
        txn = await self._enter(caller, ref, Permission.WRITE, required=True)
        staged = await self._staged(caller, txn, cluster, proc)
        name = name or ""
        file = staged.files.get(name)
        if file is None:
            raise BirdbathError.fail(f"File '{name}' has not been declared.")
        data = data or b""
        if offset < 0:
            raise BirdbathError.fail(f"Invalid offset {offset} for file '{name}'")
        end = offset + len(data)
        if end > file.size:
            raise BirdbathError.fail(f"Data for file '{name}' would end at byte {end}, beyond its declared size of "
                                     f"{file.size} bytes")
        file.verified = False
        try:
            await self._call(self.backend.write_file, cluster, proc, name, offset, data)
        except BackendError as exc:
            file.received.remove(offset, end)  # what that range holds now is unknown: it must be sent again
            raise BirdbathError.fail(str(exc)) from None
        file.received.add(offset, end)

    async def restage(self, txn: Transaction, jobs: Sequence[JobKey]) -> None:
        """Forget the files declared for ``jobs`` of ``txn`` and discard what was staged for them, so that their
        input sent again starts clean (an upload cut short: a dropped connection, a worker killed mid-way)."""
        discarded = [key for key in jobs if txn.jobs[key].staged]
        for key in jobs:
            txn.jobs[key].files.clear()
            txn.jobs[key].staged = False
        await self._discard(discarded)

    async def _staged(self, caller: Caller, txn: Transaction, cluster: int, proc: int) -> StagedJob:
        """A job this transaction created; for any other, step 5 comes first (a committed job of another owner
        is "Not job owner", as in the original), then UNKNOWNJOB."""
        staged = txn.jobs.get((cluster, proc))
        if staged is None:
            await self._owned_job(caller, cluster, proc)
            raise BirdbathError(StatusCode.UNKNOWNJOB, "Unknown job")
        return staged

    async def get_file(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int,
                       name: str | None, offset: int, length: int) -> bytes:
        txn = await self._enter(caller, ref, Permission.READ, required=False)
        if length <= 0:
            raise BirdbathError.fail("LENGTH must be >= 0")
        if offset < 0:
            raise BirdbathError.fail(f"Failed to seek to offset {offset} in file '{name}'")
        most = self.settings.max_read_bytes
        try:
            data = await self._spool_call(caller, txn, cluster, proc, self.backend.read_file, cluster, proc,
                                          name or "", offset, min(length, most + 1))
        except BackendError as exc:
            raise BirdbathError.fail(str(exc)) from None
        if len(data) > most:  # (a whole file asked for at once, as many clients do, stays within memory)
            raise BirdbathError.fail(
                f"Failed to read file '{name}': more than {most:,} bytes from offset {offset} were asked for at once, "
                f"more than one answer carries (max_request_bytes in [gateway]); read it in pieces")
        return data

    async def list_spool(self, caller: Caller, ref: TransactionRef | None, cluster: int,
                         proc: int) -> Sequence[FileInfo]:
        txn = await self._enter(caller, ref, Permission.READ, required=False)
        try:
            return await self._spool_call(caller, txn, cluster, proc, self.backend.list_files, cluster, proc)
        except BackendError as exc:
            raise BirdbathError.fail(str(exc)) from None

    async def close_spool(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int) -> None:
        txn = await self._enter(caller, ref, Permission.WRITE, required=False)
        await self._change(caller, txn, AttributeChange(cluster, proc, "FilesRetrieved", classad2.ExprTree("true")),
                           "Failed to set FilesRetrieved attribute.")

    # -- the caller -----------------------------------------------------------------------------------
    async def who_am_i(self, caller: Caller) -> dict[str, str | None]:
        """Who the gateway takes the caller for: the owner its jobs get and whose jobs are its own, the user it
        identified (None: anonymous) and how.  Clients need it to list "your jobs" as condor_q does, since over TLS
        or with a token the local login name says nothing about who the gateway says one is."""
        self.policy.check(caller, Permission.READ)
        return {"owner": self.policy.effective_user(caller),
                "user": caller.user if self.policy.identified(caller) else None,
                "authentication": caller.authentication.value}

    # -- scheduling and templates -------------------------------------------------------------------
    async def request_reschedule(self, caller: Caller) -> None:
        self.policy.check(caller, Permission.WRITE)
        await self._call(self.backend.reschedule)

    async def discover_job_requirements(self, caller: Caller, attrs: Iterable[Attr] | None) -> list[str]:
        """The files the job would transfer in.  An attribute that cannot be part of a ClassAd is left out and
        logged: HTCondor's ``convert_adStruct_to_ad`` ignored a failed ``Insert`` and the stub answered SUCCESS."""
        self.policy.check(caller, Permission.READ)
        ad = TextedAd()
        for attr in attrs or ():
            try:
                for name, value in struct_to_values((attr,), self.settings.limits):
                    ad[name] = value
            except BadAttribute as exc:
                log.warn("discoverJobRequirements from {host} ({user}): {problem}; left out, as HTCondor did",
                         host=caller.host, user=caller.user or "anonymous", problem=excerpt(str(exc), 400))
        ad["Iwd"] = "/tmp"
        return input_files(ad)

    async def create_job_template(self, caller: Caller, cluster: int, proc: int, owner: str | None, universe: Universe,
                            cmd: str | None, args: str | None, requirements: str | None) -> TemplateResult:
        """The template HTCondor's stub made.  A ``requirements`` text that cannot be used (it does not parse, is
        over the expression limits, or holds a literal the library would change) is dropped and logged, the
        template keeping ``Requirements = true``: HTCondor's stub ignored its failed ``AssignExpr`` and answered
        SUCCESS with CreateJobAd's ``true`` (8.x; 7.2.4's ad then had no Requirements at all)."""
        self.policy.check(caller, Permission.READ)
        info = self.backend.info()
        now = self._now()

        def build(text: str | None) -> classad2.ClassAd:
            return job_template(cluster, proc, owner, int(universe), cmd, args, text, now=now, version=info.version,
                                platform=info.platform, leave_in_queue=self.settings.leave_in_queue,
                                limits=self.settings.limits)

        try:
            try:
                ad = build(requirements)
            except TemplateError:
                raise
            except (ValueError, classad2.ClassAdException) as exc:
                reason = str(exc) if isinstance(exc, ValueError) else "it does not parse"
                log.warn("createJobTemplate from {host} ({user}): requirements {text} dropped ({reason}); the "
                         "template keeps Requirements = true, as HTCondor's did", host=caller.host,
                         user=caller.user or "anonymous",
                         text=excerpt(requirements or ""), reason=reason)
                ad = build(None)
        except TemplateError as exc:
            return TemplateResult(ad_to_struct(exc.ad, now), str(exc))
        return TemplateResult(ad_to_struct(ad, now))
