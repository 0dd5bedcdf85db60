"""The simplified submission API (QMF/Aviary-like): zeep against the SOAP form, plain HTTP against the JSON form."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import pwd
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import zeep
from lxml import etree
from twisted.python.failure import Failure

from backends.interface import Capability
from birdbath_client import cli
from gateway.core.auth import AccessPolicy, Caller, HostList
from gateway.core.submissions import ApiError, SubmissionService, SubmissionSettings, natural_order
from tests.accounts import UserAccount, run_as
from tests.conftest import ROOT, module_gateway
from tests.test_execution import RUNNER, process_group, wait_until
from tests.test_wsdl import first_difference, shape

CONFIG = RUNNER + "[submission]\nstaging_lifetime = 2\n"


gateway = module_gateway(CONFIG)


@pytest.fixture(scope="module")
def api(gateway):
    return zeep.Client(gateway.url + "submission?wsdl").service


def call(gateway, operation: str, **params) -> dict:
    request = urllib.request.Request(gateway.url + f"submission/json/{operation}", json.dumps(params).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.headers["Content-Type"] == "application/json"
        return json.loads(response.read())


def ok(answer) -> None:
    status = answer["status"] if isinstance(answer, dict) else answer.status
    code = status["code"] if isinstance(status, dict) else status.code
    assert code == "OK", answer


def job_of(full_id: str) -> str:
    return full_id.rsplit("#", 1)[1]


def status_of(gateway, job: str) -> int:
    return int(call(gateway, "getJobAd", id=job)["ad"]["JobStatus"]["VALUE"])


def test_the_blogs_minimal_vanilla_job_over_json(gateway, tmp_path):
    ad = {"Cmd": {"TYPE": 3, "VALUE": "/bin/sleep"}, "Args": {"TYPE": 3, "VALUE": "60"},
          "Requirements": {"TYPE": 0, "VALUE": "TRUE"}, "JobUniverse": {"TYPE": 1, "VALUE": "5"},
          "Iwd": {"TYPE": 3, "VALUE": str(tmp_path)}, "Owner": {"TYPE": 3, "VALUE": __import__("getpass").getuser()}}
    answer = call(gateway, "submit", ad=ad)
    ok(answer)
    schedd, job = answer["id"].rsplit("#", 1)
    assert schedd and job.endswith(".0")
    found = call(gateway, "getJobAd", id=answer["id"])["ad"]
    assert found["Cmd"] == {"TYPE": 3, "VALUE": "/bin/sleep"} and found["Requirements"]["TYPE"] == 0
    assert found["Submission"] == {"TYPE": 3, "VALUE": f"{schedd}#{job.split('.')[0]}"}
    assert found["ShouldTransferFiles"]["VALUE"] == "NO"
    summaries = call(gateway, "getJobSummaries", ids=[job])["jobs"]
    assert summaries[0]["id"] == job and summaries[0]["ad"]["Cmd"]["VALUE"] == "/bin/sleep"
    ok(call(gateway, "remove", id=job, reason="done"))


def test_native_json_values_and_expressions_that_stay_expressions(gateway, tmp_path):
    answer = call(gateway, "submit", ad={"Cmd": "/bin/true", "Requirements": {"TYPE": 0, "VALUE": "Memory < 0"},
                                         "Iwd": str(tmp_path), "Count": 4, "Ratio": 0.5, "Flag": True,
                                         "Rule": {"TYPE": 0, "VALUE": "Count * 2"}})
    ad = call(gateway, "getJobAd", id=answer["id"])["ad"]
    assert ad["Count"] == {"TYPE": 1, "VALUE": "4"} and ad["Ratio"]["TYPE"] == 2
    assert ad["Rule"] == {"TYPE": 0, "VALUE": "Count * 2"}  # the text, not its value 8
    assert ad["Flag"] == {"TYPE": 0, "VALUE": "TRUE"}  # booleans travel as expressions, as in QMF


def test_soap_with_typed_attributes(api, gateway, tmp_path):
    ad = [{"name": "Cmd", "type": "STRING", "value": "/bin/true"},
          {"name": "Requirements", "type": "EXPR", "value": "TARGET.Memory < 0"},
          {"name": "Iwd", "type": "STRING", "value": str(tmp_path)},
          {"name": "Happy", "type": "BOOLEAN", "value": "TRUE"},
          {"name": "Submission", "type": "STRING", "value": "soap-batch"}]
    answer = api.submit({"Attribute": ad}, None)
    assert answer.status.code == "OK"
    got = {a.name: (a.type, a.value) for a in api.getJobAd(answer.id).ad.Attribute}
    assert got["Requirements"] == ("EXPR", "TARGET.Memory < 0") and got["Happy"] == ("BOOLEAN", "TRUE")
    (submission,) = api.getSubmissions("soap-batch").submissions.SubmissionSummary
    assert submission.name == "soap-batch" and submission.idle == 1 and submission.owner
    assert api.hold(job_of(answer.id), "pause").code == "OK"  # zeep unwraps a one-field answer
    assert api.getSubmissions("soap-batch").submissions.SubmissionSummary[0].held == 1


def test_create_send_submit_and_fetch_the_output(gateway, tmp_path):
    staging = call(gateway, "create", submission="staged")["id"]
    program = b"#!/bin/sh\ncat data.bin data.bin > twice.bin\necho done\n"
    data = bytes(range(256)) * 1000
    for name, content in (("run.sh", program), ("data.bin", data)):
        for offset in range(0, len(content), 100_000):
            chunk = content[offset:offset + 100_000]
            last = offset + 100_000 >= len(content)
            answer = call(gateway, "send", staging=staging, name=name, offset=offset,
                          data=base64.b64encode(chunk).decode(), md5=hashlib.md5(content).hexdigest() if last else None)
            ok(answer)
        assert answer["size"] == len(content)
    answer = call(gateway, "submit", ad={"Cmd": "run.sh", "Requirements": {"TYPE": 0, "VALUE": "TRUE"},
                                         "Out": "job.out"}, staging=staging)
    ok(answer)
    wait_until(lambda: status_of(gateway, answer["id"]) == 4, timeout=30)
    fetched = call(gateway, "fetch", id=answer["id"], file="twice.bin", start=0, end=10_000_000)
    ok(fetched)
    assert base64.b64decode(fetched["data"]) == data * 2
    assert base64.b64decode(call(gateway, "fetch", id=answer["id"], file="OUT", start=0, end=100)["data"]) == b"done\n"
    assert base64.b64decode(call(gateway, "fetch", id=answer["id"], file="job.out", start=-3, end=0)["data"]) == b"ne\n"
    (submission,) = call(gateway, "getSubmissions", name="staged")["submissions"]
    assert submission["completed"] == 1


def test_one_staging_area_feeds_several_jobs(api, gateway):
    staging = api.create("shared-input").id
    assert api.send(staging, "in.txt", 0, b"shared\n", None).status.code == "OK"
    ads = [[{"name": "Cmd", "type": "STRING", "value": "/bin/cat"}, {"name": "In", "type": "STRING", "value": "in.txt"},
            {"name": "Out", "type": "STRING", "value": "out.txt"},
            {"name": "Requirements", "type": "EXPR", "value": "TRUE"}] for _ in range(2)]
    ids = [api.submit({"Attribute": ad}, staging).id for ad in ads]
    for job in ids:
        wait_until(lambda job=job: status_of(gateway, job) == 4, timeout=30)
        assert api.fetch(job, "out.txt", 0, 100).data == b"shared\n"
    (submission,) = api.getSubmissions("shared-input").submissions.SubmissionSummary
    assert submission.completed == 2
    jobs = api.getSubmissionJobs("shared-input").jobs.JobSummary
    assert sorted(job.id for job in jobs) == sorted(job_of(i) for i in ids)


def test_submission_counts_follow_the_jobs(gateway, tmp_path):
    base = {"Iwd": str(tmp_path), "Submission": "counted", "Requirements": {"TYPE": 0, "VALUE": "TRUE"}}
    idle = call(gateway, "submit", ad={**base, "Cmd": "/bin/true", "Requirements": {"TYPE": 0, "VALUE": "FALSE"}})
    running = call(gateway, "submit", ad={**base, "Cmd": "/bin/sleep", "Args": "30"})
    done = call(gateway, "submit", ad={**base, "Cmd": "/bin/true",
                                       "LeaveJobInQueue": {"TYPE": 0, "VALUE": "TRUE"}})
    wait_until(lambda: status_of(gateway, running["id"]) == 2 and status_of(gateway, done["id"]) == 4)
    ok(call(gateway, "hold", id=idle["id"], reason="held for the count"))
    (summary,) = call(gateway, "getSubmissions", name="counted")["submissions"]
    assert (summary["held"], summary["running"], summary["completed"], summary["idle"]) == (1, 1, 1, 0)
    ok(call(gateway, "suspend", id=running["id"]))
    assert call(gateway, "getSubmissions", name="counted")["submissions"][0]["suspended"] == 1
    ok(call(gateway, "continue", id=running["id"]))
    assert status_of(gateway, running["id"]) == 2
    ok(call(gateway, "remove", id=running["id"], reason="enough"))
    wait_until(lambda: call(gateway, "getSubmissions", name="counted")["submissions"][0]["removed"] == 1)
    jobs = call(gateway, "getSubmissionJobs", name="counted")["jobs"]
    states = [int(job["ad"]["JobStatus"]["VALUE"]) for job in jobs]
    assert states == sorted(states, key=[1, 2, 3, 4, 5, 6, 7].index)


def test_submissions_are_listed_in_natural_order(gateway, tmp_path):
    """Numbers inside names compare as numbers: a schedd's ``#2`` before its ``#10``, ``run-9`` before ``run-10``."""
    base = {"Iwd": str(tmp_path), "Cmd": "/bin/true", "Requirements": {"TYPE": 0, "VALUE": "FALSE"}}
    for name in ("natural-run-10", "natural-run-9", "natural-run-100", "natural-run-9b"):
        ok(call(gateway, "submit", ad={**base, "Submission": name}))
    for _ in range(11):  # unnamed: one submission per cluster, so ids on both sides of 10 are listed
        ok(call(gateway, "submit", ad=base))
    names = [submission["name"] for submission in call(gateway, "getSubmissions")["submissions"]]
    assert [name for name in names if name.startswith("natural-")] == [
        "natural-run-9", "natural-run-9b", "natural-run-10", "natural-run-100"]
    clusters = [int(name.rsplit("#", 1)[1]) for name in names if "#" in name]
    assert len(clusters) >= 11 and clusters == sorted(clusters) and clusters[-1] >= 10


@pytest.mark.parametrize(("names", "order"), [
    (["s#10", "s#2", "s#1", "s#11"], ["s#1", "s#2", "s#10", "s#11"]),
    (["b", "a10", "a9", "a", "10", "9"], ["9", "10", "a", "a9", "a10", "b"]),
    (["x007", "x7a", "x6", "", "x"], ["", "x", "x6", "x007", "x7a"]),
])
def test_natural_order_compares_runs_of_digits_as_numbers(names, order):
    assert sorted(names, key=natural_order) == order


def job_states(pgid: int) -> set[str]:
    """The states of a job's processes in a process group (its launcher, which stays awake, left out)."""
    states = set()
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"launcher.py" not in (proc / "cmdline").read_bytes():
                state, _, group = (proc / "stat").read_text().rsplit(")", 1)[1].split()[:3]
                if int(group) == pgid and state not in "ZX":
                    states.add(state)
        except (OSError, ValueError):
            continue
    return states


def test_suspend_stops_the_process_and_continue_resumes_it(gateway, tmp_path):
    ticks, pid = tmp_path / "ticks", tmp_path / "pid"
    answer = call(gateway, "submit", ad={"Cmd": "/bin/sh", "Arguments": f"-c 'echo $$ > {pid}; "
                                                                        f"while true; do echo x >> {ticks}; "
                                                                        f"sleep 0.05; done'",
                                         "Iwd": str(tmp_path), "Requirements": {"TYPE": 0, "VALUE": "TRUE"}})
    wait_until(lambda: ticks.exists() and ticks.stat().st_size > 10)
    group = process_group(int(pid.read_text()))
    ok(call(gateway, "suspend", id=answer["id"], reason="breathe"))
    assert status_of(gateway, answer["id"]) == 7
    # every process of the job (the shell, its sleep) is frozen (D in the cgroup freezer, T when stopped without
    # one): nothing can write any more; its launcher stays awake to thaw it
    wait_until(lambda: job_states(group) and job_states(group) <= {"T", "D"}, timeout=5)
    frozen = ticks.stat().st_size
    time.sleep(0.3)
    assert ticks.stat().st_size == frozen
    ok(call(gateway, "continue", id=answer["id"]))
    wait_until(lambda: ticks.stat().st_size > frozen)
    ad = call(gateway, "getJobAd", id=answer["id"])["ad"]
    assert ad["JobStatus"]["VALUE"] == "2" and ad["TotalSuspensions"]["VALUE"] == "1"
    ok(call(gateway, "remove", id=answer["id"]))


def test_set_attribute_typed_and_raw(api, gateway, tmp_path):
    job = job_of(call(gateway, "submit", ad={"Cmd": "/bin/true", "Iwd": str(tmp_path),
                                             "Requirements": {"TYPE": 0, "VALUE": "FALSE"}})["id"])
    ok(call(gateway, "setAttribute", id=job, name="Recipe", type="STRING", value="secret sauce"))
    ok(call(gateway, "setAttribute", id=job, name="Limit", value="2 * 21"))
    ok(call(gateway, "setAttribute", id=job, name="Quoted", value='"raw string"'))
    ad = call(gateway, "getJobAd", id=job)["ad"]
    assert ad["Recipe"] == {"TYPE": 3, "VALUE": "secret sauce"} and ad["Limit"] == {"TYPE": 0, "VALUE": "2 * 21"}
    assert ad["Quoted"] == {"TYPE": 3, "VALUE": "raw string"}
    refused = call(gateway, "setAttribute", id=job, name="submission", value='"other"')
    assert refused["status"] == {"code": "FAIL", "text": "Changes to submission name not allowed"}


@pytest.mark.parametrize("operation, params, code, words", [
    ("getJobAd", {"id": "999999.0"}, "NO_MATCH", "Unknown job"),
    ("hold", {"id": "999999.0"}, "NO_MATCH", "999999.0"),
    ("hold", {"id": "not-an-id"}, "FAIL", "Invalid Id"),
    ("release", {"id": "0.0"}, "FAIL", "Invalid Id"),
    ("submit", {"ad": {"Cmd": "/bin/true"}}, "FAIL", "missing required attributes: Requirements, Iwd"),
    ("submit", {"ad": {"Cmd": "/bin/true", "Requirements": True, "Iwd": "/tmp", "true": 1}}, "FAIL",
     "reserved ClassAd keyword"),
    ("submit", {"ad": {"Cmd": "/bin/true", "Requirements": True, "Iwd": "/tmp", "bad-name": 1}}, "FAIL",
     "Invalid attribute name"),
    ("submit", {"ad": {"Cmd": "/bin/true", "Requirements": True, "Iwd": "/tmp", "Owner": 7}}, "FAIL",
     "Owner refused: Owner must be a string"),
    ("setAttribute", {"id": "999999.0", "name": "Owner", "type": "STRING", "value": "root"}, "FAIL",
     "Owner is set by the schedd and cannot be changed"),
    ("submit", {"ad": {"Cmd": "/bin/true", "Requirements": {"TYPE": 0, "VALUE": "(("}, "Iwd": "/tmp"}}, "FAIL",
     "Failed to parse job ad attribute Requirements"),
    ("submit", {"ad": {"Cmd": "/bin/true", "Requirements": True}, "staging": "nope"}, "NO_MATCH", "staging area"),
    ("send", {"staging": "nope", "name": "x", "offset": 0, "data": ""}, "NO_MATCH", "staging area"),
    ("getSubmissions", {"name": "no-such-submission"}, "NO_MATCH", "Unable to locate submission"),
    ("getSubmissionJobs", {"name": "no-such-submission"}, "NO_MATCH", "Unable to locate submission"),
    ("getHistory", {"constraint": "Owner =="}, "FAIL", "cannot parse the constraint 'Owner =='"),
    ("getHistory", {"limit": -1}, "FAIL", "limit must not be negative"),
    ("setAttribute", {"id": "1.0", "name": "A", "type": "TUPLE", "value": "1"}, "FAIL",
     "Failed to parse job ad attribute A: unknown type 'TUPLE'; the types are EXPR, INTEGER, FLOAT, STRING, BOOLEAN"),
    ("submit", {"ad": [{"name": "A", "type": "TUPLE", "value": "1"}]}, "FAIL", "attribute A: unknown type 'TUPLE'"),
    ("submit", {"ad": {"A": {"TYPE": 9, "VALUE": "x"}}}, "FAIL", "attribute A: unknown type 'TYPE 9'"),
    ("submit", {"ad": {"A": {"TYPE": "STRING", "VALUE": "x"}}}, "FAIL", "attribute A: unknown type 'TYPE \"STRING\"'"),
])
def test_errors_are_statuses_not_faults(gateway, operation, params, code, words):
    answer = call(gateway, operation, **params)
    assert answer["status"]["code"] == code and words in answer["status"]["text"], answer


def history_ids(gateway, **params) -> list[str]:
    answer = call(gateway, "getHistory", **params)
    ok(answer)
    return [job["id"] for job in answer["jobs"]]


def test_get_history_lists_the_jobs_that_left_the_queue_newest_first(api, gateway, tmp_path):
    tag = f"history-{uuid.uuid4().hex[:8]}"
    mine = f'Tag == "{tag}"'
    base = {"Iwd": str(tmp_path), "Tag": tag, "Requirements": {"TYPE": 0, "VALUE": "TRUE"}}
    jobs = []
    for code in (0, 1, 2):  # one after the other, so they leave the queue in this order
        job = job_of(call(gateway, "submit", ad={**base, "Cmd": "/bin/sh", "Arguments": f"-c 'exit {code}'"})["id"])
        wait_until(lambda job=job: job in history_ids(gateway, constraint=mine), timeout=30)
        jobs.append(job)
    live = job_of(call(gateway, "submit", ad={**base, "Cmd": "/bin/true",
                                              "Requirements": {"TYPE": 0, "VALUE": "FALSE"}})["id"])
    newest_first = jobs[::-1]

    answer = call(gateway, "getHistory", constraint=mine)
    ok(answer)
    assert [job["id"] for job in answer["jobs"]] == newest_first and live not in str(answer)
    newest = answer["jobs"][0]["ad"]
    assert newest["ExitCode"] == {"TYPE": 1, "VALUE": "2"} and newest["Tag"] == {"TYPE": 3, "VALUE": tag}
    assert newest["JobStatus"]["VALUE"] == "4" and "MyType" not in newest  # the whole ad, as getJobAd has it
    assert history_ids(gateway, constraint=mine, limit=2) == newest_first[:2]
    assert history_ids(gateway, constraint=mine, limit=0) == []
    assert history_ids(gateway, constraint=f"{mine} && ExitCode == 1") == [jobs[1]]
    assert history_ids(gateway, limit=1) == [jobs[2]]  # no constraint: the newest job of all
    assert live not in history_ids(gateway)

    soap = api.getHistory(mine, 2)
    assert soap.status.code == "OK"
    assert [job.id for job in soap.jobs.JobSummary] == newest_first[:2]
    typed = {a.name: (a.type, a.value) for a in soap.jobs.JobSummary[0].ad.Attribute}
    assert typed["ExitCode"] == ("INTEGER", "2") and typed["Tag"] == ("STRING", tag)
    assert [job.id for job in api.getHistory(f"{mine} && ExitCode == 0", None).jobs.JobSummary] == [jobs[0]]
    bad = api.getHistory("ExitCode ==", None)
    assert bad.status.code == "FAIL" and "cannot parse the constraint" in bad.status.text and bad.jobs is None
    assert api.getHistory(mine, -1).status.code == "FAIL"
    ok(call(gateway, "remove", id=live))


class _NoHistory:
    """A backend without the optional history (its queue is empty)."""

    capabilities = frozenset()

    def query(self, constraint):
        return []


class _History(_NoHistory):
    capabilities = frozenset({Capability.HISTORY})

    def __init__(self, ads):
        self.ads = ads
        self.constraints = []

    def history(self, constraint, limit=None, *, budget=None):
        self.constraints.append(constraint)
        return [ad for ad in self.ads if constraint is None or constraint.eval(ad) is True][:limit]


def _service(backend, tmp_path, policy=None) -> SubmissionService:
    from twisted.internet.defer import succeed
    from twisted.internet.task import Clock

    return SubmissionService(backend, lambda function, *args: succeed(function(*args)), policy or AccessPolicy(),
                             Clock(), SubmissionSettings("here", tmp_path / "staging"))


def _history(service, *args):
    from twisted.internet.defer import Deferred

    outcome = []
    Deferred.fromCoroutine(service.history(Caller("127.0.0.1"), *args)).addBoth(outcome.append)
    (result,) = outcome
    if isinstance(result, Failure):
        result.raiseException()
    return result


def test_history_is_ordered_by_when_jobs_left_and_needs_a_backend_history_and_read_permission(tmp_path):
    import classad2

    def ad(cluster, left):
        return classad2.parseOne(f"[ClusterId = {cluster}; ProcId = 0; JobStatus = 4; EnteredCurrentStatus = {left}]")

    # the backend lists the history by cluster, newest first; cluster 1 ran longest and left last
    backend = _History([ad(3, 100), ad(2, 100), ad(1, 200)])
    service = _service(backend, tmp_path)
    assert [str(ref) for ref, _ in _history(service, None, None)] == ["1.0", "3.0", "2.0"]
    assert [str(ref) for ref, _ in _history(service, "ClusterId > 1", 1)] == ["3.0"]
    assert str(backend.constraints[-1]) == "ClusterId > 1"
    with pytest.raises(ApiError, match="keeps no history"):
        _history(_service(_NoHistory(), tmp_path), None, None)
    refused = AccessPolicy(allow_read=HostList([]), allow_write=HostList([]))
    with pytest.raises(ApiError, match="Permission denied"):
        _history(_service(backend, tmp_path, refused), None, None)


def test_fetch_is_limited_to_the_jobs_spool_and_checks_ranges(gateway, tmp_path):
    staging = call(gateway, "create")["id"]
    ok(call(gateway, "send", staging=staging, name="o.txt", offset=0, data=base64.b64encode(b"0123456789").decode()))
    job = call(gateway, "submit", staging=staging,
               ad={"Cmd": "/bin/true", "Out": "o.txt", "Requirements": {"TYPE": 0, "VALUE": "FALSE"}})["id"]
    for file in ("/etc/passwd", "../../etc/passwd", "queue.sqlite3"):
        assert call(gateway, "fetch", id=job, file=file, start=0, end=10)["status"]["code"] == "FAIL"
    bad = call(gateway, "fetch", id=job, file="OUT", start=5, end=2)
    assert bad["status"]["code"] == "INVALID_OFFSET"
    assert base64.b64decode(call(gateway, "fetch", id=job, file="o.txt", start=-4, end=-1)["data"]) == b"678"
    assert base64.b64decode(call(gateway, "fetch", id=job, file="OUT", start=-100, end=0)["data"]) == b"0123456789"
    (tmp_path / "elsewhere.txt").write_text("beside the job")  # an output in its Iwd: read with the owner's rights
    outside = call(gateway, "submit", ad={"Cmd": "/bin/true", "Iwd": str(tmp_path), "Out": "elsewhere.txt",
                                          "Requirements": {"TYPE": 0, "VALUE": "FALSE"}})["id"]
    fetched = call(gateway, "fetch", id=outside, file="OUT", start=0, end=100)
    if os.geteuid() == 0:  # the gateway runs jobs as their owners: root's job, read as root
        assert base64.b64decode(fetched["data"]) == b"beside the job"
    else:
        assert fetched["status"]["code"] == "FAIL" and "owner's rights" in fetched["status"]["text"]
    (tmp_path / "link.txt").symlink_to(tmp_path / "elsewhere.txt")  # never through a link in its place
    linked = call(gateway, "submit", ad={"Cmd": "/bin/true", "Iwd": str(tmp_path), "Out": "link.txt",
                                         "Requirements": {"TYPE": 0, "VALUE": "FALSE"}})["id"]
    refused = call(gateway, "fetch", id=linked, file="OUT", start=0, end=100)
    assert refused["status"]["code"] == "FAIL" and "data" not in refused


def test_unused_staging_areas_expire_and_abort_cleans_up(gateway):
    staging = call(gateway, "create")["id"]
    ok(call(gateway, "send", staging=staging, name="f", offset=0, data=base64.b64encode(b"x").decode()))
    area = gateway.state_dir / "staging" / staging
    assert area.exists()
    wait_until(lambda: not area.exists(), timeout=10)
    assert call(gateway, "send", staging=staging, name="f", offset=0, data="")["status"]["code"] == "NO_MATCH"
    other = call(gateway, "create")["id"]
    ok(call(gateway, "abort", staging=other))
    assert call(gateway, "abort", staging=other)["status"]["code"] == "NO_MATCH"


def test_a_wrong_md5_is_refused(gateway):
    staging = call(gateway, "create")["id"]
    answer = call(gateway, "send", staging=staging, name="f", offset=0, data=base64.b64encode(b"abc").decode(),
                  md5=hashlib.md5(b"xyz").hexdigest())
    assert answer["status"]["code"] == "FAIL" and "does not match the MD5" in answer["status"]["text"]


def test_malformed_json_is_a_400(gateway):
    for body in (b"{not json", b"[1, 2]", json.dumps({"ad": {"A": {"TYPE": 3, "VALUE": "x"}, "B": [1]}}).encode()):
        request = urllib.request.Request(gateway.url + "submission/json/submit", body)
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(request, timeout=30)
        assert error.value.code == 400


def test_the_wsdl_file_is_what_the_service_definition_generates(gateway):
    from gateway.submission.service import generated_wsdl

    ours = etree.parse(str(ROOT / "wsdl" / "submission.wsdl")).getroot()
    assert first_difference(shape(etree.fromstring(generated_wsdl())), shape(ours)) is None
    with urllib.request.urlopen(gateway.url + "submission?wsdl") as response:
        served = etree.fromstring(response.read())
    assert first_difference(shape(served), shape(ours)) is None


def soap_post(gateway, inner: str) -> tuple[int, etree._Element]:
    """POST one operation's wrapper (``inner``, with prefix ``c`` for the API's namespace) to /submission."""
    body = ('<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/" xmlns:c="urn:birdbath:submission">'
            f'<s:Body>{inner}</s:Body></s:Envelope>').encode()
    request = urllib.request.Request(gateway.url + "submission", body, {"Content-Type": "text/xml"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, etree.fromstring(response.read())
    except urllib.error.HTTPError as error:
        return error.code, etree.fromstring(error.read())


def soap_status(answer: etree._Element) -> tuple[str | None, str | None]:
    code = answer.find(".//{urn:birdbath:submission}code")
    text = answer.find(".//{urn:birdbath:submission}text")
    return (None if code is None else code.text), (None if text is None else text.text)


def test_an_attribute_type_outside_the_enumeration_is_a_fail_status_over_soap(gateway, tmp_path):
    item = "<c:Attribute><c:name>{}</c:name><c:type>{}</c:type><c:value>{}</c:value></c:Attribute>"
    ad = "".join(item.format(*a) for a in (("Cmd", "STRING", "/bin/true"), ("Iwd", "STRING", tmp_path),
                                            ("Requirements", "EXPR", "FALSE"), ("Shape", "TUPLE", "(1, 2)")))
    http, answer = soap_post(gateway, f"<c:submit><c:ad>{ad}</c:ad></c:submit>")
    code, text = soap_status(answer)
    assert http == 200 and code == "FAIL" and text.startswith("Failed to parse job ad attribute Shape: unknown type "
                                                              "'TUPLE'"), etree.tostring(answer)
    good = ad.replace("TUPLE", "STRING")
    http, answer = soap_post(gateway, f"<c:submit><c:ad>{good}</c:ad></c:submit>")
    assert soap_status(answer)[0] == "OK"
    job = answer.find(".//{urn:birdbath:submission}id").text
    http, answer = soap_post(gateway, f"<c:setAttribute><c:id>{job}</c:id><c:name>A</c:name><c:type>TUPLE</c:type>"
                                      f"<c:value>1</c:value></c:setAttribute>")
    assert http == 200 and soap_status(answer) == ("FAIL", "Failed to parse job ad attribute A: unknown type "
                                                           "'TUPLE'; the types are EXPR, INTEGER, FLOAT, STRING, "
                                                           "BOOLEAN (in a JSON typed map TYPE 0 to 3)")


def test_an_unknown_json_operation_is_a_404_listing_the_operations(gateway):
    from gateway.submission.service import OPERATIONS

    for operation in ("submitJobz", "", "submit/extra"):
        request = urllib.request.Request(gateway.url + f"submission/json/{operation}", b"{}")
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(request, timeout=30)
        assert error.value.code == 404 and error.value.headers["Content-Type"] == "application/json"
        status = json.loads(error.value.read())["status"]
        assert status["code"] == "FAIL" and status["text"].startswith(f"unknown operation {operation!r}; the operations"
                                                                      f" are submit, create, send, abort")
        assert all(name in status["text"] for name in OPERATIONS)


def test_every_operation_in_one_tour(gateway, tmp_path):
    """An example of each operation of the API answering OK, over JSON: the list below must name them all."""
    from gateway.submission.service import OPERATIONS

    done = []

    def step(operation: str, **params) -> dict:
        answer = call(gateway, operation, **params)
        ok(answer)
        done.append(operation)
        return answer

    spare = step("create")["id"]
    step("abort", staging=spare)
    staging = step("create", submission="tour")["id"]
    step("send", staging=staging, name="in.txt", offset=0, data=base64.b64encode(b"tour\n").decode())
    copy = step("submit", staging=staging, ad={"Cmd": "/bin/cat", "In": "in.txt", "Out": "out.txt",
                                               "Requirements": {"TYPE": 0, "VALUE": "TRUE"}})["id"]
    job = step("submit", ad={"Cmd": "/bin/sleep", "Args": "60", "Iwd": str(tmp_path), "Submission": "tour",
                             "Requirements": {"TYPE": 0, "VALUE": "TRUE"}})["id"]
    wait_until(lambda: status_of(gateway, job) == 2)
    step("suspend", id=job, reason="a pause")
    step("continue", id=job)
    step("hold", id=job, reason="a longer pause")
    step("release", id=job, reason="go on")
    step("setAttribute", id=job, name="Note", type="STRING", value="toured")
    assert step("getJobAd", id=job)["ad"]["Note"] == {"TYPE": 3, "VALUE": "toured"}
    assert [j["id"] for j in step("getJobSummaries", ids=[job])["jobs"]] == [job_of(job)]
    assert step("getSubmissions", name="tour")["submissions"][0]["name"] == "tour"
    assert sorted(j["id"] for j in step("getSubmissionJobs", name="tour")["jobs"]) == sorted(map(job_of, (copy, job)))
    wait_until(lambda: status_of(gateway, copy) == 4)
    assert base64.b64decode(step("fetch", id=copy, file="OUT", start=0, end=100)["data"]) == b"tour\n"
    step("remove", id=job, reason="the end")
    wait_until(lambda: job_of(job) in history_ids(gateway, constraint='Submission == "tour"'))
    assert [j["id"] for j in step("getHistory", constraint=f'ClusterId == {job_of(job).split(".")[0]}')["jobs"]] \
        == [job_of(job)]
    assert sorted(set(done)) == sorted(OPERATIONS)


@pytest.mark.parametrize("kind, text, stored", [
    ("INTEGER", "7", {"TYPE": 1, "VALUE": "7"}),
    ("INTEGER", " -12 ", {"TYPE": 1, "VALUE": "-12"}),
    ("FLOAT", "7", {"TYPE": 2, "VALUE": "7.000000"}),  # an integer text is stored as a real
    ("FLOAT", "1.0E3", {"TYPE": 2, "VALUE": "1000.000000"}),
    ("FLOAT", "-0.25", {"TYPE": 2, "VALUE": "-0.250000"}),
    ("BOOLEAN", "true", {"TYPE": 0, "VALUE": "TRUE"}),
    ("BOOLEAN", "FALSE", {"TYPE": 0, "VALUE": "FALSE"}),
    ("STRING", "7", {"TYPE": 3, "VALUE": "7"}),
    ("STRING", "a == b", {"TYPE": 3, "VALUE": "a == b"}),
    ("STRING", '"quoted"', {"TYPE": 3, "VALUE": '"quoted"'}),
    ("EXPR", "Memory * 2", {"TYPE": 0, "VALUE": "Memory * 2"}),
    ("EXPR", "7", {"TYPE": 1, "VALUE": "7"}),
])
def test_typed_values_are_stored_as_their_type(api, gateway, tmp_path, kind, text, stored):
    code = {"EXPR": 0, "INTEGER": 1, "FLOAT": 2, "STRING": 3}.get(kind)
    value = {"TYPE": code, "VALUE": text} if code is not None else {"TYPE": 0, "VALUE": text}
    if kind == "BOOLEAN":  # a typed map has no BOOLEAN code: the list form names it
        ad = [{"name": "Cmd", "type": "STRING", "value": "/bin/true"}, {"name": "Iwd", "type": "STRING",
              "value": str(tmp_path)}, {"name": "Requirements", "type": "EXPR", "value": "FALSE"},
              {"name": "Typed", "type": kind, "value": text}]
    else:
        ad = {"Cmd": "/bin/true", "Iwd": str(tmp_path), "Requirements": {"TYPE": 0, "VALUE": "FALSE"}, "Typed": value}
    job = call(gateway, "submit", ad=ad)["id"]
    assert call(gateway, "getJobAd", id=job)["ad"]["Typed"] == stored
    ok(call(gateway, "setAttribute", id=job, name="Later", type=kind, value=text))
    assert call(gateway, "getJobAd", id=job)["ad"]["Later"] == stored
    soap = {a.name: (a.type, a.value) for a in api.getJobAd(job).ad.Attribute}
    wire = "BOOLEAN" if kind == "BOOLEAN" else ("EXPR", "INTEGER", "FLOAT", "STRING")[stored["TYPE"]]
    assert soap["Typed"] == soap["Later"] == (wire, stored["VALUE"])
    assert api.setAttribute(job, "BySoap", kind, text).code == "OK"
    assert {a.name: a.value for a in api.getJobAd(job).ad.Attribute}["BySoap"] == stored["VALUE"]


@pytest.mark.parametrize("kind, text, reason", [
    ("INTEGER", "abc", "'abc' is not a ClassAd integer"),
    ("INTEGER", "1.5", "'1.5' is not a ClassAd integer"),
    ("INTEGER", "TRUE", "'TRUE' is not a ClassAd integer"),
    ("INTEGER", "1 + 1", "'1 + 1' is not a ClassAd integer"),
    ("INTEGER", "", "cannot parse ''"),
    ("INTEGER", str(2**64), "64 bits"),
    ("FLOAT", "seven", "'seven' is not a ClassAd real (or integer)"),
    ("FLOAT", "true", "'true' is not a ClassAd real (or integer)"),
    ("FLOAT", "NaN", "not a finite number"),
    ("BOOLEAN", "1", "'1' is not a ClassAd boolean (true or false)"),
    ("BOOLEAN", "yes", "'yes' is not a ClassAd boolean (true or false)"),
    ("EXPR", "((", "cannot parse '(('"),
])
def test_values_that_do_not_parse_as_their_type_are_refused_and_nothing_is_stored(api, gateway, tmp_path, kind,
                                                                                   text, reason):
    base = [{"name": "Cmd", "type": "STRING", "value": "/bin/true"}, {"name": "Iwd", "type": "STRING",
            "value": str(tmp_path)}, {"name": "Requirements", "type": "EXPR", "value": "FALSE"},
            {"name": "Note", "type": "STRING", "value": tmp_path.name}]
    expected = f"Failed to parse job ad attribute X as {kind}: "
    for answer in (call(gateway, "submit", ad=base + [{"name": "X", "type": kind, "value": text}]),
                   api.submit({"Attribute": base + [{"name": "X", "type": kind, "value": text}]}, None)):
        status = answer["status"] if isinstance(answer, dict) else {"code": answer.status.code,
                                                                   "text": answer.status.text}
        assert status["code"] == "FAIL" and status["text"].startswith(expected) and reason in status["text"], answer
    assert not [job for job in call(gateway, "getJobSummaries", ids=[])["jobs"]
                if call(gateway, "getJobAd", id=job["id"])["ad"].get("Note", {}).get("VALUE") == tmp_path.name]
    job = call(gateway, "submit", ad=base)["id"]
    for answer in (call(gateway, "setAttribute", id=job, name="X", type=kind, value=text)["status"],
                   api.setAttribute(job, "X", kind, text)):
        text_of = answer["text"] if isinstance(answer, dict) else answer.text
        assert text_of.startswith(expected) and reason in text_of
    assert "X" not in call(gateway, "getJobAd", id=job)["ad"]


def test_aviary_job_id_structures_are_job_ids_in_json_and_soap(gateway, tmp_path):
    full = call(gateway, "submit", ad={"Cmd": "/bin/true", "Iwd": str(tmp_path), "Out": "o.txt",
                                       "Requirements": {"TYPE": 0, "VALUE": "FALSE"}})["id"]
    schedd, job = full.rsplit("#", 1)
    aviary = {"job": job, "pool": "localhost", "scheduler": schedd,
              "submission": {"name": f"{schedd}#{job.split('.')[0]}", "owner": "someone"}}
    assert call(gateway, "getJobAd", id=aviary)["ad"]["ClusterId"]["VALUE"] == job.split(".")[0]
    ok(call(gateway, "setAttribute", id={"job": job}, name="Via", type="STRING", value="aviary"))
    assert [j["id"] for j in call(gateway, "getJobSummaries", ids=[aviary, {"job": job}])["jobs"]] == [job, job]
    ok(call(gateway, "hold", id=aviary, reason="by JobID"))
    assert status_of(gateway, job) == 5
    http, answer = soap_post(gateway, f"<c:release><c:id><job>{job}</job><pool>localhost</pool>"
                                      f"<scheduler>{schedd}</scheduler></c:id><c:reason>go</c:reason></c:release>")
    assert http == 200 and soap_status(answer) == ("OK", "OK")
    assert status_of(gateway, job) == 1
    http, answer = soap_post(gateway, f"<c:getJobSummaries><c:ids><c:string><c:job>{job}</c:job></c:string>"
                                      f"<c:string>{job}</c:string></c:ids></c:getJobSummaries>")
    assert [e.text for e in answer.iter("{urn:birdbath:submission}id")] == [job, job]
    for bad in ({"pool": "localhost"}, {"job": 7}):
        refused = call(gateway, "getJobAd", id=bad)["status"]
        assert refused["code"] == "FAIL" and refused["text"].startswith("Invalid Id 'JobID without a job")
    http, answer = soap_post(gateway, "<c:getJobAd><c:id><c:pool>localhost</c:pool></c:id></c:getJobAd>")
    code, text = soap_status(answer)
    assert http == 200 and code == "FAIL" and "expected cluster.proc, schedd#cluster.proc or a JobID" in text


def birdbath(gateway, *args: str) -> subprocess.CompletedProcess:
    """The ``birdbath`` command against this gateway, as the test's own user."""
    return subprocess.run([sys.executable, "-m", "birdbath_client.cli", "--url", gateway.url, *args],
                          capture_output=True, text=True, timeout=120, check=False)


def birdbath_as(user: str, gateway, *args: str) -> tuple[int, str]:
    """The ``birdbath`` command run as another real user (in a forked child: the interpreter is root's), its exit
    status and what it wrote on stderr."""
    entry = pwd.getpwnam(user)

    def work() -> bytes:
        errors = io.StringIO()
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            status = cli.main(["--url", gateway.url, *args])
        return f"{status}\n{errors.getvalue()}".encode()

    status, _, errors = run_as(UserAccount(user, entry.pw_uid, entry.pw_gid, ()), work).decode().partition("\n")
    return int(status), errors


def staged_job(gateway, tag: str) -> str:
    """A job submitted from a staging area, completed: ``cluster.proc``."""
    staging = call(gateway, "create", submission=tag)["id"]
    ok(call(gateway, "send", staging=staging, name="in.txt", offset=0, data=base64.b64encode(b"staged\n").decode()))
    answer = call(gateway, "submit", ad={"Cmd": "/bin/cat", "In": "in.txt", "Out": "out.txt",
                                         "Requirements": {"TYPE": 0, "VALUE": "TRUE"}}, staging=staging)
    ok(answer)
    wait_until(lambda: status_of(gateway, answer["id"]) == 4, timeout=30)
    return job_of(answer["id"])


def queued(gateway, job: str) -> bool:
    return birdbath(gateway, "q", job, "-af", "JobStatus").stdout.strip() != ""


def test_fetch_close_and_rm_let_a_completed_staged_job_leave_the_queue(gateway, tmp_path):
    fetched, removed = staged_job(gateway, "closed"), staged_job(gateway, "removed")
    cluster = fetched.split(".")[0]
    table = birdbath(gateway, "q", "-nobatch", fetched, removed)
    assert table.returncode == 0, table.stderr
    assert [line.split()[5] for line in table.stdout.splitlines()[1:3]] == ["C", "C"]  # condor_q's ST
    assert (f"2 completed job(s) kept in the queue for their output ({fetched} {removed}): 'birdbath fetch ID DIR "
            f"-close' or 'birdbath rm ID' lets one leave.") in table.stdout
    assert "1 completed job(s) kept in the queue" in birdbath(gateway, "q", cluster).stdout  # the batch view too
    # another user may neither remove nor close them
    status, errors = birdbath_as("nobody", gateway, "rm", removed)
    assert (status, "Not job owner" in errors) == (1, True), errors
    status, errors = birdbath_as("nobody", gateway, "rm", cluster)
    assert (status, "Not job owner" in errors) == (1, True), errors
    assert queued(gateway, fetched) and queued(gateway, removed)
    # the owner: fetch -close, then rm
    closed = birdbath(gateway, "fetch", fetched, str(tmp_path / "out"), "-close")
    assert closed.returncode == 0, closed.stderr
    assert (tmp_path / "out" / "out.txt").read_text() == "staged\n"
    assert not queued(gateway, fetched)
    gone = birdbath(gateway, "rm", removed)
    assert (gone.returncode, gone.stdout) == (0, f"Job {removed} was completed; it has left the queue.\n"), gone.stderr
    assert not queued(gateway, removed)
    history = birdbath(gateway, "history", fetched.split(".")[0], removed.split(".")[0], "-af", "JobStatus", "ExitCode")
    assert history.stdout.split() == ["4", "0", "4", "0"]  # completed, as they were
    again = birdbath(gateway, "rm", removed)
    assert (again.returncode, again.stderr) == (1, f"birdbath: Job {removed} not found.\n")
