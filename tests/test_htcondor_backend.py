"""The htcondor backend: the backend contract and its own behaviour, against a recording stand-in for the
schedd (no HTCondor daemon can run here; see README "What has been verified")."""

from __future__ import annotations

import classad2
import pytest

from backends.contract import BackendContract, job_ad, submitted
from backends.htcondor import HTCondorBackend
from backends.htcondor.backend import FIRST_GATEWAY_CLUSTER
from backends.interface import BackendUnavailable
from jobmodel.classads import parse_constraint
from jobmodel.jobs import JobAction
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
    txn = backend.begin()
    cluster = backend.new_cluster(txn)
    proc = backend.new_proc(txn, cluster)
    backend.stage_file(txn, cluster, proc, "input")
    backend.write_file(txn, cluster, proc, "input", 0, b"payload")
    backend.submit(txn, cluster, proc, job_ad(Iwd=backend.spool_directory(cluster, proc), TransferInput="input"))
    backend.commit(txn)
    names = [name for name, _ in pool.calls]
    assert names.index("submitMany") < names.index("spool")
    assert pool.jobs[(1, 0)]["JobStatus"] == 1  # spooling finished: released


def test_finished_output_is_retrieved_before_listing(tmp_path, pool):
    backend = make(tmp_path, pool)
    cluster, (proc,) = submitted(backend, LeaveJobInQueue=True)
    pool.jobs[(1, 0)]["JobStatus"] = 4
    backend.list_files(None, cluster, proc)
    assert ("retrieve", (f"BirdbathClusterId == {cluster} && BirdbathProcId == {proc}",)) in pool.calls


def test_actions_and_edits_go_to_the_schedd_with_the_jobs_schedd_side_constraint(tmp_path, pool):
    backend = make(tmp_path, pool)
    cluster, (proc,) = submitted(backend)
    backend.act(None, JobAction.HOLD, cluster, proc, "maintenance")
    backend.set_attribute(None, cluster, proc, "Note", "a string")
    spec = f"BirdbathClusterId == {cluster} && BirdbathProcId == {proc}"
    assert ("act", ("Hold", spec, "maintenance")) in pool.calls
    assert ("edit", (spec, "Note", '"a string"')) in pool.calls
    assert backend.get_job(cluster, proc)["Note"] == "a string"


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
