"""Every condorSchedd operation through zeep clients generated from the served WSDL and from the shipped 7.2.4
WSDL: success and each error path, with the status codes and messages of gateway/core/status.py."""

from __future__ import annotations

import hashlib

import pytest

from tests.birdbath import ad, as_dict, begin, expr, new_job, submit_job, values
from tests.test_logging import wait_for_line

NULL = None


def items(array) -> list:
    """The items of an array answer; zeep reads an empty array element (``<classAdArray/>``) as None."""
    return list(array.item) if array is not None else []


def code(answer) -> str:
    return answer.code if hasattr(answer, "code") else answer.status.code


# -- information ---------------------------------------------------------------------------------------------
def test_version_string_is_a_condor_version_without_status_message(any_schedd):
    answer = any_schedd.getVersionString()
    assert answer.status.code == "SUCCESS" and answer.status.message is None
    assert answer.message.startswith("$CondorVersion: ") and answer.message.endswith(" $")


def test_platform_string(any_schedd):
    answer = any_schedd.getPlatformString()
    assert answer.status.code == "SUCCESS"
    assert answer.message.startswith("$CondorPlatform: ") and answer.message.endswith(" $")


# -- transactions ----------------------------------------------------------------------------------------------
def test_begin_returns_an_id_and_the_duration(any_schedd):
    answer = any_schedd.beginTransaction(45)
    assert answer.status.code == "SUCCESS" and answer.status.message == "Success"
    assert answer.transaction.id != 0 and answer.transaction.duration == 45
    assert code(any_schedd.abortTransaction(answer.transaction)) == "SUCCESS"


def test_begin_raises_a_duration_below_one_to_one(any_schedd):
    answer = any_schedd.beginTransaction(0)
    assert answer.transaction.duration == 1
    assert code(any_schedd.abortTransaction(answer.transaction)) == "SUCCESS"


def test_a_negative_duration_is_one_second_and_logged_as_htcondor_raised_it(any_schedd, gateway):
    """HTCondor's stub raised any duration below 1 to 1 at begin, and never checked extend's: SUCCESS, not FAIL."""
    answer = any_schedd.beginTransaction(-5)
    assert answer.status.code == "SUCCESS" and answer.transaction.id != 0 and answer.transaction.duration == 1
    wait_for_line(gateway.log, "beginTransaction from", "the duration -5 is negative", "1 s")
    extended = any_schedd.extendTransaction(answer.transaction, -7)
    assert extended.status.code == "SUCCESS" and extended.transaction.duration == 1
    wait_for_line(gateway.log, "extendTransaction from", "the duration -7 is negative")
    assert code(any_schedd.abortTransaction(answer.transaction)) == "SUCCESS"


@pytest.mark.parametrize("operation", ["commitTransaction", "abortTransaction", "newCluster"])
def test_calls_that_need_a_transaction_refuse_a_null_one(any_schedd, operation):
    answer = getattr(any_schedd, operation)({"id": 0, "duration": 60})
    assert code(answer) == "INVALIDTRANSACTION"
    assert (answer.message if hasattr(answer, "message") else answer.status.message) == "Invalid transaction"


def test_an_unknown_transaction_is_invalid(any_schedd):
    answer = any_schedd.newCluster({"id": 12345, "duration": 60})
    assert answer.status.code == "INVALIDTRANSACTION" and answer.integer == 0


def test_a_transaction_sent_back_without_duration_cannot_be_extended(any_schedd):
    txn = begin(any_schedd)
    answer = any_schedd.newCluster({"id": txn.id})
    assert answer.status.code == "FAIL" and answer.status.message == "Could not extend transaction"
    any_schedd.abortTransaction(txn)


def test_committed_and_aborted_transactions_are_gone(any_schedd):
    txn = begin(any_schedd)
    assert code(any_schedd.commitTransaction(txn)) == "SUCCESS"
    assert code(any_schedd.commitTransaction(txn)) == "INVALIDTRANSACTION"
    txn = begin(any_schedd)
    assert code(any_schedd.abortTransaction(txn)) == "SUCCESS"
    assert code(any_schedd.abortTransaction(txn)) == "INVALIDTRANSACTION"


def test_extend_sets_the_duration_for_later_calls(any_schedd):
    txn = begin(any_schedd, 30)
    answer = any_schedd.extendTransaction(txn, 120)
    assert answer.status.code == "SUCCESS"
    assert answer.transaction.id == txn.id and answer.transaction.duration == 120
    assert code(any_schedd.extendTransaction({"id": 0, "duration": 1}, 5)) == "INVALIDTRANSACTION"
    any_schedd.abortTransaction(answer.transaction)


# -- clusters, jobs, submit ------------------------------------------------------------------------------------
def test_new_cluster_ids_grow_and_procs_count_from_zero(any_schedd):
    txn = begin(any_schedd)
    first = any_schedd.newCluster(txn).integer
    procs = [any_schedd.newJob(txn, first).integer for _ in range(3)]
    second = any_schedd.newCluster(txn).integer
    assert procs == [0, 1, 2] and second > first
    assert any_schedd.newJob(txn, second).integer == 0
    any_schedd.abortTransaction(txn)


def test_new_job_only_in_the_transactions_active_cluster(any_schedd):
    txn = begin(any_schedd)
    cluster = any_schedd.newCluster(txn).integer
    answer = any_schedd.newJob(txn, cluster + 1000)
    assert answer.status.code == "FAIL" and answer.status.message.startswith("Could not create new job")
    any_schedd.abortTransaction(txn)


def test_submit_fills_in_what_a_schedd_does(any_schedd):
    cluster, proc = submit_job(any_schedd, Cmd="/bin/sleep", Arguments="1", JobUniverse=5)
    job = any_schedd.getJobAd(NULL, cluster, proc)
    assert job.status.code == "SUCCESS"
    attrs = as_dict(job.classAd)
    names = [item.name for item in job.classAd.item]
    assert names[:3] == ["MyType", "TargetType", "ServerTime"]
    assert attrs["MyType"] == ("STRING-ATTR", "Job") and attrs["TargetType"] == ("STRING-ATTR", "Machine")
    assert attrs["ClusterId"] == ("INTEGER-ATTR", str(cluster)) and attrs["ProcId"] == ("INTEGER-ATTR", str(proc))
    assert attrs["JobStatus"] == ("INTEGER-ATTR", "1")
    assert attrs["SOAPJob"] == ("BOOLEAN-ATTR", "TRUE")
    for name in ("QDate", "EnteredCurrentStatus", "ServerTime"):
        assert attrs[name][0] == "INTEGER-ATTR" and int(attrs[name][1]) > 1_600_000_000
    assert attrs["GlobalJobId"][1].endswith(f"#{cluster}.{proc}#{attrs['QDate'][1]}")
    assert attrs["Iwd"][1].endswith(f"cluster{cluster}.proc{proc}.subproc0")
    assert attrs["TransferInput"][0] == "STRING-ATTR" and not attrs["TransferInput"][1]  # zeep reads "" as None
    assert attrs["Cmd"] == ("STRING-ATTR", "/bin/sleep")


def test_submit_types_values_and_keeps_expressions(any_schedd):
    cluster, proc = submit_job(any_schedd, Name='quote " and \\ backslash', Count=7, Ratio=0.5, Flag=True,
                               Requirements=expr('(Arch == "X86_64") && (Memory > 1024)'))
    attrs = as_dict(any_schedd.getJobAd(NULL, cluster, proc).classAd)
    assert attrs["Name"] == ("STRING-ATTR", 'quote " and \\ backslash')
    assert attrs["Count"] == ("INTEGER-ATTR", "7")
    assert attrs["Ratio"] == ("FLOAT-ATTR", "0.500000")
    assert attrs["Flag"] == ("BOOLEAN-ATTR", "TRUE")
    assert attrs["Requirements"] == ("EXPRESSION-ATTR", '(Arch == "X86_64") && (Memory > 1024)')


def test_a_client_iwd_and_transfer_input_win(any_schedd):
    cluster, proc = submit_job(any_schedd, files={"a.txt": b"a"}, Iwd="/shared/dag", TransferInput="x,y")
    attrs = values(any_schedd.getJobAd(NULL, cluster, proc).classAd)
    assert attrs["Iwd"] == "/shared/dag" and attrs["TransferInput"] == "x,y"


def test_an_iwd_that_is_not_a_string_is_replaced_by_the_spool(any_schedd):
    cluster, proc = submit_job(any_schedd, Iwd=expr('"/elsewhere"'))
    assert values(any_schedd.getJobAd(NULL, cluster, proc).classAd)["Iwd"].endswith(
        f"cluster{cluster}.proc{proc}.subproc0")


def test_submit_of_a_job_not_created_in_the_transaction_is_unknown(any_schedd):
    txn = begin(any_schedd)
    answer = any_schedd.submit(txn, 999999, 0, ad(Cmd="/bin/true"))
    assert answer.status.code == "UNKNOWNJOB" and answer.status.message == "Unknown cluster or job"
    assert answer.requirements is None
    any_schedd.abortTransaction(txn)


def test_submit_with_a_null_job_ad_is_an_empty_ad(any_schedd):
    txn = begin(any_schedd)
    cluster, proc = new_job(any_schedd, txn)
    assert any_schedd.submit(txn, cluster, proc, NULL).status.code == "SUCCESS"
    assert code(any_schedd.commitTransaction(txn)) == "SUCCESS"
    assert any_schedd.getJobAd(NULL, cluster, proc).status.code == "SUCCESS"


def test_submit_rejects_an_unparsable_expression_naming_the_attribute(any_schedd):
    txn = begin(any_schedd)
    cluster, proc = new_job(any_schedd, txn)
    answer = any_schedd.submit(txn, cluster, proc, ad(Requirements=expr("(((")))
    assert answer.status.code == "FAIL"
    assert answer.status.message.startswith(f"Failed to set job {cluster}.{proc}'s Requirements attribute")
    any_schedd.abortTransaction(txn)


def test_submit_replaces_the_ids_and_user_a_client_sends(any_schedd):
    """Legacy clients send createJobTemplate's whole ad back: what the schedd assigns is accepted and replaced."""
    txn = begin(any_schedd)
    cluster, proc = new_job(any_schedd, txn)
    answer = any_schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true", ClusterId=cluster + 1, ProcId=proc + 3,
                                                      User="root@evil", GlobalJobId="evil#1.0#1", QDate=1))
    assert answer.status.code == "SUCCESS"
    assert code(any_schedd.commitTransaction(txn)) == "SUCCESS"
    job = values(any_schedd.getJobAd(NULL, cluster, proc).classAd)
    assert (job["ClusterId"], job["ProcId"]) == (str(cluster), str(proc))
    assert job["User"].startswith(job["Owner"] + "@") and "evil" not in job["User"] + job["GlobalJobId"]
    assert job["QDate"] != "1"


def test_submit_refuses_an_owner_that_is_not_a_string(any_schedd):
    """Who may use which Owner depends on the caller (tests/test_owners.py covers every rule in process; here the
    caller is whoever the gateway takes a loopback client for), but an Owner that is no string is always refused."""
    txn = begin(any_schedd)
    cluster, proc = new_job(any_schedd, txn)
    answer = any_schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true", Owner=expr('strcat("ro", "ot")')))
    assert answer.status.code == "FAIL"
    assert answer.status.message == f"Failed to set job {cluster}.{proc}'s Owner attribute: Owner must be a string"
    any_schedd.abortTransaction(txn)


# -- queries -------------------------------------------------------------------------------------------------
def test_get_job_ads_with_constraints(any_schedd):
    cluster, _ = submit_job(any_schedd, Tag="query-test")
    found = any_schedd.getJobAds(NULL, f"ClusterId == {cluster}")
    assert found.status.code == "SUCCESS" and len(found.classAdArray.item) == 1
    assert values(found.classAdArray.item[0])["Tag"] == "query-test"
    everything = any_schedd.getJobAds(NULL, NULL)
    assert len(everything.classAdArray.item) >= 1


@pytest.mark.parametrize("constraint, every", [
    (NULL, True), ("", True), ("TRUE", True), ("1", True), ("2.5", True), ("ClusterId", True),  # non-zero: true
    ("  ", False), ("0", False), ("0.0", False), ('"x"', False), ("UNDEFINED", False), ("ERROR", False),
    ("NoSuchAttribute", False),
])
def test_get_job_ads_takes_a_constraint_as_the_schedds_job_queue_did(any_schedd, constraint, every):
    """GetNextJobByConstraint: NULL and the empty text match every job, white space alone does not parse; EvalBool
    takes true and non-zero numbers as a match, anything else (a string, undefined, error) as none."""
    submit_job(any_schedd)
    answer = any_schedd.getJobAds(NULL, constraint)
    assert answer.status.code == "SUCCESS" and bool(items(answer.classAdArray)) is every


def test_a_constraint_that_does_not_parse_is_an_empty_success_and_logged(schedd, gateway):
    """As HTCondor's getJobAds answered it; the client learns nothing more, so the gateway's log says it."""
    answer = schedd.getJobAds(NULL, "((( not a classad")
    assert answer.status.code == "SUCCESS" and items(answer.classAdArray) == []
    wait_for_line(gateway.log, "constraint does not parse", "((( not a classad")
    assert items(schedd.getJobAds(NULL, " \t ").classAdArray) == []
    wait_for_line(gateway.log, "constraint does not parse, so it matches no job:  \t")


@pytest.mark.parametrize("constraint", ["ClusterId == -1", "NoSuchAttribute == 3", "((( not classad", "1/0"])
def test_constraints_that_match_nothing_give_an_empty_success(any_schedd, constraint):
    answer = any_schedd.getJobAds(NULL, constraint)
    assert answer.status.code == "SUCCESS" and items(answer.classAdArray) == []


def test_get_job_ad_of_an_unknown_job(any_schedd):
    answer = any_schedd.getJobAd(NULL, 999999, 0)
    assert answer.status.code == "UNKNOWNJOB" and answer.status.message == "Specified job is unknown"
    assert answer.classAd is None


def test_uncommitted_jobs_are_invisible_even_to_their_own_transaction(any_schedd):
    txn = begin(any_schedd)
    cluster, proc = new_job(any_schedd, txn)
    assert any_schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true")).status.code == "SUCCESS"
    assert items(any_schedd.getJobAds(txn, f"ClusterId == {cluster}").classAdArray) == []
    assert any_schedd.getJobAd(txn, cluster, proc).status.code == "UNKNOWNJOB"
    assert code(any_schedd.commitTransaction(txn)) == "SUCCESS"
    assert len(any_schedd.getJobAds(NULL, f"ClusterId == {cluster}").classAdArray.item) == 1


def test_an_aborted_transaction_leaves_nothing(any_schedd):
    txn = begin(any_schedd)
    cluster, proc = new_job(any_schedd, txn)
    any_schedd.declareFile(txn, cluster, proc, "in.txt", 2, "NOHASH", NULL)
    any_schedd.sendFile(txn, cluster, proc, "in.txt", 0, b"hi")
    any_schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true"))
    assert code(any_schedd.abortTransaction(txn)) == "SUCCESS"
    assert items(any_schedd.getJobAds(NULL, f"ClusterId == {cluster}").classAdArray) == []
    assert any_schedd.listSpool(NULL, cluster, proc).info is None


# -- hold, release, remove -----------------------------------------------------------------------------------
def test_hold_and_release_with_reasons(any_schedd):
    cluster, proc = submit_job(any_schedd)
    assert code(any_schedd.holdJob(NULL, cluster, proc, "maintenance", False, False, False)) == "SUCCESS"
    held = values(any_schedd.getJobAd(NULL, cluster, proc).classAd)
    assert held["JobStatus"] == "5" and held["HoldReason"] == "maintenance" and held["HoldReasonCode"] == "1"
    again = any_schedd.holdJob(NULL, cluster, proc, "twice", False, False, False)
    assert again.code == "FAIL" and again.message.startswith("Failed to hold job.")
    assert code(any_schedd.releaseJob(NULL, cluster, proc, "done", False, False)) == "SUCCESS"
    released = values(any_schedd.getJobAd(NULL, cluster, proc).classAd)
    assert released["JobStatus"] == "1" and released["LastHoldReason"] == "maintenance"
    assert "HoldReason" not in released
    again = any_schedd.releaseJob(NULL, cluster, proc, "twice", False, False)
    assert again.code == "FAIL" and again.message.startswith("Failed to release job.")


def test_system_hold_is_recorded_as_such(any_schedd):
    cluster, proc = submit_job(any_schedd)
    assert code(any_schedd.holdJob(NULL, cluster, proc, "policy", False, False, True)) == "SUCCESS"
    held = values(any_schedd.getJobAd(NULL, cluster, proc).classAd)
    assert held["HoldReasonCode"] == "0" and held["NumSystemHolds"] == "1"


def test_remove_job_with_reason(any_schedd, gateway):
    cluster, proc = submit_job(any_schedd, LeaveJobInQueue=True)
    assert code(any_schedd.removeJob(NULL, cluster, proc, "not needed", False)) == "SUCCESS"
    removed = values(any_schedd.getJobAd(NULL, cluster, proc).classAd)
    assert removed["JobStatus"] == "3" and removed["RemoveReason"] == "not needed"
    # HTCondor's abortJob marked a job removed whatever its state: a second removeJob was SUCCESS; it changes nothing
    again = any_schedd.removeJob(NULL, cluster, proc, "again", True)
    assert (again.code, again.message) == ("SUCCESS", "Success")
    wait_for_line(gateway.log, "removeJob from", f"job {cluster}.{proc} is removed already", "SUCCESS")
    assert values(any_schedd.getJobAd(NULL, cluster, proc).classAd)["RemoveReason"] == "not needed"
    held = any_schedd.holdJob(NULL, cluster, proc, "x", False, False, False)  # no hold of a removed job
    assert held.code == "FAIL" and held.message.startswith("Failed to hold job.")


def test_a_removed_job_leaves_the_queue_unless_left_in_it(any_schedd):
    cluster, proc = submit_job(any_schedd)
    assert code(any_schedd.removeJob(NULL, cluster, proc, "gone", False)) == "SUCCESS"
    assert any_schedd.getJobAd(NULL, cluster, proc).status.code == "UNKNOWNJOB"


@pytest.mark.parametrize("operation", ["holdJob", "releaseJob", "removeJob"])
def test_actions_on_unknown_jobs_fail(any_schedd, operation):
    flags = {"holdJob": (False, False, False), "releaseJob": (False, False), "removeJob": (False,)}[operation]
    assert code(getattr(any_schedd, operation)(NULL, 999999, 0, "x", *flags)) == "FAIL"


def test_actions_inside_a_transaction_take_effect_at_commit(any_schedd):
    cluster, proc = submit_job(any_schedd)
    txn = begin(any_schedd)
    assert code(any_schedd.holdJob(txn, cluster, proc, "later", False, False, False)) == "SUCCESS"
    assert values(any_schedd.getJobAd(NULL, cluster, proc).classAd)["JobStatus"] == "1"
    assert code(any_schedd.commitTransaction(txn)) == "SUCCESS"
    assert values(any_schedd.getJobAd(NULL, cluster, proc).classAd)["JobStatus"] == "5"


def test_an_aborted_hold_changes_nothing(any_schedd):
    cluster, proc = submit_job(any_schedd)
    txn = begin(any_schedd)
    any_schedd.holdJob(txn, cluster, proc, "never", False, False, False)
    any_schedd.abortTransaction(txn)
    assert values(any_schedd.getJobAd(NULL, cluster, proc).classAd)["JobStatus"] == "1"


def test_remove_cluster_removes_every_job_and_an_unknown_cluster_is_not_found(any_schedd):
    txn = begin(any_schedd)
    cluster = any_schedd.newCluster(txn).integer
    for _ in range(3):
        proc = any_schedd.newJob(txn, cluster).integer
        any_schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true", LeaveJobInQueue=True))
    any_schedd.commitTransaction(txn)
    assert code(any_schedd.removeCluster(NULL, cluster, "all of them")) == "SUCCESS"
    found = any_schedd.getJobAds(NULL, f"ClusterId == {cluster}").classAdArray.item
    assert [values(job)["JobStatus"] for job in found] == ["3", "3", "3"]
    # the tests' loopback caller is identified (as HTCondor's authenticated soap->user): told, as HTCondor told it
    unknown = any_schedd.removeCluster(NULL, 999999, "none")
    assert (unknown.code, unknown.message) == ("FAIL", "Cluster not found")


# -- files ---------------------------------------------------------------------------------------------------
def test_declare_send_list_get_close(any_schedd):
    data = bytes(range(256)) * 40
    cluster, proc = submit_job(any_schedd, files={"input.bin": data, "empty": b""})
    attrs = values(any_schedd.getJobAd(NULL, cluster, proc).classAd)
    assert attrs["TransferInput"] == "input.bin,empty"
    listing = any_schedd.listSpool(NULL, cluster, proc)
    assert listing.status.code == "SUCCESS"
    assert {(f.name, f.size) for f in listing.info.item} == {("input.bin", len(data)), ("empty", 0)}
    chunks = [any_schedd.getFile(NULL, cluster, proc, "input.bin", offset, 4000).data
              for offset in range(0, len(data), 4000)]
    assert b"".join(chunks) == data
    tail = any_schedd.getFile(NULL, cluster, proc, "input.bin", len(data) - 10, 100)
    assert tail.status.code == "SUCCESS" and tail.data == data[-10:]
    assert code(any_schedd.closeSpool(NULL, cluster, proc)) == "SUCCESS"
    assert values(any_schedd.getJobAd(NULL, cluster, proc).classAd)["FilesRetrieved"] == "TRUE"


def test_chunks_in_any_order(any_schedd):
    txn = begin(any_schedd)
    cluster, proc = new_job(any_schedd, txn)
    any_schedd.declareFile(txn, cluster, proc, "f", 10, "NOHASH", NULL)
    assert code(any_schedd.sendFile(txn, cluster, proc, "f", 5, b"56789")) == "SUCCESS"
    assert code(any_schedd.sendFile(txn, cluster, proc, "f", 0, b"01234")) == "SUCCESS"
    assert any_schedd.getFile(txn, cluster, proc, "f", 0, 10).data == b"0123456789"
    any_schedd.abortTransaction(txn)


def test_declare_errors(any_schedd):
    txn = begin(any_schedd)
    cluster, proc = new_job(any_schedd, txn)
    assert code(any_schedd.declareFile(txn, cluster, proc, "a", 1, "NOHASH", NULL)) == "SUCCESS"
    again = any_schedd.declareFile(txn, cluster, proc, "a", 1, "NOHASH", NULL)
    assert again.code == "ALREADYEXISTS" and again.message == "File 'a' already declared."
    unknown = any_schedd.declareFile(txn, cluster, proc + 7, "a", 1, "NOHASH", NULL)
    assert unknown.code == "UNKNOWNJOB" and unknown.message == "Unknown job"
    path = any_schedd.declareFile(txn, cluster, proc, "../escape", 1, "NOHASH", NULL)
    assert path.code == "FAIL" and path.message.startswith("Failed to open '../escape' for writing, reason:")
    null = any_schedd.declareFile({"id": 0, "duration": 1}, cluster, proc, "b", 1, "NOHASH", NULL)
    assert null.code == "INVALIDTRANSACTION"
    any_schedd.abortTransaction(txn)


def test_send_errors(any_schedd):
    txn = begin(any_schedd)
    cluster, proc = new_job(any_schedd, txn)
    undeclared = any_schedd.sendFile(txn, cluster, proc, "nope", 0, b"x")
    assert undeclared.code == "FAIL" and undeclared.message == "File 'nope' has not been declared."
    assert code(any_schedd.sendFile(txn, cluster, proc + 3, "nope", 0, b"x")) == "UNKNOWNJOB"
    any_schedd.abortTransaction(txn)


def test_a_declared_md5_is_checked_at_submit(any_schedd):
    txn = begin(any_schedd)
    cluster, proc = new_job(any_schedd, txn)
    good, bad = b"good data", b"bad data"
    any_schedd.declareFile(txn, cluster, proc, "good", len(good), "MD5HASH", hashlib.md5(good).hexdigest())
    any_schedd.declareFile(txn, cluster, proc, "bad", len(bad), "MD5HASH", hashlib.md5(b"other").hexdigest())
    any_schedd.sendFile(txn, cluster, proc, "good", 0, good)
    any_schedd.sendFile(txn, cluster, proc, "bad", 0, bad)
    answer = any_schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true"))
    assert answer.status.code == "FAIL" and "'bad'" in answer.status.message and "MD5" in answer.status.message
    any_schedd.abortTransaction(txn)


def test_get_file_errors(any_schedd):
    cluster, proc = submit_job(any_schedd, files={"x": b"x"})
    assert any_schedd.getFile(NULL, cluster, proc, "x", 0, 0).status.message == "LENGTH must be >= 0"
    missing = any_schedd.getFile(NULL, cluster, proc, "missing", 0, 10)
    assert missing.status.code == "FAIL" and missing.status.message.startswith("Failed to open file 'missing'")
    assert missing.data is None
    assert any_schedd.getFile(NULL, cluster, proc, "../../queue.sqlite3", 0, 10).status.code == "FAIL"


def test_list_spool_of_a_job_without_files_has_no_info(any_schedd):
    cluster, proc = submit_job(any_schedd)
    answer = any_schedd.listSpool(NULL, cluster, proc)
    assert answer.status.code == "SUCCESS" and answer.info is None


def test_close_spool_of_an_unknown_job_fails(any_schedd):
    answer = any_schedd.closeSpool(NULL, 999999, 0)
    assert answer.code == "FAIL" and answer.message.startswith("Failed to set FilesRetrieved attribute.")


# -- scheduling and templates ----------------------------------------------------------------------------------
def test_request_reschedule(any_schedd):
    assert code(any_schedd.requestReschedule()) == "SUCCESS"


def test_discover_job_requirements_lists_input_files_in_order(any_schedd):
    answer = any_schedd.discoverJobRequirements(ad(TransferInput="a, b", In="stdin.txt", Cmd="prog"))
    assert answer.status.code == "SUCCESS"
    assert answer.requirements.item == ["a", "b", "stdin.txt", "prog"]
    no_exe = any_schedd.discoverJobRequirements(ad(Cmd="prog", TransferExecutable=False))
    assert no_exe.status.code == "SUCCESS" and items(no_exe.requirements) == []


def test_discover_job_requirements_leaves_out_what_cannot_be_an_attribute_as_htcondor_did(any_schedd, gateway):
    """HTCondor's convert_adStruct_to_ad ignored a failed Insert: the rest of the ad still answered."""
    answer = any_schedd.discoverJobRequirements(ad(TransferInput="a", Broken=expr("Queue=150"), Cmd="prog",
                                                   **{"not a name": "x"}))
    assert answer.status.code == "SUCCESS" and answer.requirements.item == ["a", "prog"]
    wait_for_line(gateway.log, "discoverJobRequirements from", "'Broken'", "left out")
    wait_for_line(gateway.log, "discoverJobRequirements from", "'not a name'", "left out")


def test_create_job_template(any_schedd):
    answer = any_schedd.createJobTemplate(12, 3, "alice", "VANILLA", "/bin/ls", "-l 'a b'", "Memory > 10")
    assert answer.status.code == "SUCCESS"
    attrs = as_dict(answer.classAd)
    assert [item.name for item in answer.classAd.item][:3] == ["MyType", "TargetType", "ServerTime"]
    assert attrs["Owner"] == ("STRING-ATTR", "alice")
    assert attrs["JobUniverse"] == ("INTEGER-ATTR", "5")
    assert attrs["Cmd"] == ("STRING-ATTR", "/bin/ls")
    assert attrs["Arguments"] == ("STRING-ATTR", "-l 'a b'")
    assert attrs["Requirements"] == ("EXPRESSION-ATTR", "Memory > 10")
    assert attrs["LeaveJobInQueue"] == ("EXPRESSION-ATTR", "FilesRetrieved=?=FALSE")  # as the 8.x template had it
    assert attrs["RequestMemory"] == ("EXPRESSION-ATTR", "ifthenelse(MemoryUsage isnt undefined,MemoryUsage,( ImageSize "
                                                         "+ 1023 ) / 1024)")
    assert attrs["ClusterId"] == ("INTEGER-ATTR", "12") and attrs["ProcId"] == ("INTEGER-ATTR", "3")
    assert attrs["ShouldTransferFiles"] == ("STRING-ATTR", "YES") and attrs["In"] == ("STRING-ATTR", "/dev/null")
    assert "Iwd" not in attrs


def test_create_job_template_without_owner_omits_it(any_schedd):
    answer = any_schedd.createJobTemplate(1, 0, NULL, "SCHEDULER", "/bin/true", NULL, NULL)
    attrs = as_dict(answer.classAd)
    assert "Owner" not in attrs and attrs["JobUniverse"] == ("INTEGER-ATTR", "7")
    assert attrs["Requirements"] == ("BOOLEAN-ATTR", "TRUE")


@pytest.mark.parametrize("requirements", ["Queue=150", "", "   ", "(((", "Memory >"])
def test_create_job_template_drops_requirements_that_do_not_parse_as_htcondor_did(any_schedd, gateway, requirements):
    """HTCondor's stub ignored a failed AssignExpr: SUCCESS, CreateJobAd's Requirements = true kept (8.x)."""
    answer = any_schedd.createJobTemplate(1, 0, "carol", "VANILLA", "/bin/ls", NULL, requirements)
    assert answer.status.code == "SUCCESS"
    assert as_dict(answer.classAd)["Requirements"] == ("BOOLEAN-ATTR", "TRUE")
    assert as_dict(answer.classAd)["Cmd"] == ("STRING-ATTR", "/bin/ls")
    if requirements.strip():
        wait_for_line(gateway.log, "createJobTemplate from", "dropped", "Requirements = true")


def test_create_job_template_with_bad_arguments_fails_but_returns_the_ad(any_schedd):
    answer = any_schedd.createJobTemplate(1, 0, "bob", "VANILLA", "/bin/ls", "'unterminated", NULL)
    assert answer.status.code == "FAIL" and answer.status.message == "Invalid arguments string."
    assert as_dict(answer.classAd)["Cmd"] == ("STRING-ATTR", "/bin/ls")
