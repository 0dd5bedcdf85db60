"""The local backend's job queue: transactions over the durable store, the jobs' spool, user logs, change notices.

A transaction arrives whole (a :class:`~backends.interface.Batch`, built by the gateway or the DAG runner) and is
written in one durable SQLite transaction, so an uncommitted job is invisible to every query and an aborted or
expired one leaves nothing behind but the files it staged, which the gateway discards.  Every queue change goes
through :meth:`JobQueue.write`, which also moves finished jobs into the history, writes the user-log
events and the gateway's job log, and tells the listener (the executor) what changed.
"""

from __future__ import annotations

import errno
import getpass
import os
import shutil
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import classad2
from twisted.logger import Logger

from backends import evaluation
from backends.interface import AttributeChange, BackendError, Batch, Change, Changes, FileInfo, UnknownJob
from backends.spool import Spool, read_range
from jobmodel.classads import matches, projected
from jobmodel.jobs import JobStatus, Universe

from . import joblog, lifecycle
from .lifecycle import Event, Transition, updated
from .owners import Account, Accounts, NoAccount, open_regular_as, to_switch
from .store import JobKey, JobStore
from .trash import Trash
from .userlog import UserLog, log_path

log = Logger()

#: told (on the backend thread) which jobs changed; an empty dict asks for a scheduling cycle
ChangeListener = Callable[[dict[JobKey, classad2.ClassAd]], None]


@contextmanager
def _queue_errors() -> Iterator[None]:
    """A failure of the queue's database (a full disk: "database or disk is full") as a BackendError, which the
    front ends answer with a FAIL status; SQLite has rolled the write back, so nothing of it was stored."""
    try:
        yield
    except sqlite3.Error as exc:
        raise BackendError(f"the job queue could not be written: {exc}") from None


def _within(path: str, directory: Path) -> bool:
    """Whether ``path`` (a job's ``Iwd``, as written) names ``directory`` or a place below it."""
    if not os.path.isabs(path):
        return False
    named = Path(os.path.normpath(path))
    return named == directory or directory in named.parents


class JobQueue:
    """The queue as the backend interface sees it, plus :meth:`write` for the scheduler and the DAG runner.

    ``accounts`` say whom a job's work runs as: its spool directory is given to its owner when the job starts, not at
    commit (:meth:`ensure_spool`; as HTCondor's CHOWN_JOB_SPOOL_FILES gives it to the owner), and its user log written with
    its owner's rights.  ``uid_domain`` makes every job's
    ``User`` (``Owner@uid_domain``, whatever the client sent); by default the schedd's name."""

    def __init__(self, store: JobStore, spool: Spool, schedd_name: str, clock: Callable[[], float],
                 accounts: Accounts | None = None, uid_domain: str | None = None, trash: Trash | None = None) -> None:
        self.store = store
        self.trash = trash
        self.spool = spool
        self.schedd_name = schedd_name
        self.accounts = accounts if accounts is not None else Accounts()
        self.uid_domain = uid_domain or schedd_name
        self._clock = clock
        #: jobs whose process is (or may be) running: they stay in the queue whatever their state says
        self.active: set[JobKey] = set()
        self.listener: ChangeListener | None = None
        #: within :meth:`synced_by_caller`: what once_durable leaves for after the caller's sync
        self._after_sync: list[Callable[[], None]] | None = None

    def now(self) -> int:
        return int(self._clock())

    # -- transactions -------------------------------------------------------------------------------
    def reserve_clusters(self) -> range:
        with _queue_errors():
            return self.store.reserve_clusters()

    def commit(self, batch: Batch) -> None:
        """Write a transaction's new jobs (their staged files synced) and changes.

        A job has a spool directory once a file is staged for it, and its owner gets it when the job starts
        (:meth:`ensure_spool`, which makes one for a job without files that works in it): making a new cluster's three levels of
        spool and looking its owner up were a fifth of the commit's work on the backend's thread, which the client
        waits for."""
        ads, events = self._prepared(batch)
        for job in batch.jobs:
            if job.files:
                self.spool.sync(*job.key)
        self.write(ads, events)

    def ensure_spool(self, key: JobKey, account: Account | None, iwd: str) -> None:
        """A starting job's spool directory (its default ``Iwd``, where its output comes back), made when it has none
        and the job works in it (``iwd`` is it or below it; a job that works elsewhere and has no files has no use
        for one: its two directories were a tenth of a trivial job's start), and handed, with the files staged in
        it, to the account the job runs as (None: the gateway's user) while it is still the gateway's (what is in it
        then, the gateway put there), so the job can write there; the directories above it stay the gateway's, so
        the job cannot swap it for another.  One given already is left as it is: what its job left in it could be a
        hard link to another's file."""
        directory = self.spool.directory(*key)
        try:
            owner = os.lstat(directory).st_uid
        except FileNotFoundError:
            if not _within(iwd, directory):
                return
            self.spool.create(*key)
            owner = os.geteuid()
        switched = to_switch(account)
        if owner != os.geteuid() or switched is None:
            return
        try:
            self.spool.give(*key, switched.uid, switched.gid)
        except (BackendError, OSError) as exc:  # the job still starts; it finds its spool as it is
            log.warn("cannot give the spool of job {job} to {owner}: {error}", job=key, owner=switched.name,
                     error=exc)

    def check_changes(self, batch: Batch) -> None:
        self._prepared(batch)

    def _prepared(self, batch: Batch) -> tuple[dict[JobKey, classad2.ClassAd], list[tuple[JobKey, Event]]]:
        """The ads a batch writes and their user-log events: its jobs as they enter the queue, then its changes."""
        now = self.now()
        ads: dict[JobKey, classad2.ClassAd] = {}
        events: list[tuple[JobKey, Event]] = []
        host = f"<127.0.0.1:0?alias={self.schedd_name}>"
        for job in batch.jobs:
            problem = job.id_problem()
            if problem is not None:
                raise BackendError(problem)
            ads[job.key] = self._enqueue(job.key, updated(job.ad, {}), now)
            events.append((job.key, lambda user_log: user_log.submitted(host)))
        for change in batch.changes:
            for key in self._keys(change, ads):
                current = ads[key] if key in ads else self.store.get(key)
                if current is None:
                    raise UnknownJob(f"job {key[0]}.{key[1]} is not in the queue")
                try:
                    transition = self._transition(change, current, now)
                except BackendError:
                    if change.proc is None:
                        continue  # a cluster removal skips the jobs that are already gone
                    raise
                ads[key] = updated(current, transition.updates)
                events.extend((key, event) for event in transition.events)
        return ads, events

    def _keys(self, change: Change, ads: dict[JobKey, classad2.ClassAd]) -> list[JobKey]:
        if change.proc is not None:
            return [(change.cluster, change.proc)]
        pending = [key for key in ads if key[0] == change.cluster]
        return sorted(set(self.store.keys_in_cluster(change.cluster)) | set(pending))

    @staticmethod
    def _transition(change: Change, ad: classad2.ClassAd, now: int) -> Transition:
        if isinstance(change, AttributeChange):
            return Transition({change.name: change.value})
        return lifecycle.user_action(change.action, ad, change.reason, change.system, now)

    def _enqueue(self, key: JobKey, ad: classad2.ClassAd, now: int) -> classad2.ClassAd:
        """Fill in what a schedd sets when a job enters the queue."""
        cluster, proc = key
        ad["ClusterId"] = cluster
        ad["ProcId"] = proc
        ad["QDate"] = now
        if ad.get("JobStatus") not in (JobStatus.IDLE, JobStatus.HELD):
            ad["JobStatus"] = int(JobStatus.IDLE)
        ad["EnteredCurrentStatus"] = now
        ad["GlobalJobId"] = f"{self.schedd_name}#{cluster}.{proc}#{now}"
        defaults: dict[str, object] = {
            "JobUniverse": int(Universe.VANILLA), "JobPrio": 0, "NumJobStarts": 0, "NumRestarts": 0,
            "CompletionDate": 0, "RemoteWallClockTime": 0.0, "RemoteUserCpu": 0.0, "RemoteSysCpu": 0.0,
            "Owner": getpass.getuser(),
        }
        for name, value in defaults.items():
            if name not in ad:
                ad[name] = value
        owner = ad.get("Owner")
        if isinstance(owner, str):
            ad["User"] = f"{owner}@{self.uid_domain}"  # the schedd's to say, never the client's
        else:
            ad.pop("User", None)
        return ad

    def account_of(self, ad: classad2.ClassAd) -> Account | None:
        """Whose rights a job's files are touched with: its owner's account, or None (the gateway's user) when the
        gateway does not switch.  Raises NoAccount when the owner has no account here or may not run jobs."""
        if not self.accounts.switching:
            return None
        owner = ad.get("Owner")
        return self.accounts.of(owner if isinstance(owner, str) else None)

    # -- files the ads name ----------------------------------------------------------------------------------------
    def read_owner_file(self, ad: classad2.ClassAd, path: str, offset: int, length: int) -> tuple[int, bytes]:
        """A file a job's ad names (its Out, Err, UserLog), read with its owner's rights as the starter wrote it:
        a regular file only, never through a symbolic link in its place, never blocking on a FIFO.  Only when the
        gateway runs jobs as their owners (as root): otherwise it has no owner's rights to use but its own."""
        if not self.accounts.switching:
            raise BackendError(f"Cannot read '{path}': outside the job's spool a job's files are read with its "
                               f"owner's rights, which a gateway that does not run as root does not have")
        try:
            fd = open_regular_as(self.account_of(ad), path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except NoAccount as exc:
            raise BackendError(f"Failed to open file '{path}', reason: {exc}") from None
        except OSError as exc:
            reason = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
            raise BackendError(f"Failed to open file '{path}', reason: {reason}") from None
        try:
            return read_range(fd, os.fstat(fd).st_size, offset, length)
        finally:
            os.close(fd)

    # -- files of jobs not committed yet ----------------------------------------------------------------
    def stage_file(self, cluster: int, proc: int, name: str) -> None:
        self.spool.create(cluster, proc)
        self.spool.stage(cluster, proc, name)

    def write_file(self, cluster: int, proc: int, name: str, offset: int, data: bytes) -> None:
        self.spool.write(cluster, proc, name, offset, data)

    def file_md5(self, cluster: int, proc: int, name: str) -> str:
        return self.spool.md5(cluster, proc, name)

    def discard_jobs(self, jobs: Iterable[JobKey]) -> None:
        for key in jobs:  # (into the trash: a rename each)
            if key not in self.store:
                self.discard(self.spool.directory(*key))

    def list_files(self, cluster: int, proc: int) -> Sequence[FileInfo]:
        return self.spool.list(cluster, proc)

    def read_file(self, cluster: int, proc: int, name: str, offset: int, length: int) -> bytes:
        return self.spool.read(cluster, proc, name, offset, length)

    # -- reading ----------------------------------------------------------------------------------------
    def query(self, constraint: classad2.ExprTree | None, projection: Sequence[str] | None = None, *,
              budget: float | None = None) -> list[classad2.ClassAd]:
        """Committed jobs for which ``constraint`` is true; a client's constraint (with a ``budget``) is evaluated
        in a forked worker unless it is simple (``backends.evaluation``), the gateway's own in this thread."""
        found = self.store.selected(constraint, budget)
        if projection:
            return [projected(ad, projection) for ad in found]
        return found

    def history(self, constraint: classad2.ExprTree | None, limit: int | None = None, *,
                budget: float | None = None) -> list[classad2.ClassAd]:
        """Jobs that left the queue (completed or removed), newest first."""
        if budget is not None and constraint is not None:
            return evaluation.filtered(list(self.store.history()), constraint, budget)[:limit]
        found = []
        for ad in self.store.history():
            if matches(constraint, ad):
                found.append(ad)
                if limit is not None and len(found) >= limit:
                    break
        return found

    def get_job(self, cluster: int, proc: int) -> classad2.ClassAd | None:
        return self.store.get((cluster, proc))

    def changes_since(self, number: int) -> Changes:
        return self.store.changes_since(number)

    def watch_changes(self, observer: Callable[[int], None]) -> None:
        self.store.watch_changes(observer)

    def job_in_memory(self, cluster: int, proc: int) -> classad2.ClassAd | None:
        key = cluster, proc
        return self.store.get(key) if self.store.in_memory(key) else None

    def reschedule(self) -> None:
        if self.listener is not None:
            self.listener({})

    # -- writing queue changes ------------------------------------------------------------------------
    def write(self, ads: dict[JobKey, classad2.ClassAd], events: Iterable[tuple[JobKey, Event]],
              notify: bool = True) -> None:
        """Write the changes' user-log events, store the changed ads durably (finished jobs go to the history), then
        write their job log lines and tell the listener."""
        if not ads:
            return
        leaving = [key for key, ad in ads.items() if key not in self.active and lifecycle.leaves_queue(ad)]
        before = {key: joblog.status_before(self.store.get(key)) for key in ads}
        for key, event in events:  # before the queue shows the change, as HTCondor's shadow writes the user log
            self._log_event(ads.get(key), key, event)  # before it updates the schedd: a client that sees a job
            # completed finds its terminate event in the log
        with _queue_errors():
            self.store.apply(ads, leaving)  # (on disk once the backend's call returns: LocalBackend.serially)
        for key, ad in ads.items():
            joblog.status_changed(key, before[key], ad)
        for key in leaving:
            self.discard(self.spool.directory(*key))
        if notify and self.listener is not None:
            self.listener(dict(ads))

    def discard(self, directory: Path) -> None:
        """Remove a directory the queue is done with: into the trash (emptied by a thread of its own), or at once
        when there is none."""
        if self.trash is not None:
            self.trash.discard(directory)
        else:
            shutil.rmtree(directory, ignore_errors=True)

    @contextmanager
    def synced_by_caller(self) -> Iterator[list[Callable[[], None]]]:
        """Work whose writes its caller makes durable once it returns (``LocalBackend.serially``), so that the next
        call does not wait for this one's sync: within it :meth:`once_durable` does not sync but puts its action in
        the list this yields, "after the write", for the caller to run after its sync."""
        self._after_sync = after_sync = []
        try:
            yield after_sync
        finally:
            self._after_sync = None

    @property
    def within_synced_work(self) -> bool:
        """Whether this runs within :meth:`synced_by_caller` (a call from within a call is part of it)."""
        return self._after_sync is not None

    def once_durable(self, action: Callable[[], None]) -> None:
        """Do ``action`` once every write so far is on disk: now, or within :meth:`synced_by_caller` after its
        caller's sync."""
        if self._after_sync is None:
            with _queue_errors():
                self.store.durable(self.store.written)
            action()
        else:
            self._after_sync.append(action)

    def write_transitions(self, transitions: dict[JobKey, tuple[classad2.ClassAd, Transition]],
                          notify: bool = True) -> None:
        """Apply each job's transition to its ad and :meth:`write` the results with their events."""
        self.write({key: updated(ad, transition.updates) for key, (ad, transition) in transitions.items()},
                   [(key, event) for key, (_, transition) in transitions.items() for event in transition.events],
                   notify)

    def _log_event(self, ad: classad2.ClassAd | None, key: JobKey, event: Event) -> None:
        """Write one event to the job's user log as its owner; a log the owner cannot write is skipped (and said in
        the gateway's log): the job goes on."""
        path = log_path(ad) if ad is not None else None
        if ad is None or path is None:
            return
        try:
            event(UserLog(path, *key, clock=self._clock, account=self.account_of(ad)))
        except NoAccount as refused:
            log.warn("not writing the user log {path} of job {job}: {error}", path=path, job=key, error=refused.reason)
        except OSError as exc:
            log.warn("cannot write to the user log {path} of job {job}: {error}", path=path, job=key, error=exc)
