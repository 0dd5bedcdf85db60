"""The local backend on its own: a durable, transactional queue with spool directories."""

from __future__ import annotations

import classad2
import pytest

from backends.contract import act
from backends.interface import (
    ActionChange,
    AttributeChange,
    BackendError,
    Batch,
    InvalidState,
    NewJob,
    ScheddBackend,
    UnknownJob,
)
from backends.local import LocalBackend
from jobmodel.classads import parse_constraint
from jobmodel.jobs import JobAction


@pytest.fixture
def backend(tmp_path) -> LocalBackend:
    backend = LocalBackend(tmp_path, schedd_name="test.example", clock=lambda: 1_700_000_000)
    yield backend
    backend.close()


def submitted(backend: LocalBackend, count: int = 1, **attributes) -> tuple[int, list[int]]:
    cluster = backend.reserve_clusters()[0]
    procs = list(range(count))
    backend.commit(Batch([NewJob(cluster, proc, classad2.ClassAd({"Cmd": "/bin/true", **attributes}))
                          for proc in procs]))
    return cluster, procs


def test_it_implements_the_backend_interface(backend):
    assert isinstance(backend, ScheddBackend)
    assert backend.info().name == "local" and backend.info().version.startswith("$CondorVersion: ")


def test_commit_fills_in_schedd_attributes(backend):
    cluster, (proc,) = submitted(backend)
    ad = backend.get_job(cluster, proc)
    assert ad["ClusterId"] == cluster and ad["ProcId"] == proc and ad["JobStatus"] == 1
    assert ad["QDate"] == 1_700_000_000 and ad["EnteredCurrentStatus"] == 1_700_000_000
    assert ad["GlobalJobId"] == f"test.example#{cluster}.{proc}#1700000000"


def test_staged_files_are_invisible_until_commit_and_discarded_into_the_trash(backend):
    cluster, proc = backend.reserve_clusters()[0], 0
    backend.stage_file(cluster, proc, "in")
    backend.write_file(cluster, proc, "in", 0, b"data")
    assert backend.get_job(cluster, proc) is None and backend.query(None) == []
    backend.discard([(cluster, proc)])  # a rename: the trash's thread removes it
    assert backend.list_files(cluster, proc) == []
    assert not backend._queue.spool.directory(cluster, proc).exists()


def test_cluster_ids_are_never_reused_across_restarts(tmp_path):
    first = LocalBackend(tmp_path)
    block = first.reserve_clusters()
    first.close()
    second = LocalBackend(tmp_path)
    assert second.reserve_clusters()[0] == block[-1] + 1
    second.close()


def test_a_full_queue_database_fails_the_commit_and_keeps_nothing_of_it(tmp_path):
    """SQLite's "database or disk is full" (here through max_page_count, a real SQLITE_FULL without a full disk) is a
    BackendError; the write is rolled back, what it staged can be discarded, and the queue works once there is room."""
    backend = LocalBackend(tmp_path, schedd_name="test.example")
    first, _ = submitted(backend)
    database = backend._queue.store._db  # the store's own connection: max_page_count is per connection
    database.execute(f"PRAGMA max_page_count = {database.execute('PRAGMA page_count').fetchone()[0]}")
    cluster, proc = backend.reserve_clusters()[0], 0
    ad = classad2.ClassAd()
    ad["Padding"] = "x" * 100_000  # needs pages the database may not have
    with pytest.raises(BackendError, match="database or disk is full"):
        backend.commit(Batch([NewJob(cluster, proc, ad)]))
    assert not database.in_transaction
    backend.discard([(cluster, proc)])
    assert backend.get_job(cluster, proc) is None and backend.list_files(cluster, proc) == []
    database.execute("PRAGMA max_page_count = 1073741823")
    later, _ = submitted(backend)
    assert later > cluster > first
    backend.close()
    reopened = LocalBackend(tmp_path, schedd_name="test.example")
    assert reopened.get_job(cluster, proc) is None and reopened.get_job(later, 0) is not None
    reopened.close()


def test_the_queue_is_reloaded_from_disk(tmp_path):
    backend = LocalBackend(tmp_path)
    cluster, (proc,) = submitted(backend, Requirements=classad2.ExprTree("Memory > 5"))
    backend.close()
    reopened = LocalBackend(tmp_path)
    assert str(reopened.get_job(cluster, proc).lookup("Requirements")) == "Memory > 5"
    reopened.close()


def test_queries_with_constraint_and_projection(backend):
    cluster, procs = submitted(backend, 3, Tag="x")
    found = backend.query(parse_constraint(f"ClusterId == {cluster} && ProcId > 0"), ["ProcId", "Tag", "Nope"])
    assert sorted(ad["ProcId"] for ad in found) == [1, 2]
    assert all(set(ad.keys()) == {"ProcId", "Tag"} for ad in found)


def test_state_transitions_and_their_preconditions(backend):
    cluster, (proc,) = submitted(backend)
    with pytest.raises(InvalidState):
        act(backend, JobAction.RELEASE, cluster, proc, "not held")
    act(backend, JobAction.HOLD, cluster, proc, "why")
    assert backend.get_job(cluster, proc)["HoldReason"] == "why"
    act(backend, JobAction.REMOVE, cluster, proc, "gone")
    assert backend.get_job(cluster, proc) is None  # removed jobs leave the queue ...
    (removed,) = backend.history(parse_constraint(f"ClusterId == {cluster}"))  # ... for the history
    assert removed["JobStatus"] == 3 and removed["RemoveReason"] == "gone"
    with pytest.raises(UnknownJob):
        act(backend, JobAction.HOLD, cluster + 100, 0, "who")


def test_removing_a_cluster_skips_jobs_already_removed(backend):
    cluster, procs = submitted(backend, 3, LeaveJobInQueue=True)
    act(backend, JobAction.REMOVE, cluster, 1, "first")
    with pytest.raises(InvalidState):
        act(backend, JobAction.HOLD, cluster, 1, "too late")
    act(backend, JobAction.REMOVE, cluster, None, "rest")
    assert backend.get_job(cluster, 1)["RemoveReason"] == "first"
    assert backend.get_job(cluster, 2)["RemoveReason"] == "rest"


def test_leave_job_in_queue_keeps_finished_jobs_until_it_turns_false(backend):
    cluster, (proc,) = submitted(backend, LeaveJobInQueue=classad2.ExprTree("FilesRetrieved =?= false"),
                                 FilesRetrieved=False)
    act(backend, JobAction.REMOVE, cluster, proc, "done with it")
    assert backend.get_job(cluster, proc)["JobStatus"] == 3
    backend.commit(Batch(changes=[AttributeChange(cluster, proc, "FilesRetrieved", classad2.ExprTree("true"))]))
    assert backend.get_job(cluster, proc) is None
    assert backend.history(parse_constraint(f"ClusterId == {cluster}"), limit=1)[0]["FilesRetrieved"] is True


def test_changes_in_a_transaction_apply_in_order_at_commit(backend):
    cluster, (proc,) = submitted(backend)
    batch = Batch(changes=[ActionChange(JobAction.HOLD, cluster, proc, "one"),
                           ActionChange(JobAction.RELEASE, cluster, proc, "two"),  # (the job is held by then)
                           AttributeChange(cluster, proc, "Note", "set in txn")])
    backend.check_changes(batch)
    assert backend.get_job(cluster, proc).get("Note") is None
    with pytest.raises(InvalidState):  # without the hold before it, the release does not apply
        backend.check_changes(Batch(changes=batch.changes[1:]))
    backend.commit(batch)
    ad = backend.get_job(cluster, proc)
    assert ad["JobStatus"] == 1 and ad["LastHoldReason"] == "one" and ad["Note"] == "set in txn"


def test_spool_files_are_plain_names_only(backend):
    cluster, proc = backend.reserve_clusters()[0], 0
    for name in ("../x", "a/b", "", ".."):
        with pytest.raises(BackendError):
            backend.stage_file(cluster, proc, name)
    backend.discard([(cluster, proc)])


def test_a_restart_preens_spools_of_jobs_that_never_committed(tmp_path):
    backend = LocalBackend(tmp_path)
    cluster, proc = backend.reserve_clusters()[0], 0
    backend.stage_file(cluster, proc, "orphan")
    kept_cluster, (kept_proc,) = submitted(backend)
    backend.close()  # as if the process died: the transaction is neither committed nor aborted
    reopened = LocalBackend(tmp_path)
    assert reopened.list_files(cluster, proc) == []
    assert reopened.get_job(kept_cluster, kept_proc) is not None
    reopened.close()


def test_user_is_always_the_owner_at_the_uid_domain(tmp_path):
    """Whatever the client sent (a forged User), the schedd derives it; uid_domain defaults to the schedd name."""
    for options, domain in (({}, "test.example"), ({"uid_domain": "example.org"}, "example.org")):
        backend = LocalBackend(tmp_path / domain, schedd_name="test.example", **options)
        cluster, (proc,) = submitted(backend, Owner="alice", User="root@evil")
        assert backend.get_job(cluster, proc)["User"] == f"alice@{domain}"
        backend.close()


@pytest.mark.parametrize("denied", ["root", ["root", 0]])
def test_denied_owners_is_a_list_of_names(tmp_path, denied):
    with pytest.raises(ValueError, match="denied_owners"):
        LocalBackend(tmp_path, denied_owners=denied)


def test_a_call_returns_once_its_writes_are_on_disk_and_only_then_does_what_waited_for_them(backend, monkeypatch):
    store, queue, order = backend._queue.store, backend._queue, []
    real_durable = store.durable
    monkeypatch.setattr(store, "durable", lambda written: (order.append(("synced", written)), real_durable(written)))

    def work() -> None:  # (inside a call: the queue itself, not the backend's methods, which are calls)
        queue.commit(Batch([NewJob(queue.store.next_cluster_id(), 0, classad2.ClassAd({"Cmd": "/bin/true"}))]))
        queue.once_durable(lambda: order.append(("after", store.written)))
        order.append(("returning", store.written))

    backend.serially(work)
    written = store.written
    backend.serially(lambda: backend.serially(len, ""))  # (a call from within a call is part of it, not a wait for itself)
    assert order[-3:] == [("returning", written), ("synced", written), ("after", written)]
    queue.once_durable(lambda: order.append(("at once", store.written)))  # (outside a call: synced there and then)
    assert order[-2:] == [("synced", written), ("at once", written)]


def test_a_job_without_a_spool_yet_has_no_files(backend):
    """A job gets its spool with its first staged file (or at commit): before that, reading a file of it fails as
    for a file missing from its spool, and listing finds nothing."""
    cluster = backend.reserve_clusters()[0]
    assert backend.list_files(cluster, 0) == []
    with pytest.raises(BackendError, match=r"^Failed to open file 'in', reason: No such file or directory$"):
        backend.read_file(cluster, 0, "in", 0, 10)
