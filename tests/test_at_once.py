"""The local backend's calls answered at once on the reactor (``immediate``): the same answers as on its threads,
never a wait for a lock another thread holds or for the disk, and the calls that cannot answer so (a commit in
progress, a new block of cluster ids, an ad still on disk, spool directories to remove) made on a thread instead."""

from __future__ import annotations

import threading

import classad2
import pytest
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from backends.interface import WouldBlock, answering_at_once, call_at_once, immediate
from backends.local import LocalBackend
from backends.local import store as store_module
from backends.local.store import CLUSTER_BLOCK
from gateway.core.auth import AccessPolicy, Authentication, Caller
from gateway.core.queries import QueryRunner
from gateway.core.schedd import BirdbathSchedd
from gateway.core.status import BirdbathError
from gateway.core.threads import BlockingCaller
from tests.test_threads import run


@pytest.fixture
def backend(tmp_path) -> LocalBackend:
    backend = LocalBackend(tmp_path, schedd_name="test.example", clock=lambda: 1_700_000_000)
    yield backend
    backend.close()


@pytest.fixture
def ready(backend) -> LocalBackend:
    """A backend that has reserved a block of cluster ids (its first cluster, 1, is used up)."""
    backend.new_cluster(backend.begin())
    return backend


@pytest.fixture
def caller():
    caller = BlockingCaller(reactor, 2, "test")
    yield caller
    caller.stop()


def a_job(owner: str = "alice") -> classad2.ClassAd:
    return classad2.ClassAd({"Cmd": "/bin/true", "Owner": owner})


def submit_at_once(backend: LocalBackend) -> tuple[object, int, int]:
    """The submit flow's backend calls up to commit, each answered at once."""
    txn = call_at_once(backend.begin)
    cluster = call_at_once(backend.new_cluster, txn)
    proc = call_at_once(backend.new_proc, txn, cluster)
    call_at_once(backend.submit, txn, cluster, proc, a_job())
    return txn, cluster, proc


class CommitInProgress:
    """A commit on a thread of its own, stopped while it holds the queue (in the write's change notice, after the
    SQLite write) until ``finish``."""

    def __init__(self, backend: LocalBackend, txn: object) -> None:
        self.inside, self._go_on = threading.Event(), threading.Event()
        backend._queue.listener = self._wait
        self._thread = threading.Thread(target=backend.commit, args=(txn,))
        self._thread.start()
        assert self.inside.wait(10)

    def _wait(self, changes) -> None:
        self.inside.set()
        self._go_on.wait(10)

    def finish(self) -> None:
        self._go_on.set()
        self._thread.join(10)


def test_the_submit_flow_at_once_answers_as_on_the_backends_thread(tmp_path):
    at_once = LocalBackend(tmp_path / "a", schedd_name="test.example", clock=lambda: 1_700_000_000)
    threaded = LocalBackend(tmp_path / "b", schedd_name="test.example", clock=lambda: 1_700_000_000)
    try:
        threaded.new_cluster(threaded.begin())  # (the first block of ids, reserved on a thread by either)
        at_once.new_cluster(at_once.begin())
        txn, cluster, proc = submit_at_once(at_once)
        at_once.commit(txn)
        txn = threaded.begin()
        assert (threaded.new_cluster(txn), threaded.new_proc(txn, 2)) == (cluster, proc) == (2, 0)
        threaded.submit(txn, 2, 0, a_job())
        threaded.commit(txn)
        assert str(call_at_once(at_once.get_job, 2, 0)) == str(threaded.get_job(2, 0))
        assert call_at_once(at_once.get_job, 2, 1) is None
    finally:
        at_once.close()
        threaded.close()


def test_refusals_at_once_are_the_same_as_on_a_thread(ready):
    backend = ready
    txn, cluster, proc = submit_at_once(backend)
    with pytest.raises(Exception, match="was not created in this transaction") as at_once:
        call_at_once(backend.submit, txn, cluster, proc + 1, a_job())
    with pytest.raises(Exception, match="was not created in this transaction") as threaded:
        backend.submit(txn, cluster, proc + 1, a_job())
    assert type(at_once.value) is type(threaded.value)
    bad = a_job()
    bad["ProcId"] = classad2.ExprTree("3 + 4")
    with pytest.raises(WouldBlock):  # (an expression of the client's is evaluated on a thread, never on the reactor)
        call_at_once(backend.submit, txn, cluster, proc, bad)
    with pytest.raises(Exception, match="ProcId must be 0"):
        backend.submit(txn, cluster, proc, bad)
    backend.abort(txn)
    with pytest.raises(Exception, match="no longer open"):
        call_at_once(backend.new_proc, txn, cluster)


def test_only_the_cluster_that_needs_a_new_block_of_ids_goes_to_a_thread(backend):
    txn = backend.begin()
    with pytest.raises(WouldBlock):  # (a new queue has no block reserved: a synced write first)
        call_at_once(backend.new_cluster, txn)
    ids = [backend.new_cluster(txn)]
    ids += [call_at_once(backend.new_cluster, txn) for _ in range(CLUSTER_BLOCK - 1)]
    with pytest.raises(WouldBlock):
        call_at_once(backend.new_cluster, txn)
    ids.append(backend.new_cluster(txn))
    assert ids == list(range(1, CLUSTER_BLOCK + 2))


def test_ids_handed_out_at_once_are_never_handed_out_again_after_a_restart(tmp_path):
    first = LocalBackend(tmp_path, schedd_name="test.example")
    txn = first.begin()
    first.new_cluster(txn)
    handed = [call_at_once(first.new_cluster, txn) for _ in range(5)]  # (killed: never closed)
    again = LocalBackend(tmp_path, schedd_name="test.example")
    assert again.new_cluster(again.begin()) > max(handed)
    again.close()


def test_while_a_commit_holds_the_queue_nothing_at_once_waits_for_it(ready, caller):
    backend = ready
    committing, cluster, proc = submit_at_once(backend)
    commit = CommitInProgress(backend, committing)
    try:
        other = call_at_once(backend.begin)  # (a transaction object: no lock needed)
        for call in ((backend.new_cluster, other), (backend.abort, other)):
            with pytest.raises(WouldBlock):
                call_at_once(*call)
        waiting = caller(backend.new_cluster, other)  # on a thread instead, behind the commit
        assert not waiting.called
    finally:
        commit.finish()
    assert run(_awaited(waiting)) == cluster + 1
    assert backend.get_job(cluster, proc)["Owner"] == "alice"


def test_a_transaction_that_expires_while_its_commit_runs_is_rolled_back_after_it_and_loses_nothing(ready, caller):
    backend = ready
    txn, cluster, proc = submit_at_once(backend)
    commit = CommitInProgress(backend, txn)
    try:
        expiry = caller(backend.abort, txn)  # (the lease's end: declined at once, queued on a thread)
        assert not expiry.called
    finally:
        commit.finish()
    run(_awaited(expiry))
    assert backend.get_job(cluster, proc) is not None
    assert backend._queue.spool.directory(cluster, proc).is_dir()


def test_an_abort_at_once_moves_its_jobs_spool_directories_into_the_trash(ready):
    backend = ready
    empty = backend.begin()
    backend.new_cluster(empty)  # (a cluster id is not undone: it is never used again)
    call_at_once(backend.abort, empty)
    with pytest.raises(Exception, match="no longer open"):
        call_at_once(backend.new_cluster, empty)
    txn, cluster, proc = submit_at_once(backend)
    assert backend._queue.spool.directory(cluster, proc).exists()
    call_at_once(backend.abort, txn)  # a rename each: no thread needed
    assert not backend._queue.spool.directory(cluster, proc).exists()
    with pytest.raises(Exception, match="no longer open"):
        call_at_once(backend.new_proc, txn, cluster)


def test_an_ad_still_on_disk_after_a_restart_is_read_on_a_thread(tmp_path, monkeypatch, caller):
    backend = LocalBackend(tmp_path, schedd_name="test.example")
    txn = backend.begin()
    cluster = backend.new_cluster(txn)
    backend.submit(txn, cluster, backend.new_proc(txn, cluster), a_job())
    backend.commit(txn)
    expected = str(backend.get_job(cluster, 0))
    backend.close()
    loader_may_run = threading.Event()
    real_load_all = store_module.JobStore._load_all
    monkeypatch.setattr(store_module.JobStore, "_load_all",
                        lambda store: (loader_may_run.wait(10), real_load_all(store)))
    again = LocalBackend(tmp_path, schedd_name="test.example")
    try:
        with pytest.raises(WouldBlock):
            call_at_once(again.get_job, cluster, 0)
        assert call_at_once(again.get_job, cluster, 1) is None  # (not queued: known from memory)
        assert str(run(_awaited(caller(again.get_job, cluster, 0)))) == expected
        assert str(call_at_once(again.get_job, cluster, 0)) == expected  # (parsed now: in memory)
    finally:
        loader_may_run.set()
        again.close()


def test_a_declined_call_is_made_again_on_the_pool_where_it_may_block(caller):
    where = []

    @immediate
    def sometimes() -> str:
        where.append(answering_at_once())
        if answering_at_once():
            raise WouldBlock("not now")
        return threading.current_thread().name

    assert "backend-test" in run(_awaited(caller(sometimes)))
    assert where == [True, False]
    assert not answering_at_once()


def test_a_failure_at_once_is_a_failed_deferred(caller):
    @immediate
    def refuses() -> None:
        raise ValueError("refused")

    outcome = run(_awaited(caller(refuses)))
    assert isinstance(outcome.value, ValueError) and not answering_at_once()


async def _awaited(deferred):
    return await deferred


def test_get_job_ad_with_its_owner_check_answers_at_once_as_it_did_on_a_thread(backend, caller):
    for owner in ("alice", "bob"):
        txn = backend.begin()
        cluster = backend.new_cluster(txn)
        backend.submit(txn, cluster, backend.new_proc(txn, cluster), a_job(owner))
        backend.commit(txn)
    policy, clock = AccessPolicy(default_owner="guest"), Clock()
    at_once = BirdbathSchedd(backend, caller, policy, clock, queries=QueryRunner(caller))
    threaded = BirdbathSchedd(backend, caller._in_thread, policy, clock, queries=QueryRunner(caller._in_thread))
    alice, nobody = Caller("127.0.0.1", "alice", Authentication.SOCKET), Caller("10.0.0.9")
    asked = [(who, cluster, proc) for who in (alice, nobody) for cluster in (1, 2, 3, -1, 2**31 - 1)
             for proc in (0, 1, -5)]
    for who, cluster, proc in asked:
        answered = Deferred.fromCoroutine(at_once.get_job_ad(who, None, cluster, proc))
        assert answered.called  # (no thread: from memory, with the owner check in the same call)
        assert _answer(answered) == _answer(Deferred.fromCoroutine(threaded.get_job_ad(who, None, cluster, proc)))
    assert _answer(Deferred.fromCoroutine(at_once.get_job_ad(alice, None, 2, 0))) == ("FAIL", "Not job owner")


def _answer(deferred: Deferred) -> object:
    """What an operation answered (its attributes, or its status), once it has."""
    outcome = run(_awaited(deferred))
    if hasattr(outcome, "value"):
        assert isinstance(outcome.value, BirdbathError), outcome
        return outcome.value.status.code.value, outcome.value.status.message
    return [(attr.name, attr.type, attr.value) for attr in outcome]
