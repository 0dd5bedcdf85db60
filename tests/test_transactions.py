"""Transactions as leases, driven by a fake clock (docs/birdbath.md §6)."""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock

from gateway.core.status import BirdbathError, StatusCode
from gateway.core.transactions import TransactionRef, TransactionTable


@pytest.fixture
def expired() -> list:
    return []


@pytest.fixture
def table(clock: Clock, expired: list) -> TransactionTable:
    return TransactionTable(clock, expired.append)


def test_a_lease_expires_after_its_duration(table, clock, expired):
    txn = table.open(10, "backend")
    clock.advance(9.9)
    assert expired == []
    clock.advance(0.2)
    assert expired == [txn]
    with pytest.raises(BirdbathError) as error:
        table.enter(TransactionRef(txn.id, 10), required=True)
    assert error.value.status.code is StatusCode.INVALIDTRANSACTION


def test_each_call_renews_the_lease_by_the_duration_it_carries(table, clock, expired):
    txn = table.open(10, "backend")
    clock.advance(8)
    table.enter(TransactionRef(txn.id, 30), required=True)
    clock.advance(29)
    assert expired == []
    clock.advance(2)
    assert expired == [txn]


def test_a_call_without_duration_cannot_extend(table):
    txn = table.open(10, "backend")
    with pytest.raises(BirdbathError) as error:
        table.enter(TransactionRef(txn.id, None), required=True)
    assert error.value.status.code is StatusCode.FAIL
    assert error.value.status.message == "Could not extend transaction"


@pytest.mark.parametrize("ref", [None, TransactionRef(None, None), TransactionRef(0, 60)])
def test_null_transactions(table, ref):
    assert table.enter(ref, required=False) is None
    with pytest.raises(BirdbathError) as error:
        table.enter(ref, required=True)
    assert error.value.status.message == "Invalid transaction"


def test_closing_cancels_the_lease(table, clock, expired):
    txn = table.open(10, "backend")
    table.close(txn)
    clock.advance(60)
    assert expired == [] and len(table) == 0


def test_many_transactions_in_the_same_second_get_distinct_nonzero_ids(table):
    ids = {table.open(60, n).id for n in range(1000)}
    assert len(ids) == 1000 and 0 not in ids
    assert all(-2**31 <= i < 2**31 for i in ids)


def test_leases_are_independent(table, clock, expired):
    short = table.open(5, "a")
    long = table.open(50, "b")
    clock.advance(6)
    assert expired == [short]
    assert table.enter(TransactionRef(long.id, 50), required=True) is long
