"""beginTransaction answered by the process that serves the request, without a round trip to the core.

With worker processes, every beginTransaction used to be a call into the core, the one process that holds the
transactions: the begin cost a worker two link messages and the core a whole call, for an answer that is an id and
the lease.  Now the core grants each process that begins transactions (each worker, and the core itself for the
connections it serves: one mechanism for both layouts) what a begin needs, ahead of time:

- **blocks of ids** (:data:`ID_BLOCK` at a time, drawn at random by the core's ``TransactionTable.draw``, so an id
  says nothing of another's), as cluster ids are reserved in blocks;
- **per-caller allowances**: how many more transactions a caller may begin in that process.  The core grants only
  what the caller's ``max_transactions_per_caller`` leaves once its open transactions and every allowance granted
  are counted; near the limit it grants 1, and when nothing is left it first takes back the allowances other
  processes have not spent (a round trip to each that holds one), so the limit holds across processes exactly.

A process then answers a begin by itself (:class:`Begins`): the caller's WRITE permission, the lease's duration, one
of its allowance, the next id of its block; and it tells the core **"begun"** (id, caller, duration), a one-way
message written on its link before its answer to the client.  The core opens the transaction on that message
(:meth:`Grants.begun`): the same ``Transaction``, lease timer, expiry and abort as before.  A ``begun`` naming an id
not granted to that process, or a caller it holds no allowance for, is ignored (logged): the id stays unknown.

A later call naming the id may reach the core through another worker before the first worker's ``begun`` has been
read.  An id the core does not know but granted to a process (:meth:`Grants.pending`) makes the core ask that
process to **sync** (it answers after everything it sent before, the link being ordered) before it decides: a rare
round trip.  An id granted to no process, or still unknown after the sync, is refused exactly as before.  When a
process dies, the ids of its block are retired (never drawn again) and its allowances dropped; the transactions it
announced live on in the core, under their leases.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from twisted.internet.defer import Deferred, maybeDeferred, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from .auth import AccessPolicy, Caller, Permission
from .status import BirdbathError
from .transactions import Transaction, TransactionRef, TransactionTable, names_none

log = Logger(namespace="birdbath.transactions")

#: ids granted at a time (a process asks for the next block when half of its block is spent)
ID_BLOCK = 256
#: the largest allowance granted at a time (a quarter of what the caller's limit leaves, at least 1)
ALLOWANCE_CHUNK = 64


def lease(duration: int, limit: int) -> int:
    """The lease a client asked for, within MAX_SOAP_TRANSACTION_DURATION (``limit``; <= 0: none) and at least 1 s,
    as HTCondor's stub raised it: 0 and a negative duration ask for 1 s."""
    if limit > 0:
        duration = min(duration, limit)
    return max(1, duration)


def asked_lease(caller: Caller, operation: str, duration: int, limit: int) -> int:
    """:func:`lease` of what ``caller`` asked in ``operation``; a negative duration is logged (a client's mistake)."""
    if duration < 0:
        log.warn("{operation} from {host} ({user}): the duration {duration} is negative; the lease is 1 s, as "
                 "HTCondor's was", operation=operation, host=caller.host, user=caller.user or "anonymous",
                 duration=duration)
    return lease(duration, limit)


def limit_reached(limit: int) -> BirdbathError:
    return BirdbathError.fail(
        f"Maximum number of transactions reached: this client already has {limit} open "
        f"(max_transactions_per_caller in [birdbath]); commit or abort one first")


class Grantee(Protocol):
    """A process that begins transactions, as the core sees it (a worker's link, or the core's own
    :class:`InProcess`)."""

    def sync(self) -> Deferred[None]:
        """Fires once the core has read everything the process sent before."""

    def reclaim(self, caller: Caller) -> Deferred[int]:
        """The process gives back what it has not spent of ``caller``'s allowance (answered after everything it sent
        before): how much."""


class Channel(Protocol):
    """How a process that begins transactions reaches the core's :class:`Grants`."""

    def ids(self) -> Deferred[list[int]]:
        """A new block of ids."""

    def allowance(self, caller: Caller) -> Deferred[int]:
        """A new allowance for ``caller`` (BirdbathError when the caller's limit leaves none)."""

    def begun(self, txn_id: int, caller: Caller, duration: int) -> Transaction | None:
        """Tell the core, one way, that ``txn_id`` was begun for ``caller``: the transaction it opened when it is in
        this process (None in a worker)."""


class Grants:
    """The core's side: the ids and allowances granted to each process, and the transactions they announce."""

    def __init__(self, table: TransactionTable, limit: int, max_duration: int) -> None:
        self._table = table
        self._limit = limit  # max_transactions_per_caller
        self._max_duration = max_duration
        #: ids granted and not announced yet -> the process they were granted to
        self._granted: dict[int, Grantee] = {}
        #: caller -> process -> allowance granted and not spent (as far as the core has read)
        self._allowed: dict[Caller, dict[Grantee, int]] = {}

    def ids(self, grantee: Grantee, count: int = ID_BLOCK) -> list[int]:
        """A block of ``count`` new ids for ``grantee``."""
        block = [self._table.draw() for _ in range(count)]
        for txn_id in block:
            self._granted[txn_id] = grantee
        return block

    def outstanding(self, caller: Caller) -> int:
        """How many more transactions ``caller`` may begin in the processes it was granted allowances in."""
        return sum(self._allowed.get(caller, {}).values())

    async def allow(self, grantee: Grantee, caller: Caller) -> int:
        """A new allowance for ``caller`` in ``grantee``: what the limit leaves, after taking back the allowances of
        other processes when it leaves nothing; BirdbathError (the limit's message) when nothing is left then."""
        if self._left(caller) <= 0:
            holders = [other for other, count in self._allowed.get(caller, {}).items() if other is not grantee and count]
            for other in holders:
                given_back = await other.reclaim(caller).addErrback(lambda _: 0)  # (a process gone: dropped already)
                self._spend(caller, other, given_back)
        left = self._left(caller)
        if left <= 0:
            raise limit_reached(self._limit)
        granted = max(1, min(ALLOWANCE_CHUNK, left // 4))
        held = self._allowed.setdefault(caller, {})
        held[grantee] = held.get(grantee, 0) + granted
        return granted

    def _left(self, caller: Caller) -> int:
        return self._limit - self._table.held_by(caller) - self.outstanding(caller)

    def _spend(self, caller: Caller, grantee: Grantee, count: int) -> bool:
        """Take ``count`` off ``grantee``'s allowance for ``caller`` (False: it had none)."""
        held = self._allowed.get(caller)
        if not held or held.get(grantee, 0) <= 0:
            return False
        held[grantee] -= count
        if held[grantee] <= 0:
            del held[grantee]
            if not held:
                del self._allowed[caller]
        return True

    def begun(self, grantee: Grantee, txn_id: int, caller: Caller, duration: int) -> Transaction | None:
        """``grantee`` began ``txn_id`` for ``caller``: open it, its lease armed (None: ignored, the id was not
        granted to that process or the caller holds no allowance there)."""
        if self._granted.get(txn_id) is not grantee:
            log.error("a process announced transaction {id}, which was not granted to it: ignored", id=txn_id)
            return None
        if not self._spend(caller, grantee, 1):
            log.error("a process announced transaction {id} for a caller it holds no allowance for: ignored",
                      id=txn_id)
            return None
        del self._granted[txn_id]
        return self._table.open(lease(duration, self._max_duration), caller, txn_id)

    def pending(self, ref: TransactionRef | None) -> Deferred[None] | None:
        """When ``ref`` names an id the core does not know but granted to a process, what fires once the core has
        read everything that process sent before (its ``begun`` among it, if it began it); else None: decide now."""
        if names_none(ref) or self._table.knows(ref.id):  # type: ignore[union-attr,arg-type]
            return None
        grantee = self._granted.get(ref.id)  # type: ignore[union-attr,arg-type]
        if grantee is None:
            return None
        return grantee.sync().addErrback(lambda _: None)  # (a process gone: the id stays unknown)

    def retire(self, grantee: Grantee) -> None:
        """``grantee`` is gone: the ids granted to it are never used (nor drawn again), its allowances dropped."""
        for txn_id in [txn_id for txn_id, holder in self._granted.items() if holder is grantee]:
            del self._granted[txn_id]
        for caller in list(self._allowed):
            held = self._allowed[caller]
            held.pop(grantee, None)
            if not held:
                del self._allowed[caller]


class _Shared:
    """One request in flight per key, whose end every waiter hears (a block of ids, a caller's allowance)."""

    def __init__(self) -> None:
        self._waiting: dict[Any, list[Deferred[None]]] = {}

    def wait(self, key: Any, request: Callable[[], Any], take: Callable[[Any], None]) -> Deferred[None]:
        """Fires when the request for ``key`` (``request``, started now unless one is in flight) has ended and its
        answer was taken (``take``), or fails as it did."""
        waiter: Deferred[None] = Deferred()
        waiters = self._waiting.get(key)
        if waiters is not None:
            waiters.append(waiter)
            return waiter
        waiters = self._waiting[key] = [waiter]

        def ended(result: Any) -> None:
            for each in self._waiting.pop(key):
                each.errback(result) if isinstance(result, Failure) else each.callback(None)

        maybeDeferred(request).addCallback(take).addBoth(ended)
        return waiter

    def busy(self, key: Any) -> bool:
        return key in self._waiting


class Begins:
    """A process's side: begins transactions from the ids and allowances granted to it, announcing each."""

    def __init__(self, channel: Channel, policy: AccessPolicy, max_duration: int) -> None:
        self._channel = channel
        self._policy = policy
        self._max_duration = max_duration
        self._ids: list[int] = []
        self._allowances: dict[Caller, int] = {}
        self._requests = _Shared()

    async def begin(self, caller: Caller, duration: int, operation: str = "beginTransaction") -> Transaction:
        """A new transaction of ``caller``, announced to the core (which holds it from then on); the lease is
        ``duration`` within the limits (a negative one is logged, it is a client's mistake)."""
        self._policy.check(caller, Permission.WRITE)
        duration = asked_lease(caller, operation, duration, self._max_duration)
        while self._allowances.get(caller, 0) <= 0 or not self._ids:  # (another begin may take them meanwhile)
            if self._allowances.get(caller, 0) <= 0:
                await self._requests.wait(caller, lambda: self._channel.allowance(caller),
                                          lambda granted: self._grant(caller, granted))
            else:
                await self._refill()
        self._allowances[caller] -= 1
        txn_id = self._ids.pop()
        if len(self._ids) < ID_BLOCK // 2 and not self._requests.busy(Begins):
            self._refill().addErrback(lambda _: None)  # (ahead of time: a begin waits only when it runs out)
        opened = self._channel.begun(txn_id, caller, duration)
        return opened if opened is not None else Transaction(txn_id, duration, caller)

    def _grant(self, caller: Caller, granted: int) -> None:
        self._allowances[caller] = self._allowances.get(caller, 0) + granted

    def _refill(self) -> Deferred[None]:
        return self._requests.wait(Begins, self._channel.ids, self._ids.extend)

    def give_back(self, caller: Caller) -> int:
        """What is left of ``caller``'s allowance, given back to the core (it asked: the caller's limit is near)."""
        return self._allowances.pop(caller, 0)


class InProcess:
    """The core's own begins (the connections it serves itself, and whole transactions left open for input): a
    grantee and a channel with nothing between, so every begin of either layout goes the same way."""

    def __init__(self, grants: Grants, policy: AccessPolicy, max_duration: int) -> None:
        self._grants = grants
        self.begins = Begins(self, policy, max_duration)

    def ids(self) -> Deferred[list[int]]:
        return succeed(self._grants.ids(self))

    def allowance(self, caller: Caller) -> Deferred[int]:
        return Deferred.fromCoroutine(self._grants.allow(self, caller))

    def begun(self, txn_id: int, caller: Caller, duration: int) -> Transaction | None:
        return self._grants.begun(self, txn_id, caller, duration)

    def sync(self) -> Deferred[None]:
        return succeed(None)  # (announced as begun, on the same reactor turn)

    def reclaim(self, caller: Caller) -> Deferred[int]:
        return succeed(self.begins.give_back(caller))
