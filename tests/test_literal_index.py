"""Queries answered from the jobs' groups by literal value (backends/literals.py) find exactly what evaluating
the constraint on every job finds, whatever the jobs hold; the store keeps the groups through every write."""

from __future__ import annotations

import threading

import classad2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends import literals
from backends.evaluation import literals_read, true_values
from backends.interface import QueryFailed
from backends.literals import LiteralIndex, select
from backends.local.store import JobStore
from jobmodel.classads import matches

#: what a job may hold for ClusterId: literals of every type (1, 1.0 and true apart), an expression, nothing
VALUES = st.one_of(st.integers(-3, 40), st.sampled_from([1.0, 2.5, True, False, "1", "alice", "Alice", "a\"b"]),
                   st.just(classad2.ExprTree("3 + 4")), st.just(None))
CONSTRAINTS = ["ClusterId == 1", "ClusterId % 3 == 0", "ClusterId =?= 1", "ClusterId is 1.0", "ClusterId =!= true",
               'ClusterId == "alice"', 'ClusterId =?= "alice"', "ClusterId is undefined",
               "ClusterId > 7 && ClusterId < 30", "(ClusterId)", "MY.ClusterId != 2", "ClusterId == 7", "ClusterId"]
#: a queue size for which the index always answers (the tests' queues are small)
MANY = 10**9


def job(cluster: int, proc: int, value: object) -> classad2.ClassAd:
    ad = classad2.ClassAd()
    ad["ProcId"] = proc
    if value is not None:
        ad["ClusterId"] = value
    return ad


def indexed(jobs: dict[tuple[int, int], classad2.ClassAd]) -> LiteralIndex:
    index = LiteralIndex()
    for key, ad in jobs.items():
        index.replace(key, None, ad)
    return index


def evaluated(jobs: dict[tuple[int, int], classad2.ClassAd],
              constraint: classad2.ExprTree) -> list[tuple[tuple[int, int], classad2.ClassAd]]:
    return [(key, jobs[key]) for key in sorted(jobs) if matches(constraint, jobs[key])]


@settings(max_examples=60, deadline=None)
@given(values=st.lists(VALUES, max_size=40), changes=st.lists(st.tuples(st.integers(0, 39), VALUES), max_size=10),
       text=st.sampled_from(CONSTRAINTS))
def test_the_groups_answer_what_every_job_evaluated_answers(values, changes, text):
    jobs = {(number, 0): job(number, 0, value) for number, value in enumerate(values)}
    index = indexed(jobs)
    for number, value in changes:  # jobs change their value, or leave (past the end: a new job)
        key = (number, 0)
        new = job(number, 0, value)
        index.replace(key, jobs.get(key), new)
        jobs[key] = new
    constraint = classad2.ExprTree(text)
    assert select(index, constraint, 30, jobs.get, MANY) == evaluated(jobs, constraint)


def test_a_constraint_over_another_literal_or_over_two_is_evaluated_job_by_job():
    index = indexed({(1, 0): job(1, 0, 1)})
    for text in ("GlobalJobId == 1", "ClusterId == 1 && ProcId == 0", 'regexp("a", Owner)', "Cmd == 1", "true"):
        assert select(index, classad2.ExprTree(text), 30, lambda key: None, MANY) is None


def test_values_that_few_jobs_share_are_evaluated_job_by_job():
    """With nearly a value per job the index would cost more than the jobs' own evaluation."""
    jobs = {(n, p): job(n, p, n) for n in range(10) for p in range(literals.SHARED)}
    constraint = classad2.ExprTree("ClusterId == 1")
    assert select(indexed(jobs), constraint, 30, jobs.get, len(jobs)) == evaluated(jobs, constraint)
    assert select(indexed(jobs), constraint, 30, jobs.get, len(jobs) - 1) is None


def test_a_constraint_that_selects_most_of_the_queue_is_evaluated_job_by_job():
    jobs = {(n, p): job(n, p, n % 2) for n in range(10) for p in range(10)}
    half, more = classad2.ExprTree("ClusterId == 0"), classad2.ExprTree("ClusterId >= 0")
    assert select(indexed(jobs), half, 30, jobs.get, len(jobs)) == evaluated(jobs, half)
    assert select(indexed(jobs), more, 30, jobs.get, len(jobs)) is None


def test_a_job_that_left_is_not_answered_and_one_that_changed_is_answered_as_it_is():
    jobs = {(1, 0): job(1, 0, 1), (2, 0): job(2, 0, 2)}
    index = indexed(jobs)
    now = {(1, 0): None, (2, 0): job(2, 0, 5)}  # what a reader finds when its turn comes: 1.0 left, 2.0 changed
    assert select(index, classad2.ExprTree("ClusterId < 3"), 30, now.get, MANY) == []
    assert select(index, classad2.ExprTree("ClusterId == 5"), 30, now.get, MANY) == []  # (5 was no value: not found)
    assert select(index, classad2.ExprTree("ClusterId >= 2"), 30, now.get, MANY) == [((2, 0), now[(2, 0)])]


def test_each_value_is_evaluated_once_and_within_the_budget():
    constraint = classad2.ExprTree("ClusterId % 2 == 0")
    pairs = [((int, n), n) for n in range(10)]
    assert true_values(constraint, "clusterid", pairs, None) == [(int, n) for n in range(0, 10, 2)]
    with pytest.raises(QueryFailed, match="budget"):
        true_values(constraint, "clusterid", [((int, n), n) for n in range(5000)], -1.0)


def test_the_literals_a_constraint_reads_are_named():
    assert literals_read(classad2.ExprTree("MY.ClusterId == 1 || clusterid == 2")) == {"clusterid"}
    assert literals_read(classad2.ExprTree('Owner == "a" && JobStatus == 2')) == {"owner", "jobstatus"}
    assert literals_read(classad2.ExprTree("true")) == frozenset()
    assert literals_read(classad2.ExprTree('regexp("a", Owner)')) is None


def test_the_store_keeps_the_groups_through_writes_removals_and_a_restart(tmp_path):
    store = JobStore(tmp_path / "queue.db")
    store.loaded.wait(10)

    def ad(cluster: int, proc: int, status: int, owner: str) -> classad2.ClassAd:
        made = classad2.ClassAd({"ClusterId": cluster, "ProcId": proc, "JobStatus": status})
        made["Owner"] = owner
        return made

    store.apply({(c, p): ad(c, p, 1, "alice" if c % 2 else "bob") for c in range(1, 6) for p in range(3)})
    store.apply({(3, 1): ad(3, 1, 2, "alice")}, archived=[(4, 0)])
    owned = classad2.ExprTree('Owner == "bob"')
    running = classad2.ExprTree("JobStatus == 2")
    bobs = [(2, 0), (2, 1), (2, 2), (4, 1), (4, 2)]
    assert [(a["ClusterId"], a["ProcId"]) for a in store.selected(owned, 30)] == bobs
    assert [(a["ClusterId"], a["ProcId"]) for a in store.selected(running, 30)] == [(3, 1)]
    assert len(store.selected(classad2.ExprTree("true"), 30)) == 14
    store.close()
    reopened = JobStore(tmp_path / "queue.db")
    assert reopened.loaded.wait(10)
    assert [(a["ClusterId"], a["ProcId"]) for a in reopened.selected(running, 30)] == [(3, 1)]
    assert len(reopened.selected(owned, 30)) == 5
    reopened.close()


def test_a_reader_never_misses_a_job_whose_value_stays_while_the_writer_moves_others():
    """A query thread reading while the backend's thread moves jobs between states: every job whose state does not
    change is found by every read (the writer's moves add before they remove)."""
    jobs = {(n, 0): job(n, 0, 1) for n in range(2000)}
    index = indexed(jobs)
    for n in range(1000, 2000):  # the moving half holds ClusterId 2 or 3; the steady half holds 1
        jobs[(n, 0)] = new = job(n, 0, 2)
        index.replace((n, 0), job(n, 0, 1), new)
    stop = threading.Event()

    def writer() -> None:
        value = 2
        while not stop.is_set():
            value = 5 - value
            for n in range(1000, 2000):
                new = job(n, 0, value)
                index.replace((n, 0), jobs[(n, 0)], new)
                jobs[(n, 0)] = new

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        constraint = classad2.ExprTree("ClusterId == 1 || ClusterId == 2 || ClusterId == 3")
        for _ in range(200):
            assert len(select(index, constraint, 30, jobs.get, MANY)) == 2000
    finally:
        stop.set()
        thread.join()


def test_a_value_is_grouped_with_its_type():
    assert literals.value_of(job(1, 0, 1), "clusterid") != literals.value_of(job(1, 0, 1.0), "clusterid")
    assert literals.value_of(job(1, 0, 1), "clusterid") != literals.value_of(job(1, 0, True), "clusterid")
    assert literals.value_of(job(1, 0, classad2.ExprTree("1 + 2")), "clusterid") is literals.IRREGULAR
    assert literals.value_of(job(1, 0, None), "clusterid") is literals.MISSING


# -- answers remembered at a change number (backends.literals.RememberedAnswers, JobStore.selected) ----------------
@pytest.fixture
def polled(tmp_path, monkeypatch):
    """A store of 20 one-job clusters, and a count of its evaluations (by the groups or job by job)."""
    store = JobStore(tmp_path / "queue.db")
    store.loaded.wait(10)
    store.apply({(c, 0): classad2.ClassAd({"ClusterId": c, "ProcId": 0, "JobStatus": 1}) for c in range(1, 21)})
    evaluations: list[str] = []
    for module, name in ((literals, "select"), (literals.evaluation, "filtered")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *args, real=real, name=name: evaluations.append(name) or real(*args))
    yield store, evaluations
    store.close()


def keys_of(ads: list[classad2.ClassAd]) -> list[tuple[int, int]]:
    return [(ad["ClusterId"], ad["ProcId"]) for ad in ads]


def test_a_timeless_constraint_asked_again_over_unchanged_jobs_is_not_evaluated_again(polled):
    store, evaluations = polled
    constraint = classad2.ExprTree("ClusterId % 5 == 0")
    assert [keys_of(store.selected(constraint, 30)) for _ in range(3)] == [[(5, 0), (10, 0), (15, 0), (20, 0)]] * 3
    assert len(evaluations) == 2  # the groups declined (one job a value), then every job: once
    store.apply({(10, 0): classad2.ClassAd({"ClusterId": 10, "ProcId": 0, "JobStatus": 2}),
                 (21, 0): classad2.ClassAd({"ClusterId": 21, "ProcId": 0, "JobStatus": 1})}, archived=[(5, 0)])
    assert keys_of(store.selected(constraint, 30)) == [(10, 0), (15, 0), (20, 0)] and len(evaluations) == 4
    assert store.selected(constraint, 30)[0]["JobStatus"] == 2 and len(evaluations) == 4


def test_an_answer_one_of_whose_ads_changed_under_a_write_not_counted_yet_is_evaluated_again(polled):
    """A write publishes its ads before it is counted: at the same change number, an ad found before may have
    changed; the remembered answer checks the revisions of what it answers."""
    from backends.interface import stamp

    store, _ = polled
    constraint = classad2.ExprTree("JobStatus == 1 && ClusterId < 3")
    assert keys_of(store.selected(constraint, 30)) == [(1, 0), (2, 0)]
    number = store.changes.number
    store._jobs[(2, 0)] = stamp(classad2.ClassAd({"ClusterId": 2, "ProcId": 0, "JobStatus": 5}), (2, 0), 10**9)
    assert store.changes.number == number  # (published, not counted: as a write is half-way)
    assert keys_of(store.selected(constraint, 30)) == [(1, 0)]


def test_a_constraint_that_may_change_with_time_alone_is_evaluated_every_time(polled):
    store, evaluations = polled
    for text in ("ClusterId == 1 && time() > 0", "ClusterId == 1 && Cmd is undefined"):  # a function; not a literal
        for _ in range(2):
            assert keys_of(store.selected(classad2.ExprTree(text), 30)) == [(1, 0)], text
    assert evaluations.count("filtered") == 4
    evaluations.clear()
    store.apply({(3, 0): classad2.ClassAd({"ClusterId": 3, "ProcId": 0, "JobStatus": classad2.ExprTree("1 + 0")})})
    for _ in range(2):  # (a job whose JobStatus is an expression, which may call time())
        assert len(store.selected(classad2.ExprTree("JobStatus == 1"), 30)) == 20
    assert evaluations.count("filtered") == 2
    assert literals.timeless(store._literals, classad2.ExprTree("ClusterId == 1"))
    assert not literals.timeless(store._literals, classad2.ExprTree("JobStatus == 1"))


def test_the_answers_remembered_are_bounded():
    answers = literals.RememberedAnswers(capacity=3)
    for number in range(5):
        answers.put(f"ClusterId == {number}", 7, [(number, 0)])
    assert len(answers) == 3 and answers.get("ClusterId == 0", 7) is None
    assert answers.get("ClusterId == 4", 7) == [(4, 0)] and answers.get("ClusterId == 4", 8) is None


def test_nothing_is_answered_from_memory_while_a_write_is_under_way(polled):
    """A write announces its number before its ads are readable: until it is counted, a query evaluates the jobs as
    they are (a reader that saw one of its ads must not be followed by one answered from before it)."""
    store, evaluations = polled
    constraint = classad2.ExprTree("ClusterId % 5 == 0")
    store.selected(constraint, 30)
    store.changes.announce()
    store._jobs[(25, 0)] = classad2.ClassAd({"ClusterId": 25, "ProcId": 0, "JobStatus": 1})  # (half-way)
    assert keys_of(store.selected(constraint, 30))[-1] == (25, 0)
    count = len(evaluations)
    store.selected(constraint, 30)
    assert len(evaluations) > count  # nor remembered while it is under way
