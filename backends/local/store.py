"""The durable job queue of the local backend: one SQLite file in WAL mode.

Job ads are stored as ClassAd text (with the texts of clients' expressions they keep, ``jobmodel.exprtext``,
in a column of their own) and kept parsed in memory, so queries never touch the disk; the idle ones are also
kept in the order they start (``idle``), so scheduling reads only them.  The store is the only writer of its file;
every change goes through :meth:`JobStore.apply`, which writes all of a transaction's ads in one SQLite transaction
and only then updates the in-memory view.

What scheduling needs of a job (its state, priority, submission time and CPUs) is also kept in columns of its row,
in an index of their own: a restart reads those (a few megabytes for 100,000 jobs) and answers at once, while a
thread of its own parses the stored ads in the background (:meth:`JobStore.get` parses one that is asked for before
its turn).  Parsing every ad before answering took seconds per 100,000 jobs.

Every ad the store holds carries its revision (``backends.interface.stamp``): a number drawn for the write that stored
it, or, for an ad read back from the file, the number the store drew when it opened.  Numbers come from one counter for
every store of the process, so no two writes, and no two stores, ever give one.  As ads are never changed in place
(a change is a new ad, written by :meth:`JobStore.apply`), a number stands for one content.

Durability is group commit: a write is committed to the WAL without waiting for the disk, and :meth:`durable` waits
until it is synced; one ``fsync`` covers every write made before it, so callers that commit at the same time share
one (``sync_write`` gives the sequence number to wait for).

Each write is also numbered in a :class:`ChangeLog`, with the jobs it changed, once its ads are published: the
gateway's worker processes keep a view of the jobs' literals and ask the store which jobs changed since the number
their view reflects (``changes_since``, ``backends.interface.Capability.CHANGES``).
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import threading
import time
from collections import deque
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

import classad2
from twisted.logger import Logger

from backends import evaluation, literals
from backends.interface import Changes, Revision, revision, stamp
from backends.literals import LiteralIndex, RememberedAnswers
from jobmodel.classads import keep_printed
from jobmodel.exprtext import restored, texts_record

from . import idle
from .idle import IdleJobs
from .lifecycle import WITH_PROCESS

log = Logger()
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
#: the scheduling columns of a job's row (added to queues written before they existed), and their index
COLUMNS = ("status", "prio", "qdate", "cpus")
INDEX = f"CREATE INDEX IF NOT EXISTS jobs_scheduling ON jobs (cluster, proc, {', '.join(COLUMNS)})"
#: rows the background loader parses at a time
LOAD_CHUNK = 500


class JobStore:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        _keep_private(path)
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # the WAL is synced by durable(), for many commits at once
        self._written = self._synced = 0  # sequence numbers of the writes committed, and synced to disk
        self._sync_lock = threading.Lock()
        self._wal: int | None = None
        self._db.executescript(SCHEMA)
        _add_texts_columns(self._db)
        self._add_columns()
        row = self._db.execute("SELECT value FROM counters WHERE name = 'cluster'").fetchone()
        #: the last cluster id handed out, and the highest reserved durably (see next_cluster_id)
        self._last_cluster = self._reserved_cluster = row[0] if row else 0
        #: the ids the last reservation handed out (what release_clusters may take back the end of)
        self._last_block = range(0)
        #: every queued job; None for one whose ad is not parsed yet (the loader's or get's work)
        self._jobs: dict[JobKey, classad2.ClassAd | None] = {}
        #: the revision number of every ad read back from the file (a write's ads get numbers of their own)
        self._loaded_revision = next(REVISIONS)
        #: the idle jobs in the order they start (kept up to date by apply)
        self.idle = IdleJobs()
        #: the parsed jobs grouped by the literals queries select them by (kept with _jobs, under the lock)
        self._literals = LiteralIndex()
        #: constraint text -> the revisions of the ads a timeless constraint was found true for, at a change number
        self._answers: RememberedAnswers[list[Revision]] = RememberedAnswers()
        #: the jobs each write changed, by change number (``changes_since``)
        self.changes = ChangeLog()
        entries = []
        for cluster, proc, *columns in self._db.execute(
                f"SELECT cluster, proc, {', '.join(COLUMNS)} FROM jobs INDEXED BY jobs_scheduling"):
            self._jobs[(cluster, proc)] = None
            entries.append(idle.entry_from_columns((cluster, proc), *columns))
        self.idle.put_all(entry for entry in entries if entry is not None)
        self._closing = False
        #: set once every stored ad is parsed
        self.loaded = threading.Event()
        self._loader = threading.Thread(target=self._load_all, name="queue-loader", daemon=True)
        self._loader.start()

    def _add_columns(self) -> None:
        """Give a queue written before the scheduling columns existed its columns, filled from its ads (once)."""
        present = {row[1] for row in self._db.execute("PRAGMA table_info(jobs)")}
        missing = [name for name in COLUMNS if name not in present]
        if missing:
            with self._transaction():
                for name in missing:
                    self._db.execute(f"ALTER TABLE jobs ADD COLUMN {name}")
                rows = self._db.execute("SELECT cluster, proc, ad FROM jobs").fetchall()
                self._db.executemany(
                    f"UPDATE jobs SET {', '.join(f'{name} = ?' for name in COLUMNS)} WHERE cluster = ? AND proc = ?",
                    [(*idle.columns(parsed(text)), cluster, proc) for cluster, proc, text in rows])
        self._db.execute(INDEX)

    def close(self) -> None:
        """Give back the unused rest of the reserved cluster ids (a clean restart goes on from the last one handed
        out), then close the file."""
        self._closing = True
        self._loader.join()
        with self._lock:
            if self._last_cluster < self._reserved_cluster:
                try:
                    with self._transaction():
                        self._db.execute("UPDATE counters SET value = ? WHERE name = 'cluster'", (self._last_cluster,))
                except sqlite3.Error:
                    pass  # (a full disk: the next start skips the rest of the block, as after a crash)
            self._db.close()
            if self._wal is not None:
                os.close(self._wal)
                self._wal = None

    # -- reads (in-memory) ---------------------------------------------------------------------------
    def get(self, key: JobKey) -> classad2.ClassAd | None:
        """The committed ad; callers must not modify it (changes replace the object, never mutate it)."""
        ad = self._jobs.get(key)
        if ad is None and key in self._jobs:
            return self._load(key)
        return ad

    def in_memory(self, key: JobKey) -> bool:
        """Whether :meth:`get` answers ``key`` from memory (a queued ad not parsed yet is read from disk)."""
        return self._jobs.get(key, key) is not None  # (one lookup: the job may leave meanwhile)

    def __contains__(self, key: JobKey) -> bool:
        return key in self._jobs

    def __len__(self) -> int:
        return len(self._jobs)

    def ads(self) -> Iterator[tuple[JobKey, classad2.ClassAd]]:
        """Every queued job, as it is when its turn comes (a job changed meanwhile is seen changed, one that left
        is skipped).  Only the jobs' keys are copied, never the ads: callers on other threads read while the
        backend's thread writes."""
        for key in list(self._jobs):
            ad = self.get(key)
            if ad is not None:
                yield key, ad

    def values(self) -> Iterator[classad2.ClassAd]:
        """The queued ads, as :meth:`ads` reads them."""
        for _, ad in self.ads():
            yield ad

    def selected(self, constraint: classad2.ExprTree | None, budget: float | None) -> list[classad2.ClassAd]:
        """The queued ads for which ``constraint`` is true (``backends.evaluation.filtered``'s rules).  Once every
        stored ad is parsed: the ads found at this change number before, when the constraint is timeless
        (``backends.literals.timeless``) and none of them changed since; else from the jobs' groups by value when
        that is cheaper (:func:`~backends.literals.select`), otherwise evaluated job by job.

        The change number is read before any ad, and nothing is remembered or answered from memory while a write is
        under way (:meth:`ChangeLog.announce`): an answer remembered at a number is the jobs as they were at that
        number, whole, and it is answered only while the store is still there (each ad checked against its revision
        too, which a write must change)."""
        if constraint is None or not self.loaded.is_set():
            return evaluation.filtered(self.values(), constraint, budget)
        changes = self.changes
        text, number = str(constraint), changes.number
        quiet = not changes.under_way(number)
        remembered = self._answers.get(text, number) if quiet else None
        if remembered is not None:
            ads = self._at(remembered)
            if ads is not None and not changes.under_way(number):
                return ads
        found = literals.select(self._literals, constraint, budget, self.get, len(self._jobs))
        ads = [ad for _, ad in found] if found is not None else evaluation.filtered(self.values(), constraint, budget)
        if quiet and not changes.under_way(number) and literals.timeless(self._literals, constraint):
            self._answers.put(text, number, [revision(ad) for ad in ads])  # type: ignore[misc]
        return ads

    def _at(self, revisions: list[Revision]) -> list[classad2.ClassAd] | None:
        """The ads of now at these revisions; None when one of them changed."""
        ads = []
        jobs = self._jobs
        for stamped in revisions:
            ad = jobs.get(stamped.key)
            if ad is None or revision(ad) != stamped:
                return None
            ads.append(ad)
        return ads

    def keys(self) -> list[JobKey]:
        return list(self._jobs)

    def changes_since(self, number: int) -> Changes:
        """The store's change number and the jobs written or gone after ``number`` (:meth:`ChangeLog.since`)."""
        return self.changes.since(number)

    def watch_changes(self, observer: Callable[[int], None]) -> None:
        """``observer`` hears the change number now and each new one (:meth:`ChangeLog.watch`)."""
        self.changes.watch(observer)

    def keys_in_cluster(self, cluster: int) -> list[JobKey]:
        return sorted(key for key in self._jobs if key[0] == cluster)

    def keys_with_status(self, statuses: Iterable[int]) -> list[JobKey]:
        """The jobs in these states (from the scheduling columns: no ad is parsed)."""
        wanted = sorted(set(statuses))
        with self._lock:
            rows = self._db.execute(
                f"SELECT cluster, proc FROM jobs INDEXED BY jobs_scheduling WHERE status IN "
                f"({', '.join('?' * len(wanted))})", wanted).fetchall()
        return [(cluster, proc) for cluster, proc in rows]

    def _load(self, key: JobKey) -> classad2.ClassAd | None:
        """Parse a job's stored ad now (the loader has not come to it yet)."""
        with self._lock:
            if key in self._jobs and self._jobs[key] is None:
                row = self._db.execute("SELECT ad, texts FROM jobs WHERE cluster = ? AND proc = ?", key).fetchone()
                self._jobs[key] = ad = stamp(parsed(*row), key, self._loaded_revision)
                self._literals.replace(key, None, ad)
            return self._jobs.get(key)

    def _load_all(self) -> None:
        """Parse every stored ad not parsed yet, a chunk at a time, on a connection of its own (WAL: reading never
        waits for the writer)."""
        if not any(ad is None for ad in self._jobs.values()):
            self.loaded.set()
            return
        db = sqlite3.connect(str(self._path), check_same_thread=False)
        started = time.monotonic()
        try:
            after = (-1, -1)
            while not self._closing:
                rows = db.execute("SELECT cluster, proc, ad, texts FROM jobs WHERE (cluster, proc) > (?, ?) "
                                  "ORDER BY cluster, proc LIMIT ?", (*after, LOAD_CHUNK)).fetchall()
                if not rows:
                    break
                ads = [((cluster, proc), stamp(parsed(text, texts), (cluster, proc), self._loaded_revision))
                       for cluster, proc, text, texts in rows if self._jobs.get((cluster, proc), False) is None]
                with self._lock:  # only what no write replaced since it was read
                    for key, ad in ads:
                        if key in self._jobs and self._jobs[key] is None:
                            self._jobs[key] = ad
                            self._literals.replace(key, None, ad)
                after = rows[-1][0], rows[-1][1]
        finally:
            db.close()
            self.loaded.set()
        log.info("{jobs} queued job ads parsed in {seconds:.1f} s", jobs=len(self._jobs),
                 seconds=time.monotonic() - started)

    @property
    def written(self) -> int:
        """The sequence number of the last write committed (see :meth:`durable`)."""
        return self._written

    # -- writes --------------------------------------------------------------------------------------
    def next_cluster_id(self) -> int:
        """One cluster id (see :meth:`reserve_clusters`)."""
        return self.reserve_clusters(1)[0]

    def reserve_clusters(self, most: int | None = None) -> range:
        """Up to ``most`` cluster ids (at least one; None: the rest of the reserved block) that are never handed out
        again, even if their transactions abort or the gateway dies.

        Ids are reserved durably :data:`CLUSTER_BLOCK` at a time (the counter holds the highest reserved) and handed
        out from memory, so that new clusters cost a synced write once per block and not every time.  A start after
        a crash goes on after the last reserved id (the rest of that block is never used); after a clean stop, from
        the last one used (the gateway gives back what it did not hand out: :meth:`release_clusters`)."""
        with self._lock:
            if self._closing:  # close() gives back the ids not handed out: one handed out now would come again
                raise sqlite3.ProgrammingError("the job queue is closed")
            if self._last_cluster >= self._reserved_cluster:
                with self._transaction():
                    row = self._db.execute("SELECT value FROM counters WHERE name = 'cluster'").fetchone()
                    reserved = max(row[0] if row else 0, self._last_cluster) + CLUSTER_BLOCK
                    self._db.execute("INSERT OR REPLACE INTO counters (name, value) VALUES ('cluster', ?)",
                                     (reserved,))
                self.durable(self._written)
                self._reserved_cluster = reserved
            block = range(self._last_cluster + 1, min(self._reserved_cluster, self._last_cluster + max(1, most or CLUSTER_BLOCK)) + 1)
            self._last_cluster = block[-1]
            self._last_block = block
            return block

    def release_clusters(self, unused: range) -> None:
        """Take back the end of the last reservation, not handed out: the next reservation begins with it, and
        :meth:`close` records the id before it as the last one used.  Ids that are not the end are kept away (one
        of them may have been handed out after them)."""
        with self._lock:
            last = self._last_block
            if (unused and unused.step == 1 and last and unused[0] >= last[0]
                    and unused[-1] == last[-1] == self._last_cluster):
                self._last_cluster = unused[0] - 1
                self._last_block = range(last[0], unused[0])

    def apply(self, ads: Mapping[JobKey, classad2.ClassAd], archived: Iterable[JobKey] = ()) -> int:
        """Write these ads and move the ``archived`` jobs into the history, atomically; then publish the result to
        readers, each queued ad stamped with this write's revision number (the ads become the store's: callers hand
        over new ads and never change them after).  Returns the write's sequence number: it is on disk once
        :meth:`durable` of it returned."""
        archived = [key for key in archived if key in ads or key in self._jobs]
        queued = [_queued_row(key, ad) for key, ad in ads.items() if key not in archived]
        history = [_row(key, ads[key] if key in ads else self.get(key)) for key in archived]
        with self._lock:
            with self._transaction():
                self._db.executemany(f"INSERT OR REPLACE INTO jobs (cluster, proc, ad, texts, {', '.join(COLUMNS)}) "
                                     f"VALUES (?, ?, ?, ?{', ?' * len(COLUMNS)})", queued)
                self._db.executemany("INSERT OR REPLACE INTO history (cluster, proc, ad, texts) VALUES (?, ?, ?, ?)",
                                     history)
                self._db.executemany("DELETE FROM jobs WHERE cluster = ? AND proc = ?", archived)
            number = next(REVISIONS)
            self.changes.announce()
            for key, ad in ads.items():
                if key not in archived:
                    old, self._jobs[key] = self._jobs.get(key), stamp(ad, key, number)
                    self._literals.replace(key, old, ad)
            for key in archived:
                self._literals.replace(key, self._jobs.pop(key, None), None)
            changed = ads.keys() | set(archived)
            for key in changed:
                self.idle.update(key, self._jobs.get(key))
            self.changes.record(changed)  # (after the ads are published: a reader told of a change can read it)
            return self._written

    def durable(self, written: int) -> None:
        """Return once write number ``written`` (and every one before it) is on disk: the first caller syncs the
        WAL for everything committed so far while the others wait, and most of them find their write synced."""
        if self._synced >= written:
            return
        with self._sync_lock:
            if self._synced >= written:
                return
            target = self._written
            if self._wal is None:
                self._wal = os.open(f"{self._path}-wal", os.O_RDONLY)
                _sync_directory(self._path.parent)  # (the WAL file itself must be found after a crash)
            os.fsync(self._wal)
            self._synced = target

    def dag_state(self, cluster: int) -> str | None:
        """The saved node states of the DAG whose DAGMan job is ``cluster`` (JSON text), if any."""
        with self._lock:
            row = self._db.execute("SELECT state FROM dag_state WHERE cluster = ?", (cluster,)).fetchone()
        return row[0] if row else None

    def save_dag_state(self, cluster: int, state: str | None) -> None:
        with self._lock:
            with self._transaction():
                if state is None:
                    self._db.execute("DELETE FROM dag_state WHERE cluster = ?", (cluster,))
                else:
                    self._db.execute("INSERT OR REPLACE INTO dag_state (cluster, state) VALUES (?, ?)",
                                     (cluster, state))
            written = self._written
        self.durable(written)

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
        return _SqliteTransaction(self._db, self._committed)

    def _committed(self) -> None:
        self._written += 1


#: the changed jobs a store remembers (an entry is a change number and a job key, ~150 bytes: 30 MB when full); a
#: view further behind than that is sent whole again
CHANGE_LOG = 200_000


class ChangeLog:
    """The jobs each write changed, numbered 2, 3, ... (1 is the store's opening: every job is new to a reader at 0),
    the newest :data:`CHANGE_LOG` entries kept.

    Its own lock, held for an append or a scan of the newest entries only, never across a write to the file (the
    store's lock is held for SQLite's whole transaction): readers are the query threads, the writer the backend's
    thread."""

    def __init__(self, capacity: int = CHANGE_LOG) -> None:
        self.capacity = capacity
        #: the number of the last write recorded
        self.number = 1
        #: the number of the write under way (its ads being published) until it is recorded; :attr:`number` otherwise
        self.announced = 1
        #: readers at this number or after it are told every change; one before it is too far behind
        self._known_after = 1
        self._entries: deque[tuple[int, JobKey]] = deque()
        self._lock = threading.Lock()
        self._observers: list[Callable[[int], None]] = []

    def watch(self, observer: Callable[[int], None]) -> None:
        """Call ``observer`` with the number now, then with each new one as it is recorded (under the log's lock, so
        in order: a number an observer heard is never followed by a smaller one)."""
        with self._lock:
            self._observers.append(observer)
            observer(self.number)

    def announce(self) -> None:
        """A write is about to publish its ads: its number is :attr:`announced`, and the observers hear it now, so
        that nothing reads the number before as current while the write is half-applied (a reader that saw one of
        its ads, and one after it that did not, would see time go back)."""
        with self._lock:
            self.announced = self.number + 1
            for observer in self._observers:
                observer(self.announced)

    def under_way(self, number: int) -> bool:
        """Whether a write was announced after ``number`` was read as :attr:`number` (or it is no longer the
        number): what was read since may be half of it."""
        return self.announced != number

    def record(self, keys: Iterable[JobKey]) -> int:
        """Number a write that changed ``keys`` (those it wrote and those that left); returns its number.  The
        entries of the oldest writes go beyond capacity, and with them what readers behind them can be told."""
        with self._lock:
            number = self.number + 1
            entries = self._entries
            for key in keys:
                if len(entries) >= self.capacity:
                    self._known_after = entries.popleft()[0]
                entries.append((number, key))
            self.number = self.announced = number
            for observer in self._observers:
                observer(number)
            return number

    def since(self, number: int) -> Changes:
        """The number now and the jobs changed after ``number``, read from the newest end; ``keys=None`` when
        ``number`` is before what the log remembers (or not one of its numbers at all: from another store)."""
        with self._lock:
            now = self.number
            if number < self._known_after or number > now:
                return Changes(now, None)
            found: set[JobKey] = set()
            for written, key in reversed(self._entries):
                if written <= number:
                    break
                found.add(key)
            return Changes(now, frozenset(found))


def parsed(text: str, texts: str | None = None) -> classad2.ClassAd:
    """A stored ad (``str(ad)``: the new ClassAd syntax, and the record of its kept expression texts) read back.
    Not with ``classad2.parseOne``, which keeps an unreachable copy of every ad it parses (htcondor 24.0: about a
    kilobyte per ad, for the life of the process), and the history is read over and over."""
    return restored(text, texts)


def _row(key: JobKey, ad: classad2.ClassAd) -> tuple[int, int, str, str | None]:
    return key[0], key[1], str(ad), texts_record(ad)


def _queued_row(key: JobKey, ad: classad2.ClassAd) -> tuple:
    """A queued job's row: the ad's text, its kept expression texts, and the idle index's columns.  The ad of a job
    with a process (one a slot, at most) keeps its text (``keep_printed``): it is copied again when its run ends; a
    queued ad keeping it would cost 2 KB a job."""
    columns = idle.columns(ad)
    text = keep_printed(ad) if columns[0] in WITH_PROCESS else str(ad)
    return key[0], key[1], text, texts_record(ad), *columns


def _keep_private(path: Path) -> None:
    """The queue's files are the gateway's alone (0600), as HTCondor keeps its job queue log: job ads hold the jobs'
    arguments and environments.  SQLite gives the ``-wal`` and ``-shm`` files it creates the database file's mode,
    so the file is made with that mode before SQLite opens it; the files of a queue made before are tightened."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        try:
            os.chmod(path.with_name(name), 0o600)
        except FileNotFoundError:
            pass


def _add_texts_columns(db: sqlite3.Connection) -> None:
    """A queue written before expression texts were kept gets their column (empty: those ads keep none)."""
    for table in ("jobs", "history"):
        if "texts" not in [row[1] for row in db.execute(f"PRAGMA table_info({table})")]:
            db.execute(f"ALTER TABLE {table} ADD COLUMN texts TEXT")


#: the revision numbers of job ads (``backends.interface.Revision``), one counter for every store of the process
REVISIONS = itertools.count(1)

#: cluster ids reserved with one synced write
CLUSTER_BLOCK = 100

#: rows of the history read at once
HISTORY_PAGE = 64


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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

    def __init__(self, db: sqlite3.Connection, committed: Callable[[], None]) -> None:
        self._db = db
        self._committed = committed

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            try:
                self._db.execute("COMMIT")
                self._committed()
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
