"""The one interface between the gateway and a schedd backend.

Backends schedule and store; they never see XML.  The gateway builds each transaction itself (``gateway/core``:
clusters, procs, job ads, changes to queued jobs) and hands it over whole: :meth:`ScheddBackend.commit` takes a
:class:`Batch`, atomic and durable.  Before that the backend only reserves cluster ids (a block at a time) and
stages the files of the transaction's jobs.  Every method may block (SQLite, the HTCondor bindings) and the gateway
calls it from a worker thread, never from the reactor, except those that answer from memory and never block:
:meth:`ScheddBackend.info`, :meth:`ScheddBackend.spool_directory` and :meth:`ScheddBackend.job_in_memory`.

Every whole job ad a backend answers (``query`` without a projection, ``get_job``, ``job_in_memory``) carries its
:class:`Revision` (:func:`stamp`, read with :func:`revision`): the gateway keeps what it wrote for a job's ad by that,
and answers it again while the revision stays.

What a backend offers beyond the required methods it declares in ``capabilities`` (:class:`Capability`);
:func:`check` verifies both when the backend is loaded, and names what is missing.

Errors a caller can act on are raised as :class:`BackendError` subclasses whose message names the job, file or
attribute concerned; the front end turns them into the protocol's status.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple, Protocol, Sequence, runtime_checkable

import classad2

from jobmodel.jobs import JobAction

ENTRY_POINT_GROUP = "birdbath.backends"

#: a job's (cluster, proc)
JobKey = tuple[int, int]


class Revision(NamedTuple):
    """Which content of a job's ad an ad holds: for one job (``key``, its cluster and proc as the ad names them), two
    ads with the same ``number`` are the same ad, attribute for attribute and with the same kept expression texts.
    Every change of a job's ad, whoever makes it (a client's batch, the backend's scheduler, a job's usage while it
    runs, the pool behind the backend), gives the job a number it never had with another content, for as long as the
    process lives.  Hashable: what the gateway keys the texts it keeps on (``gateway.birdbath.adtexts``)."""

    key: JobKey
    number: int


#: the Python attribute of a ClassAd object that holds its :class:`Revision` (not a ClassAd attribute: it is never
#: stored, evaluated or copied; a copy or a projection of an ad has none)
_REVISION = "birdbath_revision"


def stamp(ad: classad2.ClassAd, key: JobKey, number: int) -> classad2.ClassAd:
    """Give ``ad`` (a whole job ad a backend answers) its revision; the ad itself, for chaining.  A backend stamps
    an ad before any reader sees it and never changes an ad a reader may hold: a change is a new ad, stamped with a
    new number."""
    setattr(ad, _REVISION, Revision(key, number))
    return ad


def revision(ad: classad2.ClassAd) -> Revision | None:
    """The revision a backend gave ``ad``; None for an ad without one (a projection, a copy, an ad of no job)."""
    return getattr(ad, _REVISION, None)


class BackendError(Exception):
    """A request the backend refused; the message says what and why."""


class UnknownJob(BackendError):
    """No such job (in the committed queue, or in the given transaction)."""


class InvalidState(BackendError):
    """The job exists but the action does not apply to it (e.g. releasing a job that is not held)."""


class BackendUnavailable(BackendError):
    """The backend cannot be reached (a pool that is down)."""


class QueryFailed(BackendError):
    """A client's query that could not be answered: it ran out of its budget, or evaluating it failed."""


class Capability(enum.Enum):
    """Optional parts of the interface, and the methods a backend that declares one must have."""

    #: ``start(reactor, call)`` once the gateway runs, for services in its process (``call(function, *args)`` runs
    #: a function on the backend's worker thread and returns a Deferred); ``async stop(fast=False)`` at shutdown,
    #: before close (``fast``: the gateway's SIGQUIT, which does not wait for running jobs to stop by themselves)
    SERVICES = ("start", "stop")
    #: ``history(constraint, limit=None, *, budget=None)``: jobs that left the queue, newest first (``budget`` as
    #: for :meth:`ScheddBackend.query`)
    HISTORY = ("history",)
    #: the pool's ads, as a collector answers them (the condorCollector service):
    #: ``pool_ads(ad_type, constraint, *, budget=None, contact=None)`` returns the ads of one ``jobmodel.pool.AdType``
    #: (``AdType.ANY``: every kind) for which ``constraint`` is true, ``budget`` as for :meth:`ScheddBackend.query`;
    #: ``contact`` is the gateway's own address (``<host:port>``), which a backend whose daemons are the gateway
    #: publishes as their ``MyAddress``.  ``advertise(ad_type, ad)`` stores or replaces an ad as a collector does an
    #: update (it expires unless advertised again) and returns True when the ad is new; it raises
    #: :class:`BackendError` for an ad the pool refuses.  Both may be called from the query pool.
    POOL = ("pool_ads", "advertise")
    #: ``figures()``: the backend's :class:`jobmodel.figures.BackendFigures` now -- its queue tallied as its
    #: Scheduler ad counts it, and how it runs jobs -- for the gateway's metrics (called from the query pool)
    FIGURES = ("figures",)
    #: ``changes_since(number) -> Changes``: the backend's change number now and the jobs whose ad changed (written,
    #: or left the queue) after change number ``number``, or ``keys=None`` when ``number`` is too old for the backend
    #: to tell (every job must then be taken as changed; 0 is always too old).  A job changed by a write the answer
    #: counts is readable as written (or gone) by the time the answer is given.  Called from the query pool while the
    #: backend writes: the gateway's worker processes keep a view of the jobs' literals and ask only what changed
    #: (``gateway/workers/jobview.py``).  ``watch_changes(observer)`` calls ``observer(number)`` at once with the
    #: number now, then on the writer's thread with each write's number before any of its ads is readable, and
    #: again once it is counted, before the write returns (so before its caller hears it is done); never a smaller
    #: number after a larger.  The observer must be quick and must not raise: the workers read the number it
    #: publishes to tell whether their view is current without asking the core (a view is current only while no write
    #: is under way)
    CHANGES = ("changes_since", "watch_changes")

    @property
    def methods(self) -> tuple[str, ...]:
        return self.value


class Changes(NamedTuple):
    """A backend's answer to ``changes_since(number)`` (:attr:`Capability.CHANGES`): its change number now, and the
    jobs changed after ``number`` (None: all of them may have)."""

    number: int
    keys: frozenset[JobKey] | None


class IncompleteBackend(TypeError):
    """A backend that lacks a required method or attribute, or a method of a capability it declares."""


@dataclass(frozen=True)
class BackendInfo:
    """What a backend says about itself: the strings getVersionString/getPlatformString return, its schedd's name and
    its pool's (the central manager, as HTCondor's ``COLLECTOR_HOST`` names it; Aviary's ids carry both)."""

    name: str
    version: str
    platform: str
    schedd_name: str
    pool: str = ""


@dataclass(frozen=True)
class FileInfo:
    name: str
    size: int


@dataclass(frozen=True)
class NewJob:
    """A job a transaction creates: its ids (the cluster reserved by :meth:`ScheddBackend.reserve_clusters`, procs
    0, 1, ... in it), the ad the client gave, and the names of the files staged for it
    (:meth:`ScheddBackend.stage_file`), which the commit makes as durable as the ad."""

    cluster: int
    proc: int
    ad: classad2.ClassAd
    files: tuple[str, ...] = ()

    @property
    def key(self) -> JobKey:
        return self.cluster, self.proc

    def id_problem(self) -> str | None:
        """Why the ad cannot be this job's (a ``ClusterId`` or ``ProcId`` that evaluates to another id), or None."""
        for name, expected in (("ClusterId", self.cluster), ("ProcId", self.proc)):
            if name in self.ad and self.ad.eval(name) != expected:
                return f"{name} must be {expected}, the id of job {self.cluster}.{self.proc}"
        return None


@dataclass(frozen=True)
class ActionChange:
    """Hold, release, remove, suspend or continue one job, or with ``proc=None`` every job of a cluster (those it
    does not apply to are skipped)."""

    action: JobAction
    cluster: int
    proc: int | None
    reason: str | None
    system: bool = False  # a hold by the system (HoldReasonCode), not by the job's owner


@dataclass(frozen=True)
class AttributeChange:
    """Set one attribute of a job (a ``str`` is a string literal)."""

    cluster: int
    proc: int
    name: str
    value: str | classad2.ExprTree


#: a change to a job that is queued, or created in the same batch
Change = ActionChange | AttributeChange


@dataclass(frozen=True)
class Batch:
    """One transaction, whole: the jobs it creates, then its changes in order (they may name its own jobs)."""

    jobs: Sequence[NewJob] = ()
    changes: Sequence[Change] = ()


@runtime_checkable
class ScheddBackend(Protocol):
    """A schedd as the gateway sees it: a job queue that takes transactions whole, with per-job spool directories."""

    #: how many worker threads may call into the backend at once
    threads: int
    #: seconds after which the gateway stops waiting for a call and reports the backend unavailable (None: never)
    call_timeout: float | None
    #: the optional parts this backend has
    capabilities: frozenset[Capability]

    def info(self) -> BackendInfo:
        """Who the backend is; answered from memory (never blocks: the gateway may call it on the reactor)."""

    def close(self) -> None:
        """Release resources; called once at shutdown, after the files of every open transaction were discarded."""

    # -- transactions -------------------------------------------------------------------------------
    def reserve_clusters(self) -> range:
        """Cluster ids never handed out before, also across restarts (the gateway hands them out one per new
        cluster, and asks again when they are used up); a block, so that a new cluster costs no durable write."""

    def release_clusters(self, unused: range) -> None:
        """The end of the last block :meth:`reserve_clusters` returned, never handed out (the gateway stops): a
        backend that can, hands these ids out again, so that the next start goes on from the last id used."""

    def commit(self, batch: Batch) -> None:
        """Make every job and change of ``batch`` durable and visible at once, or raise and change nothing.

        The backend adds to each new job's ad what a schedd fills in (QDate, JobStatus, ...) and derives ``User``
        from ``Owner`` (``Owner@<uid domain>``), whatever the ad says; an ad whose ``ClusterId`` or ``ProcId`` is
        not the job's is a :class:`BackendError`.  A change to a job that is not queued is :class:`UnknownJob`, an
        action that does not apply to the job's state :class:`InvalidState`."""

    def check_changes(self, batch: Batch) -> None:
        """Raise what :meth:`commit` would raise for ``batch``'s changes now, changing nothing (the gateway refuses
        a change inside a transaction when the client makes it, not only at commit)."""

    # -- files of the jobs a transaction creates ----------------------------------------------------
    def spool_directory(self, cluster: int, proc: int) -> str:
        """The job's spool directory as the backend's jobs see it (what ``Iwd`` is set to for spooled jobs); computed,
        never blocks."""

    def stage_file(self, cluster: int, proc: int, name: str) -> None:
        """Create (without truncating) a file in the spool of a job not committed yet (making the spool)."""

    def write_file(self, cluster: int, proc: int, name: str, offset: int, data: bytes) -> None:
        """Write ``data`` at ``offset`` into a staged file."""

    def file_md5(self, cluster: int, proc: int, name: str) -> str:
        """The hex MD5 of a staged file, to check a hash the client declared."""

    def discard(self, jobs: Sequence[JobKey]) -> None:
        """Remove what was staged for jobs that will never be committed (an aborted or expired transaction)."""

    # -- spool files ----------------------------------------------------------------------------------
    def list_files(self, cluster: int, proc: int) -> Sequence[FileInfo]:
        """The regular files of a job's spool directory (symbolic links, FIFOs, directories are not listed: a job
        that writes its spool may have put anything there)."""

    def read_file(self, cluster: int, proc: int, name: str, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes of a spool file from ``offset`` (fewer at end of file).  ``name`` is a plain name;
        only a regular file inside the job's spool is read, never through a symbolic link, never blocking on a FIFO
        (anything else is a :class:`BackendError`)."""

    def read_job_file(self, cluster: int, proc: int, path: str, offset: int, length: int) -> tuple[int, bytes]:
        """A file of a job, as the submit side sees it: its size and up to ``length`` bytes from ``offset``.
        ``path`` is a plain name in the job's spool, read with :meth:`read_file`'s confinement, or an absolute path
        the job's ad names (its Out, Err, UserLog), read with the job owner's rights, never the gateway's, and never
        through a symbolic link in its place (a backend that cannot do that answers BackendError for it, as for any
        other name)."""

    # -- queue ----------------------------------------------------------------------------------------
    def query(self, constraint: classad2.ExprTree | None, projection: Sequence[str] | None = None, *,
              budget: float | None = None) -> list[classad2.ClassAd]:
        """The committed job ads for which ``constraint`` is true (all when ``None``); without a ``projection``, each
        carries its :class:`Revision`.

        ``budget`` marks a client's query (its constraint is the client's text): the backend answers within that
        many seconds or raises :class:`QueryFailed`, and no constraint, however slow or deep, may stall or crash the
        gateway's process.  The gateway calls such queries from a pool of their own, concurrently with each other
        and with the backend's worker thread: ``query``, ``history`` and ``get_job`` must be safe to call so."""

    def get_job(self, cluster: int, proc: int) -> classad2.ClassAd | None:
        """One committed job ad (with its :class:`Revision`), or ``None``."""

    def job_in_memory(self, cluster: int, proc: int) -> classad2.ClassAd | None:
        """The committed job's ad (with its :class:`Revision`) when the backend holds it in memory, at once and without
        blocking (the gateway calls it on the reactor); ``None`` otherwise (no such job, or not in memory), and the
        gateway then asks :meth:`get_job` on a thread."""

    def reschedule(self) -> None:
        """Ask the backend to start runnable jobs now."""


REQUIRED_ATTRIBUTES = ("threads", "call_timeout", "capabilities")
REQUIRED_METHODS = ("info", "close", "reserve_clusters", "release_clusters", "commit", "check_changes", "spool_directory", "stage_file", "write_file",
                    "file_md5", "discard", "list_files", "read_file", "read_job_file", "query", "get_job",
                    "job_in_memory", "reschedule")


def check(backend: object, name: str = "backend") -> ScheddBackend:
    """The backend itself, once it has every required part and the methods of every capability it declares."""
    missing = [attribute for attribute in REQUIRED_ATTRIBUTES if not hasattr(backend, attribute)]
    missing += [method for method in REQUIRED_METHODS if not callable(getattr(backend, method, None))]
    capabilities = getattr(backend, "capabilities", frozenset())
    unknown = [capability for capability in capabilities if not isinstance(capability, Capability)]
    if unknown:
        raise IncompleteBackend(f"the {name} backend declares unknown capabilities {unknown!r}")
    for capability in sorted(capabilities, key=lambda c: c.name):
        missing += [f"{method} (for {capability.name})" for method in capability.methods
                    if not callable(getattr(backend, method, None))]
    if missing:
        raise IncompleteBackend(f"the {name} backend does not implement the backend interface: missing "
                                + ", ".join(missing))
    return backend
