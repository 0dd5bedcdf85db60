"""The contract every schedd backend must keep, as pytest tests any backend package can run.

A backend's test module subclasses :class:`BackendContract` and provides a ``backend`` fixture::

    from backends.contract import BackendContract

    class TestMyBackend(BackendContract):
        @pytest.fixture
        def backend(self, tmp_path):
            backend = MyBackend(tmp_path)
            yield backend
            backend.close()

The tests use only :mod:`backends.interface`: batches (committed whole, or refused with nothing changed), cluster
ids, queries with constraints and projections, actions, staging and discarding files, output retrieval, error
reporting, and the revisions every whole job ad carries (the gateway keeps what it wrote for an ad by them).
They call the backend directly (as the gateway's worker threads do), with jobs that never need to run: their
``Requirements`` are false.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import classad2
import pytest

from jobmodel.classads import parse_constraint
from jobmodel.jobs import JobAction, JobStatus

from .interface import (
    ActionChange,
    AttributeChange,
    BackendError,
    BackendInfo,
    Batch,
    Capability,
    Changes,
    InvalidState,
    NewJob,
    ScheddBackend,
    UnknownJob,
    revision,
)


def job_ad(**attributes: object) -> classad2.ClassAd:
    ad = classad2.ClassAd()
    ad["Cmd"] = "/bin/true"
    ad["Requirements"] = classad2.ExprTree("false")  # never matched: the contract is about the queue
    ad["Iwd"] = "/tmp"
    for name, value in attributes.items():
        ad[name] = value
    return ad


def given_reason(text: str) -> str:
    """A hold or remove reason as the caller gave it: a real condor_schedd appends who acted (" (by user
    nobody)"), which the contract leaves to the backend."""
    return re.sub(r" \(by user [^()]+\)$", "", text)


def new_cluster(backend: ScheddBackend) -> int:
    return backend.reserve_clusters()[0]


def submitted(backend: ScheddBackend, count: int = 1, **attributes: object) -> tuple[int, list[int]]:
    cluster = new_cluster(backend)
    procs = list(range(count))
    backend.commit(Batch([NewJob(cluster, proc, job_ad(**attributes)) for proc in procs]))
    return cluster, procs


def act(backend: ScheddBackend, action: JobAction, cluster: int, proc: int | None, reason: str) -> None:
    backend.commit(Batch(changes=[ActionChange(action, cluster, proc, reason)]))


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
        assert backend.get_job(cluster, 0).eval("ClusterId") == cluster

    def test_a_job_in_memory_is_its_committed_ad_or_none(self, backend):
        cluster, (proc,) = submitted(backend, Tag="memory")
        ad = backend.job_in_memory(cluster, proc)
        assert ad is None or str(ad) == str(backend.get_job(cluster, proc))
        assert backend.job_in_memory(999_999, 0) is None

    def test_a_backend_that_tells_its_changes_names_each_job_a_batch_changed(self, backend):
        """``Capability.CHANGES``, when declared: 0 is too old; a commit's jobs are named after the number before
        it, readable as committed; the numbers never go back."""
        if Capability.CHANGES not in backend.capabilities:
            pytest.skip("the backend does not declare Capability.CHANGES")
        start = backend.changes_since(0)
        assert isinstance(start, Changes) and start.keys is None
        cluster, procs = submitted(backend, 2)
        after = backend.changes_since(start.number)
        assert after.number > start.number and {(cluster, proc) for proc in procs} <= after.keys
        backend.commit(Batch(changes=[AttributeChange(cluster, 1, "Note", "changed")]))
        later = backend.changes_since(after.number)
        assert later.number > after.number and (cluster, 1) in later.keys and (cluster, 0) not in later.keys
        assert backend.get_job(cluster, 1).eval("Note") == "changed"

    def test_a_watcher_hears_each_change_number_before_the_write_returns(self, backend):
        """``Capability.CHANGES``' ``watch_changes``: the number now at once, then every new one, never going back,
        each heard by the time the write that made it returns, and the one changes_since answers."""
        if Capability.CHANGES not in backend.capabilities:
            pytest.skip("the backend does not declare Capability.CHANGES")
        heard: list[int] = []
        backend.watch_changes(heard.append)
        assert heard == [backend.changes_since(0).number]
        cluster, _ = submitted(backend)
        assert heard[-1] == backend.changes_since(0).number > heard[0]
        backend.commit(Batch(changes=[AttributeChange(cluster, 0, "Note", "watched")]))
        assert heard[-1] == backend.changes_since(0).number and heard == sorted(heard)

    def test_a_failing_batch_changes_nothing(self, backend):
        cluster, (proc,) = submitted(backend)
        fresh = new_cluster(backend)
        batch = Batch([NewJob(fresh, 0, job_ad())], [AttributeChange(cluster, proc, "Note", "changed"),
                                                     ActionChange(JobAction.HOLD, 999_999, 0, "who")])
        with pytest.raises(UnknownJob):
            backend.check_changes(batch)
        with pytest.raises(UnknownJob):
            backend.commit(batch)
        assert backend.get_job(fresh, 0) is None and "Note" not in backend.get_job(cluster, proc)

    def test_changes_apply_at_commit_in_order_and_are_checked_before(self, backend):
        cluster, (proc,) = submitted(backend)
        changes = [ActionChange(JobAction.HOLD, cluster, proc, "later"),
                   AttributeChange(cluster, proc, "Note", classad2.ExprTree("1 + 1"))]
        backend.check_changes(Batch(changes=changes))
        assert status(backend, cluster, proc) == JobStatus.IDLE
        backend.commit(Batch(changes=changes))
        ad = backend.get_job(cluster, proc)
        assert ad.eval("JobStatus") == JobStatus.HELD and given_reason(ad.eval("HoldReason")) == "later"
        assert ad.eval("Note") == 2

    def test_a_job_whose_ad_names_other_ids_is_refused(self, backend):
        cluster = new_cluster(backend)
        with pytest.raises(BackendError, match="ProcId"):
            backend.commit(Batch([NewJob(cluster, 0, job_ad(ProcId=classad2.ExprTree("3 + 4")))]))
        assert backend.get_job(cluster, 0) is None

    def test_cluster_ids_never_repeat(self, backend):
        first = backend.reserve_clusters()
        second = backend.reserve_clusters()
        assert len(first) >= 1 and len(second) >= 1 and second[0] > first[-1]

    def test_cluster_ids_given_back_unused_come_again_and_no_others(self, backend):
        block = backend.reserve_clusters()
        backend.release_clusters(block)
        again = backend.reserve_clusters()
        assert again[0] == block[0]
        later = backend.reserve_clusters()
        backend.release_clusters(again)  # not the end of the last reservation: kept, never handed out twice
        backend.release_clusters(range(later[-1] + 1, later[-1] + 3))  # never reserved
        assert backend.reserve_clusters()[0] == later[-1] + 1

    # -- queries --------------------------------------------------------------------------------------
    def test_queries_with_constraint_and_projection(self, backend):
        cluster, _ = submitted(backend, 3, Size=5)
        found = backend.query(parse_constraint(f"ClusterId == {cluster} && ProcId >= 1"), ["ProcId", "Size"])
        assert sorted(ad.eval("ProcId") for ad in found) == [1, 2]
        assert all(set(ad.keys()) <= {"ProcId", "Size"} and ad.eval("Size") == 5 for ad in found)
        assert backend.query(parse_constraint("NoSuchAttribute == 1")) == []

    # -- revisions ------------------------------------------------------------------------------------
    def test_every_whole_ad_answered_carries_its_jobs_revision(self, backend):
        cluster, procs = submitted(backend, 2)
        found = backend.query(parse_constraint(f"ClusterId == {cluster}"))
        assert sorted(revision(ad).key for ad in found) == [(cluster, proc) for proc in procs]
        ad = backend.get_job(cluster, 1)
        assert revision(ad).key == (cluster, 1)
        assert revision(backend.get_job(cluster, 1)) == revision(ad)  # unchanged: the same revision
        in_memory = backend.job_in_memory(cluster, 1)
        assert in_memory is None or revision(in_memory) == revision(ad)

    def test_every_change_of_a_job_gives_it_a_revision_it_never_had_with_other_content(self, backend):
        """Attribute changes (a string, an expression, back to an earlier value), hold, release and removal, each
        alone and several in one batch: after each the job's revision differs from the one before, and one number
        always stands for one text (a change to another job leaves this one's alone)."""
        cluster, (proc, other) = submitted(backend, 2, LeaveJobInQueue=True)
        texts: dict[int, str] = {}
        numbers: list[int] = []

        def read() -> None:
            for ad in (backend.get_job(cluster, proc),
                       *backend.query(parse_constraint(f"ClusterId == {cluster} && ProcId == {proc}"))):
                found = revision(ad)
                assert found is not None and found.key == (cluster, proc)
                assert texts.setdefault(found.number, str(ad)) == str(ad), "one revision, two contents"
            numbers.append(found.number)

        read()
        steps = [[AttributeChange(cluster, proc, "Note", "one")],
                 [AttributeChange(cluster, proc, "Note", classad2.ExprTree("1 + 1"))],
                 [AttributeChange(cluster, proc, "Note", "one")],
                 [ActionChange(JobAction.HOLD, cluster, proc, "wait")],
                 [ActionChange(JobAction.RELEASE, cluster, proc, "go")],
                 [AttributeChange(cluster, proc, "Note", "two"), AttributeChange(cluster, proc, "Size", classad2.ExprTree("7"))],
                 [ActionChange(JobAction.REMOVE, cluster, proc, "gone")]]
        for changes in steps:
            backend.commit(Batch(changes=changes))
            read()
            assert numbers[-1] != numbers[-2], f"{changes} left the revision as it was"
        before = revision(backend.get_job(cluster, proc))
        backend.commit(Batch(changes=[AttributeChange(cluster, other, "Note", "elsewhere")]))
        assert revision(backend.get_job(cluster, proc)) == before

    # -- actions --------------------------------------------------------------------------------------
    def test_hold_release_remove_with_reasons(self, backend):
        cluster, (proc,) = submitted(backend, LeaveJobInQueue=True)
        act(backend, JobAction.HOLD, cluster, proc, "wait")
        assert given_reason(backend.get_job(cluster, proc).eval("HoldReason")) == "wait"
        with pytest.raises(InvalidState):
            act(backend, JobAction.HOLD, cluster, proc, "again")
        act(backend, JobAction.RELEASE, cluster, proc, "go")
        assert status(backend, cluster, proc) == JobStatus.IDLE
        with pytest.raises(InvalidState):
            act(backend, JobAction.RELEASE, cluster, proc, "not held")
        act(backend, JobAction.REMOVE, cluster, proc, "gone")
        ad = backend.get_job(cluster, proc)
        assert ad.eval("JobStatus") == JobStatus.REMOVED and given_reason(ad.eval("RemoveReason")) == "gone"

    def test_a_whole_cluster_can_be_removed(self, backend):
        cluster, procs = submitted(backend, 3, LeaveJobInQueue=True)
        act(backend, JobAction.HOLD, cluster, 1, "first")
        act(backend, JobAction.HOLD, cluster, None, "all")  # (the held one is skipped, not an error)
        assert all(status(backend, cluster, proc) == JobStatus.HELD for proc in procs)
        act(backend, JobAction.REMOVE, cluster, None, "all")
        assert all(status(backend, cluster, proc) == JobStatus.REMOVED for proc in procs)

    def test_unknown_jobs_are_reported(self, backend):
        with pytest.raises(UnknownJob):
            act(backend, JobAction.HOLD, 999_999, 0, "who")
        with pytest.raises(UnknownJob):
            backend.commit(Batch(changes=[AttributeChange(999_999, 0, "A", "b")]))
        assert backend.get_job(999_999, 0) is None

    # -- staging and output -----------------------------------------------------------------------------
    def test_staged_files_are_in_the_spool_after_commit(self, backend):
        cluster = new_cluster(backend)
        backend.stage_file(cluster, 0, "data.bin")
        backend.write_file(cluster, 0, "data.bin", 3, b"def")
        backend.write_file(cluster, 0, "data.bin", 0, b"abc")
        assert backend.file_md5(cluster, 0, "data.bin") == "e80b5017098950fc58aad83c8c14978e"
        assert backend.get_job(cluster, 0) is None
        backend.commit(Batch([NewJob(cluster, 0, job_ad(), ("data.bin",))]))
        assert [(f.name, f.size) for f in backend.list_files(cluster, 0)] == [("data.bin", 6)]
        assert backend.read_file(cluster, 0, "data.bin", 2, 100) == b"cdef"
        assert backend.read_job_file(cluster, 0, "data.bin", 2, 3) == (6, b"cde")
        assert backend.spool_directory(cluster, 0)

    def test_discarding_removes_what_was_staged_but_never_a_committed_job(self, backend):
        committed, (proc,) = submitted(backend)
        Path(backend.spool_directory(committed, proc)).mkdir(parents=True, exist_ok=True)
        (Path(backend.spool_directory(committed, proc)) / "kept").write_bytes(b"kept")
        cluster = new_cluster(backend)
        backend.stage_file(cluster, 0, "input")
        backend.write_file(cluster, 0, "input", 0, b"data")
        backend.discard([(cluster, 0), (committed, proc)])
        assert list(backend.list_files(cluster, 0)) == []
        assert backend.read_file(committed, proc, "kept", 0, 10) == b"kept"

    def test_job_files_are_plain_names_in_the_spool_only(self, backend, tmp_path):
        cluster, (proc,) = submitted(backend)
        output = tmp_path / "job.out"
        output.write_bytes(b"0123456789")
        # (an absolute path, a file the job's ad names such as its Out, is read with the owner's rights where the
        # backend can take them: tests/test_run_as_owner.py)
        for name in ("../" + output.name, "", "."):
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
        assert [(info.name, info.size) for info in backend.list_files(cluster, proc)] == [("plain", 2)]
        assert backend.read_job_file(cluster, proc, "plain", 0, 10) == (2, b"ok")
        for name in ("leak", "dangling", "fifo", "folder"):
            with pytest.raises(BackendError):
                backend.read_file(cluster, proc, name, 0, 100)
            with pytest.raises(BackendError):
                backend.read_job_file(cluster, proc, name, 0, 100)

    def test_staged_files_have_plain_names(self, backend):
        cluster = new_cluster(backend)
        for name in ("../escape", "a/b", ""):
            with pytest.raises(BackendError):
                backend.stage_file(cluster, 0, name)
        backend.discard([(cluster, 0)])

    def test_reading_a_missing_file_is_an_error(self, backend):
        cluster, (proc,) = submitted(backend)
        with pytest.raises(BackendError):
            backend.read_file(cluster, proc, "missing", 0, 10)
