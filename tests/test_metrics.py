"""Operators' monitoring: /metrics scraped with prometheus_client's own parser moves by exactly what happened
(a submit, a run, a hold, a refused caller); /healthz and /readyz answer, and /readyz says when the state
directory's disk is full (a small tmpfs)."""

from __future__ import annotations

import base64
import http.client
import json
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.testing import GatewayProcess, TestPki
from gateway.testing_ports import HeldPort
from jobmodel.arguments import join_v2
from tests.birdbath import expr
from tests.conftest import module_gateway, zeep_client
from tests.test_execution import RUNNER, submit, wait_for, wait_until
from tests.test_lowlatency import base as open_base  # noqa: F401 (a fixture: a directory jobs run as nobody reach)

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = pytest.mark.gateway

READERS = '[birdbath]\nallow_read = ["127.0.0.1"]\n'
monitored = module_gateway(RUNNER + READERS)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def get(port: int, path: str, source: str = "127.0.0.1") -> tuple[int, str, bytes]:
    """GET ``path`` from the loopback address ``source``."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(source, 0))
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.getheader("content-type", ""), response.read()
    finally:
        connection.close()


def scrape(port: int) -> Samples:
    status, content_type, body = get(port, "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=")
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(body.decode()) for sample in family.samples}


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    key = (name, frozenset(labels.items()))
    return after.get(key, 0.0) - before.get(key, 0.0)


@pytest.fixture(scope="module")
def schedd(monitored):
    return zeep_client(monitored.url + "condorSchedd.wsdl", monitored.url)


def test_counters_move_by_what_happened(monitored, schedd):
    before = scrape(monitored.port)
    ran, = submit(schedd, Cmd="/bin/true")
    wait_for(schedd, ran, lambda job: job.get("JobStatus") == "4")
    parked, = submit(schedd, Cmd="/bin/true", Requirements=expr("FALSE"))
    assert schedd.holdJob(None, *parked, "parked by the test", False, False, False).code == "SUCCESS"
    status, _, answer = get(monitored.port, "/metrics", source="127.0.0.2")
    assert status == 403 and "allow_read" in json.loads(answer)["error"]
    after = scrape(monitored.port)

    assert moved(before, after, "birdbath_jobs_submitted_total") == 2
    assert moved(before, after, "birdbath_job_transitions_total", state="running") == 1
    assert moved(before, after, "birdbath_job_transitions_total", state="completed") == 1
    assert moved(before, after, "birdbath_job_transitions_total", state="held") == 1
    assert moved(before, after, "birdbath_job_run_duration_seconds_count") == 1
    assert moved(before, after, "birdbath_requests_total", operation="submit", outcome="SUCCESS") == 2
    assert moved(before, after, "birdbath_requests_total", operation="holdJob", outcome="SUCCESS") == 1
    assert moved(before, after, "birdbath_request_duration_seconds_count", operation="submit") == 2
    assert moved(before, after, "birdbath_requests_refused_total", code="403") == 1
    # the queue as it is now: read from the backend at the scrape
    assert moved(before, after, "birdbath_jobs", state="held") == 1
    assert moved(before, after, "birdbath_jobs", state="completed") == 1
    assert moved(before, after, "birdbath_held_jobs", code="1") == 1  # HoldReasonCode 1: held by a user
    assert after[("birdbath_slots", frozenset())] == 2
    assert after[("birdbath_transactions_open", frozenset())] == 0
    assert after[("birdbath_state_directory_free_bytes", frozenset())] > 0
    assert after[("process_resident_memory_bytes", frozenset())] > 0


def test_health_and_readiness(monitored):
    status, content_type, body = get(monitored.port, "/healthz")
    assert (status, content_type, json.loads(body)) == (200, "application/json", {"status": "ok"})
    status, _, body = get(monitored.port, "/readyz")
    assert (status, json.loads(body)) == (200, {"ready": True, "problems": []})


@pytest.mark.parametrize("path", ["/metrics", "/healthz", "/readyz"])
def test_pages_refuse_hosts_outside_allow_read(monitored, path):
    status, content_type, body = get(monitored.port, path, source="127.0.0.2")
    assert (status, content_type) == (403, "application/json")
    assert json.loads(body) == {"error": "host 127.0.0.2 is not in allow_read"}


def test_operations_keep_every_other_path(monitored):
    status, _, body = get(monitored.port, "/some/where/condorSchedd.wsdl")
    assert status == 200 and b"definitions" in body
    status, _, _ = get(monitored.port, "/metricsandmore")
    assert status == 404  # an operation's path, answered as the operations answer a GET that is no WSDL


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 4 MiB tmpfs of its own, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


def test_readyz_says_when_the_state_directory_is_full(start_gateway, small_disk):
    gateway = start_gateway(RUNNER, state_dir=small_disk / "state")
    assert get(gateway.port, "/readyz")[0] == 200
    filler = small_disk / "filler"
    full = subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], check=False, capture_output=True)
    assert b"No space left" in full.stderr
    status, _, body = get(gateway.port, "/readyz")
    answer = json.loads(body)
    assert status == 503 and answer["ready"] is False
    assert [problem for problem in answer["problems"] if "does not take a write" in problem] == answer["problems"]
    free = scrape(gateway.port)[("birdbath_state_directory_free_bytes", frozenset())]
    assert free < 64 * 1024
    filler.unlink()
    assert get(gateway.port, "/readyz")[0] == 200


def test_a_job_the_gateway_cannot_start_is_held_with_the_code_the_alert_reads(monitored, schedd):
    """BirdbathJobsHeldByGatewayFailures (README) fires on held jobs of any code but 1 (a user) and 3 (the job's own
    policy): a job whose Iwd does not exist is held by the gateway with code 14 (IWD_ERROR)."""
    before = scrape(monitored.port)
    key, = submit(schedd, Cmd="/bin/true", Iwd="/nonexistent/directory")
    wait_for(schedd, key, lambda job: job.get("JobStatus") == "5")
    after = scrape(monitored.port)
    assert moved(before, after, "birdbath_held_jobs", code="14") == 1
    assert moved(before, after, "birdbath_job_transitions_total", state="held") == 1


def test_amqp_figures_and_readiness_follow_the_broker(amqp_broker, open_base):  # noqa: F811
    from tests.test_lowlatency import carod_config, run, seed_job, wait_for_consumer

    queue = "grid-metrics"
    gateway = GatewayProcess(open_base / "served", carod_config(amqp_broker, carod_broker_queue=queue),
                             tmp=open_base).start()
    try:
        wait_for_consumer(amqp_broker, queue)
        before = scrape(gateway.port)
        job = seed_job()
        assert [reply.status for reply in run(amqp_broker, queue, [job])[job.message_id]] == [2, 4]
        after = scrape(gateway.port)
        assert after[("birdbath_amqp_connected", frozenset())] == 1
        assert moved(before, after, "birdbath_amqp_messages_taken_total") == 1
        assert moved(before, after, "birdbath_amqp_messages_finals_total") == 1
        assert moved(before, after, "birdbath_amqp_messages_rejected_total") == 0
        assert after[("birdbath_amqp_connections_total", frozenset())] == 1
        assert get(gateway.port, "/readyz")[0] == 200
    finally:
        gateway.stop()


def test_readyz_says_when_the_broker_is_away(start_gateway, open_base):  # noqa: F811
    with HeldPort() as unused:  # a port nothing listens on, and nothing will while the test runs
        gateway = start_gateway(f"[carod]\nenable_carod = true\ncarod_broker_port = {unused.port}\n",
                                state_dir=open_base / "away")
        status, _, body = get(gateway.port, "/readyz")
        assert (status, json.loads(body)) == (503, {"ready": False, "problems": ["AMQP broker not connected"]})
        assert scrape(gateway.port)[("birdbath_amqp_connected", frozenset())] == 0


def test_callers_refused_for_who_they_are_are_counted(start_gateway, tmp_path):
    """A wrong password on the SSL port is refused (401) for the operations and for /metrics alike, and counted."""
    import base64
    import ssl

    pki = TestPki(tmp_path / "pki")
    pki.passwords({"alice": "wonderland"})
    gateway = start_gateway(pki.config(certificates=False, passwords=True), ssl=True)
    before = scrape(gateway.port)
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    wrong = {"Authorization": "Basic " + base64.b64encode(b"alice:wrong").decode()}
    for method, path, body in (("POST", "/", b"<x/>"), ("GET", "/metrics", None)):
        connection = http.client.HTTPSConnection("127.0.0.1", gateway.ssl_port, context=context, timeout=30)
        try:
            connection.request(method, path, body=body, headers=wrong)
            response = connection.getresponse()
            assert response.status == 401 and response.getheader("www-authenticate", "").startswith("Basic")
            response.read()
        finally:
            connection.close()
    after = scrape(gateway.port)
    assert moved(before, after, "birdbath_requests_refused_total", code="401") == 2


def test_pages_answer_only_what_they_serve(monitored):
    """A POST to a page is not an operation's (405, and the gateway goes on); a query string changes nothing."""
    connection = http.client.HTTPConnection("127.0.0.1", monitored.port, timeout=30)
    try:
        connection.request("POST", "/metrics", body=b"<x/>", headers={"Content-Type": "text/xml"})
        response = connection.getresponse()
        assert response.status == 405
        response.read()
    finally:
        connection.close()
    status, _, body = get(monitored.port, "/healthz?verbose=1&x=%00")
    assert (status, json.loads(body)) == (200, {"status": "ok"})
    assert get(monitored.port, "/metrics")[0] == 200


def test_execution_figures_move_by_what_happened(monitored, schedd, tmp_path):
    """What BirdbathSchedulerNotCycling (README) reads: a job that cannot match any slot is idle but unmatchable (the
    rule leaves it out), a job that can starts (a ``running`` transition) and holds a slot while it runs; each
    run's launcher start and each negotiation cycle is timed."""
    # an earlier test's job may have left its slot only just now (a slot is free once its run is cleaned up,
    # shortly after the job's completion is recorded)
    wait_until(lambda: scrape(monitored.port)[("birdbath_slots_busy", frozenset())] == 0)
    before = scrape(monitored.port)
    parked, = submit(schedd, Cmd="/bin/true", Requirements=expr("FALSE"))
    wait_until(lambda: moved(before, scrape(monitored.port), "birdbath_idle_jobs_unmatchable") == 1)
    go = tmp_path / "go"
    busy, = submit(schedd, Cmd="/bin/sh", Arguments="-c " + join_v2([f"while [ ! -e {go} ]; do sleep 0.05; done"]),
                   Iwd=str(tmp_path), ShouldTransferFiles="NO")
    wait_for(schedd, busy, lambda job: job.get("JobStatus") == "2")
    # the scheduler writes the job's running state on the backend's thread, and the executor counts its slot once
    # the reactor hears of the choice: a client quick enough reads JobStatus 2 a moment before the slot is counted
    wait_until(lambda: moved(before, scrape(monitored.port), "birdbath_slots_busy") == 1)
    running = scrape(monitored.port)
    assert moved(before, running, "birdbath_slots_busy") == 1
    assert running[("birdbath_slots_busy", frozenset())] < running[("birdbath_slots", frozenset())]
    assert moved(before, running, "birdbath_jobs", state="idle") == 1  # the parked job, which is unmatchable:
    assert moved(before, running, "birdbath_idle_jobs_unmatchable") == 1  # no idle job the rule would count
    go.touch()
    wait_for(schedd, busy, lambda job: job.get("JobStatus") == "4")
    assert schedd.removeJob(None, *parked, "done", False).code == "SUCCESS"
    wait_until(lambda: moved(before, scrape(monitored.port), "birdbath_idle_jobs_unmatchable") == 0)
    after = scrape(monitored.port)
    assert moved(before, after, "birdbath_job_transitions_total", state="running") == 1
    assert moved(before, after, "birdbath_slots_busy") == 0
    assert moved(before, after, "birdbath_launcher_start_duration_seconds_count") == 1
    assert moved(before, after, "birdbath_launcher_start_duration_seconds_sum") > 0
    assert moved(before, after, "birdbath_launcher_start_duration_seconds_bucket", le="+Inf") == 1
    assert moved(before, after, "birdbath_negotiation_cycle_duration_seconds_count") >= 2  # (a start, an end)
    assert moved(before, after, "birdbath_negotiation_cycle_duration_seconds_sum") > 0


def test_staging_areas_and_the_spool_are_counted(monitored):
    from tests.test_submission_api import call, ok

    before = scrape(monitored.port)
    staging = call(monitored, "create")["id"]
    ok(call(monitored, "send", staging=staging, name="in.txt", offset=0, data=base64.b64encode(b"x" * 1000).decode()))
    staged = scrape(monitored.port)
    assert moved(before, staged, "birdbath_staging_areas") == 1
    assert moved(before, staged, "birdbath_spool_bytes") == 0  # (a staging area is not the spool yet)
    never = {"TYPE": 0, "VALUE": "FALSE"}
    jobs = [call(monitored, "submit", staging=staging, ad={"Cmd": "/bin/true", "Requirements": never})["id"]
            for _ in range(2)]  # (an area may be submitted from again, until it expires or is aborted)
    submitted = scrape(monitored.port)
    assert moved(before, submitted, "birdbath_staging_areas") == 1
    assert moved(before, submitted, "birdbath_spool_bytes") == 2000
    ok(call(monitored, "abort", staging=staging))
    assert moved(before, scrape(monitored.port), "birdbath_staging_areas") == 0
    for job in jobs:
        ok(call(monitored, "remove", id=job))


def test_status_and_the_scheduler_ad_show_the_figures_of_the_metrics(monitored, schedd):
    """One source: ``birdbath status -schedd`` (the collector's Scheduler ad) and /metrics count the same jobs."""
    held, = submit(schedd, Cmd="/bin/true", Requirements=expr("FALSE"))
    assert schedd.holdJob(None, *held, "for the count", False, False, False).code == "SUCCESS"
    idle, = submit(schedd, Cmd="/bin/true", Requirements=expr("FALSE"))
    status = subprocess.run([sys.executable, "-m", "birdbath_client.cli", "--url", monitored.url, "status", "-schedd",
                             "-af", "TotalIdleJobs", "TotalRunningJobs", "TotalHeldJobs", "TotalJobAds"],
                            capture_output=True, text=True, timeout=120, check=True)
    samples = scrape(monitored.port)
    jobs = {state: int(samples[("birdbath_jobs", frozenset({("state", state)}))])
            for state in ("idle", "running", "held")}
    total = sum(int(value) for (name, _), value in samples.items() if name == "birdbath_jobs")
    assert status.stdout.split() == [str(jobs["idle"]), str(jobs["running"]), str(jobs["held"]), str(total)]
    assert jobs["idle"] >= 1 and jobs["held"] >= 1
    for key in (held, idle):
        schedd.removeJob(None, *key, "counted", False)


def test_the_pages_on_a_port_of_their_own(start_gateway):
    with HeldPort() as held:  # bound by the gateway (SO_REUSEADDR), and by no other socket before it
        port = held.port
        gateway = start_gateway(f"[gateway]\nmetrics_port = {port}\n" + READERS)
    samples = scrape(port)
    assert samples[("birdbath_slots", frozenset())] > 0
    assert get(port, "/readyz")[0] == 200 and get(port, "/healthz")[0] == 200
    assert get(port, "/condorSchedd.wsdl")[0] == 404  # the pages only: no operation is served there
    status, _, body = get(port, "/metrics", source="127.0.0.2")
    assert status == 403 and json.loads(body) == {"error": "host 127.0.0.2 is not in allow_read"}
    assert get(gateway.port, "/metrics")[0] == 200  # (and still on the gateway's own port)


def test_metrics_port_must_be_a_port_of_its_own():
    from gateway.config import ConfigError, GatewayConfig, validate

    with pytest.raises(ConfigError, match="metrics_port 1984 is another of the gateway's ports"):
        validate(GatewayConfig(metrics_port=1984))
    with pytest.raises(ConfigError, match="metrics_port"):
        validate(GatewayConfig(metrics_port=65536))


def test_figures_add_up_across_processes():
    """What a parent process of several workers does with their figures: adds them (a histogram's buckets too)."""
    from jobmodel.figures import CYCLE_BOUNDS, Buckets, ExecutionFigures, JobFacts, Kind, tally
    from jobmodel.jobs import JobStatus

    one = tally([JobFacts("alice", JobStatus.IDLE, 5, 2, 0), JobFacts("bob", JobStatus.HELD, 5, 1, 14)])
    two = tally([JobFacts("alice", JobStatus.RUNNING, 12, 0, 0), JobFacts("alice", JobStatus.IDLE, 5, 1, 0)])
    both = one.merge(two)
    assert both.count(JobStatus.IDLE) == 2 and both.count(JobStatus.IDLE, weighted=True) == 3
    assert both.count(JobStatus.RUNNING, kind=Kind.SLOT) == 0 and both.count(JobStatus.RUNNING, kind=Kind.LOCAL) == 1
    assert both.held_by_code == {14: 1} and both.owners() == ["alice", "bob"]
    fast, slow = Buckets(CYCLE_BOUNDS), Buckets(CYCLE_BOUNDS)
    fast.observe(0.0005)
    slow.observe(3.0)
    slow.observe(100.0)  # (above every bound: the +Inf bucket)
    added = ExecutionFigures(slots=2, cycles=fast).merge(ExecutionFigures(slots=4, busy_slots=1, cycles=slow))
    assert (added.slots, added.busy_slots, added.cycles.count, added.cycles.total) == (6, 1, 3, 103.0005)
    assert added.cycles.counts[0] == 1 and added.cycles.counts[-1] == 1 and added.cycles.counts[-2] == 0
    with pytest.raises(ValueError):
        fast.merge(Buckets((1.0,)))


def test_request_tallies_add_up_across_processes():
    """Each process tallies the requests it serves; the core adds the workers' tallies to its own (a histogram's
    buckets too), and a client naming ever new operations gets them counted as ``other``."""
    from prometheus_client import CollectorRegistry, generate_latest
    from twisted.logger import LogLevel

    from gateway.monitoring.events import MAX_LABEL_VALUES, REQUESTS, EventMetrics, RequestCounter

    def answered(operation: str, outcome: str, ms: float) -> dict:
        return {"log_namespace": REQUESTS, "operation": operation, "outcome": outcome, "ms": ms,
                "log_level": LogLevel.info}

    worker = RequestCounter()
    for ms in (0.3, 2.0):
        worker(answered("getJobAd", "SUCCESS", ms))
    worker({"log_namespace": REQUESTS, "code": 401, "log_level": LogLevel.warn})
    worker({"log_namespace": REQUESTS, "code": 401, "log_level": LogLevel.info})  # not a refusal: not counted
    registry = CollectorRegistry()
    core = EventMetrics(registry, lambda: [worker.tally()])
    core(answered("getJobAd", "FAIL", 40.0))
    for number in range(MAX_LABEL_VALUES + 5):
        core(answered(f"made-up-{number}", "FAIL", 1.0))
    samples = {(sample.name, frozenset(sample.labels.items())): sample.value
               for family in text_string_to_metric_families(generate_latest(registry).decode())
               for sample in family.samples}

    def value(name: str, **labels: str) -> float:
        return samples[(name, frozenset(labels.items()))]

    assert value("birdbath_requests_total", operation="getJobAd", outcome="SUCCESS") == 2
    assert value("birdbath_requests_total", operation="getJobAd", outcome="FAIL") == 1
    assert value("birdbath_request_duration_seconds_count", operation="getJobAd") == 3
    assert value("birdbath_request_duration_seconds_bucket", operation="getJobAd", le="0.0005") == 1
    assert value("birdbath_request_duration_seconds_bucket", operation="getJobAd", le="0.0025") == 2
    assert value("birdbath_request_duration_seconds_bucket", operation="getJobAd", le="+Inf") == 3
    assert value("birdbath_request_duration_seconds_sum", operation="getJobAd") == pytest.approx(0.0423)
    assert value("birdbath_requests_refused_total", code="401") == 1
    assert value("birdbath_requests_total", operation="other", outcome="FAIL") == 6  # 64 names, getJobAd first
    assert worker.tally().answered == {"getJobAd": {"SUCCESS": 2}}  # adding left the worker's own tally alone
