"""The one submission path (gateway/core/transactions.py, ``BirdbathSchedd.submit_transaction``): a whole transaction
(new clusters of ClassAds or typed attributes with their input files, changes) committed in one call on the backend's
thread, its ads made as Birdbath's submit makes them, refused whole with nothing left behind; one that awaits input
stays open as its caller's Birdbath transaction.  In this process over the local backend on a fake clock; the front
ends that use it are tested end to end in test_rest.py, test_dag_submit.py, test_lowlatency.py and
test_submission_api.py."""

from __future__ import annotations

from pathlib import Path

import classad2
import pytest
from twisted.internet.defer import maybeDeferred
from twisted.internet.task import Clock

from backends.interface import ActionChange, AttributeChange, BackendError
from backends.local import LocalBackend
from gateway.core.adstruct import Attr, AttrType
from gateway.core.auth import AccessPolicy, Authentication, Caller, HostList
from gateway.core.schedd import BirdbathSchedd, ScheddSettings
from gateway.core.status import BirdbathError, StatusCode
from gateway.core.transactions import (
    AdRules,
    Committed,
    InputFile,
    NewCluster,
    TransactionRef,
    WholeTransaction,
    needs_input,
)
from gateway.workers import wire
from jobmodel.dagman import DagDescription
from jobmodel.expressions import ExpressionLimits
from jobmodel.exprtext import SourceExpr, TextedAd, expression_text
from jobmodel.jobs import JobAction
from jobmodel.submitfile import SubmitDescriptionError
from tests.synchronous import run

ALICE = Caller("127.0.0.1", "alice", Authentication.SOCKET)
BOB = Caller("127.0.0.1", "bob", Authentication.SOCKET)
SCHEDD_SET = ("ClusterId", "ProcId", "QDate", "EnteredCurrentStatus", "GlobalJobId")


@pytest.fixture
def backend(tmp_path):
    backend = LocalBackend(tmp_path / "state", schedd_name="test.example")
    yield backend
    backend.close()


@pytest.fixture
def calls() -> list[str]:
    return []


@pytest.fixture
def schedd(backend, calls) -> BirdbathSchedd:
    def call(function, *args, **kwargs):
        calls.append(getattr(function, "__name__", "?"))
        return maybeDeferred(function, *args, **kwargs)

    return BirdbathSchedd(backend, call, AccessPolicy(), Clock())


def attrs(**values: str) -> list[Attr]:
    return [Attr(name, AttrType.STRING, value) for name, value in values.items()]


def an_ad(cmd: str = "/bin/true") -> classad2.ClassAd:
    ad = TextedAd()
    ad["Cmd"] = cmd
    ad["Requirements"] = SourceExpr("(Arch =?= \"X86_64\")")
    ad["RequestMemory"] = 64
    return ad


def refused(operation) -> BirdbathError:
    with pytest.raises(BirdbathError) as caught:
        run(operation)
    return caught.value


def queued(backend) -> list[tuple[int, int]]:
    return sorted((ad["ClusterId"], ad["ProcId"]) for ad in backend.query(None))


def test_clusters_of_ads_and_attributes_with_their_files_commit_in_one_backend_call(schedd, backend, calls):
    whole = WholeTransaction([NewCluster([an_ad(), an_ad("/bin/echo")], [InputFile("in.dat", b"data")]),
                              NewCluster([attrs(Cmd="/bin/date")])])
    run(schedd.clusters.next())  # (the block of ids reserved before: what is counted is the transaction's work)
    calls.clear()
    made = run(schedd.submit_transaction(ALICE, whole))
    assert made == Committed([(2, 0), (2, 1), (3, 0)])
    assert calls == ["_write"]  # the files and the commit, one trip to the backend's thread
    assert queued(backend) == [(2, 0), (2, 1), (3, 0)]
    for proc in (0, 1):
        assert (Path(backend.spool_directory(2, proc)) / "in.dat").read_bytes() == b"data"
        ad = backend.get_job(2, proc)
        assert ad["TransferInput"] == "in.dat" and ad["Iwd"] == backend.spool_directory(2, proc)
        assert ad["SOAPJob"] is True and ad["Owner"] == "alice" and ad["RequestMemory"] == 64
        assert expression_text(ad, "Requirements", ad.lookup("Requirements")) == '(Arch =?= "X86_64")'
    assert backend.get_job(3, 0)["TransferInput"] == "" and backend.get_job(3, 0)["Cmd"] == "/bin/date"


def test_an_ad_is_made_the_same_whether_its_client_built_the_transaction_call_by_call_or_whole(schedd, backend):
    job = [*attrs(Cmd="/bin/true", Iwd="/tmp"), Attr("Requirements", AttrType.EXPRESSION, "TRUE"),
           Attr("ClusterId", AttrType.INTEGER, "99"), Attr("JobPrio", AttrType.INTEGER, "5")]
    txn = run(schedd.begin_transaction(ALICE, 60))
    ref = TransactionRef(txn.id, 60)
    cluster = run(schedd.new_cluster(ALICE, ref))
    proc = run(schedd.new_job(ALICE, ref, cluster))
    run(schedd.submit(ALICE, ref, cluster, proc, job))
    run(schedd.commit_transaction(ALICE, ref))
    (whole,) = run(schedd.submit_transaction(ALICE, WholeTransaction([NewCluster([job])]))).jobs

    def made(key):
        ad = backend.get_job(*key)
        return {name: str(ad.lookup(name)) for name in ad if name not in SCHEDD_SET}

    assert made((cluster, proc)) == made(whole)
    assert backend.get_job(*whole)["Iwd"] == "/tmp" and backend.get_job(*whole)["ClusterId"] == whole[0]


def test_a_cluster_by_the_submission_apis_rules_gets_its_defaults_and_its_submission(schedd, backend):
    """QMF submits this way: the submission API's defaults (its counters, no SOAPJob), the Submission
    ``<schedd>#<cluster>`` unless the ad names one, and, with input files, a retention for the job's output."""
    job = [*attrs(Cmd="/bin/true", Iwd="/tmp"), Attr("Requirements", AttrType.EXPRESSION, "TRUE")]
    made = run(schedd.submit_transaction(ALICE, WholeTransaction([
        NewCluster([job], rules=AdRules.SUBMISSION_API),
        NewCluster([[*job, *attrs(Submission="mine")]], [InputFile("in.dat", b"x")], rules=AdRules.SUBMISSION_API,
                   retention=600)])))
    (plain, named) = (backend.get_job(*key) for key in made.jobs)
    assert plain["Submission"] == f"test.example#{made.jobs[0][0]}" and named["Submission"] == "mine"
    assert "SOAPJob" not in plain and plain["MaxHosts"] == 1 and plain["ShouldTransferFiles"] == "NO"
    assert plain["Iwd"] == "/tmp" and "LeaveJobInQueue" not in plain
    assert named["TransferInput"] == "in.dat" and named["ShouldTransferFiles"] == "YES"
    assert "< 600" in str(named.lookup("LeaveJobInQueue"))
    # Birdbath's own rules give none of it
    (birdbath,) = run(schedd.submit_transaction(ALICE, WholeTransaction([NewCluster([job])]))).jobs
    assert "Submission" not in backend.get_job(*birdbath) and backend.get_job(*birdbath)["SOAPJob"] is True


def test_changes_commit_with_the_new_jobs_and_may_name_them(schedd, backend):
    (first,) = run(schedd.submit_transaction(ALICE, WholeTransaction([NewCluster([an_ad()])]))).jobs
    made = run(schedd.submit_transaction(ALICE, WholeTransaction(
        [NewCluster([an_ad()])],
        [AttributeChange(first[0], 0, "Note", "queued"), AttributeChange(first[0] + 1, 0, "Note", "new"),
         ActionChange(JobAction.HOLD, first[0], 0, "held by a whole transaction")])))
    assert made.jobs == [(first[0] + 1, 0)]
    assert backend.get_job(*first)["Note"] == "queued" and backend.get_job(*first)["JobStatus"] == 5
    assert backend.get_job(first[0] + 1, 0)["Note"] == "new"


@pytest.mark.parametrize("files, status, said", [
    ([InputFile("../escape", b"x")], StatusCode.FAIL, "Failed to open '../escape' for writing"),
    ([InputFile("", b"x")], StatusCode.FAIL, "Failed to open '' for writing"),
    ([InputFile("twice", b"1"), InputFile("twice", b"2")], StatusCode.ALREADYEXISTS, "File 'twice' already declared"),
])
def test_a_hostile_input_file_refuses_the_transaction_whole(schedd, backend, files, status, said):
    error = refused(schedd.submit_transaction(ALICE, WholeTransaction([NewCluster([an_ad()]),
                                                                       NewCluster([an_ad()], files)])))
    assert error.status.code is status and said in error.status.message
    assert queued(backend) == []


def test_a_hostile_ad_is_refused_naming_its_attribute_and_nothing_is_queued(backend):
    schedd = BirdbathSchedd(backend, lambda f, *a: maybeDeferred(f, *a), AccessPolicy(), Clock(),
                            ScheddSettings(limits=ExpressionLimits(max_length=200, max_depth=20)))
    for text in ("RequestMemory > " + " + ".join(["1"] * 100), "(" * 30 + "1" + ")" * 30):
        long = an_ad()
        long["Requirements"] = classad2.ExprTree(text)
        error = refused(schedd.submit_transaction(ALICE, WholeTransaction([NewCluster([an_ad()]),
                                                                           NewCluster([long])])))
        assert "Requirements attribute" in error.status.message and "max_expression_" in error.status.message
    bad_name = refused(schedd.submit_transaction(ALICE, WholeTransaction(
        [NewCluster([[Attr("not a name", AttrType.STRING, "x")]])])))
    assert "not a name" in bad_name.status.message
    assert queued(backend) == []


def test_a_cluster_without_jobs_and_an_owner_the_caller_may_not_use_are_refused(schedd, backend):
    assert "has no job" in refused(schedd.submit_transaction(ALICE, WholeTransaction([NewCluster([])]))).status.message
    error = refused(schedd.submit_transaction(ALICE, WholeTransaction([NewCluster([attrs(Cmd="/bin/true",
                                                                                          Owner="bob")])])))
    assert "Owner attribute" in error.status.message
    assert queued(backend) == []


def test_a_change_to_another_owners_job_refuses_the_new_jobs_with_it(schedd, backend):
    (bobs,) = run(schedd.submit_transaction(BOB, WholeTransaction([NewCluster([an_ad()])]))).jobs
    error = refused(schedd.submit_transaction(ALICE, WholeTransaction(
        [NewCluster([an_ad()], [InputFile("in.dat", b"data")])], [AttributeChange(*bobs, "Note", "mine")])))
    assert "Not job owner" in error.status.message
    assert queued(backend) == [bobs] and "Note" not in backend.get_job(*bobs)
    assert not Path(backend.spool_directory(bobs[0] + 1, 0)).exists()


def test_a_caller_without_write_permission_is_refused_before_any_work(backend, calls):
    readers = AccessPolicy(allow_write=HostList(["10.0.0.1"]))
    schedd = BirdbathSchedd(backend, lambda f, *a: maybeDeferred(f, *a), readers, Clock())
    assert refused(schedd.submit_transaction(ALICE, WholeTransaction([NewCluster([an_ad()])]))).status.message \
        == "Permission denied"
    assert queued(backend) == []


def test_a_failed_commit_discards_what_was_written_for_its_jobs(schedd, backend, monkeypatch):
    def full(batch):
        raise BackendError("the disk is full")

    monkeypatch.setattr(backend, "commit", full)
    error = refused(schedd.submit_transaction(ALICE, WholeTransaction([NewCluster([an_ad()],
                                                                                  [InputFile("in.dat", b"x")])])))
    assert error.status.message == "Commit failed, transaction rolled back: the disk is full"
    assert not Path(backend.spool_directory(1, 0)).exists()


def test_jobs_awaiting_input_leave_their_callers_transaction_open_until_it_is_sent(schedd, backend):
    waits = attrs(Cmd="run.sh", TransferInput="data.txt")
    made = run(schedd.submit_transaction(ALICE, WholeTransaction([NewCluster([waits, attrs(Cmd="/bin/true")])],
                                                                 input_lease=30)))
    assert made.jobs == [(1, 0), (1, 1)] and made.awaiting == [(1, 0)] and made.transaction is not None
    assert queued(backend) == []
    assert schedd.transactions.held(made.transaction, BOB) is None  # another caller's, as any transaction
    ref = made.transaction
    for name, data in (("run.sh", b"#!/bin/sh\n"), ("data.txt", b"42\n")):
        run(schedd.declare_file(ALICE, ref, 1, 0, name, len(data), None))
        run(schedd.send_file(ALICE, ref, 1, 0, name, 0, data))
    run(schedd.commit_transaction(ALICE, ref))
    assert queued(backend) == [(1, 0), (1, 1)]
    assert (Path(backend.spool_directory(1, 0)) / "data.txt").read_bytes() == b"42\n"


def test_jobs_awaiting_input_expire_with_their_lease_as_any_transaction(backend):
    clock = Clock()
    schedd = BirdbathSchedd(backend, lambda f, *a: maybeDeferred(f, *a), AccessPolicy(), clock)
    made = run(schedd.submit_transaction(ALICE, WholeTransaction([NewCluster([attrs(Cmd="run.sh")])],
                                                                 input_lease=30)))
    clock.advance(31)
    assert schedd.transactions.held(made.transaction, ALICE) is None
    assert refused(schedd.commit_transaction(ALICE, made.transaction)).status.code is StatusCode.INVALIDTRANSACTION


@pytest.mark.parametrize("ad, needs", [
    ({"Cmd": "/bin/true"}, False), ({"Cmd": "run.sh"}, True), ({"Cmd": "run.sh", "TransferExecutable": False}, False),
    ({"Cmd": "/bin/cat", "In": "in.txt"}, True), ({"Cmd": "/bin/true", "TransferInput": "http://x/y, "}, False),
    ({"Cmd": "/bin/true", "TransferInput": "a,http://x/y"}, True),
])
def test_needs_input_reads_what_the_client_must_send(ad, needs):
    assert needs_input(classad2.ClassAd(ad)) is needs


def test_a_whole_transaction_crosses_between_a_worker_and_the_core_with_its_texts():
    whole = WholeTransaction([NewCluster([an_ad(), attrs(Cmd="/bin/true")], [InputFile("in.dat", b"\0data")])],
                             [AttributeChange(1, 0, "Note", "x"), ActionChange(JobAction.HOLD, 1, None, "why")], 5)
    crossed = wire.Codec().decode(wire.Codec().encode(whole))
    (ad, typed) = crossed.clusters[0].jobs
    assert list(typed) == attrs(Cmd="/bin/true") and crossed.clusters[0].files == [InputFile("in.dat", b"\0data")]
    assert expression_text(ad, "Requirements", ad.lookup("Requirements")) == '(Arch =?= "X86_64")'
    assert list(crossed.changes) == list(whole.changes) and crossed.input_lease == 5
    api = WholeTransaction([NewCluster([attrs(Cmd="/bin/true")], rules=AdRules.SUBMISSION_API, retention=60)])
    assert wire.Codec().decode(wire.Codec().encode(api)).clusters[0].rules is AdRules.SUBMISSION_API
    made = Committed([(1, 0)], [(1, 0)], TransactionRef(7, 30))
    assert wire.Codec().decode(wire.Codec().encode(made)) == made


def test_a_dag_is_one_dagman_job_whose_ad_names_its_cluster_and_a_dag_name_that_is_no_file_is_refused():
    (ad,) = DagDescription("diamond.dag", "false").ads(7)
    assert ad["Cmd"] == "/usr/bin/condor_dagman" and "-Dag diamond.dag" in ad["Arguments"]
    assert str(ad.lookup("OtherJobRemoveRequirements")) == "DAGManJobId is 7"
    for hostile in ("../elsewhere.dag", "a.dag -Dagman /bin/sh", ""):
        with pytest.raises(SubmitDescriptionError):
            DagDescription(hostile, "false").ads(7)
