"""The local backend's durable store on a real SQLite file: what leaves the queue is read back from the history in
pages, newest first, so that a caller that stops early reads one page and not the whole history; cluster ids are
reserved durably a block at a time and never handed out twice, across restarts too."""

from __future__ import annotations

import gc
import itertools
import sqlite3

import classad2
import pytest

from backends.local import store as store_module
from backends.local.store import CLUSTER_BLOCK, HISTORY_PAGE, JobStore, parsed
from jobmodel.classads import copy_ad, kept_text


def archived_store(path, count: int) -> JobStore:
    """A store whose history holds jobs 1.0 .. count.1 (two procs a cluster), written in one transaction."""
    store = JobStore(path / "queue.sqlite3")
    ads = {}
    for cluster in range(1, count + 1):
        for proc in (0, 1):
            ad = classad2.ClassAd()
            ad["ClusterId"], ad["ProcId"], ad["JobStatus"] = cluster, proc, 4
            ads[(cluster, proc)] = ad
    store.apply(ads, archived=list(ads))
    return store


def test_the_whole_history_reads_back_newest_first_across_pages(tmp_path):
    store = archived_store(tmp_path, HISTORY_PAGE + 7)  # (2 * HISTORY_PAGE + 14 jobs: three pages)
    keys = [(ad["ClusterId"], ad["ProcId"]) for ad in store.history()]
    assert keys == sorted(((c, p) for c in range(1, HISTORY_PAGE + 8) for p in (0, 1)), reverse=True)
    assert len(set(keys)) == len(keys)
    assert list(store.history()) and not list(JobStore(tmp_path / "empty.sqlite3").history())


def test_a_reader_that_stops_at_the_newest_job_reads_one_page(tmp_path):
    store = archived_store(tmp_path, 3 * HISTORY_PAGE)
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    (newest,) = itertools.islice(store.history(), 1)
    assert (newest["ClusterId"], newest["ProcId"]) == (3 * HISTORY_PAGE, 1)
    selects = [statement for statement in statements if statement.startswith("SELECT")]
    assert len(selects) == 1 and f"LIMIT {HISTORY_PAGE}" in selects[0]


def test_a_page_boundary_inside_a_cluster_loses_no_proc(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "HISTORY_PAGE", 3)  # pages end between the two procs of a cluster
    store = archived_store(tmp_path, 5)
    assert [(ad["ClusterId"], ad["ProcId"]) for ad in store.history()] == [
        (c, p) for c in range(5, 0, -1) for p in (1, 0)]


def test_cluster_ids_go_up_by_one_and_a_block_of_them_costs_one_synced_write(tmp_path):
    store = JobStore(tmp_path / "queue.sqlite3")
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    ids = [store.next_cluster_id() for _ in range(2 * CLUSTER_BLOCK + 1)]
    assert ids == list(range(1, 2 * CLUSTER_BLOCK + 2))
    assert sum(statement.startswith("INSERT OR REPLACE INTO counters") for statement in statements) == 3
    assert statements.count("COMMIT") == 3


def test_a_reservation_takes_the_rest_of_the_block_and_then_a_new_block(tmp_path):
    store = JobStore(tmp_path / "queue.sqlite3")
    assert store.next_cluster_id() == 1
    assert store.reserve_clusters() == range(2, CLUSTER_BLOCK + 1)
    assert store.reserve_clusters(5) == range(CLUSTER_BLOCK + 1, CLUSTER_BLOCK + 6)
    store.close()


def test_after_a_restart_no_cluster_id_is_handed_out_again(tmp_path):
    """(The store is not closed: as after a kill -9, only what was synced is there.)"""
    first = JobStore(tmp_path / "queue.sqlite3")
    before = [first.next_cluster_id() for _ in range(5)]
    again = JobStore(tmp_path / "queue.sqlite3")
    after = again.next_cluster_id()
    assert after > max(before) and after == CLUSTER_BLOCK + 1  # the rest of the first block is skipped
    again.close()  # a clean close gives the rest of the block back
    assert JobStore(tmp_path / "queue.sqlite3").next_cluster_id() == after + 1
    legacy = JobStore(tmp_path / "legacy.sqlite3")  # a queue whose counter held the last id handed out
    legacy._db.execute("INSERT INTO counters (name, value) VALUES ('cluster', 7)")
    assert JobStore(tmp_path / "legacy.sqlite3").next_cluster_id() == 8


def test_ids_given_back_are_handed_out_again_and_a_clean_restart_goes_on_from_the_last_one_used(tmp_path):
    store = JobStore(tmp_path / "queue.sqlite3")
    block = store.reserve_clusters()
    assert block == range(1, CLUSTER_BLOCK + 1)
    store.release_clusters(range(4, CLUSTER_BLOCK + 1))  # 1..3 were used
    assert store.reserve_clusters(2) == range(4, 6)  # from memory, no new reservation
    store.release_clusters(range(5, 6))
    store.close()
    again = JobStore(tmp_path / "queue.sqlite3")
    assert again.next_cluster_id() == 5
    again.release_clusters(range(5, 6))  # and then a crash (no close): the reservation on disk holds
    assert JobStore(tmp_path / "queue.sqlite3").next_cluster_id() == 5 + CLUSTER_BLOCK


@pytest.mark.parametrize("unused", [range(50, CLUSTER_BLOCK), range(50, CLUSTER_BLOCK + 2), range(1, CLUSTER_BLOCK + 1),
                                    range(2, CLUSTER_BLOCK + 1, 2), range(0)],
                         ids=["not-the-end", "past-the-end", "before-the-block", "stepped", "empty"])
def test_ids_that_are_not_the_end_of_the_last_reservation_are_not_taken_back(tmp_path, unused):
    """Giving back ids that were handed out, or never reserved, would hand them out twice."""
    store = JobStore(tmp_path / "queue.sqlite3")
    store.next_cluster_id()  # 1, then 2..CLUSTER_BLOCK
    store.reserve_clusters()
    store.release_clusters(unused)
    assert store.next_cluster_id() == CLUSTER_BLOCK + 1
    store.close()


def test_a_closed_store_hands_out_no_cluster_id(tmp_path):
    """(close() gives back the ids not handed out yet: one handed out after it would be handed out again.)"""
    store = JobStore(tmp_path / "queue.sqlite3")
    handed = store.next_cluster_id()
    store.close()
    with pytest.raises(sqlite3.ProgrammingError):
        store.reserve_clusters()
    assert JobStore(tmp_path / "queue.sqlite3").next_cluster_id() == handed + 1


def live_classads() -> int:
    gc.collect()
    return sum(1 for thing in gc.get_objects() if isinstance(thing, classad2.ClassAd))


def test_reading_the_history_again_and_again_keeps_no_ad_alive(tmp_path):
    """classad2.parseOne keeps a copy of every ad it parses, for ever; the store does not use it."""
    store = archived_store(tmp_path, 300)
    ads = list(store.history())
    assert ads[0] == parsed(str(ads[0])) and str(parsed(str(ads[0]))) == str(ads[0])
    del ads
    before = live_classads()
    for _ in range(3):
        assert len(list(store.history())) == 600
    assert live_classads() == before
    JobStore(tmp_path / "queue.sqlite3")  # (the queue read at start-up goes the same way)


def job(cluster: int, proc: int = 0, status: int = 1, **attributes: object) -> classad2.ClassAd:
    ad = classad2.ClassAd()
    ad["ClusterId"], ad["ProcId"], ad["JobStatus"] = cluster, proc, status
    for name, value in attributes.items():
        ad[name] = value
    return ad


def test_only_the_ads_of_jobs_with_a_process_keep_the_text_they_were_stored_with(tmp_path):
    """A running job's ad is copied again when its run ends: it keeps its row's text for that copy; a queued job's
    ad keeps none (2 KB a job, for as long as it waits), and neither does one in the history."""
    store = JobStore(tmp_path / "queue.sqlite3")
    running, suspended, idle = job(1, status=2), job(2, status=7), job(3)
    held, done = job(4, status=5), job(5, status=4)
    store.apply({(1, 0): running, (2, 0): suspended, (3, 0): idle, (4, 0): held, (5, 0): done}, archived=[(5, 0)])
    assert kept_text(store.get((1, 0))) == str(running) and kept_text(store.get((2, 0))) == str(suspended)
    assert kept_text(store.get((3, 0))) is None and kept_text(store.get((4, 0))) is None and kept_text(done) is None
    assert str(copy_ad(store.get((1, 0)))) == str(running)


def test_the_idle_jobs_are_kept_in_the_order_they_start_as_jobs_change(tmp_path):
    store = JobStore(tmp_path / "queue.sqlite3")
    store.apply({(1, 0): job(1, QDate=30), (2, 0): job(2, QDate=10), (3, 0): job(3, QDate=20, JobPrio=5),
                 (4, 0): job(4, QDate=5, JobUniverse=7), (5, 0): job(5, QDate=1, RequestCpus=2),
                 (6, 0): job(6, status=5)})
    # (the jobs that take no slot first: they do not compete with the others)
    assert list(store.idle.in_order()) == [((4, 0), 0), ((3, 0), 1), ((5, 0), 2), ((2, 0), 1), ((1, 0), 1)]
    assert list(store.idle.in_order(free_cpus=0)) == [((4, 0), 0)]
    store.apply({(3, 0): job(3, status=2, QDate=20, JobPrio=5), (6, 0): job(6, QDate=0)}, archived=[(5, 0)])
    assert [key for key, _ in store.idle.in_order()] == [(4, 0), (6, 0), (2, 0), (1, 0)]
    store.idle.set_aside((6, 0))
    assert [key for key, _ in store.idle.in_order()] == [(4, 0), (2, 0), (1, 0)] and (6, 0) in store.idle
    store.idle.reconsider()
    assert [key for key, _ in store.idle.in_order()] == [(4, 0), (6, 0), (2, 0), (1, 0)]
    store.idle.set_aside((6, 0))
    store.apply({(6, 0): job(6, QDate=0, JobPrio=1)})  # a changed job is matched again
    assert [key for key, _ in store.idle.in_order()] == [(4, 0), (6, 0), (2, 0), (1, 0)]
    reopened = JobStore(tmp_path / "queue.sqlite3")  # (built again from the queue at start-up)
    assert list(reopened.idle.in_order()) == list(store.idle.in_order())
    assert len(store.idle) == 4 and (2, 0) in store.idle and (3, 0) not in store.idle


def test_a_restart_reads_the_scheduling_columns_and_parses_the_ads_in_the_background(tmp_path):
    store = JobStore(tmp_path / "queue.sqlite3")
    store.apply({(1, 0): job(1, QDate=30), (2, 0): job(2, status=2), (3, 0): job(3, QDate=10, JobPrio=2)})
    reopened = JobStore(tmp_path / "queue.sqlite3")
    assert list(reopened.idle.in_order()) == list(store.idle.in_order())  # (from the columns, before any parse)
    assert reopened.keys_with_status([2]) == [(2, 0)]
    assert reopened.get((3, 0))["JobPrio"] == 2  # asked for before the loader came to it: parsed now
    assert reopened.loaded.wait(10)
    assert {key: str(ad) for key, ad in reopened.ads()} == {key: str(ad) for key, ad in store.ads()}
    reopened.close()


def test_a_queue_written_before_the_scheduling_columns_gets_them_from_its_ads(tmp_path):
    import sqlite3

    db = sqlite3.connect(tmp_path / "queue.sqlite3")
    db.execute("CREATE TABLE jobs (cluster INTEGER NOT NULL, proc INTEGER NOT NULL, ad TEXT NOT NULL, "
               "PRIMARY KEY (cluster, proc))")
    db.executemany("INSERT INTO jobs VALUES (?, ?, ?)", [(1, 0, str(job(1, QDate=5))), (2, 0, str(job(2, status=5)))])
    db.commit()
    db.close()
    store = JobStore(tmp_path / "queue.sqlite3")
    assert [key for key, _ in store.idle.in_order()] == [(1, 0)] and store.keys_with_status([5]) == [(2, 0)]
    assert store.get((2, 0))["JobStatus"] == 5


def test_commits_at_once_share_one_sync_and_each_is_durable_when_durable_returns(tmp_path, monkeypatch):
    import os
    import threading

    store = JobStore(tmp_path / "queue.sqlite3")
    store.durable(store.apply({(10, 0): job(10)}))  # (the first sync also syncs the directory of the new WAL)
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(store_module.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    written = [store.apply({(n, 0): job(n)}) for n in range(1, 6)]  # five commits, none synced yet
    threads = [threading.Thread(target=store.durable, args=(number,)) for number in written]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(synced) == 1  # the first sync covered every write before it
    store.durable(written[-1])
    assert len(synced) == 1
    store.apply({(9, 0): job(9)})
    store.durable(store.written)
    assert len(synced) == 2
