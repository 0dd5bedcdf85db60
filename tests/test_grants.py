"""Transactions begun where the request is served (gateway/core/grants.py): the core's grants of ids and per-caller
allowances, and what it does with a "begun" it has not read yet, a forged id, an expired lease, a process gone.

A worker is modelled by :class:`Worker`, its link to the core by the messages it sent that the core has not read
(``unread``): a round trip (a block of ids, an allowance, a sync, a reclaim) reads them first, as the real link is
ordered; a test delivers them or not.  The real processes' side is in tests/test_workers.py.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock

from gateway.core import transactions
from gateway.core.auth import AccessPolicy, Authentication, Caller, HostList
from gateway.core.grants import ID_BLOCK, Begins, Grants, InProcess
from gateway.core.status import BirdbathError, StatusCode
from gateway.core.transactions import Transaction, TransactionRef, TransactionTable

ALICE = Caller("127.0.0.1", "alice", Authentication.SOCKET)
BOB = Caller("127.0.0.1", "bob", Authentication.SOCKET)


class Worker:
    """A process that begins transactions, with the core at the other end of an ordered link."""

    def __init__(self, grants: Grants, max_duration: int = 0) -> None:
        self.grants = grants
        self.unread: list[Callable[[], object]] = []
        self.syncs = 0
        self.begins = Begins(self, AccessPolicy(), max_duration)

    # its link's messages (gateway.core.grants.Channel)
    def ids(self) -> Deferred[list[int]]:
        self.deliver()
        return succeed(self.grants.ids(self))

    def allowance(self, caller: Caller) -> Deferred[int]:
        self.deliver()
        return Deferred.fromCoroutine(self.grants.allow(self, caller))

    def begun(self, txn_id: int, caller: Caller, duration: int) -> None:
        self.unread.append(lambda: self.grants.begun(self, txn_id, caller, duration))

    # the core's asks (gateway.core.grants.Grantee)
    def sync(self) -> Deferred[None]:
        self.syncs += 1
        self.deliver()
        return succeed(None)

    def reclaim(self, caller: Caller) -> Deferred[int]:
        self.deliver()
        return succeed(self.begins.give_back(caller))

    def deliver(self) -> None:
        unread, self.unread = self.unread, []
        for message in unread:
            message()


@pytest.fixture
def table(clock: Clock) -> TransactionTable:
    return TransactionTable(clock, lambda txn: None)


def grants_of(table: TransactionTable, limit: int = 20, max_duration: int = 0) -> Grants:
    return Grants(table, limit, max_duration)


def enter(table: TransactionTable, grants: Grants, txn_id: int, caller: Caller = ALICE) -> Transaction:
    """What the core's prologue does (``BirdbathSchedd._enter``): wait for a pending sync, then look the id up."""
    ref = TransactionRef(txn_id, 60)
    pending = grants.pending(ref)
    if pending is not None:
        assert pending.called  # (the fake workers answer at once)
    return table.enter(ref, True, caller)  # type: ignore[return-value]


def refused(table: TransactionTable, grants: Grants, txn_id: int, caller: Caller = ALICE) -> bool:
    with pytest.raises(BirdbathError) as error:
        enter(table, grants, txn_id, caller)
    return error.value.status.code is StatusCode.INVALIDTRANSACTION


def began(worker: Worker, caller: Caller = ALICE) -> Transaction | BirdbathError:
    """A begin in ``worker``: its transaction, or the BirdbathError it was refused with."""
    answer = Deferred.fromCoroutine(worker.begins.begin(caller, 60))
    results: list = []
    answer.addBoth(results.append)
    assert results, "the begin waits"
    result = results[0]
    return result.value if hasattr(result, "value") else result


# -- begins and the race with another worker ----------------------------------------------------------------------
def test_a_transaction_begun_in_a_worker_is_the_cores_once_its_begun_is_read(table):
    grants = grants_of(table)
    worker = Worker(grants)
    txn = began(worker)
    assert not table.knows(txn.id) and worker.unread  # written on the link, not read yet
    worker.deliver()
    held = enter(table, grants, txn.id)
    assert held.id == txn.id and held.caller == ALICE and held is not txn  # the core's own Transaction
    assert worker.syncs == 0  # known already: no round trip


def test_a_call_through_another_worker_that_arrives_first_syncs_with_the_worker_that_began_it(table):
    grants = grants_of(table)
    first, second = Worker(grants), Worker(grants)
    began(second)  # (both workers hold blocks)
    txn = began(first)
    assert first.unread  # its begun not read when the call that names the id arrives through the other worker
    assert enter(table, grants, txn.id).id == txn.id
    assert first.syncs == 1 and second.syncs == 0  # only the worker the id was granted to, only this once
    enter(table, grants, txn.id)
    assert first.syncs == 1


def test_the_core_waits_for_the_sync_before_it_decides(table):
    grants = grants_of(table)
    worker = Worker(grants)
    txn = began(worker)
    answered: Deferred[None] = Deferred()
    worker.sync = lambda: answered  # type: ignore[method-assign]  # (a worker slow to answer)
    pending = grants.pending(TransactionRef(txn.id, 60))
    assert pending is not None and not pending.called
    worker.deliver()
    answered.callback(None)
    assert pending.called and table.enter(TransactionRef(txn.id, 60), True, ALICE).id == txn.id


# -- ids that are refused ----------------------------------------------------------------------------------------------
def test_a_forged_id_is_refused_without_asking_any_worker(table):
    grants = grants_of(table)
    worker = Worker(grants)
    txn = began(worker)
    worker.deliver()
    forged = next(i for i in range(1, 1000) if i != txn.id and grants.pending(TransactionRef(i, 60)) is None)
    assert refused(table, grants, forged)
    assert worker.syncs == 0


def test_an_id_of_a_workers_block_it_never_announced_is_refused_after_one_sync(table):
    grants = grants_of(table)
    first, second = Worker(grants), Worker(grants)
    began(first)
    first.deliver()
    never = first.begins._ids[0]  # granted to the first worker, not begun
    assert refused(table, grants, never)
    assert first.syncs == 1 and second.syncs == 0


def test_another_callers_id_is_refused_as_an_unknown_one(table):
    grants = grants_of(table)
    worker = Worker(grants)
    txn = began(worker)
    assert refused(table, grants, txn.id, BOB)


def test_an_expired_lease_is_refused_and_its_id_is_not_asked_about(table, clock):
    grants = grants_of(table, max_duration=30)
    worker = Worker(grants, max_duration=30)
    txn = began(worker)  # asked for 60 s: 30 s, the limit, in the worker and again in the core
    assert txn.duration == 30
    worker.deliver()
    clock.advance(29)
    assert enter(table, grants, txn.id).id == txn.id  # renewed: 60 s from now, as the call carried
    clock.advance(61)
    assert refused(table, grants, txn.id)
    assert worker.syncs == 0


def test_a_begun_for_an_id_granted_to_another_process_is_ignored(table):
    grants = grants_of(table)
    first, second = Worker(grants), Worker(grants)
    began(first)
    began(second)
    stolen = first.begins._ids[0]
    assert grants.begun(second, stolen, ALICE, 60) is None  # a hostile worker cannot open another's ids
    first.deliver()
    second.deliver()
    assert refused(table, grants, stolen)


def test_a_begun_for_a_caller_without_allowance_is_ignored(table):
    grants = grants_of(table)
    worker = Worker(grants)
    began(worker)
    worker.deliver()
    assert grants.begun(worker, worker.begins._ids[0], BOB, 60) is None  # BOB never asked for an allowance
    assert table.held_by(BOB) == 0


# -- the per-caller limit across workers -------------------------------------------------------------------------
def test_a_caller_beginning_more_than_its_limit_through_two_workers_gets_exactly_its_limit(table):
    grants = grants_of(table, limit=5)
    first, second = Worker(grants), Worker(grants)
    answers = [began(worker) for _ in range(6) for worker in (first, second)]  # 12 begins, alternating
    opened = [answer for answer in answers if isinstance(answer, Transaction)]
    refusals = [answer for answer in answers if isinstance(answer, BirdbathError)]
    assert len(opened) == 5 and len(refusals) == 7
    assert all("Maximum number of transactions reached: this client already has 5 open" in refusal.status.message
               for refusal in refusals)
    first.deliver()
    second.deliver()
    assert table.held_by(ALICE) == 5 and grants.outstanding(ALICE) == 0
    assert isinstance(began(first, BOB), Transaction)  # another caller has a limit of its own


def test_a_transaction_ended_frees_room_in_any_worker(table):
    grants = grants_of(table, limit=2)
    first, second = Worker(grants), Worker(grants)
    one, two = began(first), began(first)
    first.deliver()
    assert isinstance(began(second), BirdbathError)
    table.close(enter(table, grants, one.id))
    assert isinstance(began(second), Transaction)
    assert isinstance(began(first), BirdbathError)
    assert two.id != one.id


def test_allowances_unspent_in_one_worker_are_taken_back_for_another(table):
    grants = grants_of(table, limit=8)
    first, second = Worker(grants), Worker(grants)
    began(first)  # granted 2 (a quarter of what the limit leaves), spent 1
    assert first.begins._allowances[ALICE] == 1
    opened = [began(second) for _ in range(7)]
    assert all(isinstance(txn, Transaction) for txn in opened)  # the first worker's unspent one was taken back
    assert ALICE not in first.begins._allowances
    assert isinstance(began(first), BirdbathError)


def test_begins_waiting_for_an_allowance_share_one_request(table):
    grants = grants_of(table)
    asked: list[Deferred[int]] = []
    worker = Worker(grants)

    def allowance(caller: Caller) -> Deferred[int]:
        asked.append(Deferred())
        return asked[-1]

    worker.allowance = allowance  # type: ignore[method-assign]
    waiting = [Deferred.fromCoroutine(worker.begins.begin(ALICE, 60)) for _ in range(3)]
    assert len(asked) == 1 and not any(begin.called for begin in waiting)
    grants._allowed[ALICE] = {worker: 2}  # (what the core granted: two)
    asked[0].callback(2)
    assert sum(begin.called for begin in waiting) == 2 and len(asked) == 2  # the third asks again
    asked[1].errback(BirdbathError.fail("Maximum number of transactions reached"))
    assert waiting[2].called
    waiting[2].addErrback(lambda failure: failure.trap(BirdbathError))


def test_a_refused_allowance_fails_every_begin_waiting_for_it(table):
    grants = grants_of(table, limit=0)
    worker = Worker(grants)
    assert isinstance(began(worker), BirdbathError)
    assert isinstance(began(worker), BirdbathError)


def test_a_caller_without_write_permission_is_refused_before_anything_is_asked(table):
    grants = grants_of(table)
    worker = Worker(grants)
    worker.begins = Begins(worker, AccessPolicy(allow_write=HostList(["192.0.2.1"])), 0)
    answer = began(worker)
    assert isinstance(answer, BirdbathError) and answer.status.code is StatusCode.FAIL
    assert grants.outstanding(ALICE) == 0 and not worker.begins._ids


# -- blocks of ids, a worker gone -------------------------------------------------------------------------------
def test_a_worker_asks_for_its_next_block_before_it_runs_out(table):
    grants = grants_of(table, limit=10 * ID_BLOCK)
    worker = Worker(grants)
    ids = {began(worker).id for _ in range(3 * ID_BLOCK)}
    assert len(ids) == 3 * ID_BLOCK and all(0 < i <= transactions.MAX_ID for i in ids)
    assert len(worker.begins._ids) >= ID_BLOCK // 2 - 1


def test_a_dead_workers_transactions_live_on_and_its_ids_are_never_used(table, clock, monkeypatch):
    grants = grants_of(table, limit=3)
    dead, alive = Worker(grants), Worker(grants)
    txn = began(dead)
    dead.deliver()
    unused = dead.begins._ids[0]
    grants.retire(dead)  # its link lost
    assert enter(table, grants, txn.id).id == txn.id  # announced: it lives on, its lease governs it
    assert refused(table, grants, unused) and dead.syncs == 0  # never announced: unknown, nobody to ask
    assert [isinstance(began(alive), Transaction) for _ in range(3)] == [True, True, False]  # its allowance dropped
    draws = iter([unused - 1, 6])  # randbelow(n) + 1 is the id: the retired id is drawn, and skipped
    monkeypatch.setattr(transactions.secrets, "randbelow", lambda bound: next(draws))
    assert grants.ids(alive, 1) == [7]
    clock.advance(61)
    assert refused(table, grants, txn.id)


def test_a_sync_that_fails_with_the_worker_gone_meanwhile_refuses_the_id(table):
    grants = grants_of(table)
    worker = Worker(grants)
    txn = began(worker)  # its begun never read
    worker.sync = lambda: Deferred.fromCoroutine(_gone())  # type: ignore[method-assign]
    assert refused(table, grants, txn.id)


async def _gone() -> None:
    raise ConnectionError("the worker is gone")


def test_the_core_begins_its_own_transactions_as_a_worker_does(table):
    grants = grants_of(table, limit=2)
    core, worker = InProcess(grants, AccessPolicy(), 0), Worker(grants)
    mine = Deferred.fromCoroutine(core.begins.begin(ALICE, 60)).result
    assert table.knows(mine.id)  # announced at once, in the same process
    assert isinstance(began(worker), Transaction)
    assert isinstance(began(worker), BirdbathError)  # the core's grant counts
