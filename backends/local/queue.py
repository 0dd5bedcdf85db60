"""The local backend's job queue: transactions over the durable store, the jobs' spool, user logs, change notices.

Transactions collect their changes in memory and write them in one durable SQLite transaction at commit, so an
uncommitted job is invisible to every query and an aborted or expired one leaves nothing behind.  Every queue
change goes through :meth:`JobQueue.write`, which also moves finished jobs into the history, writes the user-log
events and the gateway's job log, and tells the listener (the executor) what changed.
"""

from __future__ import annotations

import errno
import getpass
import os
import shutil
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import classad2
from twisted.logger import Logger

from backends import evaluation
from backends.interface import BackendError, FileInfo, UnknownJob, WouldBlock, answering_at_once
from backends.spool import Spool, read_range
from jobmodel.classads import matches, projected
from jobmodel.jobs import JobAction, JobStatus, Universe

from . import joblog, lifecycle
from .lifecycle import Event, Transition, Updates, updated
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


@dataclass(eq=False)
class LocalTransaction:
    next_proc: dict[int, int] = field(default_factory=dict)  # clusters created in this transaction
    new_jobs: dict[JobKey, classad2.ClassAd | None] = field(default_factory=dict)
    updates: dict[JobKey, Updates] = field(default_factory=dict)  # changes to committed jobs, in order
    events: list[tuple[JobKey, Event]] = field(default_factory=list)
    open: bool = True


class JobQueue:
    """The queue as the backend interface sees it, plus :meth:`write` for the scheduler and the DAG runner.

    ``accounts`` say whom a job's work runs as: its spool directory is given to its owner at commit (as HTCondor's
    CHOWN_JOB_SPOOL_FILES does) and its user log written with its owner's rights.  ``uid_domain`` makes every job's
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
        #: what once_durable leaves for the caller to do after its sync (None: once_durable syncs itself)
        self.deferred: list[Callable[[], None]] | None = None

    def now(self) -> int:
        return int(self._clock())

    # -- transactions -------------------------------------------------------------------------------
    def begin(self) -> LocalTransaction:
        return LocalTransaction()

    def commit(self, txn: LocalTransaction) -> None:
        self._check_open(txn)
        now = self.now()
        ads: dict[JobKey, classad2.ClassAd] = {}
        events: list[tuple[JobKey, Event]] = []
        host = f"<127.0.0.1:0?alias={self.schedd_name}>"
        for key, ad in txn.new_jobs.items():
            if ad is None:
                self.discard(self.spool.directory(*key))  # a proc that never got a job ad is not a job
                continue
            ads[key] = self._enqueue(key, ad, now)
            self.spool.sync(*key)
            self._give_spool(key, ads[key])
            events.append((key, lambda user_log: user_log.submitted(host)))
        for key, updates in txn.updates.items():
            base = ads[key] if key in ads else self.store.get(key)
            if base is not None:
                ads[key] = updated(base, updates)
        self.write(ads, events + txn.events)
        txn.open = False

    def abort(self, txn: LocalTransaction) -> None:
        if not txn.open:
            return
        if txn.new_jobs and self.trash is None and answering_at_once():
            raise WouldBlock("removing the spool directories of the transaction's jobs")
        txn.open = False
        for key in txn.new_jobs:  # (into the trash: a rename each, as cheap as new_proc's mkdir)
            self.discard(self.spool.directory(*key))

    # -- building jobs ------------------------------------------------------------------------------
    def new_cluster(self, txn: LocalTransaction) -> int:
        self._check_open(txn)
        with _queue_errors():
            cluster = self.store.next_cluster_id(wait=not answering_at_once())
        if cluster is None:
            raise WouldBlock("reserving the next block of cluster ids")
        txn.next_proc[cluster] = 0
        return cluster

    def new_proc(self, txn: LocalTransaction, cluster: int) -> int:
        self._check_open(txn)
        if cluster not in txn.next_proc:
            raise BackendError(f"cluster {cluster} was not created in this transaction")
        proc = txn.next_proc[cluster]
        self.spool.create(cluster, proc)  # first: a spool that cannot be made (a full disk) uses up no proc id
        txn.next_proc[cluster] = proc + 1
        txn.new_jobs[(cluster, proc)] = None
        return proc

    def submit(self, txn: LocalTransaction, cluster: int, proc: int, ad: classad2.ClassAd) -> None:
        self._new_job(txn, cluster, proc)
        if ("ClusterId" in ad or "ProcId" in ad) and answering_at_once():
            raise WouldBlock("evaluating the ad's ids wants the deep stack of a backend thread")
        for name, expected in (("ClusterId", cluster), ("ProcId", proc)):
            if name in ad and ad.eval(name) != expected:
                raise BackendError(f"{name} must be {expected}, the id of this job")
        txn.new_jobs[(cluster, proc)] = updated(ad, {})

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

    def _give_spool(self, key: JobKey, ad: classad2.ClassAd) -> None:
        """Hand a new job's spool directory (and the files staged in it) to the account it runs as, so the job can
        write there; the directories above it stay the gateway's, so the job cannot swap it for another."""
        try:
            account = to_switch(self.account_of(ad))
        except NoAccount:
            return  # the job is held when it would start; its spool stays the gateway's
        if account is not None:
            try:
                self.spool.give(*key, account.uid, account.gid)
            except (BackendError, OSError) as exc:  # the job is still queued; it finds its spool as it is
                log.warn("cannot give the spool of job {job} to {owner}: {error}", job=key, owner=account.name,
                         error=exc)

    def account_of(self, ad: classad2.ClassAd) -> Account | None:
        """Whose rights a job's files are touched with: its owner's account, or None (the gateway's user) when the
        gateway does not switch.  Raises NoAccount when the owner has no account here or may not run jobs."""
        if not self.accounts.switching:
            return None
        owner = ad.get("Owner")
        return self.accounts.of(owner if isinstance(owner, str) else None)

    # -- files ----------------------------------------------------------------------------------------
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

    def stage_file(self, txn: LocalTransaction, cluster: int, proc: int, name: str) -> None:
        self._new_job(txn, cluster, proc)
        self.spool.stage(cluster, proc, name)

    def write_file(self, txn: LocalTransaction, cluster: int, proc: int, name: str, offset: int,
                   data: bytes) -> None:
        self._new_job(txn, cluster, proc)
        self.spool.write(cluster, proc, name, offset, data)

    def file_md5(self, txn: LocalTransaction, cluster: int, proc: int, name: str) -> str:
        self._new_job(txn, cluster, proc)
        return self.spool.md5(cluster, proc, name)

    def list_files(self, cluster: int, proc: int) -> Sequence[FileInfo]:
        return self.spool.list(cluster, proc)

    def read_file(self, cluster: int, proc: int, name: str, offset: int, length: int) -> bytes:
        return self.spool.read(cluster, proc, name, offset, length)

    # -- reading ----------------------------------------------------------------------------------------
    def query(self, constraint: classad2.ExprTree | None, projection: Sequence[str] | None = None, *,
              budget: float | None = None) -> list[classad2.ClassAd]:
        """Committed jobs for which ``constraint`` is true; a client's constraint (with a ``budget``) is evaluated
        in a forked worker (``backends.evaluation``), the gateway's own in this thread."""
        found = evaluation.filtered(self.store.values(), constraint, budget)
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
        if answering_at_once() and not self.store.in_memory((cluster, proc)):
            raise WouldBlock("reading the job's ad from disk")
        return self.store.get((cluster, proc))

    # -- changing committed jobs ----------------------------------------------------------------------
    def act(self, txn: LocalTransaction | None, action: JobAction, cluster: int, proc: int | None,
            reason: str | None, *, system: bool = False) -> int:
        own = txn is None
        txn = txn or self.begin()
        self._check_open(txn)
        keys = self._cluster_keys(txn, cluster) if proc is None else [(cluster, proc)]
        changed = 0
        for key in keys:
            current = self._view(txn, key)
            if current is None:
                raise UnknownJob(f"job {key[0]}.{key[1]} is not in the queue")
            try:
                transition = lifecycle.user_action(action, current, reason, system, self.now())
            except BackendError:
                if proc is None:
                    continue  # a cluster removal skips the jobs that are already gone
                raise
            self.record(txn, key, transition)
            changed += 1
        if own:
            self.commit(txn)
        return changed

    def set_attribute(self, txn: LocalTransaction | None, cluster: int, proc: int, name: str,
                      value: str | classad2.ExprTree) -> None:
        own = txn is None
        txn = txn or self.begin()
        self._check_open(txn)
        if self._view(txn, (cluster, proc)) is None:
            raise UnknownJob(f"job {cluster}.{proc} is not in the queue")
        self.record(txn, (cluster, proc), Transition({name: value}))
        if own:
            self.commit(txn)

    def reschedule(self) -> None:
        if self.listener is not None:
            self.listener({})

    @staticmethod
    def record(txn: LocalTransaction, key: JobKey, transition: Transition) -> None:
        """Add a transition of a job to a transaction (applied, with its user-log events, at commit)."""
        if txn.new_jobs.get(key) is not None:
            txn.new_jobs[key] = updated(txn.new_jobs[key], transition.updates)
        else:
            txn.updates.setdefault(key, {}).update(transition.updates)
        txn.events.extend((key, event) for event in transition.events)

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

    def once_durable(self, action: Callable[[], None]) -> None:
        """Do ``action`` once every write so far is on disk: now, or, in a call that waits for its writes after it
        (``LocalBackend.serially`` sets :attr:`deferred`), once it has."""
        if self.deferred is None:
            with _queue_errors():
                self.store.durable(self.store.written)
            action()
        else:
            self.deferred.append(action)

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

    # -- helpers ------------------------------------------------------------------------------------
    @staticmethod
    def _check_open(txn: LocalTransaction) -> None:
        if not txn.open:
            raise BackendError("the transaction is no longer open")

    def _new_job(self, txn: LocalTransaction, cluster: int, proc: int) -> None:
        self._check_open(txn)
        if (cluster, proc) not in txn.new_jobs:
            raise UnknownJob(f"job {cluster}.{proc} was not created in this transaction")

    def _cluster_keys(self, txn: LocalTransaction, cluster: int) -> list[JobKey]:
        pending = [key for key, ad in txn.new_jobs.items() if key[0] == cluster and ad is not None]
        return sorted(set(self.store.keys_in_cluster(cluster)) | set(pending))

    def _view(self, txn: LocalTransaction, key: JobKey) -> classad2.ClassAd | None:
        """A job as this transaction sees it: committed or created here, with the transaction's changes."""
        base = txn.new_jobs.get(key)
        if base is None:
            base = self.store.get(key)
        if base is None:
            return None
        return updated(base, txn.updates.get(key, {}))
