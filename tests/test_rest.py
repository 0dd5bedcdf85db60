"""The REST face end to end: real gateways on loopback, every answer checked against the contract
(``tests/rest.py``), a refusal of each kind beside each happy path, and a real other user for the owner rules."""

from __future__ import annotations

import gzip
import http.client
import io
import json
import os
import pwd
import tarfile
import threading
import time

import pytest
import requests
from openapi_spec_validator import validate as validate_spec

from gateway.rest import tarfiles
from gateway.rest.contract import Contract
from gateway.rest.problems import Problem
from gateway.testing import QUEUE_ONLY, TestPki, module_gateway
from tests.accounts import UserAccount, run_as
from tests.rest import CONTRACT, Answer, call, check, tar_members, tar_of, wait_for
from tests.test_logging import wait_until

runner = module_gateway("[backends.local]\nslots = 2\n")

SCRIPT = "#!/bin/sh\necho \"read $(cat in.txt)\" > result.txt\necho \"args $*\"\n"
NEEDS_INPUT = ("executable = run.sh\narguments = one two\ntransfer_input_files = in.txt\n"
               "should_transfer_files = YES\noutput = out.txt\nerror = err.txt\nqueue\n")


def submit(port: int, description: str) -> dict:
    answer = call(port, "POST", "/api/v1/jobs", {"submit_file": description})
    assert answer.status == 201, answer.body
    return answer.json


def problem(answer: Answer, status: int, *words: str) -> dict:
    """The answer is a problem document of this status whose detail says each of ``words``."""
    assert answer.status == status, answer.body
    assert answer.headers["content-type"] == "application/problem+json"
    document = answer.json
    assert document["status"] == document["code"] == status
    for word in words:
        assert word in document["detail"], document
    return document


# -- the contract ------------------------------------------------------------------------------------
def test_the_contract_is_valid_openapi_3_1():
    assert CONTRACT.document["openapi"].startswith("3.1")
    validate_spec(CONTRACT.document)


def test_handlers_and_contract_must_name_the_same_operations():
    """RestApi checks at start-up that it serves exactly the documented operations (gateway.app builds it, so a
    gateway with a handler missing or undocumented does not start)."""
    document = json.loads(json.dumps(CONTRACT.document))
    document["paths"]["/api/v1/extra"] = {"get": {"operationId": "extraThing", "responses": {}}}
    with pytest.raises(RuntimeError, match="not served.*extraThing"):
        Contract(document).check(CONTRACT.operations)
    with pytest.raises(RuntimeError, match=r"undocumented \[.unknownThing.\]"):
        CONTRACT.check({"unknownThing"} | CONTRACT.operations)


def test_every_documented_route_is_served_and_nothing_else(gateway):
    job = submit(gateway.port, "executable = /bin/true\nqueue\n")["job_ids"][0]
    for path, methods in CONTRACT.document["paths"].items():
        concrete = path.replace("{job}", job)
        for method in methods:
            body = b"" if method in ("post", "patch", "put") else None
            answer = call(gateway.port, method.upper(), concrete, body)
            assert answer.status != 404 or "no resource" not in answer.json["detail"], (method, path)
            assert answer.status < 500, (method, path, answer.body)
    problem(call(gateway.port, "GET", "/api/v1/nothing"), 404, "no resource", "/openapi.json")
    refused = call(gateway.port, "PUT", "/api/v1/history", b"")
    assert refused.status == 405 and refused.headers["allow"] == "GET"
    served = call(gateway.port, "GET", "/openapi.json")
    assert served.json == CONTRACT.document


# -- submitting and listing ------------------------------------------------------------------------------
def test_a_submit_description_queues_every_statement_and_a_new_executable_starts_a_cluster(gateway):
    made = submit(gateway.port, "executable = /bin/sleep\narguments = 1$(Process)\nqueue 2\narguments = 99\nqueue\n"
                                "executable = /bin/echo\nqueue item in (a, b)\n")
    first = made["cluster_id"]
    assert made["job_ids"] == [f"{first}.0", f"{first}.1", f"{first}.2", f"{first + 1}.0", f"{first + 1}.1"]
    assert made["awaiting_input"] == []
    ad = call(gateway.port, "GET", f"/api/v1/jobs/{first}.1").json
    assert (ad["Cmd"], ad["Args"], ad["Owner"]) == ("/bin/sleep", "11", "root")
    assert ad["Iwd"].startswith(str(gateway.state_dir))  # the job's spool, never the gateway's directory
    cluster = call(gateway.port, "GET", f"/api/v1/jobs/{first}?projection=ClusterId,ProcId,Args").json
    assert [(job["ProcId"], job["Args"]) for job in cluster["jobs"]] == [(0, "10"), (1, "11"), (2, "99")]
    assert set(cluster["jobs"][0]) == {"ClusterId", "ProcId", "Args"}


def test_listing_takes_a_constraint_a_projection_a_limit_and_pages(gateway):
    first = submit(gateway.port, "executable = /bin/true\nqueue 5\n")["cluster_id"]
    wanted = f"/api/v1/jobs?constraint=ClusterId%3D%3D{first}&projection=ProcId,JobStatus&limit=2"
    procs, path = [], wanted
    while True:
        page = call(gateway.port, "GET", path).json
        procs += [job["ProcId"] for job in page["jobs"]]
        assert all(set(job) == {"ProcId", "JobStatus"} for job in page["jobs"])
        if not page["has_more"]:
            break
        path = f"{wanted}&page_token={page['next_page_token']}"
    assert procs == [0, 1, 2, 3, 4]
    every = call(gateway.port, "GET", f"/api/v1/jobs?constraint=ClusterId%3D%3D{first}&limit=*").json
    assert every["total_returned"] == 5 and not every["has_more"]
    # a constraint that does not parse matches nothing, as getJobAds answers it (and HTCondor did)
    assert call(gateway.port, "GET", "/api/v1/jobs?constraint=ClusterId%3D%3D").json["jobs"] == []
    problem(call(gateway.port, "GET", "/api/v1/jobs?limit=0"), 400, "limit")
    problem(call(gateway.port, "GET", "/api/v1/jobs?page_token=x"), 400, "page_token")


def test_a_classad_as_json_is_one_job_with_its_types_kept(gateway):
    ad = {"Cmd": "/bin/echo", "Arguments": "json", "JobPrio": 7, "RequestCpus": 1, "Rank": 0.5, "Hold": False,
          "Requirements": "/Expr(TARGET.Memory > 1)/", "Iwd": "/tmp"}
    made = call(gateway.port, "POST", "/api/v1/jobs", {"ad": ad})
    assert made.status == 201 and made.headers["location"] == f"/api/v1/jobs/{made.json['cluster_id']}"
    got = call(gateway.port, "GET", f"/api/v1/jobs/{made.json['job_ids'][0]}").json
    assert {name: got[name] for name in ad} == {**ad, "Requirements": "/Expr(TARGET.Memory > 1)/"}
    problem(call(gateway.port, "POST", "/api/v1/jobs", {"ad": {"Cmd": ["a"]}}), 400, "'Cmd'")
    problem(call(gateway.port, "POST", "/api/v1/jobs", {"ad": {"Cmd": "/bin/true", "Bad Name": 1}}), 400, "Bad Name")
    problem(call(gateway.port, "POST", "/api/v1/jobs", {"ad": {"Cmd": "/bin/true", "Req": "/Expr(1 +)/"}}), 400,
            "Req")


@pytest.mark.parametrize(("description", "words"), [
    ("include : /etc/passwd\nqueue\n", ("include is not allowed",)),
    ("include command : id\nqueue\n", ("include is not allowed",)),
    ("executable = /bin/echo\narguments = $ENV(HOME)\nqueue\n", ("$ENV() is not allowed",)),
    ("executable = /bin/echo\ngetenv = true\nqueue\n", ("getenv is not allowed",)),
    ("executable = /bin/echo\nrequest_memory = 1 +\nqueue\n", ("ERROR", "RequestMemory")),
    ("executable = /bin/echo\nuniverse = nowhere\nqueue\n", ("universe",)),
    ("executable = /bin/echo\nqueue 20000\n", ("more than 10000 jobs",)),
    ("executable = /bin/echo\nqueue item from (\na\n", ("closing",)),
])
def test_a_bad_submit_description_is_a_problem_and_queues_nothing(gateway, description, words):
    before = call(gateway.port, "GET", "/api/v1/jobs?limit=*&projection=ClusterId").json["total_returned"]
    problem(call(gateway.port, "POST", "/api/v1/jobs", {"submit_file": description}), 400, *words)
    after = call(gateway.port, "GET", "/api/v1/jobs?limit=*&projection=ClusterId").json["total_returned"]
    assert after == before


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"submit_file": 1}', b'{}',
                                  b'{"submit_file": "queue", "ad": {}}', b'{"submit_file": "queue", "more": 1}'])
def test_a_submission_that_is_neither_form_is_a_problem(gateway, body):
    problem(call(gateway.port, "POST", "/api/v1/jobs", body), 400)


def test_each_request_is_one_access_log_line_with_its_operation_and_outcome(gateway):
    def lines() -> list[str]:
        return [line for line in gateway.log().splitlines() if "REST getJob from 127.0.0.1: 404 UNKNOWNJOB" in line]

    before = len(lines())
    problem(call(gateway.port, "GET", "/api/v1/jobs/999999.0"), 404)
    wait_until(lambda: len(lines()) > before, "the request's access-log line")
    assert len(lines()) == before + 1
    assert "[birdbath.request#info]" in lines()[-1]


@pytest.mark.parametrize("job, status", [("1000000000.0", 404), ("2147483647.2147483647", 404),
                                         ("2147483648.0", 404), ("1.2147483648", 404), ("0.0", 404),
                                         ("1" * 5000 + ".0", 404), ("1.", 404)])
def test_job_ids_are_those_an_xsd_int_carries(gateway, job, status):
    """Ids up to 2**31 - 1 are jobs that may be unknown (the htcondor backend's clusters have ten digits); others
    are not job ids at all."""
    document = problem(call(gateway.port, "GET", f"/api/v1/jobs/{job}"), status)
    in_range = job.split(".")[0] != "0" and len(job) < 30 and not job.endswith(".") and \
        all(int(part) <= 2**31 - 1 for part in job.split("."))
    assert ("a job is cluster.proc" in document["detail"]) is not in_range, document


# -- job control ---------------------------------------------------------------------------------------
def test_edit_hold_release_and_remove_with_reasons(gateway):
    job = submit(gateway.port, "executable = /bin/true\nqueue\n")["job_ids"][0]
    edited = call(gateway.port, "PATCH", f"/api/v1/jobs/{job}", {"attributes": {
        "JobPrio": 5, "Note": '"quoted"', "Flag": True, "Typed": {"type": "string", "value": "a \"b\""},
        "Later": "JobPrio + 1"}})
    assert edited.status == 200, edited.body
    ad = call(gateway.port, "GET", f"/api/v1/jobs/{job}").json
    assert (ad["JobPrio"], ad["Note"], ad["Flag"], ad["Typed"], ad["Later"]) == \
        (5, "quoted", True, 'a "b"', "/Expr(JobPrio + 1)/")
    problem(call(gateway.port, "PATCH", f"/api/v1/jobs/{job}", {"attributes": {"Owner": '"eve"'}}), 400, "Owner")
    problem(call(gateway.port, "PATCH", f"/api/v1/jobs/{job}", {"attributes": {"JobPrio": "1 +"}}), 400, "JobPrio")
    problem(call(gateway.port, "PATCH", f"/api/v1/jobs/{job}", {"attributes": {}}), 400)
    problem(call(gateway.port, "PATCH", "/api/v1/jobs/999999.0", {"attributes": {"JobPrio": 1}}), 404)

    assert call(gateway.port, "POST", f"/api/v1/jobs/{job}/hold", {"reason": "wait a bit"}).status == 200
    held = call(gateway.port, "GET", f"/api/v1/jobs/{job}?projection=JobStatus,HoldReason").json
    assert held == {"JobStatus": 5, "HoldReason": "wait a bit"}
    assert call(gateway.port, "POST", f"/api/v1/jobs/{job}/release", b"").status == 200
    assert call(gateway.port, "GET", f"/api/v1/jobs/{job}?projection=JobStatus").json == {"JobStatus": 1}
    problem(call(gateway.port, "POST", f"/api/v1/jobs/{job}/hold", {"reason": 7}), 400, "reason")
    problem(call(gateway.port, "POST", "/api/v1/jobs/999999.0/hold", b""), 404)

    removed = call(gateway.port, "DELETE", f"/api/v1/jobs/{job}?reason=done%20with%20it")
    assert removed.json == {"message": f"job {job} removed", "job_id": job}
    problem(call(gateway.port, "GET", f"/api/v1/jobs/{job}"), 404)
    cluster, proc = (int(part) for part in job.split("."))
    history = call(gateway.port, "GET", f"/api/v1/history?constraint=ClusterId%3D%3D{cluster}"
                                        f"&projection=ClusterId,ProcId,RemoveReason").json["jobs"]
    assert history == [{"ClusterId": cluster, "ProcId": proc, "RemoveReason": "done with it"}]
    problem(call(gateway.port, "DELETE", "/api/v1/jobs/999999.0"), 404)


def test_removing_a_cluster_removes_its_jobs(gateway):
    made = submit(gateway.port, "executable = /bin/true\nqueue 3\n")
    assert call(gateway.port, "DELETE", f"/api/v1/jobs/{made['cluster_id']}").status == 200
    problem(call(gateway.port, "GET", f"/api/v1/jobs/{made['cluster_id']}"), 404)


# -- input and output ----------------------------------------------------------------------------------
def test_input_is_taken_before_the_jobs_are_queued_and_output_comes_back_as_a_tar(runner):
    made = submit(runner.port, NEEDS_INPUT.replace("queue", "queue 2"))
    cluster = made["cluster_id"]
    assert made["awaiting_input"] == made["job_ids"] == [f"{cluster}.0", f"{cluster}.1"]
    problem(call(runner.port, "GET", f"/api/v1/jobs/{cluster}.0"), 404)  # not queued before its input
    one = call(runner.port, "PUT", f"/api/v1/jobs/{cluster}.0/input", tar_of({"run.sh": SCRIPT, "in.txt": "A"}),
               "application/x-tar")
    assert one.json["files"] == ["run.sh", "in.txt"] and one.json["queued"] == []
    problem(call(runner.port, "PUT", f"/api/v1/jobs/{cluster}.0/input", tar_of({"x": "y"}), "application/x-tar"),
            409, "not waiting")
    other = call(runner.port, "PUT", f"/api/v1/jobs/{cluster}.1/input",
                 gzip.compress(tar_of({"./run.sh": SCRIPT, "in.txt": "B"})), "application/x-tar")
    assert other.json["queued"] == made["job_ids"]
    for proc, letter in ((0, "A"), (1, "B")):
        assert wait_for(runner.port, f"{cluster}.{proc}")["JobStatus"] == 4
        output = call(runner.port, "GET", f"/api/v1/jobs/{cluster}.{proc}/output")
        assert output.headers["content-type"] == "application/x-tar"
        files = tar_members(output.body)
        assert files["result.txt"] == f"read {letter}\n".encode()
        assert files["out.txt"] == b"args one two\n"


def test_a_cluster_takes_one_upload_for_all_its_jobs(runner):
    made = submit(runner.port, NEEDS_INPUT.replace("queue", "queue 3"))
    put = call(runner.port, "PUT", f"/api/v1/jobs/{made['cluster_id']}/input",
               tar_of({"run.sh": SCRIPT, "in.txt": "C"}), "application/x-tar")
    assert put.json["queued"] == made["job_ids"]
    for job in made["job_ids"]:
        assert wait_for(runner.port, job)["JobStatus"] == 4
    assert tar_members(call(runner.port, "GET", f"/api/v1/jobs/{made['job_ids'][2]}/output").body)[
        "result.txt"] == b"read C\n"


def test_a_large_output_is_streamed_whole(runner):
    """Several chunks of the spool's files, read while the connection drains (a client that reads slowly)."""
    made = submit(runner.port, "executable = /bin/sh\narguments = \"-c 'yes abcdefg | head -c 3000000 > big.bin'\"\n"
                               "should_transfer_files = YES\nqueue\n")
    job = made["job_ids"][0]
    assert wait_for(runner.port, job)["JobStatus"] == 4
    connection = http.client.HTTPConnection("127.0.0.1", runner.port, timeout=60)
    connection.request("GET", f"/api/v1/jobs/{job}/output")
    response = connection.getresponse()
    received = bytearray()
    while block := response.read(256 * 1024):
        received += block
        time.sleep(0.01)
    connection.close()
    assert tar_members(bytes(received))["big.bin"] == (b"abcdefg\n" * 375000)[:3000000]


def _tar_with(kind: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo({"absolute": "/etc/cron.d/x", "dotdot": "../escape", "inner": "a/../../b",
                                "subdir": "sub/file"}.get(kind, "in.txt"))
        if kind == "symlink":
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/shadow"
        elif kind == "hardlink":
            info.type, info.linkname = tarfile.LNKTYPE, "/etc/shadow"
        elif kind == "directory":
            info.name, info.type = "dir", tarfile.DIRTYPE
        elif kind == "fifo":
            info.type = tarfile.FIFOTYPE
        archive.addfile(info, io.BytesIO(b""))
        if kind == "twice":
            archive.addfile(info, io.BytesIO(b""))
    return buffer.getvalue()


@pytest.mark.parametrize(("kind", "words"), [
    ("symlink", ("link",)), ("hardlink", ("link",)), ("absolute", ("absolute or with ..",)),
    ("dotdot", ("absolute or with ..",)), ("inner", ("absolute or with ..",)), ("directory", ("not a regular file",)),
    ("fifo", ("not a regular file",)), ("subdir", ("path separator",)), ("garbage", ("not a tar archive",)),
    ("twice", ("twice",))])
def test_a_hostile_archive_is_refused_and_the_job_still_waits_for_its_input(gateway, kind, words):
    made = submit(gateway.port, NEEDS_INPUT)
    job = made["job_ids"][0]
    body = b"this is no tar" * 100 if kind == "garbage" else _tar_with(kind)
    problem(call(gateway.port, "PUT", f"/api/v1/jobs/{job}/input", body, "application/x-tar"), 400, *words)
    good = call(gateway.port, "PUT", f"/api/v1/jobs/{job}/input", tar_of({"run.sh": SCRIPT, "in.txt": "ok"}),
                "application/x-tar")
    assert good.status == 200 and good.json["queued"] == [job]


class HeldUpload(io.BytesIO):
    """An uploaded body whose reads wait until the reactor has run a call the test scheduled: read on the reactor's
    thread, they would wait in vain (until ``patience`` runs out), as every other client would."""

    def __init__(self, data: bytes, patience: float = 30) -> None:
        super().__init__(data)
        self.reactor_answered = threading.Event()
        self.patience = patience
        self.readers: set[int] = set()

    def read(self, size: int | None = -1) -> bytes:
        self.readers.add(threading.get_ident())
        self.reactor_answered.wait(self.patience)
        return super().read(size)


def _offloaded_upload(body: bytes, work):
    """Run ``work(offload, upload)`` on the global reactor, with a real thread pool for the reading, while the reactor
    answers another call; the upload, and what the work returned or raised."""
    from twisted.internet import reactor
    from twisted.internet.defer import ensureDeferred
    from twisted.internet.threads import deferToThreadPool
    from twisted.python.threadpool import ThreadPool

    pool = ThreadPool(minthreads=1, maxthreads=2, name="uploads")
    pool.start()
    upload = HeldUpload(body)
    reactor.callLater(0, upload.reactor_answered.set)  # "another client's request", answered by the reactor
    outcome: dict = {}
    try:
        done = ensureDeferred(work(lambda function, *args: deferToThreadPool(reactor, pool, function, *args), upload))
        done.addBoth(lambda value: outcome.update(value=value))
        deadline = time.monotonic() + 60
        while "value" not in outcome and time.monotonic() < deadline:
            reactor.runUntilCurrent()
            reactor.doIteration(0.01)
    finally:
        upload.reactor_answered.set()
        pool.stop()
    return upload, outcome["value"]


def test_an_upload_is_checked_and_read_off_the_reactor_which_answers_meanwhile():
    body = gzip.compress(tar_of({"run.sh": SCRIPT, "big.bin": b"abcdefg\n" * 300_000}))

    async def check_and_read(offload, upload):
        members = await tarfiles.checked_upload(offload, upload, 10_000_000)
        read = {}
        async for member, chunks in tarfiles.uploaded_files(offload, upload):
            read[member.name] = b"".join([chunk async for chunk in chunks])
        return members, read

    upload, (members, read) = _offloaded_upload(body, check_and_read)
    assert threading.get_ident() not in upload.readers and upload.readers  # the reactor's thread never read it
    assert {member.name: member.size for member in members} == {"run.sh": len(SCRIPT), "big.bin": 2_400_000}
    assert read == tar_members(gzip.decompress(body))


def test_a_hostile_upload_checked_off_the_reactor_is_the_same_problem():
    async def check(offload, upload):
        return await tarfiles.checked_upload(offload, upload, 10_000_000)

    upload, failure = _offloaded_upload(_tar_with("symlink"), check)
    assert threading.get_ident() not in upload.readers
    assert failure.check(Problem) and failure.value.status == 400 and "link" in str(failure.value)


def test_input_beyond_the_request_limit_is_refused(start_gateway):
    small = start_gateway(QUEUE_ONLY + "[gateway]\nmax_request_bytes = 65536\n")
    job = submit(small.port, NEEDS_INPUT)["job_ids"][0]
    big = call(small.port, "PUT", f"/api/v1/jobs/{job}/input", tar_of({"in.txt": b"x" * 100_000}),
               "application/x-tar")
    assert big.status == 413
    bomb = gzip.compress(tar_of({"in.txt": b"\0" * 1_000_000}))  # small on the wire, large unpacked
    assert len(bomb) < 65536
    problem(call(small.port, "PUT", f"/api/v1/jobs/{job}/input", bomb, "application/x-tar"), 413,
            "max_request_bytes")
    fits = call(small.port, "PUT", f"/api/v1/jobs/{job}/input", tar_of({"run.sh": SCRIPT, "in.txt": "ok"}),
                "application/x-tar")
    assert fits.json["queued"] == [job]


def test_input_for_a_job_that_does_not_wait_for_any_is_a_problem(gateway):
    job = submit(gateway.port, "executable = /bin/true\nqueue\n")["job_ids"][0]
    problem(call(gateway.port, "PUT", f"/api/v1/jobs/{job}/input", tar_of({"a": "b"}), "application/x-tar"), 409)
    problem(call(gateway.port, "PUT", "/api/v1/jobs/999999.0/input", tar_of({"a": "b"}), "application/x-tar"), 409)
    problem(call(gateway.port, "GET", "/api/v1/jobs/999999.0/output"), 404)


# -- DAGs ----------------------------------------------------------------------------------------------
DAG = {"diamond.dag": "JOB A a.sub\nJOB B b.sub\nPARENT A CHILD B\n",
       "a.sub": "executable = /bin/echo\narguments = A\noutput = a.out\nqueue\n",
       "b.sub": "executable = /bin/sh\narguments = \"-c 'cat a.out; echo B'\"\noutput = b.out\nqueue\n"}


def test_a_dag_and_its_node_files_run_as_one_dagman_job(runner):
    made = call(runner.port, "POST", "/api/v1/dags?dag=diamond.dag", tar_of(DAG), "application/x-tar")
    assert made.status == 201, made.body
    job = made.json["job_ids"][0]
    assert made.headers["location"] == f"/api/v1/jobs/{job}"
    ad = wait_for(runner.port, job)
    assert (ad["JobStatus"], ad["ExitCode"], ad["JobUniverse"]) == (4, 0, 7)
    files = tar_members(call(runner.port, "GET", f"/api/v1/jobs/{job}/output").body)
    assert files["b.out"] == b"A\nB\n" and "diamond.dag.dagman.out" in files


@pytest.mark.parametrize(("query", "body", "words"), [
    ("dag=other.dag", tar_of(DAG), ("does not hold the DAG file 'other.dag'",)),
    ("dag=../diamond.dag", tar_of(DAG), ("path separator",)),
    ("", tar_of(DAG), ("dag must name",)),
    ("dag=diamond.dag", b"no tar here" * 50, ("not a tar archive",)),
    ("dag=diamond.dag", _tar_with("symlink"), ("link",)),
])
def test_a_bad_dag_upload_is_a_problem_and_queues_nothing(gateway, query, body, words):
    before = call(gateway.port, "GET", "/api/v1/jobs?limit=*&projection=ClusterId").json["total_returned"]
    problem(call(gateway.port, "POST", f"/api/v1/dags?{query}", body, "application/x-tar"), 400, *words)
    assert call(gateway.port, "GET", "/api/v1/jobs?limit=*&projection=ClusterId").json["total_returned"] == before


# -- another user ------------------------------------------------------------------------------------
def as_user(account: UserAccount, port: int, method: str, path: str, body: bytes | dict | None = None,
            content_type: str = "application/json") -> Answer:
    """A request made by a real other user (identified by its socket's owner), checked against the contract."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body

    def work() -> bytes:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request(method, path, data, {"Content-Type": content_type} if data is not None else {})
        response = connection.getresponse()
        return json.dumps({"status": response.status, "headers": dict(response.getheaders()),
                           "body": response.read().decode("latin-1")}).encode()

    raw = json.loads(run_as(account, work))
    answer = Answer(raw["status"], {key.lower(): value for key, value in raw["headers"].items()},
                    raw["body"].encode("latin-1"))
    check(method, path, answer)
    return answer


def test_another_users_jobs_are_refused_and_its_own_are_its_own(gateway, accounts):
    eve = accounts.user()
    mine = submit(gateway.port, "executable = /bin/true\nqueue\n")["job_ids"][0]
    waiting = submit(gateway.port, NEEDS_INPUT)["job_ids"][0]
    for method, path, body in (("GET", f"/api/v1/jobs/{mine}", None),
                               ("PATCH", f"/api/v1/jobs/{mine}", {"attributes": {"JobPrio": 9}}),
                               ("POST", f"/api/v1/jobs/{mine}/hold", {"reason": "mine now"}),
                               ("DELETE", f"/api/v1/jobs/{mine}", None),
                               ("DELETE", f"/api/v1/jobs/{mine.split('.')[0]}", None),
                               ("GET", f"/api/v1/jobs/{mine}/output", None)):
        problem(as_user(eve, gateway.port, method, path, body), 403, "owner")
    problem(as_user(eve, gateway.port, "PUT", f"/api/v1/jobs/{waiting}/input", tar_of({"in.txt": "x"}),
                    "application/x-tar"), 409)
    problem(as_user(eve, gateway.port, "POST", "/api/v1/jobs", {"ad": {"Cmd": "/bin/true", "Owner": "root"}}),
            403, "Owner")
    assert call(gateway.port, "GET", f"/api/v1/jobs/{mine}?projection=JobStatus,JobPrio").json == \
        {"JobStatus": 1, "JobPrio": 0}
    own = as_user(eve, gateway.port, "POST", "/api/v1/jobs", {"submit_file": "executable = /bin/true\nqueue\n"})
    job = own.json["job_ids"][0]
    assert call(gateway.port, "GET", f"/api/v1/jobs/{job}?projection=Owner").json == {
        "Owner": pwd.getpwuid(eve.uid).pw_name}
    assert as_user(eve, gateway.port, "DELETE", f"/api/v1/jobs/{job}").status == 200


# -- over TLS: the caller the site identified -----------------------------------------------------------------
def test_over_tls_the_caller_is_the_certificates_or_passwords_user_and_a_bad_password_is_a_problem(
        start_gateway, tmp_path):
    pki = TestPki(tmp_path / "pki")
    pki.passwords({"carol": "c4rol's secret"})
    tls = start_gateway(pki.config(passwords=True) + QUEUE_ONLY, ssl=True, plain=False)
    alice = pki.client("alice")

    def https(method: str, path: str, auth: tuple[str, str] | None = None, client=None, **kwargs) -> Answer:
        session = requests.Session()
        session.trust_env, session.verify, session.auth = False, str(pki.ca_file), auth
        if client is not None:
            session.cert = (str(client.certificate), str(client.key))
        response = session.request(method, tls.https_url.rstrip("/") + path, timeout=30, **kwargs)
        answer = Answer(response.status_code, {key.lower(): value for key, value in response.headers.items()},
                        response.content)
        check(method, path, answer)
        return answer

    description = {"submit_file": "executable = /bin/true\nqueue\n"}
    by_password = https("POST", "/api/v1/jobs", auth=("carol", "c4rol's secret"), json=description).json["job_ids"][0]
    by_certificate = https("POST", "/api/v1/jobs", client=alice, json=description).json["job_ids"][0]
    assert https("GET", f"/api/v1/jobs/{by_password}?projection=Owner", client=alice).status == 403
    assert https("GET", f"/api/v1/jobs/{by_certificate}?projection=Owner", client=alice).json == {"Owner": "alice"}
    assert https("GET", f"/api/v1/jobs/{by_password}?projection=Owner", auth=("carol", "c4rol's secret")).json == \
        {"Owner": "carol"}
    refused = https("GET", "/api/v1/jobs", auth=("carol", "wrong"))
    problem(refused, 401)
    assert refused.headers["www-authenticate"].startswith('Basic realm="birdbath"')


# -- history and pool ------------------------------------------------------------------------------------
def test_history_lists_jobs_that_left_newest_first(runner):
    cluster = submit(runner.port, "executable = /bin/echo\narguments = gone\nleave_in_queue = false\nqueue 2\n")[
        "cluster_id"]
    deadline = time.monotonic() + 60
    while True:
        jobs = call(runner.port, "GET", f"/api/v1/history?constraint=ClusterId%3D%3D{cluster}"
                                        f"&projection=ClusterId,ProcId,JobStatus&limit=*").json["jobs"]
        if len(jobs) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert sorted(job["ProcId"] for job in jobs) == [0, 1] and {job["JobStatus"] for job in jobs} == {4}
    assert len(call(runner.port, "GET", "/api/v1/history?limit=1").json["jobs"]) == 1
    problem(call(runner.port, "GET", "/api/v1/history?constraint=%29"), 400, "constraint")


def test_the_pool_lists_the_collectors_ads(runner):
    machines = call(runner.port, "GET", "/api/v1/pool?type=Machine&projection=MyType,Name,Cpus").json["ads"]
    assert machines and all(set(ad) <= {"MyType", "Name", "Cpus"} and ad["MyType"] == "Machine" for ad in machines)
    every = call(runner.port, "GET", "/api/v1/pool").json["ads"]
    assert len(every) > len(machines)
    assert call(runner.port, "GET", "/api/v1/pool?constraint=false").json["ads"] == []
    problem(call(runner.port, "GET", "/api/v1/pool?type=Toaster"), 400, "Toaster")


# -- the caller ------------------------------------------------------------------------------------------
def test_whoami_names_the_owner_the_caller_submits_as(gateway):
    """What ``birdbath q`` lists as "yours": the owner a job submitted without one gets, and how the gateway knows."""
    me = call(gateway.port, "GET", "/api/v1/whoami")
    assert me.status == 200
    job = submit(gateway.port, "executable = /bin/true\nqueue\n")["job_ids"][0]
    owner = call(gateway.port, "GET", f"/api/v1/jobs/{job}").json["Owner"]
    assert me.json == {"owner": owner, "user": pwd.getpwuid(os.getuid()).pw_name, "authentication": "socket"}
    refused = call(gateway.port, "POST", "/api/v1/whoami", b"")
    assert refused.status == 405 and refused.headers["allow"] == "GET"
    # a password sent in clear text is not checked: the caller is refused, not taken for anyone
    basic = call(gateway.port, "GET", "/api/v1/whoami", headers={"Authorization": "Basic YWxpY2U6c2VjcmV0"})
    assert basic.status == 403 and "owner" not in basic.json
