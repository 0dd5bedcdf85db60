"""Transaction leases through the Birdbath operations (gateway.core.schedd over gateway.core.transactions), on a
fake clock and the local backend in this process: expiry rolls the work back, calls that carry the transaction
renew it, max_soap_transaction_duration caps it.  tests/test_transactions.py covers the lease table alone;
tests/test_durability.py keeps one end-to-end expiry against a real gateway."""

from __future__ import annotations

from collections.abc import Coroutine
from pathlib import Path

import pytest
from twisted.internet.defer import maybeDeferred

from backends.local import LocalBackend
from gateway.core.adstruct import Attr, AttrType
from gateway.core.auth import AccessPolicy, Caller
from gateway.core.schedd import BirdbathSchedd, ScheddSettings
from gateway.core.status import BirdbathError, StatusCode
from gateway.core.transactions import TransactionRef
from tests.synchronous import run

CALLER = Caller("127.0.0.1")



class Recording(LocalBackend):
    """The local backend, noting which staged jobs it was asked to discard."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.discarded: list[list[tuple[int, int]]] = []

    def discard(self, jobs) -> None:
        self.discarded.append(list(jobs))
        super().discard(jobs)



@pytest.fixture
def backend(tmp_path, clock):
    backend = Recording(tmp_path / "state", schedd_name="test.example", clock=clock.seconds)
    yield backend
    backend.close()


def schedd_for(backend, clock, max_duration: int = -1) -> BirdbathSchedd:
    call = maybeDeferred  # (the backend's thread, made synchronous)
    return BirdbathSchedd(backend, call, AccessPolicy(default_owner="tester"), clock,
                          ScheddSettings(max_transaction_duration=max_duration))


@pytest.fixture
def schedd(backend, clock) -> BirdbathSchedd:
    return schedd_for(backend, clock)


def ref(txn, duration: int | None = None) -> TransactionRef:
    return TransactionRef(txn.id, txn.duration if duration is None else duration)


def staged_job(schedd: BirdbathSchedd, txn) -> tuple[int, int]:
    """newCluster, newJob, declareFile + sendFile and submit in ``txn`` (each call renews its lease)."""
    cluster = run(schedd.new_cluster(CALLER, ref(txn)))
    proc = run(schedd.new_job(CALLER, ref(txn), cluster))
    run(schedd.declare_file(CALLER, ref(txn), cluster, proc, "in", 4, None))
    run(schedd.send_file(CALLER, ref(txn), cluster, proc, "in", 0, b"data"))
    run(schedd.submit(CALLER, ref(txn), cluster, proc, [Attr("Cmd", AttrType.STRING, "/bin/true")]))
    return cluster, proc


def is_invalid(operation: Coroutine) -> bool:
    try:
        run(operation)
    except BirdbathError as error:
        return error.status.code is StatusCode.INVALIDTRANSACTION
    return False


def test_an_idle_transaction_expires_after_its_duration_and_its_work_is_rolled_back(schedd, backend, clock):
    txn = run(schedd.begin_transaction(CALLER, 10))
    cluster, proc = staged_job(schedd, txn)
    spool = Path(backend.spool_directory(cluster, proc))
    assert [f.name for f in backend.list_files(cluster, proc)] == ["in"]
    clock.advance(9.9)
    assert backend.discarded == [] and txn in schedd.transactions
    clock.advance(0.2)
    assert backend.discarded == [[(cluster, proc)]]  # the expiry callback discarded what was staged
    assert len(schedd.transactions) == 0
    assert is_invalid(schedd.commit_transaction(CALLER, ref(txn)))
    assert backend.get_job(cluster, proc) is None and backend.query(None) == []
    assert not spool.exists()
    assert clock.getDelayedCalls() == []


def test_every_call_that_carries_the_transaction_renews_the_lease(schedd, backend, clock):
    txn = run(schedd.begin_transaction(CALLER, 10))
    cluster = run(schedd.new_cluster(CALLER, ref(txn)))
    proc = run(schedd.new_job(CALLER, ref(txn), cluster))
    renewals = [
        lambda: schedd.get_job_ads(CALLER, ref(txn), "false"),  # a READ operation renews too
        lambda: schedd.declare_file(CALLER, ref(txn), cluster, proc, "in", 1, None),
        lambda: schedd.send_file(CALLER, ref(txn), cluster, proc, "in", 0, b"x"),
        lambda: schedd.list_spool(CALLER, ref(txn), cluster, proc),
        lambda: schedd.submit(CALLER, ref(txn), cluster, proc, [Attr("Cmd", AttrType.STRING, "/bin/true")]),
    ]
    for renew in renewals:  # 5 x 9 s = 45 s, far beyond the 10 s lease
        clock.advance(9)
        run(renew())
        assert txn in schedd.transactions
    run(schedd.commit_transaction(CALLER, ref(txn)))
    assert backend.get_job(cluster, proc)["Cmd"] == "/bin/true"
    clock.advance(60)
    assert backend.discarded == [] and clock.getDelayedCalls() == []  # commit disarmed the lease


def test_calls_without_the_transaction_do_not_renew_it(schedd, backend, clock):
    txn = run(schedd.begin_transaction(CALLER, 10))
    clock.advance(8)
    run(schedd.get_job_ads(CALLER, None, "false"))
    clock.advance(2.1)
    assert txn not in schedd.transactions


def test_a_renewal_lasts_the_duration_the_call_carries(schedd, backend, clock):
    txn = run(schedd.begin_transaction(CALLER, 10))
    clock.advance(5)
    run(schedd.get_job_ads(CALLER, ref(txn, 100), "false"))
    clock.advance(99)
    assert txn in schedd.transactions
    clock.advance(2)
    assert txn not in schedd.transactions


def test_a_call_with_a_duration_below_one_fails_and_does_not_renew(schedd, backend, clock):
    txn = run(schedd.begin_transaction(CALLER, 10))
    clock.advance(8)
    with pytest.raises(BirdbathError, match="Could not extend transaction"):
        run(schedd.get_job_ads(CALLER, ref(txn, 0), "false"))
    clock.advance(2.1)
    assert txn not in schedd.transactions


def test_begin_asks_for_at_least_one_second(schedd, backend, clock):
    txn = run(schedd.begin_transaction(CALLER, 0))
    assert txn.duration == 1
    clock.advance(1.01)
    assert txn not in schedd.transactions


def test_the_maximum_duration_caps_begin(backend, clock):
    schedd = schedd_for(backend, clock, max_duration=30)
    txn = run(schedd.begin_transaction(CALLER, 3600))
    assert txn.duration == 30
    clock.advance(29.9)
    assert txn in schedd.transactions
    clock.advance(0.2)
    assert txn not in schedd.transactions
    short = run(schedd.begin_transaction(CALLER, 5))  # under the cap: as asked
    assert short.duration == 5


def test_the_maximum_duration_caps_extend(backend, clock):
    schedd = schedd_for(backend, clock, max_duration=30)
    txn = run(schedd.begin_transaction(CALLER, 10))
    assert run(schedd.extend_transaction(CALLER, ref(txn), 7200)).duration == 30
    assert run(schedd.extend_transaction(CALLER, ref(txn), 20)).duration == 20


def test_extend_renews_by_the_carried_duration_and_the_new_one_applies_from_the_next_call(schedd, backend, clock):
    """As in HTCondor 7.x-8.6: stub_prefix re-arms the lease with the Transaction element's duration, and
    extendTransaction only records the new one, which the client then carries (6.x re-armed with the new one)."""
    txn = run(schedd.begin_transaction(CALLER, 10))
    clock.advance(9)
    extended = run(schedd.extend_transaction(CALLER, ref(txn, 10), 600))
    assert extended.duration == 600
    clock.advance(9)
    run(schedd.get_job_ads(CALLER, ref(extended), "false"))  # the client carries what it was given: 600 s
    clock.advance(599)
    assert txn in schedd.transactions
    clock.advance(2)
    assert txn not in schedd.transactions


def test_an_extension_not_carried_by_a_later_call_keeps_the_old_lease(schedd, backend, clock):
    txn = run(schedd.begin_transaction(CALLER, 10))
    run(schedd.extend_transaction(CALLER, ref(txn, 10), 600))
    clock.advance(10.1)
    assert txn not in schedd.transactions


def test_abort_and_commit_end_the_lease_and_the_id(schedd, backend, clock):
    aborted = run(schedd.begin_transaction(CALLER, 10))
    committed = run(schedd.begin_transaction(CALLER, 10))
    assert aborted.id != committed.id
    run(schedd.abort_transaction(CALLER, ref(aborted)))
    assert aborted not in schedd.transactions and committed in schedd.transactions
    run(schedd.commit_transaction(CALLER, ref(committed)))
    assert committed not in schedd.transactions and backend.discarded == []  # (nothing was staged)
    assert clock.getDelayedCalls() == []
    for txn in (aborted, committed):
        assert is_invalid(schedd.extend_transaction(CALLER, ref(txn), 10))
        assert is_invalid(schedd.new_cluster(CALLER, ref(txn)))


def test_an_expiry_leaves_other_transactions_alone(schedd, backend, clock):
    short = run(schedd.begin_transaction(CALLER, 5))
    long = run(schedd.begin_transaction(CALLER, 50))
    cluster, proc = staged_job(schedd, long)
    clock.advance(6)
    assert short not in schedd.transactions and long in schedd.transactions
    run(schedd.commit_transaction(CALLER, ref(long)))
    assert backend.get_job(cluster, proc) is not None


def test_abort_all_rolls_back_what_is_open_at_shutdown(schedd, backend, clock):
    txns = [run(schedd.begin_transaction(CALLER, 60)) for _ in range(3)]
    staged = staged_job(schedd, txns[1])
    run(schedd.abort_all())
    assert backend.discarded == [[staged]]
    assert clock.getDelayedCalls() == [] and len(schedd.transactions) == 0
    clock.advance(120)
    assert len(backend.discarded) == 1  # no expiry fires afterwards


def test_an_empty_transactions_expiry_is_said_at_debug_level_and_one_with_work_at_info(schedd, clock):
    """A client that begins and never uses its transactions (or gives up) must not cost the core a log line each."""
    from twisted.logger import LogLevel, globalLogPublisher

    seen: list[dict] = []
    globalLogPublisher.addObserver(seen.append)
    try:
        empty = run(schedd.begin_transaction(CALLER, 10))
        used = run(schedd.begin_transaction(CALLER, 10))
        staged_job(schedd, used)
        clock.advance(11)
    finally:
        globalLogPublisher.removeObserver(seen.append)
    levels = {event["id"]: event["log_level"] for event in seen if "expired after" in event.get("log_format", "")}
    assert levels == {empty.id: LogLevel.debug, used.id: LogLevel.info}
