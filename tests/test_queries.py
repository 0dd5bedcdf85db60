"""Clients' queries run apart: evaluated in forked workers with a budget, on a pool of their own, limited per
caller, and refused when their constraint is over the expression limits; the gateway answers everyone else."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import classad2
import pytest
from twisted.internet.defer import Deferred, succeed

from backends.evaluation import BATCH, filtered, is_simple, matching
from backends.interface import QueryFailed
from gateway.core.auth import Authentication, Caller
from gateway.core.queries import QueryRunner, QuerySettings
from jobmodel.classads import matches, parse_constraint
from tests.birdbath import submit_job
from tests.conftest import QUEUE_ONLY, zeep_client

SLOW = 'regexp("(a+)+$", "' + "a" * 40 + '!")'  # about 0.1 s per evaluation: the library's backtracking limit


def ads(count: int) -> list[classad2.ClassAd]:
    made = []
    for number in range(count):
        ad = classad2.ClassAd()
        ad["N"] = number
        made.append(ad)
    return made


def test_the_worker_finds_what_evaluating_here_finds():
    queue = ads(5000)
    constraint = classad2.ExprTree("N % 7 == 3 || N == 4999")
    assert matching(queue, constraint, 30) == [n for n in range(5000) if n % 7 == 3 or n == 4999]
    assert filtered(queue, constraint, None) == [queue[n] for n in matching(queue, constraint, 30)]
    assert filtered(queue, None, 30) == queue
    assert matching([], constraint, 30) == []


#: every fork this process makes (os.register_at_fork: an observer of the real forks)
FORKS: list[int] = []
os.register_at_fork(before=lambda: FORKS.append(1))


@pytest.mark.parametrize("text", ["ClusterId == 5 && JobStatus =!= 5", 'Owner == "a\\"b" || MY.ProcId >= 0', "true",
                                  "JobStatus == 1 && QDate > 1000.5", "ClusterId is undefined", "(ProcId)"])
def test_a_constraint_over_the_schedds_own_literals_is_simple(text):
    assert is_simple(classad2.ExprTree(text))


@pytest.mark.parametrize("text", [SLOW, 'regexp("a", Owner)', "N == 1", 'ClusterId == size("x")', "ClusterId == {1}[0]",
                                  "JobStatus ? 1 : 2", "ClusterId == " + " + ".join(["1"] * 200),
                                  "Requirements", "MY.Cmd == TARGET.Cmd"])
def test_a_function_a_list_another_attribute_or_length_is_not_simple(text):
    assert not is_simple(classad2.ExprTree(text))


def test_a_simple_constraint_is_evaluated_here_without_a_fork():
    queue = ads(1000)
    for ad in queue:
        ad["ClusterId"], ad["JobStatus"] = ad["N"] // 10, 1 + ad["N"] % 2
    constraint = classad2.ExprTree("ClusterId == 42 && JobStatus =!= 2")
    forks = len(FORKS)
    assert filtered(queue, constraint, 30) == [ad for ad in queue if ad["ClusterId"] == 42 and ad["JobStatus"] == 1]
    assert len(FORKS) == forks
    filtered(queue, classad2.ExprTree("N == 7"), 30)
    assert len(FORKS) == forks + 1  # any other constraint still goes to a worker


@pytest.mark.parametrize("text", ["TRUE", "true", " True "])
def test_the_literal_true_is_every_ad_and_never_evaluated(text):
    assert parse_constraint(text) is None


@pytest.mark.parametrize("text", ["(true)", "true && N == 1", "1", "N =?= UNDEFINED"])
def test_other_constant_looking_constraints_are_still_evaluated(text):
    constraint = parse_constraint(text)
    assert constraint is not None
    queue = ads(10)
    assert filtered(queue, constraint, 30) == [ad for ad in queue if matches(constraint, ad)]


def test_a_simple_constraint_over_its_budget_fails_between_batches():
    with pytest.raises(QueryFailed, match=r"did not finish within its budget of 0 s \(max_query_seconds\)"):
        filtered(ads(BATCH + 1), classad2.ExprTree("ClusterId == 1"), 0)
    assert filtered(ads(BATCH), classad2.ExprTree("ClusterId == 1"), 0) == []  # one batch is always evaluated


def test_a_query_over_its_budget_is_killed_and_fails():
    started = time.monotonic()
    with pytest.raises(QueryFailed, match=r"did not finish within its budget of 0.5 s \(max_query_seconds\)"):
        matching(ads(200), classad2.ExprTree(SLOW), 0.5)
    assert time.monotonic() - started < 5  # it did not wait for the 20 s of evaluation


def test_a_worker_that_crashes_fails_the_query_and_nothing_else():
    """A thread with a small stack forks a worker that cannot hold the constraint's recursion: the worker dies of
    its signal, the query fails, this process goes on."""
    outcome: list[BaseException] = []
    deep = classad2.ExprTree("!" * 20000 + "true")  # parsed here: parsing recurses too

    def query() -> None:
        try:
            matching(ads(3), deep, 30)
        except QueryFailed as failed:
            outcome.append(failed)

    previous = threading.stack_size(256 * 1024)
    try:
        thread = threading.Thread(target=query)
        thread.start()
    finally:
        threading.stack_size(previous)
    thread.join()
    assert len(outcome) == 1 and "its query worker died (signal 11)" in str(outcome[0])


def test_one_caller_runs_at_most_its_share_at_once():
    """A caller's third query waits until one of its two ends; another caller's runs meanwhile."""
    started: list[str] = []
    pending: list[Deferred] = []

    def call(function, *args):
        started.append(function(*args))
        pending.append(Deferred())
        return pending[-1]

    runner = QueryRunner(call, QuerySettings(per_caller=2))
    alice, bob = (Caller("127.0.0.1", name, Authentication.SOCKET) for name in ("alice", "bob"))
    answers = [Deferred.fromCoroutine(runner.run(caller, lambda tag, budget: tag, tag))
               for caller, tag in ((alice, "a1"), (alice, "a2"), (alice, "a3"), (bob, "b1"))]
    assert started == ["a1", "a2", "b1"]
    pending[0].callback("done")
    assert started == ["a1", "a2", "b1", "a3"] and answers[0].result == "done"
    for deferred in pending[1:]:
        deferred.callback("done")
    assert all(answer.called for answer in answers)
    assert runner._turns == {}  # nothing kept for callers with nothing running


def test_a_runner_without_a_pool_passes_the_budget():
    runner = QueryRunner(lambda function, *args: succeed(function(*args)), QuerySettings(budget=7.0))
    caller = Caller("127.0.0.1", "alice", Authentication.SOCKET)
    answer = Deferred.fromCoroutine(runner.run(caller, lambda budget: budget))
    assert answer.result == 7.0


def test_a_job_lookup_never_waits_for_the_backends_thread(tmp_path, clock):
    """getJobAd and the submission API's lookups run on the query pool: with the backend's thread stuck (behind a
    long durable commit, say) they still answer."""
    from backends.interface import Batch, NewJob
    from backends.local import LocalBackend
    from gateway.core.auth import AccessPolicy
    from gateway.core.schedd import BirdbathSchedd
    from gateway.core.submissions import SubmissionService, SubmissionSettings
    from tests.synchronous import run

    backend = LocalBackend(tmp_path / "state", schedd_name="test.example", slots=0)
    cluster, proc = backend.reserve_clusters()[0], 0
    job = classad2.ClassAd()
    job["Cmd"], job["Owner"] = "/bin/true", "alice"
    backend.commit(Batch([NewJob(cluster, proc, job)]))

    def stuck(function, *args, **kwargs) -> Deferred:
        return Deferred()  # the backend's thread never gets to it

    queries = QueryRunner(lambda function, *args: succeed(function(*args)))
    alice = Caller("127.0.0.1", "alice", Authentication.SOCKET)
    schedd = BirdbathSchedd(backend, stuck, AccessPolicy(), clock, queries=queries)
    assert ("Cmd", "/bin/true") in [(a.name, a.value) for a in run(schedd.get_job_ad(alice, None, cluster, proc))]
    service = SubmissionService(backend, stuck, AccessPolicy(), clock, SubmissionSettings("test.example",
                                                                                         tmp_path / "staging"),
                                queries=queries)
    assert run(service.summaries(alice, [f"{cluster}.{proc}"]))[0]["Cmd"] == "/bin/true"
    backend.close()


# -- end to end ---------------------------------------------------------------------------------------------
def _status(schedd, constraint):
    return schedd.getJobAds(None, constraint).status


def test_constraints_over_the_limits_answer_fail_naming_the_limit(gateway):
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    submit_job(schedd, Cmd="/bin/true")
    status = _status(schedd, "!" * 100000 + "true")
    assert status.code == "FAIL" and "max_expression_length" in status.message
    status = _status(schedd, "!" * 30000 + "true")
    assert status.code == "FAIL" and "nests 30001 levels deep" in status.message
    assert _status(schedd, "true").code == "SUCCESS"


def test_slow_queries_fail_at_their_budget_and_the_gateway_answers_others_meanwhile(start_gateway):
    """Six pathological queries of one client run on the pool, two at a time; meanwhile a getJobAd and a whole submit flow
    answer without waiting for them (the last slow ones cannot have ended: each pair takes a whole budget), and each
    slow query ends with FAIL at the budget.  No wall-clock threshold: the order of events is the proof."""
    gateway = start_gateway("[gateway]\nmax_query_seconds = 3\n" + QUEUE_ONLY)
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    cluster, proc = submit_job(schedd, Cmd="/bin/true")
    for _ in range(40):
        submit_job(schedd, Cmd="/bin/true")

    with ThreadPoolExecutor(6) as pool:
        slow = [pool.submit(lambda: _status(zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url), SLOW))
                for _ in range(6)]
        time.sleep(0.5)  # a head start: the first slow pair is evaluating now
        assert schedd.getJobAd(None, cluster, proc).status.code == "SUCCESS"
        submit_job(schedd, Cmd="/bin/true")
        pending = sum(not future.done() for future in slow)
        answers = [future.result(timeout=60) for future in slow]
    assert pending >= 2, f"only {pending} slow queries were still running: the others waited for them"
    assert all(answer.code == "FAIL" and "max_query_seconds" in answer.message for answer in answers)
    assert _status(schedd, f"ClusterId == {cluster}").code == "SUCCESS"  # and it still answers queries


def test_the_limits_are_the_configured_ones_in_both_apis(start_gateway):
    gateway = start_gateway("[gateway]\nmax_expression_length = 50\n" + QUEUE_ONLY)
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    long_text = " || ".join(["ClusterId == 1"] * 4)  # 62 characters
    status = _status(schedd, long_text)
    assert status.code == "FAIL" and "over the limit of 50 (max_expression_length)" in status.message
    txn = schedd.beginTransaction(60).transaction
    cluster = schedd.newCluster(txn).integer
    proc = schedd.newJob(txn, cluster).integer
    answer = schedd.submit(txn, cluster, proc, {"item": [
        {"name": "Cmd", "type": "STRING-ATTR", "value": "/bin/true"},
        {"name": "Requirements", "type": "EXPRESSION-ATTR", "value": long_text}]})
    assert answer.status.code == "FAIL" and "max_expression_length" in answer.status.message
    request = urllib.request.Request(gateway.url + "submission/json/submit", json.dumps({"ad": {
        "Cmd": "/bin/true", "Iwd": "/tmp", "Requirements": {"TYPE": 0, "VALUE": long_text}}}).encode())
    answer = json.loads(urllib.request.urlopen(request, timeout=30).read())
    assert answer["status"]["code"] == "FAIL" and "max_expression_length" in answer["status"]["text"]
