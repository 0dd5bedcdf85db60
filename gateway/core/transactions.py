"""Transactions, built here and handed to the backend whole: the one path by which jobs enter the queue
(docs/architecture.md).

Every front end's submission ends in :meth:`QueueWriter.commit`: Birdbath's commitTransaction of a transaction its
client built call by call, and the whole transactions other front ends hand the core at once
(:class:`WholeTransaction`: the REST face, DAG submission, the low-latency service; the submission API with a
:class:`StagingArea`'s files).  A new job's ad is made by :func:`client_ad` and :func:`fill_defaults` alone,
whichever front end it came from; what the schedd assigns as the job enters the queue is the backend's.

A transaction is the gateway's record of what a client builds (clusters, jobs with their ads and declared files,
changes to queued jobs); the backend sees it only at commit, as one :class:`~backends.interface.Batch`, and before
that only stages the files sent for its jobs.  An open Birdbath transaction is an idle lease, armed for ``duration``
seconds at begin; every call that carries the transaction re-arms it with the ``duration`` carried *in that call*;
when it fires, the owner's expiry callback discards the transaction and its staged files.  The clock is injected so
tests drive expiry without sleeping.

A transaction belongs to the caller that began it (host, user and how it was identified): its id comes from
``secrets``, so it cannot be guessed from one's own, and anyone else who sends it is told it does not exist.  Ids
are drawn here (:meth:`TransactionTable.draw`) and granted in blocks to the processes that begin transactions, which
announce each they begin (``grants.py``).
"""

from __future__ import annotations

import enum
import secrets
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import classad2
from twisted.internet.defer import Deferred, DeferredLock, succeed
from twisted.internet.interfaces import IDelayedCall, IReactorTime

from backends.interface import Batch, Change, JobKey, NewJob, ScheddBackend
from jobmodel.expressions import ExpressionLimits
from jobmodel.exprtext import TextedAd, carry_texts
from jobmodel.files import ByteRanges
from jobmodel.jobs import JobStatus, Universe

from .adstruct import Attr, AttrType, BadAttribute, attribute_value, check_name, wire_value
from .auth import Caller, replaced_at_submit
from .status import BirdbathError, invalid_transaction
from .templates import LEAVE_IN_QUEUE


@dataclass(frozen=True)
class TransactionRef:
    """What a client sends: the ``Transaction`` element as received (``None`` fields when absent)."""

    id: int | None
    duration: int | None

    @property
    def is_null(self) -> bool:
        return not self.id


def names_none(ref: TransactionRef | None) -> bool:
    """Whether an operation names no transaction: no ref, or the null one (id 0), as clients send it outside one."""
    return ref is None or ref.is_null


@dataclass
class StagedFile:
    """A file declared for a job of this transaction: its declared size and MD5, and what has arrived of it."""

    size: int
    md5: str | None = None
    received: ByteRanges = field(default_factory=ByteRanges)
    verified: bool = False  # the declared MD5 matched the file as it is now

    @property
    def missing(self) -> int:
        """Bytes of the declared size not received (sends beyond the declared size are refused)."""
        return self.size - self.received.covered()


@dataclass
class StagedJob:
    """A job created by ``newJob`` in this transaction, with the files declared for it (in declaration order) and,
    once submitted, its ad."""

    files: dict[str, StagedFile] = field(default_factory=dict)
    ad: classad2.ClassAd | None = None
    staged: bool = False  # the backend was asked to stage a file for it (there may be something to discard)

    @property
    def submitted(self) -> bool:
        return self.ad is not None


@dataclass(eq=False)
class Transaction:
    """One open Birdbath transaction: the lease plus everything the client built in it."""

    id: int
    duration: int
    caller: Caller  # who began it: the only caller that may use it
    active_cluster: int | None = None
    next_proc: int = 0  # of the active cluster
    jobs: dict[JobKey, StagedJob] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)  # to queued jobs (or its own), applied at commit in order
    timer: IDelayedCall | None = None

    def batch(self, *more: Change) -> Batch:
        """What the backend commits: the submitted jobs, then the changes (and ``more`` after them)."""
        return Batch([NewJob(cluster, proc, job.ad, tuple(job.files)) for (cluster, proc), job in self.jobs.items()
                      if job.ad is not None], [*self.changes, *more])

    def staged(self) -> list[JobKey]:
        """Its jobs for which files were staged (what an abort, or a commit that leaves them out, discards)."""
        return [key for key, job in self.jobs.items() if job.staged]


class ClusterIds:
    """Cluster ids for new clusters, handed out from blocks the backend reserved (``reserve``: a Deferred of one),
    so that a new cluster costs the backend a call once per block; at shutdown the rest of the block goes back
    (``release``), so that the next start goes on from the last id handed out, as condor_schedd's does."""

    def __init__(self, reserve: Callable[[], "Deferred[range]"],
                 release: Callable[[range], Deferred[None]]) -> None:
        self._reserve = reserve
        self._release = release
        self._block: range = range(0)
        self._next = 0
        self._refill = DeferredLock()  # one reservation at a time; the others wait for it

    @classmethod
    def of(cls, backend: ScheddBackend, call: Callable[..., Deferred[Any]]) -> ClusterIds:
        """The ids of ``backend``'s blocks, reserved and given back through ``call`` (its thread)."""
        return cls(lambda: call(backend.reserve_clusters), lambda unused: call(backend.release_clusters, unused))

    async def give_back(self) -> None:
        """Hand the ids of the block not handed out yet back to the backend (at shutdown): without it, each restart
        skipped the rest of a block (cluster 21, then 101).  A later :meth:`next` reserves again."""
        await self._refill.acquire()
        try:
            unused, self._block, self._next = self._block[self._next:], range(0), 0
            if unused:
                await self._release(unused)
        finally:
            self._refill.release()

    async def next(self) -> int:
        if self._next >= len(self._block):
            await self._refill.acquire()
            try:
                while self._next >= len(self._block):  # (another caller may have refilled it meanwhile)
                    self._block, self._next = await self._reserve(), 0
                return self._take()
            finally:
                self._refill.release()
        return self._take()

    def _take(self) -> int:
        cluster = self._block[self._next]
        self._next += 1
        return cluster


#: the largest transaction id (ids are 1 .. MAX_ID)
MAX_ID = 2**31 - 1


class TransactionTable:
    """The open transactions of one gateway, keyed by the opaque id handed to clients."""

    def __init__(self, clock: IReactorTime, on_expire: Callable[[Transaction], None]) -> None:
        self._clock = clock
        self._on_expire = on_expire
        self._open: dict[int, Transaction] = {}
        #: open transactions per caller, kept with ``_open`` (the per-caller limit is checked at every begin)
        self._held: Counter[Caller] = Counter()
        #: ids drawn and not opened: granted to a process that begins transactions (``grants.Grants``), or retired
        #: with a process that died; never drawn again
        self._reserved: set[int] = set()

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, txn: object) -> bool:
        return isinstance(txn, Transaction) and self._open.get(txn.id) is txn

    def held_by(self, caller: Caller) -> int:
        """How many open transactions ``caller`` began (for the per-caller limit)."""
        return self._held[caller]

    def open(self, duration: int, caller: Caller, txn_id: int | None = None) -> Transaction:
        """Register a new transaction of ``caller`` under ``txn_id`` (one :meth:`draw` gave; by default drawn now) and
        arm its lease."""
        txn = Transaction(self.draw() if txn_id is None else txn_id, duration, caller)
        self._reserved.discard(txn.id)
        self._open[txn.id] = txn
        self._held[caller] += 1
        self._arm(txn, duration)
        return txn

    def knows(self, txn_id: int) -> bool:
        """Whether ``txn_id`` is the id of an open transaction."""
        return txn_id in self._open

    def held(self, ref: TransactionRef, caller: Caller) -> Transaction | None:
        """The open transaction ``ref`` names when ``caller`` began it, its lease left alone (None otherwise)."""
        txn = None if names_none(ref) else self._open.get(ref.id)  # type: ignore[arg-type]
        return txn if txn is not None and txn.caller == caller else None

    def enter(self, ref: TransactionRef | None, required: bool, caller: Caller) -> Transaction | None:
        """The transaction checks every operation starts with (``stub_prefix`` steps 1-3); renews the lease.

        Another caller's transaction is INVALIDTRANSACTION, exactly as an unknown id, and its lease is left alone."""
        if names_none(ref):
            if required:
                raise invalid_transaction()
            return None
        txn = self._open.get(ref.id)
        if txn is None or txn.caller != caller:
            raise invalid_transaction()
        duration = ref.duration or 0
        if duration < 1:
            raise BirdbathError.fail("Could not extend transaction")
        self._arm(txn, duration)
        return txn

    def close(self, txn: Transaction) -> None:
        """Forget a transaction (commit, abort or expiry); later use of its id is INVALIDTRANSACTION."""
        self._forget(txn)
        if txn.timer is not None and txn.timer.active():
            txn.timer.cancel()
        txn.timer = None

    def close_all(self) -> list[Transaction]:
        """Forget every open transaction (at shutdown) and return them so their work can be aborted."""
        txns = list(self._open.values())
        for txn in txns:
            self.close(txn)
        return txns

    def _arm(self, txn: Transaction, seconds: int) -> None:
        if txn.timer is not None and txn.timer.active():
            txn.timer.reset(seconds)
        else:
            txn.timer = self._clock.callLater(seconds, self._expire, txn)

    def _expire(self, txn: Transaction) -> None:
        txn.timer = None
        if self._forget(txn):
            self._on_expire(txn)

    def _forget(self, txn: Transaction) -> bool:
        """Drop an open transaction (False: it was not open)."""
        if self._open.pop(txn.id, None) is None:
            return False
        self._held[txn.caller] -= 1
        if not self._held[txn.caller]:
            del self._held[txn.caller]
        return True

    def draw(self) -> int:
        """A new id, random from 1 to 2**31 - 1 (a valid xsd:int, never 0), never one in use or drawn before and not
        opened (it is reserved until :meth:`open` takes it, or for good).

        The original's ``(time << 8) + counter`` let a client find another's open transaction from its own id.
        Positive only: spyne's xsd:int parser refuses ten-digit negative numbers, which the original's ids could be,
        and clients must get their id through."""
        while True:
            candidate = secrets.randbelow(MAX_ID) + 1
            if candidate not in self._open and candidate not in self._reserved:
                self._reserved.add(candidate)
                return candidate


# -- whole transactions ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class InputFile:
    """An input file of a new job, whole: its name in the job's spool and its bytes."""

    name: str
    data: bytes


class DescribedCluster(Protocol):
    """A cluster whose job ads are made from a description with the id the core gives it (the ads may name it):
    ``jobmodel.submitfile.ClusterDescription`` (a submit description), ``jobmodel.dagman.DagDescription``."""

    def ads(self, cluster: int) -> list[classad2.ClassAd]: ...


class AdRules(enum.Enum):
    """Whose defaults a new job's ad gets (:func:`fill_defaults`)."""

    BIRDBATH = "birdbath"  # condorSchedd's submit, and the front ends that submit as it does
    SUBMISSION_API = "submission"  # the submission API's submit (QMF's and Aviary's)


#: a new job's ad as a front end hands it: a ClassAd the gateway built, or a client's typed attributes
JobSource = classad2.ClassAd | Sequence[Attr]


@dataclass(frozen=True)
class NewCluster:
    """One new cluster of a :class:`WholeTransaction`: its jobs' ads (``jobs``, or those ``described`` makes, off
    the reactor, with the cluster's id; SubmitDescriptionError when it cannot), the input files every one of its
    jobs gets in its spool, and whose defaults the ads get."""

    jobs: Sequence[JobSource] = ()
    files: Sequence[InputFile] = ()
    described: DescribedCluster | None = None
    #: whose defaults its jobs' ads get: Birdbath's, or the submission API's (QMF's and Aviary's, which group
    #: the cluster's jobs as the Submission ``<schedd>#<cluster>`` unless their ads name one)
    rules: AdRules = AdRules.BIRDBATH
    #: seconds a finished job with input files stays queued for its output (the submission API's rules only)
    retention: int = 0


@dataclass(frozen=True)
class WholeTransaction:
    """What a front end submits in one call (``BirdbathSchedd.submit_transaction``): new clusters, then changes to
    queued jobs, committed together.  With ``input_lease`` above 0, jobs that read files the client has not sent
    yet (:func:`needs_input`) wait for them: the transaction stays open that many seconds, for declareFile,
    sendFile and commitTransaction."""

    clusters: Sequence[NewCluster]
    changes: Sequence[Change] = ()
    input_lease: int = 0


@dataclass(frozen=True)
class Committed:
    """What a whole transaction made: every new job, in order; those waiting for input and the transaction, still
    open, they wait in (None when it was committed)."""

    jobs: Sequence[JobKey]
    awaiting: Sequence[JobKey] = ()
    transaction: TransactionRef | None = None


def needs_input(ad: classad2.ClassAd) -> bool:
    """Whether a job reads files the client must send: a relative executable it transfers, a relative standard
    input, or transfer_input_files that are not URLs."""
    def text(name: str, default: str) -> str:
        value = ad.get(name, default)
        return str(value).upper() if isinstance(value, bool) else value if isinstance(value, str) else default

    relative = [text("In", "/dev/null")]
    if text("TransferExecutable", "TRUE").upper() != "FALSE":
        relative.append(text("Cmd", "/"))
    if any(value and value != "/dev/null" and not value.startswith("/") for value in relative):
        return True
    return any(name.strip() and "://" not in name for name in text("TransferInput", "").split(","))


# -- a new job's ad ----------------------------------------------------------------------------------------------------
#: the submission API's defaults, as the originals (QMF's and Aviary's submit) set them
API_DEFAULTS: tuple[tuple[str, object], ...] = (
    ("JobStatus", int(JobStatus.IDLE)), ("RemoteUserCpu", 0.0), ("JobPrio", 0), ("ImageSize", 0),
    ("JobUniverse", int(Universe.VANILLA)), ("MaxHosts", 1), ("MinHosts", 1), ("CurrentHosts", 0))


def fill_defaults(ad: classad2.ClassAd, rules: AdRules, spool: str, files: Sequence[str], *, client_iwd: bool,
                  retention: int = 0, submission: str | None = None) -> None:
    """The one place a new job's ad gets what its client did not say (what the schedd assigns on entering the
    queue, ids, QDate and the like, is the backend's).  ``files`` are the input files staged in its ``spool``.

    Birdbath (§5.2 of its description): ``SOAPJob``, the spool as ``Iwd`` unless the client gave a string
    (``client_iwd``), the staged files as ``TransferInput``.  The submission API: its originals' counters; staged
    input becomes the job's input as in Birdbath, and the finished job stays queued for its output until a client
    closes its spool, or ``retention`` seconds pass; ``submission`` names its group unless the ad does."""
    if rules is AdRules.BIRDBATH:
        _default(ad, "SOAPJob", True)
        _default(ad, "TransferInput", ",".join(files))
        if not client_iwd:
            ad["Iwd"] = spool
        return
    _default(ad, "ShouldTransferFiles", "NO")
    for name, value in API_DEFAULTS:
        _default(ad, name, value)
    if submission is not None:
        _default(ad, "Submission", submission)
    if not files:
        return
    if not client_iwd:
        ad["Iwd"] = spool
    _default(ad, "TransferInput", ",".join(files))
    ad["ShouldTransferFiles"] = "YES"
    if "LeaveJobInQueue" not in ad:  # until its output was retrieved (closeSpool sets FilesRetrieved)
        ad["FilesRetrieved"] = False
        ad["LeaveJobInQueue"] = classad2.ExprTree(
            f"{LEAVE_IN_QUEUE} && (JobStatus == 3 || JobStatus == 4) && (time() - EnteredCurrentStatus) < "
            f"{retention}")


def _default(ad: classad2.ClassAd, name: str, value: object) -> None:
    if name not in ad:
        ad[name] = value


def client_ad(source: JobSource, limits: ExpressionLimits) -> tuple[TextedAd, bool]:
    """A job's ad from what its front end sent, without what the schedd assigns (ids, QDate, User...: dropped, not
    refused, as legacy clients send createJobTemplate's whole ad back), and whether it names its own ``Iwd`` (a
    string).  Typed attributes are parsed as Birdbath's submit parses them (a NULL name skipped); a ClassAd's
    expressions are checked against ``limits`` as a client's text is, and keep their text.  BadAttribute names the
    attribute that fails."""
    ad = TextedAd()
    client_iwd = False
    if isinstance(source, classad2.ClassAd):
        for name, value in source.items():
            check_name(name)
            typed = wire_value(source, name, value)
            if typed is None or replaced_at_submit(name):
                continue  # (a value no client could send: a list, a nested ad, an undefined or error literal)
            if typed[0] is AttrType.EXPRESSION:
                try:
                    limits.check(typed[1], "its value")
                except ValueError as exc:
                    raise BadAttribute(name, str(exc)) from None
            ad[name] = value
        carry_texts(source, ad, list(ad))
        return ad, isinstance(ad.get("Iwd"), str)
    for attr in source:
        if not attr.name:
            continue
        check_name(attr.name)
        if replaced_at_submit(attr.name):
            continue
        ad[attr.name] = attribute_value(attr.name, attr.type, attr.value, limits)
        client_iwd |= attr.name == "Iwd" and attr.type is AttrType.STRING
    return ad, client_iwd


# -- the submission API's staging areas ------------------------------------------------------------------------------
@dataclass(eq=False)
class StagingArea:
    """Files a client of the submission API sends before it submits the job that takes them (``create``, ``send``):
    the gateway's own directory, copied into the job's spool when the job is committed."""

    id: str
    submission: str | None
    directory: Path
    creator: Caller  # the only caller that may send to it, abort it or submit from it
    files: dict[str, int] = field(default_factory=dict)  # name -> size
    #: the parts of each file that sends wrote (a failed write takes its part out again)
    received: dict[str, ByteRanges] = field(default_factory=dict)
    #: files that did not match the MD5 sent with their last send that had one (name -> that MD5)
    mismatched: dict[str, str] = field(default_factory=dict)
    expiry: IDelayedCall | None = None

    def refusal(self) -> str | None:
        """Why a job cannot be submitted from this area (a file is not as the client sent it), or None: a file
        with bytes no send wrote (a write failed, or a send at a far offset left a hole that submit would copy as
        zeros), or one that did not match its MD5."""
        for name, size in self.files.items():
            missing = size - self.received[name].covered()
            if missing:
                return (f"staged file {name!r} is incomplete: {missing} of its {size} bytes were not written (a "
                        f"send failed or skipped them); send them")
        if self.mismatched:
            name, md5 = next(iter(self.mismatched.items()))
            return f"staged file {name!r} does not match the MD5 sent with it ({md5}); send it again"
        return None


# -- the write ---------------------------------------------------------------------------------------------------------
#: an input file to write into a new job's spool before the commit: its bytes, or the file they are copied from
Input = tuple[JobKey, str, bytes | Path]


class QueueWriter:
    """The one way new jobs and changes reach the backend: a transaction's :meth:`~Transaction.batch`, after the
    input files the core holds for its jobs are written into their spools, in one call on the backend's thread
    (``call``), atomic and durable (``ScheddBackend.commit``); what was staged for its jobs is discarded when it
    fails, and for those it leaves out when it succeeds."""

    def __init__(self, backend: ScheddBackend, call: Callable[..., "Deferred[object]"]) -> None:
        self._backend = backend
        self._call = call

    async def stage(self, txn: Transaction, inputs: Sequence[Input]) -> None:
        """Write ``inputs`` into the spools of ``txn``'s jobs now (a transaction that stays open)."""
        if inputs:
            self._staging(txn, inputs)
            await self._call(self._write, inputs, None)

    async def commit(self, txn: Transaction, inputs: Sequence[Input] = ()) -> None:
        """Write ``inputs`` and commit ``txn`` whole; BackendError (or OSError reading an input) once its staged
        files are discarded."""
        self._staging(txn, inputs)
        batch = txn.batch()
        try:
            if batch.jobs or batch.changes:
                await self._call(self._write, inputs, batch)
        except BaseException:
            await self.discard(txn.staged())
            raise
        await self.discard([key for key in txn.staged() if not txn.jobs[key].submitted])

    def discard(self, jobs: list[JobKey]) -> "Deferred[object]":
        """Remove what was staged for jobs that will never be committed (no backend call when there is nothing)."""
        return self._call(self._backend.discard, jobs) if jobs else succeed(None)

    @staticmethod
    def _staging(txn: Transaction, inputs: Sequence[Input]) -> None:
        for key, _, _ in inputs:
            txn.jobs[key].staged = True

    def _write(self, inputs: Sequence[Input], batch: Batch | None) -> None:
        """On the backend's thread: the inputs into their spools (a file copied a block at a time), then the batch."""
        backend = self._backend
        for (cluster, proc), name, source in inputs:
            backend.stage_file(cluster, proc, name)
            if isinstance(source, bytes):
                backend.write_file(cluster, proc, name, 0, source)
                continue
            with open(source, "rb") as stream:
                offset = 0
                for block in iter(lambda: stream.read(1 << 20), b""):
                    backend.write_file(cluster, proc, name, offset, block)
                    offset += len(block)
        if batch is not None:
            backend.commit(batch)
