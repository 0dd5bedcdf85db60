"""The workers' views of the jobs (``gateway/workers/jobview.py``): the local store's change feed, the core's
getJobAds over a worker's candidates (``BirdbathSchedd.get_job_ads_among``) and the view's updates.  End to end with
worker processes: ``tests/test_workers.py``."""

from __future__ import annotations

import threading

import classad2
import pytest
from twisted.internet.defer import Deferred, fail, succeed

from backends.evaluation import VIEW_LITERALS, literal_values, literals_ad, true_keys
from backends.interface import ActionChange, AttributeChange, Batch, Changes, NewJob, revision
from backends.literals import REMEMBERED
from backends.local.store import ChangeLog, JobStore
from gateway.core.auth import AccessPolicy, Authentication, Caller, HostList
from gateway.core.grants import Begins
from gateway.core.queries import QueryRunner, QuerySettings
from gateway.core.schedd import BirdbathSchedd, JobAdStructs, ViewAnswer
from gateway.core.status import BirdbathError, StatusCode
from gateway.core.transactions import TransactionRef
from gateway.workers.changenumber import PublishedNumber
from gateway.workers.jobview import JobView, ViewedSchedd
from gateway.workers.wire import Codec
from jobmodel.jobs import JobAction
from tests.synchronous import run

ALICE = Caller("127.0.0.1", "alice", Authentication.SOCKET)


def job(cluster: int, proc: int, **attributes: object) -> classad2.ClassAd:
    ad = classad2.ClassAd()
    ad["ClusterId"], ad["ProcId"], ad["JobStatus"], ad["Owner"] = cluster, proc, 1, "alice"
    for name, value in attributes.items():
        ad[name] = value
    return ad


# -- the store's change feed -----------------------------------------------------------------------------------
def test_the_store_tells_which_jobs_each_write_changed_and_which_left(tmp_path):
    store = JobStore(tmp_path / "queue.sqlite3")
    opened = store.changes_since(0)
    assert opened.keys is None  # 0 is always too old: a reader starts from the whole queue
    assert store.changes_since(opened.number) == Changes(opened.number, frozenset())
    store.apply({(1, 0): job(1, 0), (1, 1): job(1, 1)})
    first = store.changes_since(opened.number)
    assert first.number > opened.number and first.keys == {(1, 0), (1, 1)}
    store.apply({(1, 1): job(1, 1, JobStatus=5)})
    store.apply({}, archived=[(1, 0)])
    later = store.changes_since(first.number)
    assert later.keys == {(1, 1), (1, 0)} and later.number > first.number
    assert store.changes_since(later.number).keys == frozenset()
    assert store.changes_since(later.number + 1).keys is None  # not one of its numbers
    store.close()


def test_a_watcher_hears_a_writes_number_before_its_ads_are_readable_and_again_once_it_is_counted(tmp_path):
    store = JobStore(tmp_path / "queue.sqlite3")
    heard: list[tuple[int, bool, int]] = []  # (number, the job readable then, the number counted then)
    store.watch_changes(lambda number: heard.append((number, store.get((1, 0)) is not None, store.changes.number)))
    opened = heard[0][0]
    store.apply({(1, 0): job(1, 0)})
    assert heard[1:] == [(opened + 1, False, opened), (opened + 1, True, opened + 1)]
    store.close()


def test_a_reader_behind_what_the_log_remembers_is_told_everything_may_have_changed():
    log = ChangeLog(capacity=3)
    start = log.number
    log.record([(1, 0), (1, 1)])
    middle = log.number
    log.record([(2, 0), (2, 1)])  # the oldest entry goes
    assert log.since(start).keys is None
    assert log.since(middle).keys == {(2, 0), (2, 1)}
    log.record([(3, 0), (3, 1), (3, 2), (3, 3)])  # more than it holds: its own first entries go
    assert log.since(log.number - 1).keys is None
    assert log.since(log.number).keys == frozenset()


def test_a_change_is_counted_only_once_its_ad_is_readable(tmp_path):
    """Readers on other threads while the backend's thread writes: every job a change set names is read as written
    (at least), and the numbers never go back."""
    store = JobStore(tmp_path / "queue.sqlite3")
    store.apply({(1, 0): job(1, 0, Round=0)})
    stop = threading.Event()
    problems: list[str] = []

    def write() -> None:
        for round_ in range(1, 300):
            store.apply({(1, 0): job(1, 0, Round=round_), (2, round_): job(2, round_)},
                        archived=[(2, round_ - 1)] if round_ > 1 else ())
        stop.set()

    def read() -> None:
        seen, last_round = 1, 0
        while not stop.is_set():
            changes = store.changes_since(seen)
            if changes.number < seen:
                problems.append("the number went back")
            if changes.keys and (1, 0) in changes.keys:
                round_ = store.get((1, 0))["Round"]
                if round_ < last_round:
                    problems.append(f"round {round_} after {last_round}")
                last_round = round_
            if changes.keys is not None:
                seen = changes.number

    writer = threading.Thread(target=write)
    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in (writer, *readers):
        thread.start()
    for thread in (writer, *readers):
        thread.join()
    assert not problems
    store.close()


# -- the core's answer over a worker's candidates ---------------------------------------------------------------
@pytest.fixture
def schedd(tmp_path, clock):
    from backends.local import LocalBackend

    backend = LocalBackend(tmp_path / "state", schedd_name="test.example", slots=0)
    queries = QueryRunner(lambda function, *args: succeed(function(*args)))
    yield BirdbathSchedd(backend, lambda function, *args: succeed(function(*args)), AccessPolicy(), clock,
                         queries=queries)
    backend.close()


def commit(schedd: BirdbathSchedd, count: int) -> int:
    cluster = schedd.backend.reserve_clusters()[0]
    ads = []
    for proc in range(count):
        ad = classad2.ClassAd()
        ad["Cmd"], ad["Owner"], ad["Requirements"] = "/bin/true", "alice", classad2.ExprTree("false")
        ads.append(NewJob(cluster, proc, ad))
    schedd.backend.commit(Batch(ads))
    return cluster


def keys(answer: JobAdStructs) -> list[tuple[int, int]]:
    return [revision(ad).key for ad in answer.ads]


def test_a_first_query_resets_the_view_with_every_jobs_literals(schedd):
    cluster = commit(schedd, 3)
    answer = run(schedd.get_job_ads_among(ALICE, None, f"ClusterId == {cluster} && ProcId > 0", [], 0))
    assert answer.reset and keys(answer.ads) == [(cluster, 1), (cluster, 2)]
    assert sorted((c, p) for c, p, _, _ in answer.changes) == [(cluster, 0), (cluster, 1), (cluster, 2)]
    values = dict(zip(VIEW_LITERALS, answer.changes[0][2]))
    assert values["owner"] == "alice" and values["clusterid"] == cluster and values["jobstatus"] == 1
    assert answer.ads.now == run(schedd.get_job_ads(ALICE, None, "true")).now
    assert answer.number == schedd.backend.changes_since(answer.number).number


def test_jobs_changed_since_the_views_number_are_evaluated_again_whatever_the_candidates(schedd):
    cluster = commit(schedd, 4)
    first = run(schedd.get_job_ads_among(ALICE, None, "JobStatus == 5", [], 0))
    assert keys(first.ads) == []
    schedd.backend.commit(Batch(changes=[ActionChange(JobAction.HOLD, cluster, 1, "held", False)]))
    schedd.backend.commit(Batch(changes=[AttributeChange(cluster, 2, "Note", "changed, still idle")]))
    # the candidates are wrong on purpose: job 3 does not match, and job 1 (now held) is not among them
    answer = run(schedd.get_job_ads_among(ALICE, None, "JobStatus == 5", [(cluster, 3)], first.number))
    assert not answer.reset and keys(answer.ads) == [(cluster, 1)]
    assert answer.number > first.number
    assert sorted((c, p) for c, p, _, _ in answer.changes) == [(cluster, 1), (cluster, 2)]
    assert dict(zip(VIEW_LITERALS, next(v for c, p, v, _ in answer.changes if p == 1)))["jobstatus"] == 5
    assert {(c, p): number for c, p, _, number in answer.changes} == {
        key: revision(schedd.backend.get_job(*key)).number for key in ((cluster, 1), (cluster, 2))}


def test_a_job_that_left_is_not_answered_and_leaves_the_view(schedd):
    cluster = commit(schedd, 2)
    first = run(schedd.get_job_ads_among(ALICE, None, "true", [], 0))
    schedd.backend._queue.store.apply({}, archived=[(cluster, 0)])  # (as the queue archives a finished job)
    answer = run(schedd.get_job_ads_among(ALICE, None, "true", [(cluster, 0), (cluster, 1)], first.number))
    assert keys(answer.ads) == [(cluster, 1)]
    assert answer.changes == [[cluster, 0, None, 0]]


def test_the_checks_and_failures_are_get_job_ads_ones(schedd):
    commit(schedd, 1)
    for method, args in ((schedd.get_job_ads, ()), (schedd.get_job_ads_among, ([], 0))):
        with pytest.raises(BirdbathError, match="Query failed"):
            run(method(ALICE, None, "ClusterId == " + "(" * 2000 + "1" + ")" * 2000, *args))
    schedd.policy = AccessPolicy(allow_read=HostList(["192.0.2.1"]), allow_write=HostList(["192.0.2.1"]))
    for method, args in ((schedd.get_job_ads, ()), (schedd.get_job_ads_among, ([], 0))):
        with pytest.raises(BirdbathError, match="Permission denied"):
            run(method(ALICE, None, "true", *args))


# -- the view -----------------------------------------------------------------------------------------------------
def update(number: int, reset: bool, *changes: list) -> ViewAnswer:
    """A view's update; a job's revision number, when a change does not give it, is the update's number."""
    return ViewAnswer(JobAdStructs([], 0), number, reset,
                      [change if len(change) == 4 else [*change, 0 if change[2] is None else number]
                       for change in changes])


def test_the_view_takes_in_newer_updates_only_and_starts_again_at_a_reset():
    view = JobView()
    alice = literal_values(job(1, 0))
    assert view.update(update(5, True, [1, 0, alice], [1, 1, alice]))
    assert view.number == 5 and sorted(view.ads) == [(1, 0), (1, 1)]
    assert view.update(update(7, False, [1, 0, None], [2, 0, literal_values(job(2, 0, JobStatus=5))]))
    assert sorted(view.ads) == [(1, 1), (2, 0)] and view.ads[(2, 0)]["JobStatus"] == 5
    assert not view.update(update(6, False, [1, 0, alice]))  # an answer overtaken by a newer one
    assert sorted(view.ads) == [(1, 1), (2, 0)]
    irregular = job(3, 0)
    irregular["JobStatus"] = classad2.ExprTree("Other + 1")  # (an expression a client set in its place)
    assert view.update(update(8, False, [3, 0, literal_values(irregular)]))
    assert (3, 0) not in view.ads and view.irregular == {(3, 0)}
    assert view.update(update(9, True, [4, 0, alice]))
    assert sorted(view.ads) == [(4, 0)] and not view.irregular and view.number == 9


def test_the_view_groups_its_jobs_by_value_through_every_update(monkeypatch):
    """A view answers a constraint over a literal many of its jobs share from its groups by value (as the store
    does), through updates, departures and a reset: the same keys as evaluating every entry, without doing so."""
    from gateway.workers import jobview

    view = JobView()
    running = {(c, p) for c in range(1, 41) for p in range(5) if (c + p) % 17 == 0}
    view.update(update(3, True, *[[c, p, literal_values(job(c, p, JobStatus=2 if (c, p) in running else 1))]
                                  for c in range(1, 41) for p in range(5)]))
    stopped = min(running)
    view.update(update(4, False, [1, 0, None], [2, 0, literal_values(job(2, 0, JobStatus=2))],
                       [*stopped, literal_values(job(*stopped, JobStatus=1))]))
    running = (running - {stopped, (1, 0)}) | {(2, 0)}
    constraint = classad2.ExprTree("JobStatus == 2")
    entries = view.entries()
    assert sorted(true_keys(entries, constraint, 30)) == sorted(running)
    monkeypatch.setattr(jobview.evaluation, "true_keys", lambda *args: pytest.fail("every entry was evaluated"))
    assert view.matching(constraint, 30) == sorted(running)
    view.update(update(5, True, [9, 0, literal_values(job(9, 0, JobStatus=2))],
                       *[[9, p, literal_values(job(9, p))] for p in range(1, 10)]))
    assert view.matching(constraint, 30) == [(9, 0)]


def test_a_simple_constraint_evaluates_on_the_literals_as_on_the_whole_ad():
    whole = [job(c, p, QDate=1000 + c, Cmd="/bin/x", Iwd="/tmp") for c in range(1, 6) for p in range(3)]
    whole[4]["Owner"] = "bob"
    views = [((ad["ClusterId"], ad["ProcId"]), literals_ad(literal_values(ad))) for ad in whole]
    for text in ("ClusterId == 2", 'Owner == "BOB"', "ProcId > 0 && QDate < 1004", "GlobalJobId is undefined",
                 "ClusterId % 2 == 0 || JobStatus =!= 1"):
        constraint = classad2.ExprTree(text)
        assert true_keys(views, constraint, 30) == true_keys(
            [((ad["ClusterId"], ad["ProcId"]), ad) for ad in whole], constraint, 30), text


class CoreOverCodecs:
    """A worker's link to a core in this process: each call runs the core's method, and its answer crosses through
    the core's and the worker's codecs as over the link (the worker's table of received ads fills as the real one
    does)."""

    alive = True

    def __init__(self, core: BirdbathSchedd | None = None) -> None:
        self.core = core
        self.codec, self._core_codec = Codec(), Codec()
        self.calls: list[tuple[str, tuple]] = []
        #: methods whose answers are held back (the core ran them; the answer crosses at :meth:`release`)
        self.held: set[str] = set()
        self._waiting: list[tuple[Deferred, object]] = []

    def call(self, service: str, method: str, *args: object):
        self.calls.append((method, args))
        try:
            value = run(getattr(self.core, method)(*args))
        except Exception:  # noqa: BLE001 - the call's answer, as over the link
            return fail()
        if method in self.held:
            answer: Deferred = Deferred()
            self._waiting.append((answer, value))
            return answer
        return succeed(self._crossed(value))

    def release(self) -> None:
        """The answers held back cross now, in the order they were asked."""
        waiting, self._waiting = self._waiting, []
        for answer, value in waiting:
            answer.callback(self._crossed(value))

    def _crossed(self, value: object) -> object:
        return self.codec.decode(self._core_codec.encode(value))

    def methods(self) -> list[str]:
        return [method for method, _ in self.calls]


def viewed(link: CoreOverCodecs, policy: AccessPolicy | None = None, published: PublishedNumber | None = None,
           call_in_thread=lambda function, *args: succeed(function(*args))) -> ViewedSchedd:
    """A worker's schedd over ``link``, its evaluations on this thread by default (the tests run no reactor)."""
    from twisted.internet import reactor

    policy = policy or AccessPolicy()
    begins = Begins(link, policy, 0)  # (these tests begin no transaction in the worker: it is never asked)
    return ViewedSchedd(link, "schedd", reactor, QuerySettings(), policy, published, begins=begins,
                        call_in_thread=call_in_thread)


def test_a_workers_schedd_asks_the_core_over_its_view_only_for_simple_constraints(schedd):
    cluster = commit(schedd, 1)
    link = CoreOverCodecs(schedd)
    worker = viewed(link)
    run(worker.get_job_ads(ALICE, None, f"ClusterId == {cluster}"))
    assert link.methods() == ["get_job_ads"]  # without the backend's change feed: the core answers
    worker.set_constants({"job_views": True})
    run(worker.get_job_ads(ALICE, None, f"ClusterId == {cluster}"))
    assert link.calls.pop()[1][3:] == ([], 0) and worker.view.number > 0
    run(worker.get_job_ads(ALICE, None, f"ClusterId == {cluster}"))  # (no number published: never current)
    assert link.calls.pop()[1][3:] == ([(cluster, 0)], worker.view.number)
    for text in ('regexp("x", Cmd)', "Cmd == 1", "", None, "ClusterId == " + "(" * 2000 + "1" + ")" * 2000):
        link.calls.clear()
        if text and text.startswith("ClusterId"):
            with pytest.raises(BirdbathError, match="Query failed"):
                run(worker.get_job_ads(ALICE, None, text))
        else:
            run(worker.get_job_ads(ALICE, None, text))
        assert link.methods() == ["get_job_ads"], text


BOB = Caller("127.0.0.1", "bob", Authentication.SOCKET)


@pytest.fixture
def published(schedd):
    """The backend's change number, published as the core publishes it to its workers."""
    number = PublishedNumber.create()
    schedd.backend.watch_changes(number.publish)
    return number


def test_a_current_view_answers_reads_in_the_worker_and_a_change_sends_them_to_the_core(schedd, published):
    cluster = commit(schedd, 3)
    link = CoreOverCodecs(schedd)
    worker = viewed(link, schedd.policy, published)
    worker.set_constants({"job_views": True})
    constraint = f"ClusterId == {cluster} && ProcId > 0"
    first = run(worker.get_job_ads(ALICE, None, constraint))
    assert link.methods() == ["get_job_ads_among"] and keys(first) == [(cluster, 1), (cluster, 2)]
    assert worker.current()
    again = run(worker.get_job_ads(ALICE, None, constraint))  # from the view and the ads held: nothing crosses
    one = run(worker.get_job_ad(ALICE, None, cluster, 1))
    assert link.methods() == ["get_job_ads_among"]
    assert [str(ad) for ad in again.ads] == [str(ad) for ad in first.ads] and one.ad is again.ads[0]
    for reader in (worker, schedd):  # the owner check, in the worker as in the core
        with pytest.raises(BirdbathError, match="Not job owner"):
            run(reader.get_job_ad(BOB, None, cluster, 1))
    assert link.methods() == ["get_job_ads_among"]
    run(worker.get_job_ad(ALICE, None, cluster, 0))  # an ad the worker does not hold crosses once
    run(worker.get_job_ad(ALICE, None, cluster, 0))
    assert link.methods() == ["get_job_ads_among", "get_job_ad"]

    schedd.backend.commit(Batch(changes=[ActionChange(JobAction.HOLD, cluster, 1, "held", False)]))
    assert not worker.current()  # the next reads cross; a getJobAd asks for the view's update too
    assert run(worker.get_job_ad(ALICE, None, cluster, 1)).ad["JobStatus"] == 5
    assert link.methods()[2:] == ["view_since", "get_job_ad"] and worker.current()
    assert run(worker.get_job_ad(ALICE, None, cluster, 1)).ad["JobStatus"] == 5
    assert keys(run(worker.get_job_ads(ALICE, None, "JobStatus == 5"))) == [(cluster, 1)]
    assert len(link.calls) == 4

    transaction = run(schedd.begin_transaction(ALICE, 60))  # in a transaction, the core answers
    ref = TransactionRef(transaction.id, 60)
    run(worker.get_job_ad(ALICE, ref, cluster, 1))
    run(worker.get_job_ads(ALICE, ref, constraint))
    assert link.methods()[4:] == ["get_job_ad", "get_job_ads"]
    with pytest.raises(BirdbathError) as unknown:  # a job not in the view: the core answers it unknown
        run(worker.get_job_ad(ALICE, None, cluster + 100, 0))
    assert unknown.value.status.code is StatusCode.UNKNOWNJOB and link.methods()[-1] == "get_job_ad"


def test_a_read_the_view_cannot_answer_whole_crosses(schedd, published):
    """A job whose literal is an expression, or an ad held at another revision than the view's: the core answers."""
    cluster = commit(schedd, 2)
    link = CoreOverCodecs(schedd)
    worker = viewed(link, schedd.policy, published)
    worker.set_constants({"job_views": True})
    run(worker.get_job_ads(ALICE, None, "ProcId >= 0"))
    schedd.backend.commit(Batch(changes=[AttributeChange(cluster, 1, "Note", "newer")]))
    worker._refresh()  # the view at the new revision; the ad held at the one before
    assert worker.current() and link.methods() == ["get_job_ads_among", "view_since"]
    assert [ad.get("Note") for ad in run(worker.get_job_ads(ALICE, None, "ProcId >= 0")).ads] == [None, "newer"]
    assert link.methods()[2:] == ["get_job_ads_among"]
    assert run(worker.get_job_ad(ALICE, None, cluster, 1)).ad["Note"] == "newer"  # held now
    schedd.backend.commit(Batch(changes=[AttributeChange(cluster, 0, "JobStatus", classad2.ExprTree("1 + 1"))]))
    assert [len(run(worker.get_job_ads(ALICE, None, "JobStatus == 2")).ads) for _ in range(2)] == [1, 1]
    assert worker.view.irregular == {(cluster, 0)} and worker.current()
    assert link.methods()[3:] == ["get_job_ads_among", "get_job_ads_among"]


def test_a_denied_caller_is_denied_in_the_worker_as_in_the_core(schedd, published):
    commit(schedd, 1)
    link = CoreOverCodecs(schedd)
    worker = viewed(link, schedd.policy, published)
    worker.set_constants({"job_views": True})
    run(worker.get_job_ads(ALICE, None, "ProcId >= 0"))
    stranger = Caller("192.0.2.9", "alice", Authentication.SOCKET)
    schedd.policy = worker._policy = AccessPolicy(allow_read=HostList(["127.0.0.1"]),
                                                  allow_write=HostList(["127.0.0.1"]))
    for read in (lambda: worker.get_job_ads(stranger, None, "ProcId >= 0"),
                 lambda: worker.get_job_ad(stranger, None, 1, 0)):
        with pytest.raises(BirdbathError, match="Permission denied"):
            run(read())
    assert link.methods() == ["get_job_ads_among"]


def counting(link: CoreOverCodecs, schedd: BirdbathSchedd, published: PublishedNumber) -> tuple[ViewedSchedd, list]:
    """A worker's schedd over ``link`` with job views, and the constraints it evaluates over its view, as they are."""
    evaluated: list[object] = []

    def call_in_thread(function, *args):
        evaluated.append(args[0])
        return succeed(function(*args))

    worker = viewed(link, schedd.policy, published, call_in_thread)
    worker.set_constants({"job_views": True})
    return worker, evaluated


def test_a_constraint_polled_again_over_an_unchanged_view_is_not_evaluated_again(schedd, published):
    cluster = commit(schedd, 3)
    link = CoreOverCodecs(schedd)
    worker, evaluated = counting(link, schedd, published)
    constraint = f"ClusterId == {cluster} && ProcId > 0"
    # (the first evaluation is over the empty view, which the core's answer resets)
    answers = [keys(run(worker.get_job_ads(ALICE, None, constraint))) for _ in range(4)]
    assert answers == [[(cluster, 1), (cluster, 2)]] * 4 and len(evaluated) == 2
    assert keys(run(worker.get_job_ads(ALICE, None, "ProcId == 0"))) == [(cluster, 0)] and len(evaluated) == 3
    schedd.backend.commit(Batch(changes=[AttributeChange(cluster, 0, "Note", "x")]))  # (any change: a new number)
    # the view is behind: what it found at its number are the candidates, the core answers and updates the view
    assert keys(run(worker.get_job_ads(ALICE, None, constraint))) == [(cluster, 1), (cluster, 2)]
    assert len(evaluated) == 3 and worker.view.answers.get(constraint, worker.view.number) is None
    assert keys(run(worker.get_job_ads(ALICE, None, "ProcId == 0"))) == [(cluster, 0)] and len(evaluated) == 4
    for text in range(40):  # a bounded number of them
        run(worker.get_job_ads(ALICE, None, f"ProcId == {text}"))
    assert len(worker.view.answers) == REMEMBERED


def test_a_constraint_that_does_not_parse_is_logged_once_by_the_worker_not_again_by_the_core(schedd, published):
    from twisted.logger import globalLogPublisher

    commit(schedd, 1)
    link = CoreOverCodecs(schedd)
    worker = viewed(link, schedd.policy, published)
    worker.set_constants({"job_views": True})
    seen: list[dict] = []
    globalLogPublisher.addObserver(seen.append)
    try:
        for _ in range(2):  # crossing to the core (a view behind), then answered in the worker
            assert run(worker.get_job_ads(ALICE, None, "((( not a classad")).ads == []
        assert run(schedd.get_job_ads(ALICE, None, "((( not a classad")).ads == []  # a client of the core's own
    finally:
        globalLogPublisher.removeObserver(seen.append)
    told = [event for event in seen if "does not parse" in event.get("log_format", "")]
    assert len(told) == 3 and link.methods() == ["get_job_ads_among"]


def test_an_evaluation_during_a_reset_reads_the_whole_old_view_not_half_the_new(monkeypatch):
    """A reset's tables are built before they replace the old ones: a thread evaluating while the reactor fills them
    (here, an evaluation made from inside the fill) finds every job of the old view."""
    from gateway.workers import jobview

    view = JobView()
    view.update(update(3, False, *[[c, 0, literal_values(job(c, 0))] for c in range(1, 11)]))
    constraint = classad2.ExprTree("ProcId == 0")
    seen_meanwhile: list[list] = []
    real = jobview.evaluation.literals_ad

    def filling(values):
        seen_meanwhile.append(view.matching(constraint, 30))
        return real(values)

    monkeypatch.setattr(jobview.evaluation, "literals_ad", filling)
    view.update(update(4, True, *[[c, 0, literal_values(job(c, 0))] for c in range(1, 13)]))
    assert all(sorted(found) == [(c, 0) for c in range(1, 11)] for found in seen_meanwhile)
    assert len(seen_meanwhile) == 12 and sorted(view.matching(constraint, 30)) == [(c, 0) for c in range(1, 13)]


def test_no_view_is_current_while_a_write_is_under_way(schedd, published):
    """The store publishes a write's number before its ads are readable: a worker whose view is at the number before
    crosses (the core reads the ads as they are) rather than answer what another reader may already have seen
    change."""
    cluster = commit(schedd, 1)
    link = CoreOverCodecs(schedd)
    worker = viewed(link, schedd.policy, published)
    worker.set_constants({"job_views": True})
    run(worker.get_job_ads(ALICE, None, f"ClusterId == {cluster}"))
    assert worker.current()
    schedd.backend._queue.store.changes.announce()  # (as a write does, before its ads are readable)
    assert not worker.current()
    run(worker.get_job_ad(ALICE, None, cluster, 0))
    assert link.methods()[1:] == ["view_since", "get_job_ad"] and not worker.current()


def test_a_query_in_a_transaction_is_the_cores_from_the_start(schedd, published):
    """The core checks the transaction first, as one process does: a made-up one is refused as such (not as the
    caller's missing READ), and nothing is evaluated in the worker for a caller the core then refuses."""
    cluster = commit(schedd, 1)
    link = CoreOverCodecs(schedd)
    worker, evaluated = counting(link, schedd, published)
    stranger = Caller("192.0.2.9", "alice", Authentication.SOCKET)
    schedd.policy = worker._policy = AccessPolicy(allow_read=HostList(["127.0.0.1"]),
                                                  allow_write=HostList(["127.0.0.1"]))
    with pytest.raises(BirdbathError) as refused:
        run(worker.get_job_ads(stranger, TransactionRef(12345, 60), f"ClusterId == {cluster}"))
    assert refused.value.status.code is StatusCode.INVALIDTRANSACTION and not evaluated
    txn = run(schedd.begin_transaction(ALICE, 60))
    answer = run(worker.get_job_ads(ALICE, TransactionRef(txn.id, 60), f"ClusterId == {cluster}"))
    assert keys(answer) == [(cluster, 0)] and not evaluated
    assert link.methods() == ["get_job_ads", "get_job_ads"]


def test_the_null_transaction_is_no_transaction(schedd, published):
    cluster = commit(schedd, 1)
    link = CoreOverCodecs(schedd)
    worker = viewed(link, schedd.policy, published)
    worker.set_constants({"job_views": True})
    run(worker.get_job_ads(ALICE, None, f"ClusterId == {cluster}"))
    null = TransactionRef(0, 0)
    assert null.is_null
    run(worker.get_job_ads(ALICE, null, f"ClusterId == {cluster}"))
    run(worker.get_job_ad(ALICE, null, cluster, 0))
    assert link.methods() == ["get_job_ads_among"]


def test_a_views_update_arriving_after_other_answers_is_taken_in_or_dropped_by_its_number(schedd, published):
    """A getJobAd that finds the view behind asks for its update and crosses meanwhile; the update may arrive after
    other answers, a reset after another: the view takes in only what is newer, and its answers stay exact."""
    cluster = commit(schedd, 3)
    link = CoreOverCodecs(schedd)
    link.held.add("view_since")
    worker = viewed(link, schedd.policy, published)
    worker.set_constants({"job_views": True})
    assert run(worker.get_job_ad(ALICE, None, cluster, 1)).ad["ProcId"] == 1  # the update (a reset) held back
    assert link.methods() == ["view_since", "get_job_ad"] and worker.view.number == 0
    assert keys(run(worker.get_job_ads(ALICE, None, f"ClusterId == {cluster}"))) == [(cluster, p) for p in range(3)]
    number = worker.view.number  # (the getJobAds answer reset the view first)
    schedd.backend.commit(Batch(changes=[ActionChange(JobAction.HOLD, cluster, 2, "held", False)]))
    link.release()  # the older reset arrives late: dropped
    assert worker.view.number == number and not worker.current()
    run(worker.get_job_ad(ALICE, None, cluster, 2))  # behind: asks again, crosses
    link.release()
    assert worker.current() and worker.view.number > number
    for _ in range(2):  # from the view, and the held job's ad its getJobAd brought at its new revision
        assert keys(run(worker.get_job_ads(ALICE, None, "JobStatus == 5"))) == [(cluster, 2)]
    assert link.methods()[2:] == ["get_job_ads_among", "view_since", "get_job_ad"]
