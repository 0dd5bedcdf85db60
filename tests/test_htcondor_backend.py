"""The htcondor backend: the backend contract and its own behaviour, against a recording stand-in for the
schedd (no HTCondor daemon can run here; see README "What has been verified")."""

from __future__ import annotations

import classad2
import pytest

from backends.contract import BackendContract, act, job_ad, new_cluster, submitted
from backends.htcondor import HTCondorBackend
from backends.htcondor.backend import FIRST_GATEWAY_CLUSTER, ROLLBACK_REASON
from backends.interface import (
    ActionChange,
    AttributeChange,
    BackendUnavailable,
    Batch,
    InvalidState,
    NewJob,
    UnknownJob,
)
from jobmodel.classads import matches, parse_constraint
from jobmodel.exprtext import SourceExpr
from jobmodel.jobs import JobAction, JobStatus
from tests.htcondor_standin import FakePool


@pytest.fixture
def pool() -> FakePool:
    return FakePool()


def make(tmp_path, pool: FakePool) -> HTCondorBackend:
    return HTCondorBackend(tmp_path, schedd=pool.schedd, submitter=pool.submitter, location=pool.location)


class TestHTCondorBackendContract(BackendContract):
    @pytest.fixture
    def backend(self, tmp_path, pool):
        backend = make(tmp_path, pool)
        yield backend
        backend.close()


def test_it_reports_the_schedds_own_version_and_platform(tmp_path, pool):
    info = make(tmp_path, pool).info()
    assert info.version == pool.location["CondorVersion"] and info.platform == pool.location["CondorPlatform"]
    assert info.schedd_name == "schedd@pool.example.org" and info.name == "htcondor"


def test_a_birdbath_cluster_is_one_schedd_cluster_of_raw_job_ads(tmp_path, pool):
    backend = make(tmp_path, pool)
    cluster, procs = submitted(backend, 2, Tag="raw")
    assert cluster >= FIRST_GATEWAY_CLUSTER and procs == [0, 1]
    (submission,) = [args for name, args in pool.calls if name == "submitMany"]
    ads, spool = submission
    assert spool is False and len(ads) == 2
    assert all(f"BirdbathClusterId = {cluster}" in text and 'Tag = "raw"' in text for text in ads)
    assert set(pool.jobs) == {(1, 0), (1, 1)}  # the schedd chose cluster 1
    shown = backend.get_job(cluster, 1)
    assert shown["ClusterId"] == cluster and shown["ProcId"] == 1 and shown["SchedulerClusterId"] == 1


def test_staged_files_are_spooled_after_submission(tmp_path, pool):
    backend = make(tmp_path, pool)
    cluster, proc = new_cluster(backend), 0
    backend.stage_file(cluster, proc, "input")
    backend.write_file(cluster, proc, "input", 0, b"payload")
    ad = job_ad(Iwd=backend.spool_directory(cluster, proc), TransferInput="input")
    backend.commit(Batch([NewJob(cluster, proc, ad, ("input",))]))
    names = [name for name, _ in pool.calls]
    assert names.index("submitMany") < names.index("spool")
    assert pool.jobs[(1, 0)]["JobStatus"] == 1  # spooling finished: released


def test_finished_output_is_retrieved_before_listing(tmp_path, pool):
    backend = make(tmp_path, pool)
    cluster, (proc,) = submitted(backend, LeaveJobInQueue=True)
    pool.jobs[(1, 0)]["JobStatus"] = 4
    backend.list_files(cluster, proc)
    assert ("retrieve", (f"BirdbathClusterId == {cluster} && BirdbathProcId == {proc}",)) in pool.calls


def test_actions_and_edits_go_to_the_schedd_with_the_jobs_schedd_side_constraint(tmp_path, pool):
    backend = make(tmp_path, pool)
    cluster, (proc,) = submitted(backend)
    act(backend, JobAction.HOLD, cluster, proc, "maintenance")
    for name, value in (("Note", "a string"), ("Rank", SourceExpr("Memory*1.0E3")),
                        ("Flag", classad2.ExprTree("x is true"))):
        backend.commit(Batch(changes=[AttributeChange(cluster, proc, name, value)]))
    spec = f"BirdbathClusterId == {cluster} && BirdbathProcId == {proc}"
    assert ("act", ("Hold", spec, "maintenance", 0)) in pool.calls  # what the bindings passed on to the schedd
    assert ("edit", (spec, "Note", '"a string"')) in pool.calls
    assert ("edit", (spec, "Rank", "Memory*1.0E3")) in pool.calls  # a client's expression as it sent it
    assert ("edit", (spec, "Flag", "x =?= TRUE")) in pool.calls
    shown = backend.get_job(cluster, proc)
    assert shown["Note"] == "a string" and shown["HoldReason"] == "maintenance" and shown["HoldReasonSubCode"] == 0


def test_jobs_submitted_elsewhere_keep_their_own_ids(tmp_path, pool):
    backend = make(tmp_path, pool)
    foreign = classad2.parseOne('[ClusterId = 7; ProcId = 0; JobStatus = 1; Owner = "someone"]')
    pool.jobs[(7, 0)] = foreign
    assert backend.get_job(7, 0)["Owner"] == "someone"
    assert [ad["ClusterId"] for ad in backend.query(parse_constraint("Owner == \"someone\""))] == [7]


def test_an_unreachable_schedd_is_a_clear_error(tmp_path, pool):
    backend = make(tmp_path, pool)
    pool.down = True
    with pytest.raises(BackendUnavailable) as error:
        backend.query(None)
    assert "the schedd did not complete query" in str(error.value) and "Failed to connect" in str(error.value)


def test_locating_a_schedd_in_a_pool_that_is_not_there(tmp_path):
    with pytest.raises(BackendUnavailable) as error:
        HTCondorBackend(tmp_path, collector="127.0.0.1:9", schedd_name="nowhere")
    assert "cannot locate the schedd nowhere in collector 127.0.0.1:9" in str(error.value)


# -- the stand-in takes what the 24.0 bindings take -------------------------------------------------------------
def test_the_standin_drops_a_plain_string_reason_as_the_bindings_do(pool):
    import htcondor2

    pool.jobs[(3, 0)] = classad2.parseOne("[ClusterId = 3; ProcId = 0; JobStatus = 1]")
    pool.schedd.act(htcondor2.JobAction.Hold, "ClusterId == 3", "a plain string")
    assert pool.calls[-1] == ("act", ("Hold", "ClusterId == 3", None, None))  # the schedd got no reason
    assert pool.jobs[(3, 0)]["HoldReason"] == ""
    pool.schedd.act(htcondor2.JobAction.Release, "ClusterId == 3", ("kept", 0))
    assert pool.jobs[(3, 0)]["ReleaseReason"] == "kept"
    with pytest.raises(TypeError):  # job_spec_hack runs re.fullmatch on it
        pool.schedd.act(htcondor2.JobAction.Hold, classad2.ExprTree("ClusterId == 3"), ("no", 0))
    with pytest.raises(TypeError):
        pool.schedd.query("true", ("ClusterId",))  # _schedd_query wants a list
    assert pool.schedd.query(None) == []  # str(None) is the attribute None
    with pytest.raises(TypeError):
        pool.submitter.submitMany(classad2.ClassAd(), [])  # the v1 bindings take v1 ClassAds only


def test_acting_by_constraint_on_a_job_in_the_wrong_state_matches_nothing(tmp_path, pool):
    import htcondor2

    backend = make(tmp_path, pool)
    cluster, (proc,) = submitted(backend)
    result = pool.schedd.act(htcondor2.JobAction.Release, backend._spec(cluster, proc), ("no", 0))
    assert (result["TotalSuccess"], result["TotalBadStatus"], result["TotalNotFound"]) == (0, 0, 0)
    with pytest.raises(InvalidState):  # so the backend asks whether the job is there
        act(backend, JobAction.RELEASE, cluster, proc, "no")
    with pytest.raises(UnknownJob):
        act(backend, JobAction.RELEASE, cluster + 1, proc, "no")


def test_a_failed_spooling_removes_the_cluster_again(tmp_path, pool):
    backend = make(tmp_path, pool)
    cluster, proc = new_cluster(backend), 0
    backend.stage_file(cluster, proc, "input")
    pool.fail("spool")
    with pytest.raises(BackendUnavailable):
        backend.commit(Batch([NewJob(cluster, proc, job_ad(), ("input",))]))
    assert pool.jobs == {} and pool.history[0]["RemoveReason"] == ROLLBACK_REASON
    assert pool.history[0]["LastHoldReasonCode"] == 16  # it had been waiting for its files
    assert backend.get_job(cluster, proc) is None


def test_a_job_waiting_for_its_files_cannot_be_released(tmp_path, pool):
    backend = make(tmp_path, pool)
    pool.jobs[(5, 0)] = classad2.parseOne('[ClusterId = 5; ProcId = 0; JobStatus = 5; HoldReasonCode = 16]')
    with pytest.raises(InvalidState):
        act(backend, JobAction.RELEASE, 5, 0, "too early")


def test_reasons_reach_the_schedd_for_every_action(tmp_path, pool):
    backend = make(tmp_path, pool)
    cluster, (proc,) = submitted(backend, LeaveJobInQueue=True)
    act(backend, JobAction.HOLD, cluster, proc, "wait")
    act(backend, JobAction.RELEASE, cluster, proc, "go")
    act(backend, JobAction.REMOVE, cluster, proc, "gone")
    assert [args[2:] for args in pool.called("act")] == [("wait", 0), ("go", 0), ("gone", 0)]
    ad = backend.get_job(cluster, proc)
    assert (ad["LastHoldReason"], ad["ReleaseReason"], ad["RemoveReason"]) == ("wait", "go", "gone")


# -- commit: as atomic as a schedd allows ---------------------------------------------------------------------
def _two_clusters(backend, pool, **attributes):
    clusters = [new_cluster(backend), new_cluster(backend)]
    return Batch([NewJob(clusters[0], 0, job_ad(**attributes)), NewJob(clusters[0], 1, job_ad(**attributes)),
                  NewJob(clusters[1], 0, job_ad(**attributes))]), clusters


def test_a_failed_submission_removes_the_clusters_this_commit_already_submitted(tmp_path, pool):
    backend = make(tmp_path, pool)
    batch, (first, second) = _two_clusters(backend, pool)
    pool.fail("submitMany", 2)
    with pytest.raises(BackendUnavailable) as error:
        backend.commit(batch)
    assert "submitMany failed" in str(error.value)
    assert f"removed the submitted cluster {first} (schedd cluster 1)" in str(error.value)
    removals = [args for args in pool.called("act") if args[0] == "Remove"]
    assert removals == [("Remove", "ClusterId == 1", ROLLBACK_REASON, 0),
                        ("Remove", f"BirdbathClusterId == {second}", ROLLBACK_REASON, 0)]
    # what is left: nothing in the schedd's queue; the removed jobs in its history; nothing through the gateway
    assert pool.jobs == {}
    assert [(ad["ClusterId"], ad["JobStatus"], ad["RemoveReason"]) for ad in pool.history] == \
        [(1, 3, ROLLBACK_REASON), (1, 3, ROLLBACK_REASON)]
    assert backend.query(None) == [] and backend.history(None) == []
    assert backend.get_job(first, 0) is None and backend.get_job(second, 0) is None
    backend.discard([(first, 0), (first, 1), (second, 0)])  # what the gateway does next: the staged directories go
    assert not any(backend.list_files(cluster, 0) for cluster in (first, second))


def test_a_cluster_queued_before_its_error_is_removed_by_its_gateway_id(tmp_path, pool):
    backend = make(tmp_path, pool)
    batch, (first, second) = _two_clusters(backend, pool)
    pool.fail("submitMany", 2, after=True)  # the schedd committed the second cluster, the reply was lost
    with pytest.raises(BackendUnavailable):
        backend.commit(batch)
    assert pool.jobs == {} and {ad["ClusterId"] for ad in pool.history} == {1, 2}
    assert backend.query(None) == []


def test_a_failed_change_undoes_the_changes_and_submissions_before_it(tmp_path, pool):
    backend = make(tmp_path, pool)
    held, (held_proc,) = submitted(backend, LeaveJobInQueue=True)
    edited, (edited_proc,) = submitted(backend, Note="before")
    removed, (removed_proc,) = submitted(backend)
    new = new_cluster(backend)
    batch = Batch([NewJob(new, 0, job_ad())], [
        ActionChange(JobAction.REMOVE, removed, removed_proc, "not yet"),  # removals go last
        ActionChange(JobAction.HOLD, held, held_proc, "in batch"),
        AttributeChange(edited, edited_proc, "Note", "after"), AttributeChange(held, held_proc, "Fresh", "x")])
    pool.fail("edit", 2)  # the second edit fails
    with pytest.raises(BackendUnavailable) as error:
        backend.commit(batch)
    assert "undid 2 changes to existing jobs" in str(error.value)
    assert backend.get_job(new, 0) is None
    assert backend.get_job(held, held_proc)["JobStatus"] == JobStatus.IDLE  # released again
    assert backend.get_job(held, held_proc)["ReleaseReason"] == ROLLBACK_REASON
    assert backend.get_job(edited, edited_proc)["Note"] == "before"
    assert backend.get_job(removed, removed_proc)["JobStatus"] == JobStatus.IDLE  # never removed
    assert not [args for args in pool.called("act") if args[1] == backend._spec(removed, removed_proc)]


def test_a_job_gone_before_commit_stops_it_before_anything_is_sent(tmp_path, pool):
    backend = make(tmp_path, pool)
    cluster, (proc,) = submitted(backend)
    new = new_cluster(backend)
    batch = Batch([NewJob(new, 0, job_ad())], [AttributeChange(cluster, proc, "Note", "x")])
    pool.history.insert(0, pool.jobs.pop((1, 0)))  # it completed meanwhile
    calls = len(pool.calls)
    with pytest.raises(UnknownJob):
        backend.commit(batch)
    assert {name for name, _ in pool.calls[calls:]} == {"query"}


def test_a_rollback_that_fails_says_what_is_left_and_leaves_it_visible(tmp_path, pool):
    backend = make(tmp_path, pool)
    batch, (first, _) = _two_clusters(backend, pool)
    pool.fail("submitMany", 2)
    pool.fail("act", 1)  # the removal of the first cluster
    with pytest.raises(BackendUnavailable) as error:
        backend.commit(batch)
    assert f"cluster {first} (schedd cluster 1) is still in the schedd" in str(error.value)
    assert sorted(ad["ProcId"] for ad in backend.query(parse_constraint(f"ClusterId == {first}"))) == [0, 1]


# -- queries: the schedd gets the constraint and the projection --------------------------------------------------
def _asked(pool, name="query"):
    return pool.called(name)[-1]


def _selected_by_schedd(pool, text):
    return sorted(key for key, ad in pool.jobs.items() if matches(parse_constraint(text), ad))


def test_a_constraint_without_ids_and_a_projection_go_to_the_schedd(tmp_path, pool):
    backend = make(tmp_path, pool)
    cluster, _ = submitted(backend, 2, Size=5)
    pool.jobs[(7, 0)] = classad2.parseOne('[ClusterId = 7; ProcId = 0; JobStatus = 1; Size = 1]')
    found = backend.query(parse_constraint("Size > 2"), ["Size"])
    assert _asked(pool) == ("Size > 2", ["Size", "ClusterId", "ProcId", "BirdbathClusterId", "BirdbathProcId"])
    assert [dict(ad.items()) for ad in found] == [{"Size": 5}, {"Size": 5}]  # no ids, no ServerTime


def test_gateway_ids_in_a_constraint_are_rewritten_for_the_schedd(tmp_path, pool):
    backend = make(tmp_path, pool)
    submitted(backend, 2)
    cluster, _ = submitted(backend, 2)  # schedd cluster 2
    pool.jobs[(9, 1)] = classad2.parseOne('[ClusterId = 9; ProcId = 1; JobStatus = 1]')
    found = backend.query(parse_constraint(f"ClusterId == {cluster} && ProcId == 1"), ["ProcId"])
    text, projection = _asked(pool)
    assert "BirdbathClusterId" in text and _selected_by_schedd(pool, text) == [(2, 1)]
    assert [dict(ad.items()) for ad in found] == [{"ProcId": 1}]
    assert projection == ["ProcId", "ClusterId", "BirdbathClusterId", "BirdbathProcId"]
    backend.query(parse_constraint(f"MY.ClusterId == {cluster} || SchedulerClusterId == 1"))
    assert _selected_by_schedd(pool, _asked(pool)[0]) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert [ad["ClusterId"] for ad in backend.query(parse_constraint("ClusterId == 9"))] == [9]
    assert _selected_by_schedd(pool, _asked(pool)[0]) == [(9, 1)]
    backend.query(parse_constraint('Note == "ClusterId == 3"'))  # a string is no reference
    assert _asked(pool)[0] == 'Note == "ClusterId == 3"'


def test_a_constraint_the_rewrite_cannot_handle_fetches_everything_and_is_still_right(tmp_path, pool):
    backend = make(tmp_path, pool)
    cluster, _ = submitted(backend, 2)
    found = backend.query(parse_constraint(f"TARGET.ClusterId =?= undefined && ClusterId == {cluster}"), ["ProcId"])
    assert _asked(pool) == ("true", ["ProcId", "ClusterId", "BirdbathClusterId", "BirdbathProcId"])
    assert sorted(ad["ProcId"] for ad in found) == [0, 1]


def test_history_gets_constraint_projection_and_limit(tmp_path, pool):
    backend = make(tmp_path, pool)
    cluster, procs = submitted(backend, 3, Tag="h")
    for proc in procs:
        act(backend, JobAction.REMOVE, cluster, proc, "done")
    found = backend.history(parse_constraint(f"ClusterId == {cluster} && ProcId == 1"), 1, ["Tag", "ProcId"])
    text, projection, match = _asked(pool, "history")
    assert "BirdbathProcId" in text and match == 1
    assert projection == ["Tag", "ProcId", "ClusterId", "BirdbathClusterId", "BirdbathProcId"]
    assert [dict(ad.items()) for ad in found] == [{"Tag": "h", "ProcId": 1}]
    assert [ad["ProcId"] for ad in backend.history(None, 2)] == [2, 1]  # newest first
    assert _asked(pool, "history") == ("true", [], 2)
    backend.history(parse_constraint("TARGET.ClusterId =?= undefined"), 5)
    assert _asked(pool, "history")[1:] == ([], -1)  # not translatable: the gateway filters, so it limits too


def test_the_time_of_an_answer_is_not_part_of_a_jobs_revision(tmp_path, pool, monkeypatch):
    """Every schedd answer carries ServerTime, which is not the job's: a job unchanged between two answers a second
    apart is shown the same, with the same revision (found on the real schedd: the revision changed with the
    clock)."""
    from backends.interface import revision

    backend = make(tmp_path, pool)
    cluster, (proc,) = submitted(backend)
    monkeypatch.setattr("tests.htcondor_standin.time.time", lambda: 1_700_000_000.0)
    first = backend.get_job(cluster, proc)
    monkeypatch.setattr("tests.htcondor_standin.time.time", lambda: 1_700_000_001.0)
    second = backend.get_job(cluster, proc)
    assert "ServerTime" not in first and "ServerTime" not in second
    assert revision(first) == revision(second)


def test_a_new_state_directory_goes_on_after_the_gateway_ids_the_schedd_knows(tmp_path, pool):
    first = make(tmp_path / "one", pool)
    cluster, _ = submitted(first)
    first.close()
    second = make(tmp_path / "two", pool)
    assert second.reserve_clusters()[0] > cluster


def test_the_id_map_of_an_earlier_release_is_gone_on_from(tmp_path, pool):
    """Earlier releases kept a row per gateway id (``ids``); their ids are never handed out again."""
    import sqlite3

    tmp_path.mkdir(exist_ok=True)
    with sqlite3.connect(tmp_path / "htcondor-ids.sqlite3") as db:
        db.execute("CREATE TABLE ids (gateway INTEGER PRIMARY KEY, schedd INTEGER)")
        db.execute("INSERT INTO ids VALUES (1000000041, 7), (1000000042, NULL)")
    assert make(tmp_path, pool).reserve_clusters()[0] == 1_000_000_043


def test_ids_come_in_blocks_and_a_reopened_map_never_repeats_them(tmp_path, pool):
    backend = make(tmp_path, pool)
    block = backend.reserve_clusters()
    assert len(block) == 100
    backend.close()
    assert make(tmp_path, pool).reserve_clusters()[0] == block[-1] + 1
