"""Transactions built on the reactor, committed whole on the backend's threads: the submit flow up to commit never
waits for the backend (not even while a commit holds the queue), a new cluster goes to a thread only for a new
block of ids, what the backend holds in memory is read at once and the rest on a thread, and nothing a commit wrote
is lost to a lease that ends around it."""

from __future__ import annotations

import threading

import classad2
import pytest
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from backends.interface import Batch, NewJob
from backends.local import LocalBackend
from backends.local import store as store_module
from backends.local.store import CLUSTER_BLOCK
from gateway.core.adstruct import Attr, AttrType
from gateway.core.auth import AccessPolicy, Authentication, Caller
from gateway.core.queries import QueryRunner
from gateway.core.schedd import BirdbathSchedd
from gateway.core.status import BirdbathError
from gateway.core.threads import BlockingCaller
from gateway.core.transactions import TransactionRef
from tests.test_threads import run

ALICE = Caller("127.0.0.1", "alice", Authentication.SOCKET)


@pytest.fixture
def backend(tmp_path) -> LocalBackend:
    backend = LocalBackend(tmp_path, schedd_name="test.example", clock=lambda: 1_700_000_000)
    yield backend
    backend.close()


@pytest.fixture
def caller():
    caller = BlockingCaller(reactor, 2, "test")
    yield caller
    caller.stop()


def schedd_for(backend, caller, clock=None) -> BirdbathSchedd:
    return BirdbathSchedd(backend, caller, AccessPolicy(default_owner="guest"), clock or Clock(),
                          queries=QueryRunner(caller))


def at_once(coroutine):
    """An operation's outcome, which must be there without a turn of the reactor (no backend call, no thread)."""
    answered = Deferred.fromCoroutine(coroutine)
    assert answered.called
    outcome: list = []
    answered.addBoth(outcome.append)
    if hasattr(outcome[0], "raiseException"):
        outcome[0].raiseException()
    return outcome[0]


def ref(txn) -> TransactionRef:
    return TransactionRef(txn.id, txn.duration)


def build(schedd: BirdbathSchedd) -> tuple[object, int, int]:
    """beginTransaction .. submit, each answered at once (the cluster id from a block already reserved)."""
    txn = at_once(schedd.begin_transaction(ALICE, 60))
    cluster = at_once(schedd.new_cluster(ALICE, ref(txn)))
    proc = at_once(schedd.new_job(ALICE, ref(txn), cluster))
    at_once(schedd.submit(ALICE, ref(txn), cluster, proc, [Attr("Cmd", AttrType.STRING, "/bin/true")]))
    return txn, cluster, proc


async def _awaited(deferred):
    return await deferred


class CommitInProgress:
    """A commit on a thread of its own, stopped while it holds the queue (in the write's change notice, after the
    SQLite write) until ``finish``."""

    def __init__(self, backend: LocalBackend, batch: Batch) -> None:
        self.inside, self._go_on = threading.Event(), threading.Event()
        backend._queue.listener = self._wait
        self._thread = threading.Thread(target=backend.commit, args=(batch,))
        self._thread.start()
        assert self.inside.wait(10)

    def _wait(self, changes) -> None:
        self.inside.set()
        self._go_on.wait(10)

    def finish(self) -> None:
        self._go_on.set()
        self._thread.join(10)


def test_only_the_cluster_that_needs_a_new_block_of_ids_goes_to_a_thread(backend, caller):
    schedd = schedd_for(backend, caller)
    txn = at_once(schedd.begin_transaction(ALICE, 60))
    first = Deferred.fromCoroutine(schedd.new_cluster(ALICE, ref(txn)))
    assert not first.called  # (a new queue has no block reserved: a synced write first, on a thread)
    ids = [run(_awaited(first))]
    ids += [at_once(schedd.new_cluster(ALICE, ref(txn))) for _ in range(CLUSTER_BLOCK - 1)]
    last = Deferred.fromCoroutine(schedd.new_cluster(ALICE, ref(txn)))
    assert not last.called
    ids.append(run(_awaited(last)))
    assert ids == list(range(1, CLUSTER_BLOCK + 2))


def test_ids_handed_out_are_never_handed_out_again_after_a_restart(tmp_path, caller):
    first = LocalBackend(tmp_path, schedd_name="test.example")
    schedd = schedd_for(first, caller)
    txn = at_once(schedd.begin_transaction(ALICE, 60))
    run(schedd.new_cluster(ALICE, ref(txn)))
    handed = [at_once(schedd.new_cluster(ALICE, ref(txn))) for _ in range(5)]  # (killed: never closed)
    again = LocalBackend(tmp_path, schedd_name="test.example")
    assert again.reserve_clusters()[0] > max(handed)
    again.close()


def test_while_a_commit_holds_the_queue_the_submit_flow_up_to_commit_waits_for_nothing(backend, caller):
    schedd = schedd_for(backend, caller)
    first = backend.reserve_clusters()[0]
    run(_awaited(caller(lambda: None)))
    txn = at_once(schedd.begin_transaction(ALICE, 60))
    run(schedd.new_cluster(ALICE, ref(txn)))  # (a block of ids for the schedd)
    commit = CommitInProgress(backend, Batch([NewJob(first, 0, classad2.ClassAd({"Cmd": "/bin/true"}))]))
    try:
        txn, cluster, proc = build(schedd)
        committing = Deferred.fromCoroutine(schedd.commit_transaction(ALICE, ref(txn)))
        assert not committing.called  # on a thread, behind the commit that holds the queue
    finally:
        commit.finish()
    run(_awaited(committing))
    assert backend.get_job(cluster, proc)["Owner"] == "alice" and backend.get_job(first, 0) is not None


def test_a_lease_that_ends_while_its_commit_runs_loses_nothing(backend, caller):
    """commitTransaction takes the transaction out of the lease table before the backend commits it: the lease's
    end meanwhile finds nothing to roll back, and nothing committed is discarded."""
    clock = Clock()
    schedd = schedd_for(backend, caller, clock)
    txn = at_once(schedd.begin_transaction(ALICE, 10))
    cluster = run(schedd.new_cluster(ALICE, ref(txn)))
    proc = at_once(schedd.new_job(ALICE, ref(txn), cluster))
    run(schedd.declare_file(ALICE, ref(txn), cluster, proc, "in", 4, None))
    run(schedd.send_file(ALICE, ref(txn), cluster, proc, "in", 0, b"data"))
    at_once(schedd.submit(ALICE, ref(txn), cluster, proc, [Attr("Cmd", AttrType.STRING, "/bin/true")]))
    hold = threading.Event()
    backend._queue.listener = lambda changes: hold.wait(10)
    committing = Deferred.fromCoroutine(schedd.commit_transaction(ALICE, ref(txn)))
    clock.advance(11)  # the lease would have ended now
    hold.set()
    run(_awaited(committing))
    assert backend.get_job(cluster, proc) is not None
    assert backend.read_file(cluster, proc, "in", 0, 10) == b"data"
    backend.discard([(cluster, proc)])  # (a late discard never touches a committed job)
    assert backend.read_file(cluster, proc, "in", 0, 10) == b"data"


def test_an_ad_still_on_disk_after_a_restart_is_read_on_a_thread(tmp_path, monkeypatch, caller):
    backend = LocalBackend(tmp_path, schedd_name="test.example")
    cluster = backend.reserve_clusters()[0]
    backend.commit(Batch([NewJob(cluster, 0, classad2.ClassAd({"Cmd": "/bin/true", "Owner": "alice"}))]))
    expected = str(backend.get_job(cluster, 0))
    backend.close()
    loader_may_run = threading.Event()
    real_load_all = store_module.JobStore._load_all
    monkeypatch.setattr(store_module.JobStore, "_load_all",
                        lambda store: (loader_may_run.wait(10), real_load_all(store)))
    again = LocalBackend(tmp_path, schedd_name="test.example")
    try:
        assert again.job_in_memory(cluster, 0) is None and again.job_in_memory(cluster, 1) is None
        schedd = schedd_for(again, caller)
        reading = Deferred.fromCoroutine(schedd.get_job_ad(ALICE, None, cluster, 0))
        assert not reading.called  # on a thread, which reads it from disk
        assert str(run(_awaited(reading)).ad) == expected
        assert str(again.job_in_memory(cluster, 0)) == expected  # (parsed now: in memory)
        assert str(at_once(schedd.get_job_ad(ALICE, None, cluster, 0)).ad) == expected
    finally:
        loader_may_run.set()
        again.close()


class OnDisk:
    """A backend that holds nothing in memory, so that every read goes to a thread: a local backend's queue behind."""

    def __init__(self, backend: LocalBackend) -> None:
        self._backend = backend

    def __getattr__(self, name: str) -> object:
        return getattr(self._backend, name)

    def job_in_memory(self, cluster: int, proc: int) -> None:
        return None


def test_get_job_ad_with_its_owner_check_answers_from_memory_as_it_does_on_a_thread(backend, caller):
    block = backend.reserve_clusters()
    for cluster, owner in zip(block, ("alice", "bob")):
        backend.commit(Batch([NewJob(cluster, 0, classad2.ClassAd({"Cmd": "/bin/true", "Owner": owner}))]))
    policy, clock = AccessPolicy(default_owner="guest"), Clock()
    from_memory = BirdbathSchedd(backend, caller, policy, clock, queries=QueryRunner(caller))
    threaded = BirdbathSchedd(OnDisk(backend), caller, policy, clock, queries=QueryRunner(caller))
    nobody = Caller("10.0.0.9")
    asked = [(who, cluster, proc) for who in (ALICE, nobody) for cluster in (1, 2, 3, -1, 2**31 - 1)
             for proc in (0, 1, -5)]
    for who, cluster, proc in asked:
        answered = Deferred.fromCoroutine(from_memory.get_job_ad(who, None, cluster, proc))
        assert answered.called == (cluster in (1, 2) and proc == 0)  # (no such job: asked on a thread)
        assert _answer(answered) == _answer(Deferred.fromCoroutine(threaded.get_job_ad(who, None, cluster, proc)))
    assert _answer(Deferred.fromCoroutine(from_memory.get_job_ad(ALICE, None, 2, 0))) == ("FAIL", "Not job owner")


def _answer(deferred: Deferred) -> object:
    """What an operation answered (its attributes, or its status), once it has."""
    outcome = run(_awaited(deferred))
    if hasattr(outcome, "value"):
        assert isinstance(outcome.value, BirdbathError), outcome
        return outcome.value.status.code.value, outcome.value.status.message
    return [(attr.name, attr.type, attr.value) for attr in outcome]
