"""The client library against the real gateway."""

from __future__ import annotations

import hashlib

import classad2
import pytest

from birdbath_client import Expr, GatewayError, GatewayUnavailable, JobId, Schedd

NEVER = Expr("FALSE")  # Requirements nothing matches: the job stays idle


def test_version_and_platform(schedd):
    assert schedd.version().startswith("$CondorVersion:") and schedd.platform().startswith("$CondorPlatform:")


def test_the_transaction_commits_on_success(schedd):
    with schedd.transaction() as txn:
        cluster = txn.new_cluster()
        job = JobId(cluster, txn.new_job(cluster))
        txn.submit(job, {"Cmd": "/bin/true", "Requirements": NEVER})
        assert schedd.job(job) is None  # not visible before commit
    assert schedd.job(job)["JobStatus"] == 1


def test_the_transaction_aborts_on_an_exception(schedd):
    with pytest.raises(RuntimeError):
        with schedd.transaction() as txn:
            cluster = txn.new_cluster()
            job = JobId(cluster, txn.new_job(cluster))
            txn.submit(job, {"Cmd": "/bin/true", "Requirements": NEVER})
            raise RuntimeError("changed my mind")
    assert not txn.open and schedd.job(job) is None
    assert schedd.query(f"ClusterId == {cluster}") == []


def test_values_keep_their_types_and_expressions_stay_expressions(schedd):
    ad = {"Cmd": "/bin/true", "Requirements": NEVER, "Count": 3, "Ratio": 0.25, "Flag": True,
          "Text": 'quotes " and \\', "Rule": Expr("Count * 2 > Ratio")}
    (job,) = schedd.submit(ad)
    got = schedd.job(job)
    assert got["Count"] == 3 and got["Ratio"] == 0.25 and got["Flag"] is True and got["Text"] == ad["Text"]
    assert isinstance(got["Rule"], Expr) and got["Rule"] == "Count * 2 > Ratio"
    assert isinstance(got["Requirements"], bool) and got["Requirements"] is False  # a literal stays a literal


def test_a_classad2_ad_can_be_submitted(schedd):
    ad = classad2.parseOne('[Cmd = "/bin/true"; Requirements = false; Size = 10; Big = Size > 5]')
    (job,) = schedd.submit(ad)
    got = schedd.job(job)
    assert got["Size"] == 10 and got["Big"] == Expr("Size > 5")


def test_files_go_up_and_output_comes_down_in_chunks_with_progress(schedd, tmp_path):
    program = b"#!/bin/sh\ncat data.bin data.bin > doubled.bin\n"
    data = bytes(range(256)) * 3000  # 768 kB
    uploaded: list[tuple[int, int]] = []
    with schedd.transaction() as txn:
        cluster = txn.new_cluster()
        job = JobId(cluster, txn.new_job(cluster))
        txn.upload(job, "run.sh", program)
        txn.upload(job, "data.bin", data, chunk_size=100_000, progress=lambda done, total: uploaded.append((done, total)))
        txn.submit(job, {"Cmd": "run.sh", "ShouldTransferFiles": "YES", "Requirements": Expr("TRUE"),
                         "LeaveJobInQueue": Expr("FilesRetrieved =?= false"), "FilesRetrieved": False})
    assert uploaded[-1] == (len(data), len(data)) and len(uploaded) == 8
    final = schedd.wait(job, timeout=60, poll=0.1)
    assert final["JobStatus"] == 4 and final["ExitCode"] == 0
    downloaded: list[tuple[int, int]] = []
    (path,) = schedd.download(job, tmp_path, ["doubled.bin"], chunk_size=200_000,
                              progress=lambda done, total: downloaded.append((done, total)))
    assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(data * 2).digest()
    assert downloaded[-1] == (2 * len(data), 2 * len(data))
    schedd.close_spool(job)
    assert schedd.job(job) is None


def test_queries_with_constraints(schedd):
    jobs = schedd.submit({"Cmd": "/bin/true", "Requirements": NEVER, "Tag": "query-me"}, count=3)
    found = schedd.query('Tag == "query-me"')
    assert sorted(JobId(ad["ClusterId"], ad["ProcId"]) for ad in found) == jobs


def test_hold_release_remove_and_their_errors(schedd):
    (job,) = schedd.submit({"Cmd": "/bin/true", "Requirements": NEVER, "LeaveJobInQueue": True})
    schedd.hold(job, "wait")
    assert schedd.job(job)["HoldReason"] == "wait"
    with pytest.raises(GatewayError) as error:
        schedd.hold(job, "again")
    assert error.value.code == "FAIL" and "Failed to hold job." in str(error.value)
    schedd.release(job)
    schedd.remove(job, "bye")
    assert schedd.job(job)["JobStatus"] == 3


def test_a_dag_submitted_like_condor_submit_dag(schedd, tmp_path):
    (tmp_path / "n.sub").write_text(f"executable = /bin/sh\narguments = \"-c 'echo $(JOB) >> {tmp_path}/ran'\"\n"
                                    "queue\n")
    dag = tmp_path / "two.dag"
    dag.write_text("JOB A n.sub\nJOB B n.sub\nPARENT A CHILD B\n")
    job = schedd.submit_dag(dag)
    final = schedd.wait(job, timeout=60, poll=0.1)
    assert final["ExitCode"] == 0 and (tmp_path / "ran").read_text() == "A\nB\n"
    assert final["OtherJobRemoveRequirements"] == f"DAGManJobId =?= {job.cluster}"
    schedd.close_spool(job)


def test_an_unreachable_gateway_is_a_clear_error():
    with pytest.raises(GatewayUnavailable) as error:
        Schedd("http://127.0.0.1:1/")
    assert str(error.value) == "cannot connect to the gateway at http://127.0.0.1:1/: connection refused"


def test_a_gateway_that_went_away_is_a_clear_error(start_stopped_gateway):
    schedd = Schedd(start_stopped_gateway.url)
    start_stopped_gateway.stop()
    with pytest.raises(GatewayUnavailable) as error:
        schedd.version()
    assert str(error.value) == f"cannot connect to the gateway at {schedd.url}: connection refused"


@pytest.fixture
def start_stopped_gateway(start_gateway):
    return start_gateway()
