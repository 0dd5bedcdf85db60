"""Transactions as leases, driven by a fake clock (gateway/core/transactions.py), and bound to the caller that began them
with ids nobody can guess from their own."""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock

from gateway.core import transactions
from gateway.core.auth import Authentication, Caller
from gateway.core.status import BirdbathError, StatusCode
from gateway.core.transactions import TransactionRef, TransactionTable

ALICE = Caller("127.0.0.1", "alice", Authentication.SOCKET)


@pytest.fixture
def expired() -> list:
    return []


@pytest.fixture
def table(clock: Clock, expired: list) -> TransactionTable:
    return TransactionTable(clock, expired.append)


def test_a_lease_expires_after_its_duration(table, clock, expired):
    txn = table.open(10, ALICE)
    clock.advance(9.9)
    assert expired == []
    clock.advance(0.2)
    assert expired == [txn]
    with pytest.raises(BirdbathError) as error:
        table.enter(TransactionRef(txn.id, 10), required=True, caller=ALICE)
    assert error.value.status.code is StatusCode.INVALIDTRANSACTION


def test_each_call_renews_the_lease_by_the_duration_it_carries(table, clock, expired):
    txn = table.open(10, ALICE)
    clock.advance(8)
    table.enter(TransactionRef(txn.id, 30), required=True, caller=ALICE)
    clock.advance(29)
    assert expired == []
    clock.advance(2)
    assert expired == [txn]


def test_a_call_without_duration_cannot_extend(table):
    txn = table.open(10, ALICE)
    with pytest.raises(BirdbathError) as error:
        table.enter(TransactionRef(txn.id, None), required=True, caller=ALICE)
    assert error.value.status.code is StatusCode.FAIL
    assert error.value.status.message == "Could not extend transaction"


@pytest.mark.parametrize("ref", [None, TransactionRef(None, None), TransactionRef(0, 60)])
def test_null_transactions(table, ref):
    assert table.enter(ref, required=False, caller=ALICE) is None
    with pytest.raises(BirdbathError) as error:
        table.enter(ref, required=True, caller=ALICE)
    assert error.value.status.message == "Invalid transaction"


def test_closing_cancels_the_lease(table, clock, expired):
    txn = table.open(10, ALICE)
    table.close(txn)
    clock.advance(60)
    assert expired == [] and len(table) == 0


def test_many_transactions_in_the_same_second_get_distinct_nonzero_ids(table):
    ids = {table.open(60, ALICE).id for n in range(1000)}
    assert len(ids) == 1000 and 0 not in ids
    assert all(0 < i < 2**31 for i in ids)  # a valid xsd:int that spyne parses


def test_leases_are_independent(table, clock, expired):
    short = table.open(5, ALICE)
    long = table.open(50, ALICE)
    clock.advance(6)
    assert expired == [short]
    assert table.enter(TransactionRef(long.id, 50), required=True, caller=ALICE) is long


def test_ids_are_random_not_derived_from_the_clock(clock, expired):
    """The original's ``(time << 8) + counter`` made own id - 1 another client's open transaction."""
    first, second = TransactionTable(clock, expired.append), TransactionTable(clock, expired.append)
    ids = [first.open(60, ALICE).id for n in range(200)]
    assert [second.open(60, ALICE).id for n in range(200)] != ids  # same clock, same second: other ids
    close = [a for a, b in zip(ids, ids[1:]) if abs(a - b) < 2**16]
    assert len(close) <= 2, close  # time-based ids differ by 1; random ones almost never by less than 2**16
    assert all(1 <= i <= transactions.MAX_ID for i in ids) and max(ids) > 2**30 > min(ids)


def test_an_id_is_never_one_in_use(table, monkeypatch):
    taken = table.open(60, ALICE).id
    draws = iter([taken - 1, taken - 1, 6])  # randbelow(n) + 1 is the id
    monkeypatch.setattr(transactions.secrets, "randbelow", lambda bound: next(draws))
    assert table.open(60, ALICE).id == 7  # the id in use was drawn twice and skipped


@pytest.mark.parametrize("other", [
    Caller("127.0.0.1", "bob", Authentication.SOCKET),  # another user on the same host
    Caller("10.0.0.7", "alice", Authentication.CERTIFICATE),  # the same name from elsewhere
    Caller("127.0.0.1", "alice", Authentication.NONE),  # the same name, but not identified
    Caller("127.0.0.1"),  # an anonymous client
])
def test_another_caller_is_told_the_transaction_does_not_exist_and_does_not_renew_it(table, clock, expired, other):
    txn = table.open(10, ALICE)
    clock.advance(9)
    with pytest.raises(BirdbathError) as error:
        table.enter(TransactionRef(txn.id, 600), required=True, caller=other)
    assert error.value.status.code is StatusCode.INVALIDTRANSACTION
    assert error.value.status.message == "Invalid transaction"  # word for word what an unknown id gets
    clock.advance(1.1)
    assert expired == [txn]  # the lease ran out on its own schedule: the foreign call did not renew it


def test_the_owner_is_served_while_another_caller_is_refused(table):
    txn = table.open(10, ALICE)
    with pytest.raises(BirdbathError):
        table.enter(TransactionRef(txn.id, 10), required=False, caller=Caller("127.0.0.1"))
    assert table.enter(TransactionRef(txn.id, 10), required=False, caller=ALICE) is txn


def test_held_by_counts_the_open_transactions_of_one_caller(table, clock):
    bob = Caller("127.0.0.1", "bob", Authentication.SOCKET)
    mine = [table.open(10, ALICE) for n in range(3)]
    table.open(60, bob)
    assert table.held_by(ALICE) == 3 and table.held_by(bob) == 1 and table.held_by(Caller("127.0.0.1")) == 0
    table.close(mine[0])
    clock.advance(11)  # the other two expire
    assert table.held_by(ALICE) == 0 and table.held_by(bob) == 1


def test_cluster_ids_come_from_reserved_blocks_one_reservation_at_a_time():
    """Clients that take new clusters while a block is being reserved wait for that reservation (one backend call),
    and ids are never handed out twice, even when a block holds a single id."""
    from twisted.internet.defer import Deferred

    from gateway.core.transactions import ClusterIds

    pending: list[Deferred] = []
    ids = ClusterIds(lambda: pending.append(Deferred()) or pending[-1], lambda unused: None)
    first, second, third = (Deferred.fromCoroutine(ids.next()) for _ in range(3))
    assert len(pending) == 1 and not first.called
    pending[0].callback(range(1, 3))
    assert (first.result, second.result) == (1, 2) and not third.called and len(pending) == 2
    pending[1].callback(range(7, 8))
    assert third.result == 7
    fourth = Deferred.fromCoroutine(ids.next())
    pending[2].callback(range(8, 108))
    assert fourth.result == 8 and [Deferred.fromCoroutine(ids.next()).result for _ in range(2)] == [9, 10]
    assert len(pending) == 3


def test_cluster_ids_not_handed_out_go_back_and_a_later_id_comes_from_a_new_reservation():
    from twisted.internet.defer import Deferred, succeed

    from gateway.core.transactions import ClusterIds

    blocks = [range(1, 101), range(4, 104)]
    released: list[range] = []
    ids = ClusterIds(lambda: succeed(blocks.pop(0)), lambda unused: succeed(released.append(unused)))
    Deferred.fromCoroutine(ids.give_back())  # nothing reserved yet: nothing given back
    assert [Deferred.fromCoroutine(ids.next()).result for _ in range(3)] == [1, 2, 3]
    Deferred.fromCoroutine(ids.give_back())
    Deferred.fromCoroutine(ids.give_back())  # (twice: the second has nothing to give)
    assert released == [range(4, 101)]
    assert Deferred.fromCoroutine(ids.next()).result == 4 and blocks == []
