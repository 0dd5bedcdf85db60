"""The durable job queue of the local backend: one SQLite file in WAL mode, every commit synced to disk.

Job ads are stored as ClassAd text (with the texts of clients' expressions they keep, ``jobmodel.exprtext``) and
kept parsed in memory, so queries never touch the disk; the idle ones are also
kept in the order they start (``idle``), so scheduling reads only them.  The store is
the only writer of its file; every change goes through :meth:`JobStore.apply`, which writes all of a
transaction's ads in one SQLite transaction and only then updates the in-memory view.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Iterable, Iterator, Mapping

import classad2

from jobmodel.exprtext import restored, texts_record

from .idle import IdleJobs

JobKey = tuple[int, int]

SCHEMA = """
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    cluster INTEGER NOT NULL,
    proc INTEGER NOT NULL,
    ad TEXT NOT NULL,
    texts TEXT,
    PRIMARY KEY (cluster, proc)
);
CREATE TABLE IF NOT EXISTS dag_state (cluster INTEGER PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS history (
    cluster INTEGER NOT NULL,
    proc INTEGER NOT NULL,
    ad TEXT NOT NULL,
    texts TEXT,
    PRIMARY KEY (cluster, proc)
);
"""


class JobStore:
    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)
        _add_texts_columns(self._db)
        row = self._db.execute("SELECT value FROM counters WHERE name = 'cluster'").fetchone()
        #: the last cluster id handed out, and the highest reserved durably (see next_cluster_id)
        self._last_cluster = self._reserved_cluster = row[0] if row else 0
        self._jobs: dict[JobKey, classad2.ClassAd] = {
            (cluster, proc): parsed(text, texts)
            for cluster, proc, text, texts in self._db.execute(
                "SELECT cluster, proc, ad, texts FROM jobs ORDER BY cluster, proc")
        }
        #: the idle jobs in the order they start (kept up to date by apply)
        self.idle = IdleJobs()
        for key, ad in self._jobs.items():
            self.idle.update(key, ad)

    def close(self) -> None:
        """Give back the unused rest of the reserved cluster ids (a clean restart goes on from the last one handed
        out), then close the file."""
        with self._lock:
            if self._last_cluster < self._reserved_cluster:
                try:
                    with self._transaction():
                        self._db.execute("UPDATE counters SET value = ? WHERE name = 'cluster'", (self._last_cluster,))
                except sqlite3.Error:
                    pass  # (a full disk: the next start skips the rest of the block, as after a crash)
            self._db.close()

    # -- reads (in-memory) ---------------------------------------------------------------------------
    def get(self, key: JobKey) -> classad2.ClassAd | None:
        """The committed ad; callers must not modify it (changes replace the object, never mutate it)."""
        return self._jobs.get(key)

    def __contains__(self, key: JobKey) -> bool:
        return key in self._jobs

    def ads(self) -> Iterator[tuple[JobKey, classad2.ClassAd]]:
        return iter(list(self._jobs.items()))

    def keys_in_cluster(self, cluster: int) -> list[JobKey]:
        return sorted(key for key in self._jobs if key[0] == cluster)

    # -- writes --------------------------------------------------------------------------------------
    def next_cluster_id(self) -> int:
        """Allocate a cluster id that is never handed out again, even if its transaction aborts or the gateway dies.

        Ids are reserved durably :data:`CLUSTER_BLOCK` at a time (the counter holds the highest reserved) and handed
        out from memory, so that a new cluster costs a synced write once per block and not every time; a restart
        goes on after the last reserved id (the rest of that block is never used)."""
        with self._lock:
            if self._last_cluster >= self._reserved_cluster:
                with self._transaction():
                    row = self._db.execute("SELECT value FROM counters WHERE name = 'cluster'").fetchone()
                    reserved = max(row[0] if row else 0, self._last_cluster) + CLUSTER_BLOCK
                    self._db.execute("INSERT OR REPLACE INTO counters (name, value) VALUES ('cluster', ?)",
                                     (reserved,))
                self._reserved_cluster = reserved
            self._last_cluster += 1
            return self._last_cluster

    def apply(self, ads: Mapping[JobKey, classad2.ClassAd], archived: Iterable[JobKey] = ()) -> None:
        """Write these ads and move the ``archived`` jobs into the history, atomically and durably; then publish
        the result to readers."""
        archived = [key for key in archived if key in ads or key in self._jobs]
        queued = [_row(key, ad) for key, ad in ads.items() if key not in archived]
        history = [_row(key, ads[key] if key in ads else self._jobs[key]) for key in archived]
        with self._lock:
            with self._transaction():
                self._db.executemany("INSERT OR REPLACE INTO jobs (cluster, proc, ad, texts) VALUES (?, ?, ?, ?)",
                                     queued)
                self._db.executemany("INSERT OR REPLACE INTO history (cluster, proc, ad, texts) VALUES (?, ?, ?, ?)",
                                     history)
                self._db.executemany("DELETE FROM jobs WHERE cluster = ? AND proc = ?", archived)
            self._jobs.update((key, ad) for key, ad in ads.items() if key not in archived)
            for key in archived:
                self._jobs.pop(key, None)
            for key in ads.keys() | set(archived):
                self.idle.update(key, self._jobs.get(key))

    def dag_state(self, cluster: int) -> str | None:
        """The saved node states of the DAG whose DAGMan job is ``cluster`` (JSON text), if any."""
        with self._lock:
            row = self._db.execute("SELECT state FROM dag_state WHERE cluster = ?", (cluster,)).fetchone()
        return row[0] if row else None

    def save_dag_state(self, cluster: int, state: str | None) -> None:
        with self._lock, self._transaction():
            if state is None:
                self._db.execute("DELETE FROM dag_state WHERE cluster = ?", (cluster,))
            else:
                self._db.execute("INSERT OR REPLACE INTO dag_state (cluster, state) VALUES (?, ?)", (cluster, state))

    def history(self) -> Iterator[classad2.ClassAd]:
        """Jobs that left the queue, most recent cluster first (read from disk: the history is not cached).

        Read a page at a time (:data:`HISTORY_PAGE` rows, from where the last page ended, along the primary key): a
        caller that stops early (the submission API looking up one recent job) reads a page, not the whole history,
        and no caller holds all of its text at once."""
        after: tuple[int, int] | None = None
        while True:
            with self._lock:
                rows = self._db.execute(*_history_page(after)).fetchall()
            for _, _, text, texts in rows:
                yield parsed(text, texts)
            if len(rows) < HISTORY_PAGE:
                return
            after = rows[-1][0], rows[-1][1]

    def _transaction(self) -> "_SqliteTransaction":
        return _SqliteTransaction(self._db)


def parsed(text: str, texts: str | None = None) -> classad2.ClassAd:
    """A stored ad (``str(ad)``: the new ClassAd syntax, and the record of its kept expression texts) read back.
    Not with ``classad2.parseOne``, which keeps an unreachable copy of every ad it parses (htcondor 24.0: about a
    kilobyte per ad, for the life of the process), and the history is read over and over."""
    return restored(text, texts)


def _row(key: JobKey, ad: classad2.ClassAd) -> tuple[int, int, str, str | None]:
    return key[0], key[1], str(ad), texts_record(ad)


def _add_texts_columns(db: sqlite3.Connection) -> None:
    """A queue written before expression texts were kept gets their column (empty: those ads keep none)."""
    for table in ("jobs", "history"):
        if "texts" not in [row[1] for row in db.execute(f"PRAGMA table_info({table})")]:
            db.execute(f"ALTER TABLE {table} ADD COLUMN texts TEXT")


#: cluster ids reserved with one synced write
CLUSTER_BLOCK = 100

#: rows of the history read at once
HISTORY_PAGE = 64


def _history_page(after: tuple[int, int] | None) -> tuple[str, tuple[int, ...]]:
    """The query for the page of the history that follows job ``after`` (None: the first page), newest first."""
    order = "ORDER BY cluster DESC, proc DESC LIMIT ?"
    if after is None:
        return f"SELECT cluster, proc, ad, texts FROM history {order}", (HISTORY_PAGE,)
    return (f"SELECT cluster, proc, ad, texts FROM history WHERE (cluster, proc) < (?, ?) {order}",
            (*after, HISTORY_PAGE))


class _SqliteTransaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back if the block raises or the commit fails.

    A COMMIT can fail (a full disk: "database or disk is full") and leave the transaction open; rolling it back
    then is what lets the next write start a transaction of its own once there is room again."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            try:
                self._db.execute("COMMIT")
                return
            except sqlite3.Error:
                self._roll_back()
                raise
        self._roll_back()

    def _roll_back(self) -> None:
        if self._db.in_transaction:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # SQLite rolled it back itself already (it may, on some errors)
