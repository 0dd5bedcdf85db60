"""The one interface between the gateway and a schedd backend.

Backends schedule and store; they never see XML.  Every method may block (SQLite, the HTCondor bindings) and the
gateway calls it from a worker thread, never from the reactor, except the two that must answer from memory and
never block: :meth:`ScheddBackend.info` and :meth:`ScheddBackend.spool_directory`, and those a backend marks
:func:`immediate` (which may still decline, case by case, with :class:`WouldBlock`).  A backend transaction is an
opaque object returned by :meth:`ScheddBackend.begin`; ``txn=None`` on an action means "commit this change at once".

What a backend offers beyond the required methods it declares in ``capabilities`` (:class:`Capability`);
:func:`check` verifies both when the backend is loaded, and names what is missing.

Errors a caller can act on are raised as :class:`BackendError` subclasses whose message names the job, file or
attribute concerned; the front end turns them into the protocol's status.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence, TypeVar, runtime_checkable

import classad2

from jobmodel.jobs import JobAction

ENTRY_POINT_GROUP = "birdbath.backends"

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def immediate(method: F) -> F:
    """Mark a backend method that answers from memory at once and is safe on any thread: the gateway then calls it
    where it is (the reactor, through :func:`call_at_once`) instead of on the backend's threads, since the hop there
    and back costs more than such a call (``beginTransaction`` answered three times slower for it).

    Such a method may find, on a given call, that it cannot answer without blocking (a lock another thread holds
    across I/O, data not yet in memory, a write to make durable): called at once (:func:`answering_at_once`), it
    then raises :class:`WouldBlock` before changing anything, and the gateway makes the same call on the backend's
    threads, where it blocks as any other method."""
    method.immediate = True  # type: ignore[attr-defined]
    return method


def is_immediate(function: Callable[..., Any]) -> bool:
    return getattr(function, "immediate", False) is True


class WouldBlock(Exception):
    """An :func:`immediate` method, called at once, that cannot answer this time without blocking; it changed
    nothing, and the same call made off the reactor answers."""


_where = threading.local()


def answering_at_once() -> bool:
    """True inside :func:`call_at_once` on this thread: an immediate method must not block (it raises
    :class:`WouldBlock` instead); anywhere else it may."""
    return getattr(_where, "at_once", False)


def call_at_once(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call an immediate method where it must not block; raises :class:`WouldBlock` when it declines."""
    previous = getattr(_where, "at_once", False)
    _where.at_once = True
    try:
        return function(*args, **kwargs)
    finally:
        _where.at_once = previous


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

    @property
    def methods(self) -> tuple[str, ...]:
        return self.value


class IncompleteBackend(TypeError):
    """A backend that lacks a required method or attribute, or a method of a capability it declares."""


@dataclass(frozen=True)
class BackendInfo:
    """What a backend says about itself: the strings getVersionString/getPlatformString return."""

    name: str
    version: str
    platform: str
    schedd_name: str


@dataclass(frozen=True)
class FileInfo:
    name: str
    size: int


@runtime_checkable
class ScheddBackend(Protocol):
    """A schedd as the gateway sees it: a transactional job queue with per-job spool directories."""

    #: how many worker threads may call into the backend at once (1 serialises every call)
    threads: int
    #: seconds after which the gateway stops waiting for a call and reports the backend unavailable (None: never)
    call_timeout: float | None
    #: the optional parts this backend has
    capabilities: frozenset[Capability]

    def info(self) -> BackendInfo:
        """Who the backend is; answered from memory (never blocks: the gateway may call it on the reactor)."""

    def close(self) -> None:
        """Release resources; called once at shutdown, after every open transaction was aborted."""

    # -- transactions -------------------------------------------------------------------------------
    def begin(self) -> object:
        """Open a backend transaction; nothing done through it is visible to queries until commit."""

    def commit(self, txn: object) -> None:
        """Make every change of ``txn`` durable and visible at once, or raise and change nothing."""

    def abort(self, txn: object) -> None:
        """Discard every change of ``txn``, including files staged for jobs it created."""

    # -- building jobs ------------------------------------------------------------------------------
    def new_cluster(self, txn: object) -> int:
        """Allocate a cluster id that was never used before (also across restarts and aborts)."""

    def new_proc(self, txn: object, cluster: int) -> int:
        """Add the next proc (0, 1, ...) to a cluster created in ``txn`` and create its spool directory."""

    def spool_directory(self, cluster: int, proc: int) -> str:
        """The job's spool directory as the backend's jobs see it (what ``Iwd`` is set to for spooled jobs); computed,
        never blocks."""

    def submit(self, txn: object, cluster: int, proc: int, ad: classad2.ClassAd) -> None:
        """Give a proc of ``txn`` its job ad; the backend adds what a schedd fills in (QDate, JobStatus, ...) and
        derives ``User`` from ``Owner`` (``Owner@<uid domain>``), whatever the ad says."""

    # -- files ----------------------------------------------------------------------------------------
    def stage_file(self, txn: object, cluster: int, proc: int, name: str) -> None:
        """Create (without truncating) a file in the spool of a proc created in ``txn``."""

    def write_file(self, txn: object, cluster: int, proc: int, name: str, offset: int, data: bytes) -> None:
        """Write ``data`` at ``offset`` into a staged file."""

    def file_md5(self, txn: object, cluster: int, proc: int, name: str) -> str:
        """The hex MD5 of a staged file, to check a hash the client declared."""

    def list_files(self, txn: object | None, cluster: int, proc: int) -> Sequence[FileInfo]:
        """The regular files of a job's spool directory (symbolic links, FIFOs, directories are not listed: a job
        that writes its spool may have put anything there)."""

    def read_file(self, txn: object | None, cluster: int, proc: int, name: str, offset: int,
                  length: int) -> bytes:
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
        """The committed job ads for which ``constraint`` is true (all when ``None``).

        ``budget`` marks a client's query (its constraint is the client's text): the backend answers within that
        many seconds or raises :class:`QueryFailed`, and no constraint, however slow or deep, may stall or crash the
        gateway's process.  The gateway calls such queries from a pool of their own, concurrently with each other
        and with the backend's worker thread: ``query``, ``history`` and ``get_job`` must be safe to call so."""

    def get_job(self, cluster: int, proc: int) -> classad2.ClassAd | None:
        """One committed job ad, or ``None``."""

    def act(self, txn: object | None, action: JobAction, cluster: int, proc: int | None,
            reason: str | None, *, system: bool = False) -> int:
        """Hold, release or remove one job (or, with ``proc=None``, every job of a cluster); returns how many."""

    def set_attribute(self, txn: object | None, cluster: int, proc: int, name: str,
                      value: str | classad2.ExprTree) -> None:
        """Set one attribute of a committed job (a ``str`` is a string literal)."""

    def reschedule(self) -> None:
        """Ask the backend to start runnable jobs now."""


REQUIRED_ATTRIBUTES = ("threads", "call_timeout", "capabilities")
REQUIRED_METHODS = ("info", "close", "begin", "commit", "abort", "new_cluster", "new_proc", "spool_directory", "submit",
                    "stage_file", "write_file", "file_md5", "list_files", "read_file", "read_job_file", "query",
                    "get_job", "act", "set_attribute", "reschedule")


def check(backend: Any, name: str = "backend") -> ScheddBackend:
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
