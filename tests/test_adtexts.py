"""The job-ad texts kept between answers (``gateway.birdbath.adtexts``), keyed on the revisions backends promise: every
answer has the bytes written straight from the ad, through every kind of change of a real local backend's jobs
(the contract, ``backends/contract.py``, checks the revisions themselves for every backend); ads without a revision
are never kept; the kept bytes stay within their budget, and the entries of jobs no longer asked for make room; a
real gateway's answers follow a running job's every change (the scheduler's start and end, its usage while it runs,
hold and release) while the same queries are asked again and again."""

from __future__ import annotations

import sys
import threading
import time

import classad2
import pytest

from backends.contract import job_ad, submitted
from backends.interface import ActionChange, AttributeChange, Batch, stamp
from backends.local import LocalBackend
from backends.local.store import JobStore
from gateway.birdbath import adtexts
from gateway.birdbath.adtexts import ENTRY_COST, KeptTexts
from gateway.birdbath.adwriter import own_items
from gateway.testing import module_gateway, zeep_client
from jobmodel.arguments import join_v2
from jobmodel.classads import parse_constraint
from jobmodel.jobs import JobAction
from tests.birdbath import expr, values
from tests.test_execution import submit

ROUNDS = 3  # writings of each state: the first leaves a marker, the second packs, the third unpacks


class Counting:
    """``own_items``, counting the ads it converts."""

    def __init__(self) -> None:
        self.converted = 0

    def __call__(self, ad: classad2.ClassAd) -> bytes:
        self.converted += 1
        return own_items(ad)


@pytest.fixture
def backend(tmp_path):
    backend = LocalBackend(tmp_path, slots=0)
    yield backend
    backend.close()


def stamped(text: str, key: tuple[int, int], number: int) -> classad2.ClassAd:
    return stamp(classad2.ClassAd(text), key, number)


def test_every_change_of_a_local_job_is_answered_changed(backend):
    cluster, procs = submitted(backend, 3, LeaveJobInQueue=True, Note="first")
    convert = Counting()
    texts = KeptTexts(convert)

    def answered_as_written() -> None:
        for _ in range(ROUNDS):
            ads = backend.query(parse_constraint(f"ClusterId == {cluster}"))
            assert [texts.text(ad) for ad in ads] == [own_items(ad) for ad in ads]
            assert texts.text(backend.get_job(cluster, 1)) == own_items(backend.get_job(cluster, 1))

    answered_as_written()
    assert convert.converted == 2 * len(procs) and len(texts) == len(procs)  # the third round was unpacked
    for changes in ([AttributeChange(cluster, 1, "Note", "second")],
                    [AttributeChange(cluster, 1, "Note", classad2.ExprTree("2 + 2"))],
                    [AttributeChange(cluster, 1, "Note", "first")],
                    [ActionChange(JobAction.HOLD, cluster, None, "wait")],
                    [ActionChange(JobAction.RELEASE, cluster, 1, "go")],
                    [ActionChange(JobAction.REMOVE, cluster, 2, "gone")]):
        backend.commit(Batch(changes=changes))
        answered_as_written()
    assert len(texts) == len(procs)  # one entry per job, replaced at each change


def test_a_restarted_queue_is_answered_from_its_stored_ads(tmp_path):
    """Ads read back from the file carry a revision no write of this process gave, so a text kept for a job before
    the restart (the same process, as the tests run it) is never answered for the job's stored ad."""
    backend = LocalBackend(tmp_path, slots=0)
    cluster, (proc,) = submitted(backend, LeaveJobInQueue=True)
    texts = KeptTexts(own_items)
    for _ in range(ROUNDS):
        texts.text(backend.get_job(cluster, proc))
    backend.commit(Batch(changes=[AttributeChange(cluster, proc, "Note", "stored")]))
    backend.close()
    backend = LocalBackend(tmp_path, slots=0)
    try:
        for _ in range(ROUNDS):
            ad = backend.get_job(cluster, proc)
            assert texts.text(ad) == own_items(ad) and b"stored" in texts.text(ad)
    finally:
        backend.close()


def test_every_write_of_the_store_stamps_a_number_never_given_before(tmp_path):
    """The store's one write path (``apply``: clients' batches, the scheduler's starts and ends, usage while running,
    DAG nodes) stamps every ad it stores; two stores of one process never give one number."""
    first = JobStore(tmp_path / "a.sqlite3")
    second = JobStore(tmp_path / "b.sqlite3")
    try:
        numbers = []
        for store in (first, second, first):
            ad = job_ad()
            store.apply({(1, 0): ad})
            assert store.get((1, 0)) is ad and ad.birdbath_revision.key == (1, 0)
            numbers.append(ad.birdbath_revision.number)
        assert len(set(numbers)) == len(numbers)
    finally:
        first.close()
        second.close()


def test_ads_without_a_revision_are_written_anew_and_never_kept():
    convert = Counting()
    texts = KeptTexts(convert)
    ad = classad2.ClassAd("[A = 1]")
    for value in (1, 2):
        ad["A"] = value
        for _ in range(ROUNDS):
            assert texts.text(ad) == own_items(ad)
    assert convert.converted == 2 * ROUNDS and len(texts) == 0 and texts.kept_bytes == 0


def test_a_new_revision_replaces_the_kept_text_and_its_own_is_answered():
    texts = KeptTexts(own_items)
    old, new = stamped("[A = 1]", (1, 0), 5), stamped("[A = 2]", (1, 0), 6)
    for ad in (old, old, old, new, old, new, new, new):
        assert texts.text(ad) == own_items(ad)
    assert len(texts) == 1


def test_the_kept_bytes_stay_within_the_budget_and_jobs_no_longer_asked_for_make_room():
    budget = 40 * ENTRY_COST
    convert = Counting()
    texts = KeptTexts(convert, budget)
    gone = [stamped(f'[A = {n}; B = "job {n}"]', (1, n), 1) for n in range(100)]
    for _ in range(ROUNDS):
        for ad in gone:
            assert texts.text(ad) == own_items(ad)
            assert texts.kept_bytes <= budget
    assert 0 < len(texts) < len(gone)
    kept_before = texts.jobs()
    queued = [stamped(f'[A = {n}; B = "job {n}"]', (2, n), 1) for n in range(20)]
    for _ in range(ROUNDS + 2):  # the old jobs are no longer asked for: a sweep drops them
        for ad in queued:
            assert texts.text(ad) == own_items(ad)
            assert texts.kept_bytes <= budget
    assert {key for key in texts.jobs() if key[0] == 2} == {ad.birdbath_revision.key for ad in queued}
    assert not kept_before & texts.jobs()
    converted = convert.converted
    for ad in queued:
        texts.text(ad)
    assert convert.converted == converted  # every one of them answered from its kept text
    assert texts.kept_bytes == texts.entries_cost()


def test_a_text_asked_for_again_at_its_revision_is_unpacked_once(monkeypatch):
    unpacked = []
    unpack = adtexts.Dictionary.unpack
    monkeypatch.setattr(adtexts.Dictionary, "unpack", lambda self, packed: unpacked.append(packed) or unpack(self, packed))
    texts = KeptTexts(own_items)
    ads = [stamped(f'[A = {n}; B = "job {n}"]', (1, n), 1) for n in range(3)]
    for _ in range(ROUNDS + 3):  # written, then packed, then unpacked once and answered unpacked
        assert [texts.text(ad) for ad in ads] == [own_items(ad) for ad in ads]
    assert len(unpacked) == len(ads)
    changed = stamped('[A = 0; B = "changed"]', (1, 0), 2)
    for _ in range(ROUNDS + 1):  # a new revision: never the old text, unpacked or not
        assert texts.text(changed) == own_items(changed)
    assert len(unpacked) == len(ads) + 1


def test_a_polled_set_larger_than_the_unpacked_budget_keeps_what_fits_of_it(monkeypatch):
    """Not each job evicting the next before it is asked for again, which would unpack every one of them at every
    poll and cost more than keeping none."""
    unpacked = []
    unpack = adtexts.Dictionary.unpack
    monkeypatch.setattr(adtexts.Dictionary, "unpack", lambda self, packed: unpacked.append(packed) or unpack(self, packed))
    one = len(own_items(stamped('[A = 10; B = "job 10"]', (1, 10), 1))) + adtexts.UNPACKED_COST
    texts = KeptTexts(own_items, unpacked_budget=5 * one)
    ads = [stamped(f'[A = {n}; B = "job {n}"]', (1, n), 1) for n in range(10, 30)]
    for _ in range(ROUNDS + 4):
        unpacked.clear()
        for ad in ads:
            assert texts.text(ad) == own_items(ad)
            assert texts.unpacked_bytes <= texts.unpacked_budget
    assert len(unpacked) <= len(ads) - 4  # the last poll: the four or five that fit were answered unpacked
    assert texts.unpacked_bytes == texts.unpacked_cost() > 0
    none = KeptTexts(own_items, unpacked_budget=0)
    for _ in range(ROUNDS + 1):
        assert none.text(ads[0]) == own_items(ads[0]) and none.unpacked_bytes == 0


def test_pollers_moving_to_other_jobs_have_them_kept_unpacked_within_a_while(monkeypatch):
    unpacked = []
    unpack = adtexts.Dictionary.unpack
    monkeypatch.setattr(adtexts.Dictionary, "unpack", lambda self, packed: unpacked.append(packed) or unpack(self, packed))
    now = [0.0]
    one = len(own_items(stamped('[A = 10; B = "job 10"]', (1, 10), 1))) + adtexts.UNPACKED_COST
    texts = KeptTexts(own_items, unpacked_budget=5 * one, clock=lambda: now[0])
    before = [stamped(f'[A = {n}; B = "job {n}"]', (1, n), 1) for n in range(10, 15)]
    after = [stamped(f'[A = {n}; B = "job {n}"]', (2, n), 1) for n in range(10, 15)]

    def polled(ads: list) -> int:
        """How many texts one poll unpacked."""
        unpacked.clear()
        assert [texts.text(ad) for ad in ads] == [own_items(ad) for ad in ads]
        return len(unpacked)

    for _ in range(ROUNDS):
        polled(before)
    assert polled(before) == 0
    for _ in range(ROUNDS):
        polled(after)
    assert polled(after) == len(after)  # the budget is the first set's
    now[0] += adtexts.UNPACKED_SECONDS  # all dropped at the next unpack: the set asked for now is kept
    assert polled(after) == len(after) and polled(after) == 0 and polled(before) == len(before)


@pytest.mark.parametrize("unpacked_budget", [adtexts.UNPACKED, 8 * (adtexts.UNPACKED_COST + 60)])
def test_threads_sharing_the_table_answer_every_ad_right(unpacked_budget):
    texts = KeptTexts(own_items, budget=30 * ENTRY_COST, unpacked_budget=unpacked_budget)
    ads = [stamped(f'[A = {n}; B = "{"x" * n}"]', (1, n % 50), n // 50) for n in range(200)]
    failures = []

    def work(offset: int) -> None:
        for _ in range(20):
            for ad in ads[offset::3]:
                if texts.text(ad) != own_items(ad):
                    failures.append(ad)

    threads = [threading.Thread(target=work, args=(offset,)) for offset in range(3)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # (threads switch as often as they can)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert not failures
    assert texts.kept_bytes == texts.entries_cost() <= 30 * ENTRY_COST
    assert texts.unpacked_bytes == texts.unpacked_cost() <= unpacked_budget


running = module_gateway("[backends.local]\nslots = 1\nkill_grace = 1.0\nperiodic_interval = 0.5\n"
                         "starter_update_interval = 0.5\n")


def test_a_running_jobs_every_change_is_answered_while_the_same_queries_are_asked(running, tmp_path):
    """getJobAds and getJobAd asked every 20 ms (each state read many times, so answered from kept texts): the job is
    seen idle, then running (the scheduler's start), with usage while it runs (its update every 0.5 s), held and
    released by its owner, and completed (the scheduler's end)."""
    schedd = zeep_client(running.url + "condorSchedd.wsdl", running.url)
    go = tmp_path / "go"
    tmp_path.chmod(0o777)
    work = f"import os, time\nwhile time.process_time() < 0.6 or not os.path.exists({str(go)!r}): pass\n"
    (key,) = submit(schedd, Cmd=sys.executable, Arguments=join_v2(["-S", "-c", work]), Iwd=str(tmp_path),
                    Requirements=expr("TRUE"))
    constraint = f"ClusterId == {key[0]} && ProcId == {key[1]}"
    seen: list[dict[str, str]] = []

    def until(condition, timeout: float = 30.0) -> dict[str, str]:
        """The job's ad once both queries answer it so (each asked until it does)."""
        deadline = time.monotonic() + timeout
        for ask in (lambda: values(schedd.getJobAds(None, constraint).classAdArray.item[0]),
                    lambda: values(schedd.getJobAd(None, *key).classAd)):
            while not condition(found := ask()):
                seen.append(found)
                if time.monotonic() > deadline:
                    raise AssertionError(f"job {key} never got there; last seen {seen[-1]}")
                time.sleep(0.02)
        return found

    until(lambda ad: ad["JobStatus"] in ("1", "2"))
    until(lambda ad: ad["JobStatus"] == "2")
    until(lambda ad: float(ad.get("RemoteUserCpu", 0)) + float(ad.get("RemoteSysCpu", 0)) >= 0.3)
    assert schedd.holdJob(None, *key, "wait", False, False, False).code == "SUCCESS"
    until(lambda ad: ad["JobStatus"] == "5" and ad.get("HoldReason") == "wait")
    assert schedd.releaseJob(None, *key, "go on", False, False).code == "SUCCESS"
    go.touch()
    done = until(lambda ad: ad["JobStatus"] == "4")
    assert done["ExitCode"] == "0"
