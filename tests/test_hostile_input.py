"""Hostile input, end to end: a client's mistakes and a full disk answer with a status (Birdbath FAIL, the
submission API's FAIL, HTTP 400 for JSON that cannot be read), never a fault for well-formed SOAP or an HTTP 500,
and the gateway stays up.  Each hostile case stands next to its well-behaved twin.  Through zeep clients and raw
HTTP against a real gateway (issue #13, items 1, 4, 5 and 6)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
import zeep

from backends.local.store import CLUSTER_BLOCK
from gateway.testing import QUEUE_ONLY, GatewayProcess
from tests.birdbath import ad, as_dict, begin, expr, new_job, submit_job
from tests.test_http import assert_alive, fault
from tests.test_logging import wait_for_line
from tests.wire import SOAP_ENV, body_element, post

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = pytest.mark.gateway

NULL = None
DEEP = "!" * 60_000 + "true"  # within the length limit; evaluating or printing it would overflow the stack


@pytest.fixture(scope="module")
def json_api(gateway):
    """POST a raw body to /submission/json/<operation>: (HTTP status, the JSON answer)."""
    def send(operation: str, body: bytes | dict) -> tuple[int, dict]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        request = urllib.request.Request(gateway.url + f"submission/json/{operation}", data,
                                         {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())
    return send


@pytest.fixture(scope="module")
def api(gateway):
    return zeep.Client(gateway.url + "submission?wsdl").service


def status(answer) -> tuple[str, str]:
    """(code, message) of a Birdbath answer, whether it is a Status or carries one."""
    found = answer if hasattr(answer, "code") else answer.status
    return found.code, found.message or ""


def refused(answer, *words: str) -> bool:
    code, message = status(answer)
    return code == "FAIL" and all(word in message for word in words)


def birdbath_envelope(operation: str, inner: str) -> bytes:
    return (f'<s:Envelope xmlns:s="{SOAP_ENV}" xmlns:c="urn:condor"><s:Body><c:{operation}>{inner}'
            f'</c:{operation}></s:Body></s:Envelope>').encode()


def send_file_raw(gateway, txn, cluster: int, proc: int, name: str, offset: int, data: str) -> tuple[int, str, str]:
    """sendFile with ``data`` as the literal text of the element: (HTTP status, status code, message)."""
    inner = (f"<transaction><id>{txn.id}</id><duration>{txn.duration}</duration></transaction>"
             f"<clusterId>{cluster}</clusterId><jobId>{proc}</jobId><name>{name}</name><offset>{offset}</offset>"
             f"<data>{data}</data>")
    http_status, _, answer = post(gateway.port, birdbath_envelope("sendFile", inner))
    response = body_element(answer)
    return http_status, response.findtext(".//code"), response.findtext(".//message")


# -- Birdbath: file data, sizes, MD5 -----------------------------------------------------------------------------
def test_send_file_data_in_base64_with_line_breaks_is_accepted(gateway, schedd):
    txn = begin(schedd)
    cluster, proc = new_job(schedd, txn)
    data = bytes(range(256)) * 2
    schedd.declareFile(txn, cluster, proc, "wrapped", len(data), "NOHASH", NULL)
    text = base64.encodebytes(data).decode()  # MIME style: a line break every 76 characters
    assert send_file_raw(gateway, txn, cluster, proc, "wrapped", 0, text) == (200, "SUCCESS", "Success")
    assert schedd.getFile(txn, cluster, proc, "wrapped", 0, len(data)).data == data
    schedd.abortTransaction(txn)


@pytest.mark.parametrize("data", ["!!!not*base64", "QUJDRA", "QU*JD", "=QUJD", "QUJD\u00e9"])
def test_send_file_data_that_is_not_base64_is_a_fail(gateway, schedd, data):
    txn = begin(schedd)
    cluster, proc = new_job(schedd, txn)
    schedd.declareFile(txn, cluster, proc, "f", 10, "NOHASH", NULL)
    http_status, code, message = send_file_raw(gateway, txn, cluster, proc, "f", 0, data)
    assert (http_status, code) == (200, "FAIL") and "'f'" in message and "not base64" in message
    assert schedd.abortTransaction(txn).code == "SUCCESS"


def test_declared_files_fully_received_are_committed(schedd):
    txn = begin(schedd)
    cluster, proc = new_job(schedd, txn)
    data = b"0123456789" * 100
    schedd.declareFile(txn, cluster, proc, "in", len(data), "MD5HASH", hashlib.md5(data).hexdigest())
    for offset in (500, 0, 250, 750):  # any order, overlapping
        assert schedd.sendFile(txn, cluster, proc, "in", offset, data[offset:offset + 300]).code == "SUCCESS"
    assert status(schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true")))[0] == "SUCCESS"
    assert schedd.commitTransaction(txn).code == "SUCCESS"
    assert schedd.getFile(NULL, cluster, proc, "in", 0, len(data)).data == data


def test_a_file_not_fully_received_is_refused_at_submit_and_commit_naming_it(schedd):
    txn = begin(schedd)
    cluster, proc = new_job(schedd, txn)
    schedd.declareFile(txn, cluster, proc, "big", 1_000_000, "NOHASH", NULL)
    assert schedd.sendFile(txn, cluster, proc, "big", 0, b"abc").code == "SUCCESS"
    assert refused(schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true")), "'big'", "999997", "1000000")
    assert schedd.sendFile(txn, cluster, proc, "big", 3, b"\0" * 999_997).code == "SUCCESS"
    assert status(schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true")))[0] == "SUCCESS"
    schedd.declareFile(txn, cluster, proc, "later", 5, "NOHASH", NULL)  # after submit: commit checks it
    assert refused(schedd.commitTransaction(txn), "'later'", "incomplete", "still open")
    assert schedd.getJobAds(NULL, f"ClusterId == {cluster}").classAdArray is None  # nothing committed
    schedd.sendFile(txn, cluster, proc, "later", 0, b"later")  # the transaction is still open: finish, commit
    assert schedd.commitTransaction(txn).code == "SUCCESS"
    assert {f.name: f.size for f in schedd.listSpool(NULL, cluster, proc).info.item} == {"big": 1_000_000,
                                                                                          "later": 5}


def test_data_beyond_the_declared_size_is_refused(gateway, schedd):
    txn = begin(schedd)
    cluster, proc = new_job(schedd, txn)
    schedd.declareFile(txn, cluster, proc, "small", 4, "NOHASH", NULL)
    assert schedd.sendFile(txn, cluster, proc, "small", 0, b"1234").code == "SUCCESS"
    assert refused(schedd.sendFile(txn, cluster, proc, "small", 2, b"345"), "'small'", "byte 5", "size of 4")
    assert refused(schedd.sendFile(txn, cluster, proc, "small", 2_000_000_000, b"x"), "'small'")  # no sparse file
    assert schedd.listSpool(txn, cluster, proc).info.item[0].size == 4
    assert refused(schedd.declareFile(txn, cluster, proc, "negative", -1, "NOHASH", NULL), "-1")
    schedd.abortTransaction(txn)


def test_data_changed_after_submit_must_still_match_its_md5_at_commit(schedd):
    txn = begin(schedd)
    cluster, proc = new_job(schedd, txn)
    data = b"checked"
    schedd.declareFile(txn, cluster, proc, "sum", len(data), "MD5HASH", hashlib.md5(data).hexdigest())
    schedd.sendFile(txn, cluster, proc, "sum", 0, data)
    assert status(schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true")))[0] == "SUCCESS"
    schedd.sendFile(txn, cluster, proc, "sum", 0, b"CH")
    assert refused(schedd.commitTransaction(txn), "'sum'", "MD5")
    schedd.sendFile(txn, cluster, proc, "sum", 0, b"ch")
    assert schedd.commitTransaction(txn).code == "SUCCESS"


# -- Birdbath: file names ----------------------------------------------------------------------------------------
def test_a_file_name_with_spaces_and_dots_is_fine(schedd):
    cluster, proc = submit_job(schedd, files={"input data.v2.txt": b"x"})
    assert [f.name for f in schedd.listSpool(NULL, cluster, proc).info.item] == ["input data.v2.txt"]


@pytest.mark.parametrize("name, words", [
    ("a,b", "comma"), ("line\nbreak", "control"), ("tab\there", "control"), ("back\\slash", "backslash"),
    ("sub/dir", "path separator"), ("..", "not a file name"), (" padded", "white space"), ("", "empty"),
])
def test_file_names_that_transfers_would_mangle_are_refused_at_declare(schedd, name, words):
    txn = begin(schedd)
    cluster, proc = new_job(schedd, txn)
    assert refused(schedd.declareFile(txn, cluster, proc, name, 1, "NOHASH", NULL), words)
    assert refused(schedd.sendFile(txn, cluster, proc, name, 0, b"x"), "has not been declared")
    assert status(schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true")))[0] == "SUCCESS"
    schedd.commitTransaction(txn)
    assert schedd.listSpool(NULL, cluster, proc).info is None  # no file was made


# -- Birdbath: values, names, limits -----------------------------------------------------------------------------
def test_values_at_the_edges_of_classad_ranges_are_kept(schedd):
    cluster, proc = submit_job(schedd, Big=2**63 - 1, Small=-(2**63), Tiny=5e-324, Large=1.5e308,
                               Rule=expr("MY.Big - 1 > 0"))
    attrs = as_dict(schedd.getJobAd(NULL, cluster, proc).classAd)
    assert attrs["Big"] == ("INTEGER-ATTR", str(2**63 - 1)) and attrs["Small"] == ("INTEGER-ATTR", str(-(2**63)))
    assert attrs["Rule"][0] == "EXPRESSION-ATTR" and attrs["Large"][0] == "FLOAT-ATTR"


@pytest.mark.parametrize("kind, value, words", [
    ("INTEGER-ATTR", str(2**80), "beyond the range of a ClassAd integer"),
    ("INTEGER-ATTR", "9223372036854775808", "64 bits"),
    ("INTEGER-ATTR", "0x10", "not a ClassAd number"),
    ("FLOAT-ATTR", "nan", "not a finite number"),
    ("FLOAT-ATTR", "-Infinity", "not a finite number"),
    ("FLOAT-ATTR", "1e400", "beyond the range of a ClassAd real"),
    ("EXPRESSION-ATTR", f"Memory > {10**30}", "beyond the range"),
    ("EXPRESSION-ATTR", DEEP, "max_expression_depth"),
    ("EXPRESSION-ATTR", "x" * 70_000, "max_expression_length"),
])
def test_values_the_classad_library_would_change_or_choke_on_are_refused_naming_the_attribute(schedd, kind, value,
                                                                                              words):
    txn = begin(schedd)
    cluster, proc = new_job(schedd, txn)
    answer = schedd.submit(txn, cluster, proc, {"item": [{"name": "Cmd", "type": "STRING-ATTR", "value": "/bin/true"},
                                                         {"name": "Weird", "type": kind, "value": value}]})
    assert refused(answer, "Weird", words)
    assert len(status(answer)[1]) < 1000  # the refusal does not echo the value back whole
    schedd.abortTransaction(txn)
    assert_alive_schedd(schedd)


@pytest.mark.parametrize("name", ["User ", "with space", "true", "1st", "a-b", "Name\n"])
def test_attribute_names_that_are_not_classad_identifiers_are_refused(schedd, name):
    txn = begin(schedd)
    cluster, proc = new_job(schedd, txn)
    answer = schedd.submit(txn, cluster, proc, {"item": [{"name": "Cmd", "type": "STRING-ATTR", "value": "/bin/true"},
                                                         {"name": name, "type": "STRING-ATTR", "value": "x"}]})
    assert refused(answer, repr(name))
    schedd.abortTransaction(txn)


def test_discover_job_requirements_and_templates_check_expressions_too(gateway, schedd):
    fine = schedd.discoverJobRequirements(ad(Cmd="prog", Requirements=expr("Memory > 1")))
    assert fine.status.code == "SUCCESS"
    # what cannot be an attribute is left out (logged), as HTCondor's convert_adStruct_to_ad ignored a failed Insert
    deep = schedd.discoverJobRequirements(ad(TransferInput=expr(DEEP), Cmd="prog"))
    assert deep.status.code == "SUCCESS" and deep.requirements.item == ["prog"]
    wait_for_line(gateway.log, "discoverJobRequirements from", "'TransferInput'", "max_expression_depth")
    named = schedd.discoverJobRequirements(ad(**{"bad name": 1}, In="stdin"))
    assert named.status.code == "SUCCESS" and named.requirements.item == ["stdin"]
    assert schedd.createJobTemplate(1, 0, "alice", "VANILLA", "/bin/ls", NULL, "Memory > 1").status.code == "SUCCESS"
    # a text the template cannot use is dropped (logged), as HTCondor's stub ignored a failed AssignExpr
    for dropped in (DEEP, str(2**64)):
        template = schedd.createJobTemplate(1, 0, "alice", "VANILLA", "/bin/ls", NULL, dropped)
        assert template.status.code == "SUCCESS"
        assert {item.name: item.value for item in template.classAd.item}["Requirements"] == "TRUE"
    assert_alive_schedd(schedd)


def assert_alive_schedd(schedd) -> None:
    assert schedd.getVersionString().status.code == "SUCCESS"


# -- Birdbath: durations, unknown jobs, DTDs ----------------------------------------------------------------------
def test_zero_and_negative_durations_ask_for_one_second_as_htcondor_raised_them(schedd):
    txn = schedd.beginTransaction(0).transaction
    assert txn.duration == 1
    schedd.abortTransaction(txn)
    answer = schedd.beginTransaction(-2**31)
    assert answer.status.code == "SUCCESS" and answer.transaction.duration == 1
    schedd.abortTransaction(answer.transaction)
    txn = begin(schedd)
    assert schedd.extendTransaction(txn, -5).transaction.duration == 1
    assert schedd.extendTransaction(txn, 30).transaction.duration == 30
    sent_back = {"id": txn.id, "duration": -1}  # the lease a call carries must still be at least 1 s, as in HTCondor
    assert refused(schedd.newCluster(sent_back), "Could not extend transaction")
    schedd.abortTransaction({"id": txn.id, "duration": 30})


def test_spool_operations_on_an_unknown_job_are_unknownjob(schedd):
    cluster, proc = submit_job(schedd, files={"x": b"x"})
    assert schedd.listSpool(NULL, cluster, proc).status.code == "SUCCESS"
    assert schedd.getFile(NULL, cluster, proc, "x", 0, 1).status.code == "SUCCESS"
    assert schedd.listSpool(NULL, 999_999, 0).status.code == "UNKNOWNJOB"
    assert schedd.getFile(NULL, 999_999, 0, "x", 0, 1).status.code == "UNKNOWNJOB"
    assert schedd.listSpool(NULL, cluster, proc + 1).status.code == "UNKNOWNJOB"


SUBMISSION_CREATE = (f'<s:Envelope xmlns:s="{SOAP_ENV}" xmlns:c="urn:birdbath:submission"><s:Body><c:create>'
                     f'<c:submission>%s</c:submission></c:create></s:Body></s:Envelope>')
DTD = '<?xml version="1.0"?><!DOCTYPE s:Envelope [<!ENTITY name "from-a-dtd">]>'


@pytest.mark.parametrize("path", ["/", "/condorSchedd", "/submission", "/submission/"])
def test_documents_with_a_dtd_are_refused_on_every_soap_endpoint(gateway, path):
    if path.startswith("/submission"):
        plain, hostile = (SUBMISSION_CREATE % "fine").encode(), (DTD + SUBMISSION_CREATE % "&name;").encode()
    else:
        plain = birdbath_envelope("getVersionString", "")
        hostile = DTD.encode() + birdbath_envelope("getJobAds", "<constraint>&name;</constraint>")
    head = [f"POST {path} HTTP/1.1", "Content-Type: text/xml; charset=utf-8"]
    assert post(gateway.port, plain, head)[0] == 200
    http_status, _, answer = post(gateway.port, hostile, head)
    assert http_status == 500 and "DTD" in fault(answer)[1]
    assert b"from-a-dtd" not in answer
    assert_alive(gateway)


# -- the submission API ---------------------------------------------------------------------------------------------
def job_ad(**extra) -> dict:
    return {"Cmd": "/bin/true", "Requirements": {"TYPE": 0, "VALUE": "TRUE"}, "Iwd": "/tmp", **extra}


def json_refused(answer: tuple[int, dict], *words: str, http: int = 200) -> bool:
    code, document = answer
    text = document["status"]["text"]
    return code == http and document["status"]["code"] == "FAIL" and all(word in text for word in words)


def test_json_values_in_range_are_submitted(json_api):
    code, answer = json_api("submit", {"ad": job_ad(Big=2**63 - 1, Ratio=0.25, Typed={"TYPE": 1, "VALUE": "7"})})
    assert code == 200 and answer["status"]["code"] == "OK"


@pytest.mark.parametrize("body, words", [
    (b'{"ad": {"Cmd": "/bin/true", "Requirements": true, "Iwd": "/tmp", "X": NaN}}', "not a finite number"),
    (b'{"ad": {"Cmd": "/bin/true", "Requirements": true, "Iwd": "/tmp", "X": -Infinity}}', "not a finite number"),
    (b'{"ad": {"Cmd": "/bin/true", "Requirements": true, "Iwd": "/tmp", "X": 1' + b"0" * 400 + b"}}",
     "beyond the range"),
    (b'{"ad": {"Cmd": "/bin/true", "Requirements": true, "Iwd": "/tmp", "X": {"TYPE": 1, "VALUE": "' + b"9" * 30
     + b'"}}}', "64 bits"),
    (b'{"ad": {"Cmd": "/bin/true", "Requirements": true, "Iwd": "/tmp", "X": {"TYPE": 2, "VALUE": "inf"}}}',
     "not a finite number"),
    (b'{"ad": {"Cmd": "/bin/true", "Requirements": {"TYPE": 0, "VALUE": "' + DEEP.encode() + b'"}, "Iwd": "/tmp"}}',
     "max_expression_depth"),
    (b'{"ad": {"Cmd": "/bin/true", "Requirements": true, "Iwd": "/tmp", "with space": 1}}', "'with space'"),
    (b'{"ad": {"Cmd": "/bin/true", "Requirements": true, "Iwd": "/tmp", "": 1}}', "''"),
    (b'{"ad": {"Cmd": "/bin/true", "Requirements": true, "Iwd": "/tmp", "User ": "x"}}', "'User '"),
])
def test_json_values_and_names_classads_cannot_hold_are_a_fail_status(json_api, body, words):
    answer = json_api("submit", body)
    assert json_refused(answer, words), answer
    assert len(answer[1]["status"]["text"]) < 1000


def test_set_attribute_checks_names_values_and_limits_in_json_and_soap(json_api, api):
    code, submitted = json_api("submit", {"ad": job_ad()})
    job = submitted["id"]
    assert json_api("setAttribute", {"id": job, "name": "Limit", "value": "2 * 21"})[1]["status"]["code"] == "OK"
    assert json_refused(json_api("setAttribute", {"id": job, "name": "Limit", "value": DEEP}),
                        "Limit", "max_expression_depth")
    assert json_refused(json_api("setAttribute", {"id": job, "name": "N", "type": "INTEGER", "value": str(2**80)}),
                        "64 bits")
    assert json_refused(json_api("setAttribute", {"id": job, "name": "F", "type": "FLOAT", "value": "NaN"}),
                        "not a finite number")
    assert json_refused(json_api("setAttribute", {"id": job, "name": "two words", "value": "1"}), "two words")
    soap = api.setAttribute(job, "Limit", "EXPR", "x" * 70_000)
    assert soap.code == "FAIL" and "max_expression_length" in soap.text
    assert api.setAttribute(job, "Limit", "EXPR", "3").code == "OK"


def test_json_nested_too_deep_is_a_400_with_a_fail_status(json_api):
    for depth in (33, 1_000, 100_000):
        answer = json_api("getJobSummaries", b'{"ids": ' + b"[" * depth + b"]" * depth + b"}")
        assert json_refused(answer, "nests", http=400), answer
    assert json_api("getJobSummaries", {"ids": []})[0] == 200


def test_json_parameters_of_the_wrong_type_are_a_400_with_a_fail_status(json_api):
    answer = json_api("getJobSummaries", b'{"ids": [[[["x"]]]]}')
    assert json_refused(answer, "Bad request", http=400), answer
    # a TYPE outside the codes is an unknown enumeration value: a FAIL status from the operation, naming it
    assert json_refused(json_api("submit", {"ad": {"Cmd": {"TYPE": [3], "VALUE": "x"}}}), "unknown type 'TYPE [3]'")
    assert json_refused(json_api("send", {"staging": "x", "name": "f", "offset": "far", "data": ""}),
                        "Bad request", http=400)


@pytest.mark.parametrize("operation, params, words", [
    ("getJobSummaries", {"ids": "1.0"}, "parameter ids: expected a list, not \"1.0\""),  # not three ids '1', '.', '0'
    ("getJobSummaries", {"ids": [5]}, "parameter ids: expected a job id (a string or a JobID object), not 5"),
    ("send", {"staging": "x", "name": "f", "offset": True, "data": ""}, "parameter offset: expected an integer"),
    ("send", {"staging": "x", "name": "f", "offset": 1.0, "data": ""}, "parameter offset: expected an integer"),
    ("getHistory", {"limit": 2**31}, "parameter limit: expected an integer from -2147483648 to 2147483647"),
    ("submit", {"ad": "Cmd"}, "parameter ad: expected a job ad (a map of attributes)"),  # not attributes C, m, d
    ("submit", {"ad": [None]}, "parameter ad: expected attributes as {name, type, value} strings, not null"),
    ("submit", {"ad": [{"name": "A", "type": "INTEGER", "value": 3}]}, "parameter ad: expected attributes as"),
    ("setAttribute", {"id": "1.0", "name": "A", "type": 3, "value": "x"}, "parameter type: expected a string, not 3"),
    ("create", {"submission": ["x" * 100]}, "parameter submission: expected a string, not [\"xxxx"),
])
def test_json_parameters_of_the_wrong_json_type_are_a_400_naming_the_parameter(json_api, operation, params, words):
    answer = json_api(operation, params)
    assert json_refused(answer, "Bad request: ", words, http=400), answer
    assert len(answer[1]["status"]["text"]) < 200  # a long value is cut short


def test_a_json_job_ad_may_be_the_soap_forms_list_of_attributes(json_api):
    ad = [{"name": name, "type": kind, "value": value} for name, kind, value in (
        ("Cmd", "STRING", "/bin/true"), ("Iwd", "STRING", "/tmp"), ("Requirements", "EXPR", "FALSE"),
        ("Count", "INTEGER", "3"), ("Untyped", None, "1 + 1"))]
    code, answer = json_api("submit", {"ad": ad})
    assert code == 200 and answer["status"]["code"] == "OK", answer
    stored = json_api("getJobAd", {"id": answer["id"]})[1]["ad"]
    assert stored["Count"] == {"TYPE": 1, "VALUE": "3"} and stored["Untyped"] == {"TYPE": 0, "VALUE": "1 + 1"}


def test_json_text_that_is_not_unicode_is_a_400(json_api):
    for body in (b'{"ad": {"Cmd": "\\ud800", "Requirements": true, "Iwd": "/tmp"}}',
                 b'{"submission": "\\udfff"}', b'{"\\ud800": 1}'):
        assert json_refused(json_api("submit" if b"ad" in body else "create", body), "Unicode", http=400)
    assert json_api("create", {"submission": "caf\u00e9 \U0001f600"})[1]["status"]["code"] == "OK"


def test_send_data_that_is_not_base64_is_a_fail_in_json_and_soap(gateway, json_api):
    staging = json_api("create", {})[1]["id"]
    ok = json_api("send", {"staging": staging, "name": "f", "offset": 0, "data": base64.b64encode(b"abc").decode()})
    assert ok[1]["status"]["code"] == "OK" and ok[1]["size"] == 3
    assert json_refused(json_api("send", {"staging": staging, "name": "f", "offset": 0, "data": "!!!not*base64"}),
                        "'f'", "not base64")
    inner = f"<c:staging>{staging}</c:staging><c:name>g</c:name><c:offset>0</c:offset><c:data>!!!</c:data>"
    body = (f'<s:Envelope xmlns:s="{SOAP_ENV}" xmlns:c="urn:birdbath:submission"><s:Body><c:send>{inner}</c:send>'
            f'</s:Body></s:Envelope>').encode()
    http_status, _, answer = post(gateway.port, body, ["POST /submission HTTP/1.1", "Content-Type: text/xml"])
    assert http_status == 200
    assert [e.text for e in body_element(answer).iter() if e.tag.endswith("}code")] == ["FAIL"]


@pytest.mark.parametrize("name", ["a,b", "new\nline", "back\\slash", "sub/dir", "", "..", "\x7f"])
def test_send_refuses_file_names_transfers_would_mangle(json_api, name):
    staging = json_api("create", {})[1]["id"]
    assert json_api("send", {"staging": staging, "name": "fine name.txt", "offset": 0, "data": ""})[0] == 200
    assert json_refused(json_api("send", {"staging": staging, "name": name, "offset": 0, "data": "eA=="}),
                        "Cannot stage")


def test_submit_refuses_a_staged_file_whose_md5_did_not_match_until_it_is_sent_again(json_api):
    staging = json_api("create", {})[1]["id"]
    data = base64.b64encode(b"payload").decode()
    answer = json_api("send", {"staging": staging, "name": "in", "offset": 0, "data": data,
                               "md5": hashlib.md5(b"other").hexdigest()})
    assert json_refused(answer, "MD5")
    assert json_refused(json_api("submit", {"ad": job_ad(), "staging": staging}), "'in'", "MD5")
    answer = json_api("send", {"staging": staging, "name": "in", "offset": 0, "data": data,
                               "md5": hashlib.md5(b"payload").hexdigest()})
    assert answer[1]["status"]["code"] == "OK"
    assert json_api("submit", {"ad": job_ad(), "staging": staging})[1]["status"]["code"] == "OK"


def test_chunks_sent_in_any_order_are_submitted(json_api):
    staging = json_api("create", {})[1]["id"]
    for offset, chunk in ((4, b"5678"), (0, b"1234")):
        json_api("send", {"staging": staging, "name": "in", "offset": offset, "data": base64.b64encode(chunk).decode()})
    answer = json_api("submit", {"ad": job_ad(), "staging": staging})
    assert answer[1]["status"]["code"] == "OK", answer


def test_a_send_at_a_far_offset_leaves_a_hole_that_submit_and_md5_refuse(json_api):
    staging = json_api("create", {})[1]["id"]
    far = {"staging": staging, "name": "sparse", "offset": 10**9, "data": base64.b64encode(b"x").decode()}
    assert json_api("send", far)[1]["size"] == 10**9 + 1  # a sparse file: nothing is read or copied yet
    assert json_refused(json_api("send", {**far, "md5": hashlib.md5(b"x").hexdigest()}), "'sparse'",
                        "1000000000 of its 1000000001 bytes were not sent")
    assert json_refused(json_api("submit", {"ad": job_ad(), "staging": staging}), "'sparse'", "incomplete")
    assert json_refused(json_api("send", {**far, "offset": 2**62}), "Failed to write to 'sparse'")  # EFBIG
    assert json_refused(json_api("send", {**far, "offset": 2**63}), "Bad request", http=400)  # not an xsd:long


# -- a full disk -----------------------------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs (the tests run as root); the test is skipped where it cannot be mounted."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", str(mount)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {result.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Fill the disk to the last byte; the filler file, to delete to make room again."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 16, 1):  # large blocks, then the last bytes one by one
            try:
                while os.write(fd, b"\0" * size):
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_answers_fail_statuses_and_leaves_nothing_half_committed(small_disk, tmp_path):
    gateway = GatewayProcess(small_disk / "state", QUEUE_ONLY, tmp=tmp_path).start()
    try:
        schedd = zeep.Client(gateway.url + "condorSchedd.wsdl").service
        first, _ = submit_job(schedd)
        pending = begin(schedd)  # a job waiting for its commit when the disk fills
        cluster, proc = new_job(schedd, pending)
        assert status(schedd.submit(pending, cluster, proc, ad(Cmd="/bin/true")))[0] == "SUCCESS"
        sending = begin(schedd)  # a job submitted, whose file is declared after (commit checks it)
        sent_cluster, sent_proc = new_job(schedd, sending)
        assert status(schedd.submit(sending, sent_cluster, sent_proc, ad(Cmd="/bin/true")))[0] == "SUCCESS"
        schedd.declareFile(sending, sent_cluster, sent_proc, "in", 200_000, "NOHASH", NULL)
        staging = urllib_json(gateway, "create", {})["id"]
        filler = fill(small_disk)

        assert refused(schedd.commitTransaction(pending), "Commit failed", "full")
        clusters = begin(schedd)  # ids are reserved durably a block at a time: the next reservation fails
        for _ in range(CLUSTER_BLOCK + 1):
            answer = schedd.newCluster(clusters)
            if answer.status.code != "SUCCESS":
                break
        assert refused(answer, "Could not create new cluster", "full")
        assert refused(schedd.sendFile(sending, sent_cluster, sent_proc, "in", 0, b"x" * 200_000), "space")
        assert refused(schedd.commitTransaction(sending), "'in'", "incomplete")  # the failed chunk is missing
        answer = urllib_json(gateway, "send", {"staging": staging, "name": "f", "offset": 0,
                                               "data": base64.b64encode(b"y" * 200_000).decode()})
        assert answer["status"]["code"] == "FAIL" and "space" in answer["status"]["text"]
        answer = urllib_json(gateway, "submit", {"ad": job_ad(), "staging": staging})
        assert answer["status"]["code"] == "FAIL" and "'f'" in answer["status"]["text"]
        assert urllib_json(gateway, "submit", {"ad": job_ad()})["status"]["code"] == "FAIL"
        assert schedd.getJobAds(NULL, f"ClusterId == {cluster}").classAdArray is None
        assert "Traceback" not in gateway.log()

        os.unlink(filler)  # room again: the queue works, and what failed left nothing behind
        assert schedd.abortTransaction(sending).code == "SUCCESS"
        later, _ = submit_job(schedd)
        assert later > cluster > first
        gateway.restart()
        assert schedd.getJobAds(NULL, f"ClusterId == {cluster}").classAdArray is None
        assert len(schedd.getJobAds(NULL, f"ClusterId == {first} || ClusterId == {later}").classAdArray.item) == 2
    finally:
        gateway.stop()


def urllib_json(gateway, operation: str, params: dict) -> dict:
    request = urllib.request.Request(gateway.url + f"submission/json/{operation}", json.dumps(params).encode())
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


@contextmanager
def read_only(*directories: Path):
    """The directories made read-only for a while, by read-only bind mounts over them (skips where mount fails)."""
    mounted = []
    try:
        for directory in directories:
            for options in (["--bind"], ["-o", "remount,bind,ro"]):
                result = subprocess.run(["mount", *options, str(directory), str(directory)], capture_output=True,
                                        text=True)
                if result.returncode != 0:
                    pytest.skip(f"cannot bind-mount {directory} read-only here: {result.stderr.strip()}")
                if options == ["--bind"]:
                    mounted.append(directory)
        yield
    finally:
        for directory in reversed(mounted):
            subprocess.run(["umount", str(directory)], check=False)


def test_an_unwritable_spool_answers_fail_statuses_until_it_is_writable_again(start_gateway):
    gateway = start_gateway(QUEUE_ONLY)
    schedd = zeep.Client(gateway.url + "condorSchedd.wsdl").service
    first, _ = submit_job(schedd)
    txn = begin(schedd)
    cluster, proc = new_job(schedd, txn)
    schedd.declareFile(txn, cluster, proc, "in", 3, "NOHASH", NULL)
    staging = urllib_json(gateway, "create", {})["id"]
    with read_only(gateway.state_dir / "spool", gateway.state_dir / "staging"):
        assert refused(schedd.sendFile(txn, cluster, proc, "in", 0, b"abc"), "Read-only")
        assert refused(schedd.declareFile(txn, cluster, proc, "more", 1, "NOHASH", NULL), "Read-only")
        assert refused(schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true")), "'in'", "incomplete")
        other = begin(schedd)  # (a job gets its spool at its first file, or when it starts: not at its commit)
        other_cluster, other_proc = new_job(schedd, other)
        assert status(schedd.submit(other, other_cluster, other_proc, ad(Cmd="/bin/true")))[0] == "SUCCESS"
        assert schedd.commitTransaction(other).code == "SUCCESS"
        answer = urllib_json(gateway, "send", {"staging": staging, "name": "f", "offset": 0, "data": "eA=="})
        assert answer["status"]["code"] == "FAIL" and "Read-only" in answer["status"]["text"]
    assert schedd.sendFile(txn, cluster, proc, "in", 0, b"abc").code == "SUCCESS"
    assert status(schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true")))[0] == "SUCCESS"
    assert schedd.commitTransaction(txn).code == "SUCCESS"
    assert cluster > first and schedd.getFile(NULL, cluster, proc, "in", 0, 3).data == b"abc"
    assert "Traceback" not in gateway.log()
