"""The core's declared contracts: what the front ends may call on each of the core's services.

A front end holds a service either as the core's own object (one process) or as a worker's stand-in that calls
the core over its link (:class:`gateway.workers.link.RemoteObject`).  Both answer the same :class:`typing.Protocol`
below, so the front ends' type hints name the contract, not a class; the link carries only the methods a contract
declares (a call of anything else is refused on both ends), and the attributes a contract declares are the
constants sent to each worker once, when its link is made.  A new core service is declared once, in
:data:`CONTRACTS`: the workers' list of services and the link's checks are read from it.

Each method answers an awaitable: the core's coroutine, or the link's Deferred.  A front end awaits it, or hands it
to :func:`gateway.soap.answer.started`, which answers at once what finishes without waiting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .submissions import SUMMARY_ATTRIBUTES

if TYPE_CHECKING:
    from backends.interface import BackendInfo, FileInfo, JobKey
    from jobmodel.jobs import JobAction, Universe
    from jobmodel.pool import AdType
    from jobmodel.submitfile import ClusterDescription

    from .adstruct import Attr, AttrType, JobAdStruct
    from .auth import Caller
    from .collector import Inserted, Struct
    from .described import AwaitedInput, Submitted
    from .schedd import JobAdStructs, TemplateResult, ViewAnswer
    from .submissions import JobFile, JobRef, SubmissionInfo, SubmissionSettings
    from .transactions import Committed, Transaction, TransactionRef, WholeTransaction


class ScheddContract(Protocol):
    """Birdbath's condorSchedd, and the transactions every submission path commits through
    (:class:`gateway.core.schedd.BirdbathSchedd`)."""

    #: the backend's version and platform texts, read once
    backend_info: BackendInfo
    #: whether a worker keeps views of the jobs' literals (the backend tells which jobs changed)
    job_views: bool

    def begin_transaction(self, caller: Caller, duration: int) -> Awaitable[Transaction]: ...
    def commit_transaction(self, caller: Caller, ref: TransactionRef | None) -> Awaitable[None]: ...
    def submit_transaction(self, caller: Caller, whole: WholeTransaction) -> Awaitable[Committed]: ...
    def abort_transaction(self, caller: Caller, ref: TransactionRef | None) -> Awaitable[None]: ...
    def extend_transaction(self, caller: Caller, ref: TransactionRef | None,
                           duration: int) -> Awaitable[Transaction]: ...
    def new_cluster(self, caller: Caller, ref: TransactionRef | None) -> Awaitable[int]: ...
    def new_job(self, caller: Caller, ref: TransactionRef | None, cluster: int) -> Awaitable[int]: ...
    def submit(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int,
               attrs: Iterable[Attr] | None) -> Awaitable[None]: ...
    def remove_cluster(self, caller: Caller, ref: TransactionRef | None, cluster: int,
                       reason: str | None) -> Awaitable[None]: ...
    def remove_job(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int,
                   reason: str | None) -> Awaitable[None]: ...
    def hold_job(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int, reason: str | None,
                 system_hold: bool) -> Awaitable[None]: ...
    def release_job(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int,
                    reason: str | None) -> Awaitable[None]: ...
    def get_job_ads(self, caller: Caller, ref: TransactionRef | None,
                    constraint: str | None) -> Awaitable[JobAdStructs]: ...
    def get_job_ads_among(self, caller: Caller, ref: TransactionRef | None, constraint: str | None,
                          candidates: Sequence[JobKey], seen: int) -> Awaitable[ViewAnswer]: ...
    def view_since(self, seen: int) -> Awaitable[ViewAnswer]: ...
    def get_job_ad(self, caller: Caller, ref: TransactionRef | None, cluster: int,
                   proc: int) -> Awaitable[JobAdStruct]: ...
    def declare_file(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int, name: str | None,
                     size: int, md5: str | None) -> Awaitable[None]: ...
    def send_file(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int, name: str | None,
                  offset: int, data: bytes | None) -> Awaitable[None]: ...
    def get_file(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int, name: str | None,
                 offset: int, length: int) -> Awaitable[bytes]: ...
    def list_spool(self, caller: Caller, ref: TransactionRef | None, cluster: int,
                   proc: int) -> Awaitable[Sequence[FileInfo]]: ...
    def close_spool(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int) -> Awaitable[None]: ...
    def who_am_i(self, caller: Caller) -> Awaitable[dict[str, str | None]]: ...
    def request_reschedule(self, caller: Caller) -> Awaitable[None]: ...
    def discover_job_requirements(self, caller: Caller, attrs: Iterable[Attr] | None) -> Awaitable[list[str]]: ...
    def create_job_template(self, caller: Caller, cluster: int, proc: int, owner: str | None, universe: Universe,
                            cmd: str | None, args: str | None,
                            requirements: str | None) -> Awaitable[TemplateResult]: ...


class CollectorContract(Protocol):
    """Birdbath's condorCollector (:class:`gateway.core.collector.BirdbathCollector`)."""

    backend_info: BackendInfo

    def query(self, caller: Caller, ad_type: AdType, constraint: str | None) -> Awaitable[list[Struct]]: ...
    def insert(self, caller: Caller, ad_type: AdType, attributes: Sequence[Attr] | None) -> Awaitable[Inserted]: ...


class SubmissionsContract(Protocol):
    """The submission API's staging areas, jobs and files (:class:`gateway.core.submissions.SubmissionService`)."""

    settings: SubmissionSettings

    def submit(self, caller: Caller, attrs: Sequence[Attr], staging: str | None = None) -> Awaitable[str]: ...
    def create(self, caller: Caller, submission: str | None = None) -> Awaitable[str]: ...
    def send(self, caller: Caller, staging: str, name: str, offset: int, data: bytes,
             md5: str | None = None) -> Awaitable[int]: ...
    def abort(self, caller: Caller, staging: str) -> Awaitable[None]: ...
    def act(self, caller: Caller, job: str, action: JobAction, reason: str | None) -> Awaitable[None]: ...
    def set_attribute(self, caller: Caller, job: str, name: str, type_: AttrType | None,
                      value: str) -> Awaitable[None]: ...
    def job_ad(self, caller: Caller, job: str) -> Awaitable[list[Attr]]: ...
    def summaries(self, caller: Caller, jobs: Sequence[str],
                  attributes: Sequence[str] = SUMMARY_ATTRIBUTES) -> Awaitable[list[dict[str, Any]]]: ...
    def history(self, caller: Caller, constraint: str | None = None,
                limit: int | None = None) -> Awaitable[list[tuple[JobRef, list[Attr]]]]: ...
    def submissions(self, caller: Caller, name: str | None = None) -> Awaitable[list[SubmissionInfo]]: ...
    def submission_jobs(self, caller: Caller, name: str) -> Awaitable[list[dict[str, Any]]]: ...
    def fetch(self, caller: Caller, job: str, file: str, start: int, end: int) -> Awaitable[bytes]: ...
    def job_file(self, caller: Caller, job: str, file: str, start: int, end: int) -> Awaitable[JobFile]: ...


class DescribedContract(Protocol):
    """Submissions described whole, with inputs awaited (:class:`gateway.core.described.DescribedSubmissions`)."""

    def submit(self, caller: Caller, descriptions: list[ClusterDescription] | None = None,
               ad: list[Attr] | None = None) -> Awaitable[Submitted]: ...
    def start_input(self, caller: Caller, cluster: int, proc: int | None) -> Awaitable[AwaitedInput]: ...
    def received(self, caller: Caller, awaited: AwaitedInput) -> Awaitable[list[str]]: ...


class MonitorContract(Protocol):
    """The figures and readiness of the whole gateway (:class:`gateway.monitoring.web.Monitor`)."""

    def scrape(self) -> Awaitable[bytes]: ...
    def problems(self) -> Awaitable[list[str]]: ...


class ThrottleContract(Protocol):
    """Failed logins, counted across processes (:class:`gateway.identity.throttle.LoginThrottle`)."""

    def begin(self, host: str, user: str) -> Awaitable[None]: ...
    def end(self, host: str, user: str, matched: bool | None,
            kind: str = "HTTP Basic login") -> Awaitable[None]: ...


#: every core service a front end may call, by the name the link carries: declared here once
CONTRACTS: dict[str, type] = {"schedd": ScheddContract, "collector": CollectorContract,
                              "submissions": SubmissionsContract, "described": DescribedContract,
                              "monitor": MonitorContract, "throttle": ThrottleContract}


def operations(contract: type) -> frozenset[str]:
    """The methods a contract declares: the only calls the link carries for its service."""
    return frozenset(name for name, value in vars(contract).items() if not name.startswith("_") and callable(value))


def constants(contract: type) -> tuple[str, ...]:
    """The attributes a contract declares, fixed once the core has started: sent to each worker once."""
    return tuple(name for name in vars(contract).get("__annotations__", {}) if not name.startswith("_"))
