"""The contract every schedd backend must keep, as pytest tests any backend package can run.

A backend's test module subclasses :class:`BackendContract` and provides a ``backend`` fixture::

    from backends.contract import BackendContract

    class TestMyBackend(BackendContract):
        @pytest.fixture
        def backend(self, tmp_path):
            backend = MyBackend(tmp_path)
            yield backend
            backend.close()

The tests use only :mod:`backends.interface`: transactions (commit, abort, and the rollback of every kind of
change), ids, queries with constraints and projections, actions, staging and output retrieval, error reporting.
They call the backend directly (as the gateway's worker threads do), with jobs that never need to run: their
``Requirements`` are false.
"""

from __future__ import annotations

import os
from pathlib import Path

import classad2
import pytest

from jobmodel.classads import parse_constraint
from jobmodel.jobs import JobAction, JobStatus

from .interface import BackendError, BackendInfo, InvalidState, ScheddBackend, UnknownJob


def job_ad(**attributes: object) -> classad2.ClassAd:
    ad = classad2.ClassAd()
    ad["Cmd"] = "/bin/true"
    ad["Requirements"] = classad2.ExprTree("false")  # never matched: the contract is about the queue
    ad["Iwd"] = "/tmp"
    for name, value in attributes.items():
        ad[name] = value
    return ad


def submitted(backend: ScheddBackend, count: int = 1, **attributes: object) -> tuple[int, list[int]]:
    txn = backend.begin()
    cluster = backend.new_cluster(txn)
    procs = []
    for _ in range(count):
        proc = backend.new_proc(txn, cluster)
        backend.submit(txn, cluster, proc, job_ad(**attributes))
        procs.append(proc)
    backend.commit(txn)
    return cluster, procs


def status(backend: ScheddBackend, cluster: int, proc: int) -> int | None:
    ad = backend.get_job(cluster, proc)
    return None if ad is None else ad.eval("JobStatus")


class BackendContract:
    """Subclass with a ``backend`` fixture (see the module docstring)."""

    # -- description --------------------------------------------------------------------------------
    def test_it_describes_itself(self, backend):
        info = backend.info()
        assert isinstance(info, BackendInfo) and info.name and info.schedd_name
        assert info.version.startswith("$CondorVersion: ") and info.platform.startswith("$CondorPlatform: ")
        assert isinstance(backend, ScheddBackend) and backend.threads >= 1

    # -- transactions -------------------------------------------------------------------------------
    def test_committed_jobs_are_visible_with_their_ids(self, backend):
        cluster, procs = submitted(backend, 3, Tag="visible")
        assert procs == [0, 1, 2]
        found = backend.query(parse_constraint(f"ClusterId == {cluster}"))
        assert sorted(ad.eval("ProcId") for ad in found) == procs
        assert all(ad.eval("Tag") == "visible" and ad.eval("JobStatus") == JobStatus.IDLE for ad in found)

    def test_nothing_is_visible_before_commit(self, backend):
        txn = backend.begin()
        cluster = backend.new_cluster(txn)
        proc = backend.new_proc(txn, cluster)
        backend.submit(txn, cluster, proc, job_ad())
        assert backend.get_job(cluster, proc) is None
        assert backend.query(parse_constraint(f"ClusterId == {cluster}")) == []
        backend.commit(txn)
        assert backend.get_job(cluster, proc) is not None

    def test_abort_rolls_back_new_jobs_and_their_files(self, backend):
        txn = backend.begin()
        cluster = backend.new_cluster(txn)
        proc = backend.new_proc(txn, cluster)
        backend.stage_file(txn, cluster, proc, "input")
        backend.write_file(txn, cluster, proc, "input", 0, b"data")
        backend.submit(txn, cluster, proc, job_ad())
        backend.abort(txn)
        assert backend.get_job(cluster, proc) is None
        assert list(backend.list_files(None, cluster, proc)) == []

    @pytest.mark.parametrize("change", ["hold", "remove", "set_attribute"])
    def test_abort_rolls_back_changes_to_committed_jobs(self, backend, change):
        cluster, (proc,) = submitted(backend)
        before = backend.get_job(cluster, proc)
        txn = backend.begin()
        if change == "set_attribute":
            backend.set_attribute(txn, cluster, proc, "Note", "changed")
        else:
            backend.act(txn, JobAction.HOLD if change == "hold" else JobAction.REMOVE, cluster, proc, "no")
        backend.abort(txn)
        after = backend.get_job(cluster, proc)
        assert after.eval("JobStatus") == before.eval("JobStatus") and "Note" not in after

    def test_changes_in_a_transaction_apply_at_commit(self, backend):
        cluster, (proc,) = submitted(backend)
        txn = backend.begin()
        backend.act(txn, JobAction.HOLD, cluster, proc, "later")
        backend.set_attribute(txn, cluster, proc, "Note", classad2.ExprTree("1 + 1"))
        assert status(backend, cluster, proc) == JobStatus.IDLE
        backend.commit(txn)
        ad = backend.get_job(cluster, proc)
        assert ad.eval("JobStatus") == JobStatus.HELD and ad.eval("HoldReason") == "later" and ad.eval("Note") == 2

    def test_cluster_ids_never_repeat(self, backend):
        txn = backend.begin()
        first = backend.new_cluster(txn)
        backend.abort(txn)
        txn = backend.begin()
        second = backend.new_cluster(txn)
        backend.abort(txn)
        assert second > first

    def test_procs_belong_to_a_cluster_of_the_transaction(self, backend):
        cluster, _ = submitted(backend)
        txn = backend.begin()
        with pytest.raises(BackendError):
            backend.new_proc(txn, cluster)
        backend.abort(txn)

    # -- queries --------------------------------------------------------------------------------------
    def test_queries_with_constraint_and_projection(self, backend):
        cluster, _ = submitted(backend, 3, Size=5)
        found = backend.query(parse_constraint(f"ClusterId == {cluster} && ProcId >= 1"), ["ProcId", "Size"])
        assert sorted(ad.eval("ProcId") for ad in found) == [1, 2]
        assert all(set(ad.keys()) <= {"ProcId", "Size"} and ad.eval("Size") == 5 for ad in found)
        assert backend.query(parse_constraint("NoSuchAttribute == 1")) == []

    # -- actions --------------------------------------------------------------------------------------
    def test_hold_release_remove_with_reasons(self, backend):
        cluster, (proc,) = submitted(backend, LeaveJobInQueue=True)
        assert backend.act(None, JobAction.HOLD, cluster, proc, "wait") == 1
        assert backend.get_job(cluster, proc).eval("HoldReason") == "wait"
        with pytest.raises(InvalidState):
            backend.act(None, JobAction.HOLD, cluster, proc, "again")
        backend.act(None, JobAction.RELEASE, cluster, proc, "go")
        assert status(backend, cluster, proc) == JobStatus.IDLE
        with pytest.raises(InvalidState):
            backend.act(None, JobAction.RELEASE, cluster, proc, "not held")
        backend.act(None, JobAction.REMOVE, cluster, proc, "gone")
        ad = backend.get_job(cluster, proc)
        assert ad.eval("JobStatus") == JobStatus.REMOVED and ad.eval("RemoveReason") == "gone"

    def test_a_whole_cluster_can_be_removed(self, backend):
        cluster, procs = submitted(backend, 3, LeaveJobInQueue=True)
        assert backend.act(None, JobAction.REMOVE, cluster, None, "all") == 3
        assert all(status(backend, cluster, proc) == JobStatus.REMOVED for proc in procs)

    def test_unknown_jobs_are_reported(self, backend):
        with pytest.raises(UnknownJob):
            backend.act(None, JobAction.HOLD, 999_999, 0, "who")
        with pytest.raises(UnknownJob):
            backend.set_attribute(None, 999_999, 0, "A", "b")
        assert backend.get_job(999_999, 0) is None

    # -- staging and output -----------------------------------------------------------------------------
    def test_staged_files_are_in_the_spool_after_commit(self, backend):
        txn = backend.begin()
        cluster = backend.new_cluster(txn)
        proc = backend.new_proc(txn, cluster)
        backend.stage_file(txn, cluster, proc, "data.bin")
        backend.write_file(txn, cluster, proc, "data.bin", 3, b"def")
        backend.write_file(txn, cluster, proc, "data.bin", 0, b"abc")
        assert backend.file_md5(txn, cluster, proc, "data.bin") == "e80b5017098950fc58aad83c8c14978e"
        backend.submit(txn, cluster, proc, job_ad())
        backend.commit(txn)
        assert [(f.name, f.size) for f in backend.list_files(None, cluster, proc)] == [("data.bin", 6)]
        assert backend.read_file(None, cluster, proc, "data.bin", 2, 100) == b"cdef"
        assert backend.read_job_file(cluster, proc, "data.bin", 2, 3) == (6, b"cde")
        assert backend.spool_directory(cluster, proc)

    def test_job_files_are_plain_names_in_the_spool_only(self, backend, tmp_path):
        cluster, (proc,) = submitted(backend)
        output = tmp_path / "job.out"
        output.write_bytes(b"0123456789")
        for name in (str(output), "../" + output.name, "", "."):
            with pytest.raises(BackendError):
                backend.read_job_file(cluster, proc, name, 0, 100)
        with pytest.raises(BackendError):
            backend.read_job_file(cluster, proc, "missing", 0, 1)

    def test_what_a_job_left_in_its_spool_is_read_only_if_it_is_a_regular_file(self, backend, tmp_path):
        """A job that writes its spool may leave a link to a secret, a FIFO or a directory there: none is listed,
        and reading one fails at once (never following the link, never waiting for a writer)."""
        cluster, (proc,) = submitted(backend)
        secret = tmp_path / "secret"
        secret.write_bytes(b"not for the job's owner")
        spool = Path(backend.spool_directory(cluster, proc))
        spool.mkdir(parents=True, exist_ok=True)
        (spool / "plain").write_bytes(b"ok")
        (spool / "leak").symlink_to(secret)
        (spool / "dangling").symlink_to(tmp_path / "nothing")
        os.mkfifo(spool / "fifo")
        (spool / "folder").mkdir()
        assert [(info.name, info.size) for info in backend.list_files(None, cluster, proc)] == [("plain", 2)]
        assert backend.read_job_file(cluster, proc, "plain", 0, 10) == (2, b"ok")
        for name in ("leak", "dangling", "fifo", "folder"):
            with pytest.raises(BackendError):
                backend.read_file(None, cluster, proc, name, 0, 100)
            with pytest.raises(BackendError):
                backend.read_job_file(cluster, proc, name, 0, 100)

    def test_files_only_for_jobs_of_the_transaction_and_plain_names(self, backend):
        cluster, (proc,) = submitted(backend)
        txn = backend.begin()
        with pytest.raises(UnknownJob):
            backend.stage_file(txn, cluster, proc, "late")
        own = backend.new_cluster(txn)
        own_proc = backend.new_proc(txn, own)
        for name in ("../escape", "a/b", ""):
            with pytest.raises(BackendError):
                backend.stage_file(txn, own, own_proc, name)
        backend.abort(txn)

    def test_reading_a_missing_file_is_an_error(self, backend):
        cluster, (proc,) = submitted(backend)
        with pytest.raises(BackendError):
            backend.read_file(None, cluster, proc, "missing", 0, 10)
