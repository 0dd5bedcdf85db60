"""Birdbath transactions as idle leases (docs/architecture.md), built here and handed to the backend whole.

A transaction is the gateway's record of what a client builds (clusters, jobs with their ads and declared files,
changes to queued jobs); the backend sees it only at commit, as one :class:`~backends.interface.Batch`, and before
that only stages the files sent for its jobs.  A lease is armed for ``duration`` seconds at begin; every call that
carries the transaction re-arms it with the ``duration`` carried *in that call*; when it fires, the owner's expiry
callback discards the transaction and its staged files.  The clock is injected so tests drive expiry without
sleeping.

A transaction belongs to the caller that began it (host, user and how it was identified): its id comes from
``secrets``, so it cannot be guessed from one's own, and anyone else who sends it is told it does not exist.
"""

from __future__ import annotations

import secrets
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import classad2
from twisted.internet.defer import Deferred, DeferredLock
from twisted.internet.interfaces import IDelayedCall, IReactorTime

from backends.interface import Batch, Change, JobKey, NewJob, ScheddBackend
from jobmodel.files import ByteRanges

from .auth import Caller
from .status import BirdbathError, invalid_transaction


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

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, txn: object) -> bool:
        return isinstance(txn, Transaction) and self._open.get(txn.id) is txn

    def held_by(self, caller: Caller) -> int:
        """How many open transactions ``caller`` began (for the per-caller limit)."""
        return self._held[caller]

    def open(self, duration: int, caller: Caller) -> Transaction:
        """Register a new transaction of ``caller`` and arm its lease."""
        txn = Transaction(self._new_id(), duration, caller)
        self._open[txn.id] = txn
        self._held[caller] += 1
        self._arm(txn, duration)
        return txn

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

    def _new_id(self) -> int:
        """A random id from 1 to 2**31 - 1 (a valid xsd:int, never 0), never one in use.

        The original's ``(time << 8) + counter`` let a client find another's open transaction from its own id.
        Positive only: spyne's xsd:int parser refuses ten-digit negative numbers, which the original's ids could be,
        and clients must get their id through."""
        while True:
            candidate = secrets.randbelow(MAX_ID) + 1
            if candidate not in self._open:
                return candidate
