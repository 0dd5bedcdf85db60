"""Aviary's job and query services: suds and zeep clients generated from Aviary's own WSDLs (tests/data/aviary)
calling every operation of a real gateway, Aviary's status codes for bad input, and the recorded wire exchanges
(tests/data/aviary/wire) replayed."""

from __future__ import annotations

import getpass
import json
import os
import socket
import urllib.request
from pathlib import Path

import pytest
import zeep
from lxml import etree

from tests.accounts import post_as
from tests.conftest import DATA, QUEUE_ONLY, ROOT, module_gateway

AVIARY = DATA / "aviary"
WIRE = AVIARY / "wire"
JOB_NS = "http://job.aviary.grid.redhat.com"
QUERY_NS = "http://query.aviary.grid.redhat.com"
ME = getpass.getuser()
#: what Aviary built for an OS constraint alone (its five-part template, the other parts left open)
LINUX_REQUIREMENTS = ('( TARGET.Arch  =!= undefined  ) && ( TARGET.OpSys == "LINUX" ) && ( TARGET.Disk  >= 0  ) && '
                      '( ( TARGET.Memory * 1024 )  >= 0  ) && ( TARGET.FileSystemDomain  =!= undefined  )')

gateway = module_gateway(QUEUE_ONLY)


@pytest.fixture(scope="module")
def job(gateway):
    return zeep.Client(gateway.url + "services/job?wsdl").service


@pytest.fixture(scope="module")
def query(gateway):
    return zeep.Client(gateway.url + "services/query?wsdl").service


@pytest.fixture(scope="module")
def suds_clients(gateway):
    """suds clients generated from the shipped copies of Aviary's WSDLs, pointed at the gateway."""
    from suds.client import Client

    job = Client((AVIARY / "aviary-job.wsdl").as_uri(), location=gateway.url + "services/job", cache=None)
    query = Client((AVIARY / "aviary-query.wsdl").as_uri(), location=gateway.url + "services/query", cache=None)
    return job, query


def submit(job, tmp_path: Path, **extra) -> str:
    answer = job.submitJob(cmd="/bin/sleep", args="60", owner=ME, iwd=str(tmp_path), **extra)
    assert answer.status.code == "OK", answer
    return answer.id.job


def details(query, job_id: str) -> dict[str, tuple[str, str]]:
    (found,) = query.getJobDetails(ids=[{"job": job_id}])
    assert found.status.code == "OK", found
    return {attr.name: (attr.type, attr.value) for attr in found.details.attrs}


def post(gateway, path: str, body: str) -> tuple[int, bytes]:
    request = urllib.request.Request(gateway.url + path, body.encode(), {"Content-Type": "text/xml"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def envelope(namespace: str, operation: str, content: str) -> str:
    return (f'<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/" xmlns:a="{namespace}"><s:Body>'
            f"<a:{operation}>{content}</a:{operation}></s:Body></s:Envelope>")


# -- the contracts ------------------------------------------------------------------------------------------------
def test_the_served_wsdls_and_schemas_are_avarys_own(gateway):
    for name in ("aviary-job.xsd", "aviary-query.xsd", "aviary-common.xsd"):
        assert (ROOT / "wsdl" / name).read_bytes() == (AVIARY / name).read_bytes()
        with urllib.request.urlopen(gateway.url + "services/" + name, timeout=30) as response:
            assert etree.fromstring(response.read()).get("targetNamespace") == \
                etree.parse(str(AVIARY / name)).getroot().get("targetNamespace")
    for service in ("job", "query"):
        shipped = etree.parse(str(AVIARY / f"aviary-{service}.wsdl")).getroot()
        with urllib.request.urlopen(gateway.url + f"services/{service}?wsdl", timeout=30) as response:
            served = etree.fromstring(response.read())
        address = served.find(".//{http://schemas.xmlsoap.org/wsdl/soap/}address")
        assert address.get("location") == gateway.url + f"services/{service}"
        address.set("location", "http://localhost")
        assert etree.tostring(served, method="c14n") == etree.tostring(shipped, method="c14n")


# -- the job service --------------------------------------------------------------------------------------------
def test_submit_job_builds_requirements_and_defaults_as_aviary_did(job, query, tmp_path):
    job_id = submit(job, tmp_path, submission_name="aviary-defaults",
                    requirements=[{"type": "OS", "value": "LINUX"}],
                    extra=[{"name": "Cmd", "type": "STRING", "value": "/bin/false"},
                           {"name": "AviaryCount", "type": "INTEGER", "value": "3"},
                           {"name": "Flag", "type": "BOOLEAN", "value": "TRUE"}])
    ad = details(query, job_id)
    assert ad["Requirements"] == ("EXPRESSION", LINUX_REQUIREMENTS)
    assert ad["Cmd"] == ("STRING", "/bin/sleep")  # a basic attribute in extra needs allowOverrides
    assert ad["Args"] == ("STRING", "60")
    assert ad["AviaryCount"] == ("INTEGER", "3")
    assert ad["Flag"][1] == "TRUE"
    assert ad["Submission"] == ("STRING", "aviary-defaults")
    assert ad["RequestCpus"] == ("INTEGER", "1") and ad["DiskUsage"] == ("INTEGER", "1")
    assert ad["RequestDisk"] == ("EXPRESSION", "DiskUsage")
    assert ad["RequestMemory"][1].startswith("ceiling(ifThenElse(JobVMMemory =!= undefined")


def test_allow_overrides_lets_extra_replace_the_basic_attributes(gateway, query, tmp_path):
    body = envelope(JOB_NS, "SubmitJob", f"<cmd>/bin/sleep</cmd><owner>{ME}</owner><iwd>{tmp_path}</iwd>"
                    "<extra><name>Requirements</name><type>EXPRESSION</type><value>Memory &gt; 1</value></extra>"
                    "<extra><name>RequestCpus</name><type>INTEGER</type><value>2</value></extra>")
    status, answer = post(gateway, "services/job/submitJob",
                          body.replace("<a:SubmitJob>", '<a:SubmitJob allowOverrides="true">'))
    assert status == 200, answer
    job_id = etree.fromstring(answer).findtext(".//id/job")
    ad = details(query, job_id)
    assert ad["Requirements"] == ("EXPRESSION", "Memory > 1")
    assert ad["RequestCpus"] == ("INTEGER", "2")
    status, answer = post(gateway, "services/job/submitJob", body)  # without allowOverrides: TRUE, as Aviary
    assert details(query, etree.fromstring(answer).findtext(".//id/job"))["Requirements"][1] == "TRUE"


def test_job_control_and_set_attribute(job, query, tmp_path):
    job_id = submit(job, tmp_path)

    def state() -> str:
        (found,) = query.getJobStatus(ids=[{"job": job_id}])
        return found.job_status

    assert state() == "IDLE"
    assert job.holdJob(id={"job": job_id}, reason="wait").code == "OK"
    assert state() == "HELD"
    assert job.releaseJob(id={"job": job_id}, reason="go").code == "OK"
    assert state() == "IDLE"
    suspended = job.suspendJob(id={"job": job_id}, reason="pause")
    assert suspended.code == "FAIL" and "suspend" in suspended.text  # only a running job can be suspended
    resumed = job.continueJob(id={"job": job_id}, reason="resume")
    assert resumed.code == "FAIL" and "continue" in resumed.text
    assert job.setJobAttribute(id={"job": job_id}, attribute={"name": "Mood", "value": '"calm"'}).code == "OK"
    assert details(query, job_id)["Mood"] == ("STRING", "calm")
    refused = job.setJobAttribute(id={"job": job_id}, attribute={"name": "Submission", "value": '"other"'})
    assert (refused.code, refused.text) == ("FAIL", "Changes to submission name not allowed")
    assert job.removeJob(id={"job": job_id}, reason="done").code == "OK"
    assert state() == "REMOVED"


def test_bad_ids_get_avarys_statuses(job, query):
    unknown = job.holdJob(id={"job": "987654.0"}, reason="x")
    assert unknown.code == "NO_MATCH", unknown
    garbage = job.holdJob(id={"job": "not-a-job"}, reason="x")
    assert garbage.code == "FAIL" and "Invalid Id" in garbage.text
    found = query.getJobStatus(ids=[{"job": "987654.0"}, {"job": "not-a-job"}])
    assert [(entry.id.job, entry.status.code) for entry in found] == [("987654.0", "NO_MATCH"), ("not-a-job", "FAIL")]


def test_ids_found_here_name_the_pool_and_the_scheduler_as_aviarys_did(job, query, tmp_path):
    """A JobID's pool and scheduler elements, a SubmissionID's XML attributes of those names (the local backend's
    pool is this machine); an id that names nothing found is echoed as it came, without them."""
    made = job.submitJob(cmd="/bin/sleep", args="60", owner=ME, iwd=str(tmp_path), submission_name="aviary-origin")
    scheduler = made.id.scheduler
    here = (socket.getfqdn(), scheduler)
    assert scheduler and (made.id.pool, made.id.scheduler) == here
    assert (made.id.submission.pool, made.id.submission.scheduler) == here
    (summary,) = query.getJobSummary(ids=[{"job": made.id.job}])
    assert (summary.id.pool, summary.id.submission.pool, summary.id.submission.scheduler) == (here[0], *here)
    (found,) = query.getSubmissionSummary(ids=[{"name": "aviary-origin"}], includeJobSummaries=True)
    assert (found.id.pool, found.id.scheduler) == here and found.jobs[0].id.pool == here[0]
    ids = query.getSubmissionID(size=1, offset={"name": "aviary-origin"}).ids
    assert [(entry.name, entry.pool, entry.scheduler) for entry in ids] == [("aviary-origin", *here)]
    (missing,) = query.getJobStatus(ids=[{"job": "987654.0", "pool": "elsewhere", "scheduler": "other"}])
    assert (missing.status.code, missing.id.pool, missing.id.scheduler) == ("NO_MATCH", None, None)
    (unknown,) = query.getSubmissionSummary(ids=[{"name": "no-such-submission"}])
    assert (unknown.id.pool, unknown.id.scheduler) == (None, None)


def test_a_submission_id_sent_back_with_its_attributes_is_read(gateway, job, tmp_path):
    """A client echoing a SubmissionID with its pool and scheduler attributes (any text, quotes and all) pages from
    it as from its name."""
    submit(job, tmp_path, submission_name="aviary-echoed")
    status, answer = post(gateway, "services/query/getSubmissionID", envelope(
        QUERY_NS, "GetSubmissionID", '<size>1</size><offset pool="a&amp;&quot;b" scheduler="&lt;x&gt;">'
                                     "<name>aviary-echoed</name></offset>"))
    assert status == 200, answer
    (ids,) = etree.fromstring(answer).iter("ids")
    assert ids.findtext("name") == "aviary-echoed" and ids.get("pool") == socket.getfqdn()


def test_a_value_the_schema_refuses_is_a_client_fault(gateway):
    status, answer = post(gateway, "services/job/submitJob", envelope(
        JOB_NS, "SubmitJob", "<cmd>/bin/true</cmd><owner>x</owner><iwd>/tmp</iwd>"
        "<requirements><type>GPU</type><value>1</value></requirements>"))
    assert status == 500 and b"could not be validated" in answer
    status, answer = post(gateway, "services/query/getJobData", envelope(QUERY_NS, "GetJobData", "<<"))
    assert status == 500 and b"Malformed XML" in answer


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
def test_another_user_cannot_submit_for_me_nor_hold_my_job(gateway, job, tmp_path):
    answer = etree.fromstring(post_as("nobody", gateway.port, "/services/job/submitJob", envelope(
        JOB_NS, "SubmitJob", f"<cmd>/bin/sleep</cmd><owner>{ME}</owner><iwd>/tmp</iwd>")))
    assert answer.findtext(".//status/code") == "FAIL" and "Owner refused" in answer.findtext(".//status/text")
    assert answer.find(".//id") is None
    job_id = submit(job, tmp_path)
    answer = post_as("nobody", gateway.port, "/services/job/holdJob",
                     envelope(JOB_NS, "HoldJob", f"<id><job>{job_id}</job></id><reason>mine now</reason>"))
    status = etree.fromstring(answer).find(".//status")
    assert status.findtext("code") == "FAIL" and "Not job owner" in status.findtext("text")


# -- the query service ------------------------------------------------------------------------------------------
def test_job_summary_and_submission_summary(job, query, tmp_path):
    job_id = submit(job, tmp_path, submission_name="aviary-summary")
    job.holdJob(id={"job": job_id}, reason="look at me")
    (summary,) = query.getJobSummary(ids=[{"job": job_id}])
    assert (summary.status.code, summary.job_status, summary.cmd, summary.args1, summary.held) == \
        ("OK", "HELD", "/bin/sleep", "60", "look at me")
    assert summary.id.submission.name == "aviary-summary" and summary.id.submission.owner == ME
    assert summary.queued.year >= 2020
    (found,) = query.getSubmissionSummary(ids=[{"name": "aviary-summary"}])
    assert (found.status.code, found.held, found.idle, found.jobs) == ("OK", 1, 0, [])
    assert found.id.owner == ME
    (withjobs,) = _summaries_with_jobs(query, "aviary-summary")
    assert [entry.id.job for entry in withjobs.jobs] == [job_id]
    (missing,) = query.getSubmissionSummary(ids=[{"name": "no-such-submission"}])
    assert missing.status.code == "NO_MATCH"
    mine = query.getSubmissionSummary(ids=[{"owner": ME}])
    assert "aviary-summary" in {entry.id.name for entry in mine}


def _summaries_with_jobs(query, name: str):
    """GetSubmissionSummary with includeJobSummaries (an XML attribute of the request element; zeep takes it as a
    keyword)."""
    return query.getSubmissionSummary(ids=[{"name": name}], includeJobSummaries=True)


def test_submission_ids_are_paged(job, query, tmp_path):
    names = [f"aviary-page-{n}" for n in range(3)]
    for name in names:
        submit(job, tmp_path, submission_name=name)
    first = query.getSubmissionID(size=2, offset={"name": names[0]})
    assert [entry.name for entry in first.ids] == names[:2]
    rest = query.getSubmissionID(size=100, offset={"name": names[2]})
    assert rest.ids[0].name == names[2] and rest.remaining == 0
    assert first.remaining == len(rest.ids)  # the page's two, then the rest from the third on
    newest = query.getSubmissionID(size=1, mode="BEFORE")
    assert len(newest.ids) == 1 and newest.remaining >= 2  # at least the two others just submitted


def test_submission_ids_by_qdate_from_an_offset(job, query, tmp_path):
    """AFTER and BEFORE walk by each submission's oldest QDate from the offset's (gateway.core.submission_pages has
    the rules case by case); the offset itself is not answered again."""
    submit(job, tmp_path, submission_name="aviary-qdate")
    (mine,) = [entry for entry in query.getSubmissionID(size=1000, mode="BEFORE").ids if entry.name == "aviary-qdate"]
    after = query.getSubmissionID(size=1000, mode="AFTER", offset={"qdate": mine.qdate - 1})
    assert "aviary-qdate" in [entry.name for entry in after.ids] and after.remaining == 0
    assert [entry.qdate for entry in after.ids] == sorted(entry.qdate for entry in after.ids)  # oldest first
    before = query.getSubmissionID(size=1000, mode="BEFORE", offset={"name": "aviary-qdate", "qdate": mine.qdate})
    assert "aviary-qdate" not in [entry.name for entry in before.ids]
    assert all(entry.qdate <= mine.qdate for entry in before.ids) and before.remaining == 0
    newest = query.getSubmissionID(size=1, mode="AFTER", offset={"qdate": mine.qdate})
    assert [entry.qdate > mine.qdate for entry in newest.ids] == [True] * len(newest.ids)


def test_submission_ids_for_hostile_pages(job, query, tmp_path):
    submit(job, tmp_path, submission_name="aviary-hostile")
    everything = query.getSubmissionID(size=2**31 - 1)  # a huge size: every submission, by name
    names = [entry.name for entry in everything.ids]
    assert everything.remaining == 0 and names == sorted(names) and "aviary-hostile" in names
    negative = query.getSubmissionID(size=-1, offset={"name": "aviary-hostile"})  # no ids, the rest remaining
    assert (negative.ids, negative.remaining) == ([], len(names) - names.index("aviary-hostile"))
    for hostile in ({"size": 5, "offset": {"name": "no-such-submission"}},  # an unknown offset: nothing
                    {"size": 5, "offset": {"name": "aviary-hostile", "owner": "no-such-owner"}},
                    {"size": 5, "offset": {}},  # an offset without a name
                    {"size": 5, "mode": "AFTER", "offset": {"qdate": 2**31 - 1}},
                    {"size": 5, "mode": "BEFORE", "offset": {"qdate": -2**31}}):
        answer = query.getSubmissionID(**hostile)
        assert (answer.ids, answer.remaining) == ([], 0), hostile


def test_a_scan_mode_the_schema_does_not_know_is_a_client_fault(gateway):
    status, answer = post(gateway, "services/query/getSubmissionID", envelope(
        QUERY_NS, "GetSubmissionID", "<size>1</size><mode>SIDEWAYS</mode>"))
    assert status == 500 and b"could not be validated" in answer


def test_partial_matches_are_accepted_and_ids_match_exactly_as_avarys_query_server_did(gateway, job, query, tmp_path):
    """The original's query service read partialMatches and never used it: an id is a job's whole id, a submission
    name a whole name, whatever the attribute says."""
    job_id = submit(job, tmp_path, submission_name="aviary-partial-name")
    cluster = job_id.partition(".")[0]
    while not any(cluster in other.id.job and other.id.job != job_id for other in query.getJobStatus()):
        submit(job, tmp_path)  # until another job's id holds this one's cluster (1.0 and 11.0, 21.0, ...)
    for partial in (True, False, None):
        options = {} if partial is None else {"partialMatches": partial}
        for operation in (query.getJobStatus, query.getJobSummary, query.getJobDetails):
            assert [entry.id.job for entry in operation(ids=[{"job": job_id}], **options)] == [job_id]
        (prefix,) = query.getJobStatus(ids=[{"job": cluster}], **options)
        assert prefix.status.code != "OK"
        (exact,) = query.getSubmissionSummary(ids=[{"name": "aviary-partial-name"}], **options)
        assert exact.status.code == "OK" and exact.id.name == "aviary-partial-name"
        (part,) = query.getSubmissionSummary(ids=[{"name": "aviary-partial"}], **options)
        assert part.status.code == "NO_MATCH"
    status, answer = post(gateway, "services/query/getSubmissionSummary", envelope(
        QUERY_NS, "GetSubmissionSummary", "<ids><name>aviary-partial</name></ids>").replace(
        "<a:GetSubmissionSummary>", '<a:GetSubmissionSummary partialMatches="true">'))
    assert status == 200 and etree.fromstring(answer).findtext(".//status/code") == "NO_MATCH"


def test_job_data_reads_a_staged_out_file(gateway, query, tmp_path):
    submission = zeep.Client(gateway.url + "submission?wsdl").service
    staging = submission.create("aviary-data").id
    assert submission.send(staging, "out.txt", 0, b"line one\nline two\n", None).status.code == "OK"
    ad = [{"name": "Cmd", "type": "STRING", "value": "/bin/cat"}, {"name": "Out", "type": "STRING", "value": "out.txt"},
          {"name": "Requirements", "type": "EXPR", "value": "TRUE"}]
    job_id = submission.submit({"Attribute": ad}, staging).id.rpartition("#")[2]
    head = query.getJobData(data={"id": {"job": job_id}, "type": "OUT"}, max_bytes=4)
    assert (head.status.code, head.content, head.file_size, head.file_name) == ("OK", "line", 18, "out.txt")
    tail = query.getJobData(data={"id": {"job": job_id}, "type": "OUT"}, max_bytes=4, from_end=True)
    assert tail.content == "two\n"
    no_log = query.getJobData(data={"id": {"job": job_id}, "type": "LOG"}, max_bytes=4)
    assert no_log.status.code == "FAIL"
    unknown = query.getJobData(data={"id": {"job": "987654.0"}, "type": "ERR"}, max_bytes=4)
    assert unknown.status.code == "NO_MATCH"


@pytest.mark.skipif(os.geteuid() != 0, reason="reading with the owner's rights needs a gateway running as root")
def test_job_data_reads_out_err_and_log_in_the_iwd_with_the_owners_rights(job, query, tmp_path):
    (tmp_path / "job.out").write_text("hello from the job\n")
    (tmp_path / "job.log").write_text("000 (001.000.000) submitted\n")
    (tmp_path / "job.err").symlink_to(tmp_path / "job.out")  # a link in its place is never followed
    job_id = submit(job, tmp_path, extra=[{"name": name, "type": "STRING", "value": value} for name, value in
                                          (("Out", "job.out"), ("Err", "job.err"), ("UserLog", "job.log"))])

    def data(kind: str, **options):
        return query.getJobData(data={"id": {"job": job_id}, "type": kind}, **options)

    out = data("OUT", max_bytes=5)
    assert (out.status.code, out.content, out.file_size, out.file_name) == \
        ("OK", "hello", 19, str(tmp_path / "job.out"))
    assert data("OUT", max_bytes=4, from_end=True).content == "job\n"
    assert data("OUT").content == "hello from the job\n"  # max_bytes defaults to 1024
    assert data("LOG", max_bytes=3).content == "000"
    err = data("ERR", max_bytes=5)
    assert err.status.code == "FAIL" and "symbolic link" in err.status.text and err.content is None


# -- suds -------------------------------------------------------------------------------------------------------
def test_suds_calls_every_operation(suds_clients, tmp_path):
    job, query = suds_clients
    answer = job.service.submitJob(cmd="/bin/sleep", args="60", owner=ME, iwd=str(tmp_path),
                                   submission_name="aviary-suds")
    assert answer.status.code == "OK", answer
    job_id = answer.id.job
    for control in ("suspendJob", "continueJob"):  # only a running job can be suspended
        assert getattr(job.service, control)(id={"job": job_id}, reason="suds").code == "FAIL", control
    assert job.service.setJobAttribute(id={"job": job_id}, attribute={"name": "X", "value": "1"}).code == "OK"
    for control in ("holdJob", "releaseJob", "removeJob"):
        assert getattr(job.service, control)(id={"job": job_id}, reason="suds").code == "OK", control
    (status,) = query.service.getJobStatus(ids=[{"job": job_id}])
    assert status.job_status == "REMOVED"
    (summary,) = query.service.getJobSummary(ids=[{"job": job_id}])
    assert summary.cmd == "/bin/sleep"
    (found,) = query.service.getJobDetails(ids=[{"job": job_id}])
    assert {attr.name for attr in found.details.attrs} >= {"Cmd", "Requirements", "Owner"}
    data = query.service.getJobData(data={"id": {"job": job_id}, "type": "ERR"}, max_bytes=10)
    assert data.status.code == "FAIL"
    (submission,) = query.service.getSubmissionSummary(ids=[{"name": "aviary-suds"}])
    assert submission.removed == 1
    page = query.service.getSubmissionID(size=1, offset={"name": "aviary-suds"})
    assert page.ids[0].name == "aviary-suds"
    qdate = page.ids[0].qdate
    after = query.service.getSubmissionID(size=1000, mode="AFTER", offset={"qdate": qdate - 1})
    assert "aviary-suds" in [entry.name for entry in after.ids] and after.remaining == 0
    before = query.service.getSubmissionID(size=1000, mode="BEFORE", offset={"name": "aviary-suds", "qdate": qdate})
    assert "aviary-suds" not in [entry.name for entry in getattr(before, "ids", [])]
    assert query.service.getSubmissionID(size=-3, offset={"name": "aviary-suds"}).remaining >= 0
    unknown = query.service.getSubmissionID(size=5, offset={"name": "no-such-submission"})
    assert (getattr(unknown, "ids", []), unknown.remaining) == ([], 0)
    (exact,) = query.service.getJobStatus(ids=[{"job": job_id}])  # suds leaves partialMatches out: still exact
    assert exact.id.job == job_id


# -- recorded exchanges -----------------------------------------------------------------------------------------
def shape(element: etree._Element) -> list[str]:
    """An answer's element paths (no values: ids and times differ between runs)."""
    tree = element.getroottree()
    return [tree.getpath(node).replace("soap11env:", "").replace("tns:", "") for node in element.iter()
            if isinstance(node.tag, str)]


def test_the_recorded_exchanges_replay(start_gateway, tmp_path):
    """Each recorded request (tests/data/aviary/wire, in order, against a fresh gateway) answered in the recorded
    answer's shape."""
    gateway = start_gateway(QUEUE_ONLY)
    exchanges = json.loads((WIRE / "exchanges.json").read_text())
    assert len({exchange["operation"] for exchange in exchanges}) == 13
    for exchange in exchanges:
        request = (WIRE / exchange["request"]).read_text().replace("@IWD@", str(tmp_path)).replace("@OWNER@", ME)
        status, answer = post(gateway, exchange["path"], request)
        assert status == 200, (exchange, answer)
        recorded = etree.fromstring((WIRE / exchange["answer"]).read_bytes())
        assert shape(etree.fromstring(answer)) == shape(recorded), exchange["operation"]
