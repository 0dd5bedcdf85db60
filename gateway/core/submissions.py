"""The simplified submission API (like MRG Grid's QMF and Aviary job APIs): ``submit(ad) -> id``, ``create() -> id`` and
``send(id, name, offset, data)`` for input staging, jobs grouped by their ``Submission`` attribute, job control and
queries.  Protocol-free: the SOAP and JSON forms in ``gateway.submission.service`` call this.

Deliberate fixes of the originals' quirks: expressions keep their text on output; strings are never
quote-trimmed; output retrieval is binary-safe and limited to the job's Out/Err/UserLog (read with its owner's
rights) and the files in its spool; an unknown submission is NO_MATCH; SetJobAttribute honours a given type and
refuses the attributes the schedd owns; suspend/continue report whether they applied.  Values are strictly typed
(``adstruct.typed_value``) at submit and setAttribute alike: one that does not parse as its type is refused, naming
the attribute and the type, as QMF's "Failed to parse job ad attribute".

The owner rules are Birdbath's (``AccessPolicy.owner_refusal``): submitting, job control, setAttribute and fetch
need a caller that may use the job's Owner; queries are not filtered, as getJobAds is not.  A staging area belongs
to the caller that created it (host, user and how it was identified).
"""

from __future__ import annotations

import enum
import json
import os
import re
import shutil
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import classad2
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from backends.interface import (
    ActionChange,
    AttributeChange,
    BackendError,
    Batch,
    Capability,
    ScheddBackend,
    UnknownJob,
)
from jobmodel.classads import job_status, literal_int, parse_constraint
from jobmodel.expressions import ExpressionLimits, ExpressionRefused
from jobmodel.exprtext import TextedAd, expression_text
from jobmodel.files import ByteRanges, is_plain_name, md5_of, transfer_name_problem, write_at
from jobmodel.jobs import JobAction, JobStatus
from jobmodel.values import BadValue, check_attribute_name, excerpt

from .adstruct import Attr, AttrType, BadAttribute, ad_to_struct, typed_value
from .auth import AccessPolicy, Caller, NotOwner, OwnerUse, Permission, replaced_at_submit, schedd_owned
from .queries import QueryRunner
from .status import BirdbathError
from .transactions import (
    AdRules,
    ClusterIds,
    QueueWriter,
    StagedFile,
    StagedJob,
    StagingArea,
    Transaction,
    fill_defaults,
)

log = Logger()

SUMMARY_ATTRIBUTES = ("ClusterId", "ProcId", "GlobalJobId", "QDate", "EnteredCurrentStatus", "JobStatus", "Cmd",
                      "Args", "Arguments", "ReleaseReason", "HoldReason", "Submission", "Owner")
STATE_NAMES = {JobStatus.IDLE: "Idle", JobStatus.RUNNING: "Running", JobStatus.REMOVED: "Removed",
               JobStatus.COMPLETED: "Completed", JobStatus.HELD: "Held",
               JobStatus.TRANSFERRING_OUTPUT: "TransferringOutput", JobStatus.SUSPENDED: "Suspended"}


#: the API's names of attribute types
API_TYPES = {"EXPR": AttrType.EXPRESSION, "INTEGER": AttrType.INTEGER, "FLOAT": AttrType.FLOAT,
             "STRING": AttrType.STRING, "BOOLEAN": AttrType.BOOLEAN}
TYPE_NAMES = {kind: name for name, kind in API_TYPES.items()}
#: QMF's numeric type codes (the ``{"TYPE": code, "VALUE": text}`` ads); a boolean travels as an expression, as in QMF
QMF_CODES = {"EXPR": 0, "INTEGER": 1, "FLOAT": 2, "STRING": 3, "BOOLEAN": 0}
FROM_QMF = {0: "EXPR", 1: "INTEGER", 2: "FLOAT", 3: "STRING"}


class ApiStatus(str, enum.Enum):
    """Aviary's status codes, used by both forms of the API."""

    OK = "OK"
    FAIL = "FAIL"
    NO_MATCH = "NO_MATCH"
    INVALID_OFFSET = "INVALID_OFFSET"
    UNIMPLEMENTED = "UNIMPLEMENTED"
    UNAVAILABLE = "UNAVAILABLE"


class ApiError(Exception):
    def __init__(self, code: ApiStatus, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


def fail(text: str) -> ApiError:
    return ApiError(ApiStatus.FAIL, text)


@dataclass(frozen=True)
class JobRef:
    cluster: int
    proc: int

    @classmethod
    def parse(cls, text: str) -> "JobRef":
        """``cluster.proc`` or ``schedd#cluster.proc`` (an Aviary JobID structure arrives as :func:`aviary_job`'s
        text)."""
        match = re.fullmatch(r"(?:.*#)?(\d+)\.(\d+)", (text or "").strip())
        if not match or int(match.group(1)) <= 0:
            raise ApiError(ApiStatus.FAIL, f"Invalid Id {excerpt(text or '')}: expected cluster.proc, "
                                           f"schedd#cluster.proc or a JobID {{job, pool, scheduler, submission}}")
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.cluster}.{self.proc}"


def aviary_job(fields: dict[str, Any]) -> str:
    """The job id an Aviary ``JobID`` structure (``{job, pool?, scheduler?, submission?}``) names: its
    ``job``, the only part Aviary itself used (as the schedd part of ``schedd#cluster.proc`` is not checked either).
    A structure without a ``job`` text becomes a text that names it, for JobRef.parse to refuse."""
    job = fields.get("job")
    return job if isinstance(job, str) else f"JobID without a job: {json.dumps(fields, default=str)}"


@dataclass(frozen=True)
class SubmissionInfo:
    name: str
    owner: str
    qdate: int
    counts: dict[str, int]


@dataclass(frozen=True)
class SubmissionSettings:
    schedd_name: str
    staging_root: Path
    staging_lifetime: int = 3600  # seconds an unused staging area lives
    output_retention: int = 86400  # seconds a finished staged job stays queued so its output can be fetched
    max_staging_areas_per_caller: int = 20  # staging areas one caller (host, user, authentication) may hold
    limits: ExpressionLimits = ExpressionLimits()  # on the expression text of job ads and setAttribute values
    pool_name: str = ""  # the backend's pool (its central manager), which Aviary's ids name beside the schedd
    #: the most one fetch reads (max_request_bytes: what a client may send in one request, it may read in one)
    max_read_bytes: int = 16 * 1024 * 1024


class SubmissionService:
    def __init__(self, backend: ScheddBackend, call: Callable[..., Any], policy: AccessPolicy, clock: IReactorTime,
                 settings: SubmissionSettings, *, queries: QueryRunner | None = None,
                 clusters: ClusterIds | None = None, writer: QueueWriter | None = None) -> None:
        self._backend = backend
        self._call = call
        self._writer = writer or QueueWriter(backend, call)
        #: the ids of new clusters (shared with the Birdbath service, so ids go up across both)
        self._clusters = clusters or ClusterIds.of(backend, call)
        self._queries = queries or QueryRunner(call)  # without a pool of their own, queries share the backend's
        self._policy = policy
        self._clock = clock
        self.settings = settings
        self._staging: dict[str, StagingArea] = {}
        shutil.rmtree(settings.staging_root, ignore_errors=True)  # staging areas do not survive a restart
        settings.staging_root.mkdir(mode=0o700, parents=True, exist_ok=True)  # what clients sent: the gateway's alone

    def _check(self, caller: Caller, permission: Permission) -> None:
        try:
            self._policy.check(caller, permission)
        except BirdbathError as exc:  # "Permission denied", and why when a token's scope is what refused
            raise fail(exc.status.message or "Permission denied") from None

    async def _run(self, function: Callable[..., Any], *args: Any, lane: Callable[..., Any] | None = None) -> Any:
        """``function(*args)`` on the backend's thread (or on ``lane``), its errors as statuses."""
        with _statuses():
            return await (lane or self._call)(function, *args)

    async def _query(self, caller: Caller, function: Callable[..., Any], *args: Any) -> Any:
        """A query, on the query pool (``function`` takes the ``budget`` keyword)."""
        try:
            return await self._queries.run(caller, function, *args)
        except BackendError as exc:
            raise fail(f"Query failed: {exc}") from None

    # -- submitting ---------------------------------------------------------------------------------
    async def submit(self, caller: Caller, attrs: Sequence[Attr], staging: str | None = None) -> str:
        """One job in a fresh cluster; returns ``<schedd>#<cluster>.<proc>``."""
        self._check(caller, Permission.WRITE)
        area = self._staging_area(caller, staging) if staging else None
        refusal = area.refusal() if area is not None else None
        if refusal is not None:
            raise fail(f"Cannot submit from staging area {staging}: {refusal}")
        ad = self._client_ad(caller, attrs, spooled=area is not None)
        try:
            cluster = await self._clusters.next()
        except BackendError as exc:
            raise fail(f"Could not create a new cluster: {exc}") from None
        key = (cluster, 0)
        files = dict(area.files) if area is not None else {}
        group = (area.submission if area is not None else None) or f"{self.settings.schedd_name}#{cluster}"
        fill_defaults(ad, AdRules.SUBMISSION_API, self._backend.spool_directory(*key), list(files),
                      client_iwd=isinstance(ad.get("Iwd"), str), retention=self.settings.output_retention,
                      submission=group)
        txn = Transaction(0, 0, caller)  # a whole transaction of one job, with the area's files copied in
        txn.jobs[key] = StagedJob({name: StagedFile(size) for name, size in files.items()}, ad)
        inputs = [(key, name, area.directory / name) for name in files] if area is not None else []
        with _statuses():
            await self._writer.commit(txn, inputs)
        return f"{self.settings.schedd_name}#{cluster}.0"

    def _client_ad(self, caller: Caller, attrs: Sequence[Attr], spooled: bool) -> classad2.ClassAd:
        """:func:`api_ad` with its Owner; its defaults are :func:`~gateway.core.transactions.fill_defaults`' once
        its cluster is known."""
        ad = api_ad(attrs, self.settings.limits, spooled=spooled)
        try:
            ad["Owner"] = self._policy.submit_owner(caller, ad.get("Owner"))
        except NotOwner as exc:
            raise fail(f"Owner refused: {exc}") from None
        return ad

    # -- staging ------------------------------------------------------------------------------------
    @property
    def staging_areas(self) -> int:
        """Staging areas held now (the operators' figure)."""
        return len(self._staging)

    async def create(self, caller: Caller, submission: str | None = None) -> str:
        self._check(caller, Permission.WRITE)
        self._check_room(caller)
        staging = uuid.uuid4().hex
        area = StagingArea(staging, submission or None, self.settings.staging_root / staging, caller)
        self._staging[area.id] = area  # counted at once: concurrent creates cannot pass the limit together
        try:
            await self._run(area.directory.mkdir)
        except ApiError:
            self._staging.pop(area.id, None)
            raise
        area.expiry = self._clock.callLater(self.settings.staging_lifetime, self._expire, area.id)
        return area.id

    async def send(self, caller: Caller, staging: str, name: str, offset: int, data: bytes,
                   md5: str | None = None) -> int:
        """Write ``data`` at ``offset`` into the staged file ``name``; with ``md5``, check the whole file after."""
        self._check(caller, Permission.WRITE)
        area = self._staging_area(caller, staging)
        problem = transfer_name_problem(name)
        if problem is not None:
            raise fail(f"Cannot stage {name!r}: {problem}")
        if offset < 0:
            raise ApiError(ApiStatus.INVALID_OFFSET, f"offset {offset} is negative")
        self._renew(area)
        received = area.received.setdefault(name, ByteRanges())
        end = offset + len(data)
        try:
            size = await self._run(write_at, area.directory / name, offset, data, True)
        except ApiError as exc:
            received.remove(offset, end)  # what that part holds now is unknown: it must be sent again
            area.files[name] = max(area.files.get(name, 0), end)  # a file whose first send fails is still needed
            raise fail(f"Failed to write to {name!r}: {exc.text}") from None
        received.add(offset, end)
        area.files[name] = size
        if md5:
            await self._check_md5(area, name, size, md5)
        return size

    async def _check_md5(self, area: StagingArea, name: str, size: int, md5: str) -> None:
        """The whole staged file against the MD5 sent; only once every byte of it was sent (reading the holes a far
        offset leaves would be reading zeros for as long as the client likes)."""
        missing = size - area.received[name].covered()
        if missing:
            area.mismatched[name] = md5
            raise fail(f"File {name!r} cannot match the MD5 sent: {missing} of its {size} bytes were not sent")
        actual = await self._run(md5_of, area.directory / name)
        if actual != md5.lower():
            area.mismatched[name] = md5
            raise fail(f"File {name!r} does not match the MD5 sent (sent {md5}, staged {actual})")
        area.mismatched.pop(name, None)

    async def abort(self, caller: Caller, staging: str) -> None:
        self._check(caller, Permission.WRITE)
        self._discard(self._staging_area(caller, staging))

    def _check_room(self, caller: Caller) -> None:
        limit = self.settings.max_staging_areas_per_caller
        if sum(1 for area in self._staging.values() if area.creator == caller) >= limit:
            raise fail(f"Too many staging areas: this client already has {limit} "
                       f"(max_staging_areas_per_caller in [submission]); submit from or abort one first, "
                       f"or wait until unused ones expire")

    def _staging_area(self, caller: Caller, staging: str) -> StagingArea:
        """The caller's own staging area; another caller's is answered as if it did not exist."""
        area = self._staging.get(staging)
        if area is None or area.creator != caller:
            raise ApiError(ApiStatus.NO_MATCH, f"No staging area {staging!r} (unknown, used up or expired)")
        return area

    def _renew(self, area: StagingArea) -> None:
        if area.expiry is not None and area.expiry.active():
            area.expiry.reset(self.settings.staging_lifetime)

    def _expire(self, staging: str) -> None:
        area = self._staging.get(staging)
        if area is not None:
            log.info("staging area {id} expired unused; removing its files", id=staging)
            area.expiry = None
            self._discard(area)

    def _discard(self, area: StagingArea) -> None:
        self._staging.pop(area.id, None)
        if area.expiry is not None and area.expiry.active():
            area.expiry.cancel()
        self._call(shutil.rmtree, area.directory, True).addErrback(
            lambda failure: log.failure("removing staging area {id}", failure, id=area.id))

    # -- control --------------------------------------------------------------------------------------
    async def act(self, caller: Caller, job: str, action: JobAction, reason: str | None) -> None:
        self._check(caller, Permission.WRITE)
        ref = JobRef.parse(job)
        try:
            await self._call(self._as_owner, caller, ref, self._backend.commit,
                             Batch(changes=[ActionChange(action, ref.cluster, ref.proc, reason)]))
        except UnknownJob as exc:
            raise ApiError(ApiStatus.NO_MATCH, str(exc)) from None
        except BackendError as exc:
            raise fail(f"Failed to {action.value} job {ref}: {exc}") from None

    async def set_attribute(self, caller: Caller, job: str, name: str, type_: AttrType | None, value: str) -> None:
        """A typed value (STRING is quoted for you), or with no type raw ClassAd text, as QMF did; never one of
        the attributes the schedd owns (Owner, User, the ids, QDate, the job's state...)."""
        self._check(caller, Permission.WRITE)
        ref = JobRef.parse(job)
        _check_name(name)
        if name.lower() == "submission":
            raise fail("Changes to submission name not allowed")
        if schedd_owned(name):
            raise fail(f"{name} is set by the schedd and cannot be changed")
        parsed = api_value(name, type_ or AttrType.EXPRESSION, value, self.settings.limits)
        await self._run(self._as_owner, caller, ref, self._backend.commit,
                        Batch(changes=[AttributeChange(ref.cluster, ref.proc, name, parsed)]))

    def _check_owner(self, caller: Caller, ref: JobRef, ad: classad2.ClassAd) -> None:
        try:
            self._policy.check_owner(caller, ad.get("Owner"), OwnerUse.ACT)
        except NotOwner as exc:
            raise fail(f"Not job owner of {ref}: {exc}") from None

    def _as_owner(self, caller: Caller, ref: JobRef, function: Callable[..., Any], *args: Any) -> Any:
        """On the backend's thread: the owner check on the queued job, then ``function``, in one backend call, so
        that no job can enter the queue between the check and the work."""
        ad = self._backend.get_job(ref.cluster, ref.proc)
        if ad is None:
            raise UnknownJob(f"job {ref} is not in the queue")
        self._check_owner(caller, ref, ad)
        return function(*args)

    # -- queries --------------------------------------------------------------------------------------
    async def job_ad(self, caller: Caller, job: str) -> list[Attr]:
        self._check(caller, Permission.READ)
        return self._wire_ad(await self._find(JobRef.parse(job)))

    def _wire_ad(self, ad: classad2.ClassAd) -> list[Attr]:
        """A whole job ad as typed attributes (without the synthetic MyType, TargetType, ServerTime)."""
        return [attr for attr in ad_to_struct(ad, int(self._clock.seconds()))
                if attr.name not in ("MyType", "TargetType", "ServerTime")]

    async def _find(self, ref: JobRef) -> classad2.ClassAd:
        ad = await self._run(self._lookup, ref, lane=self._queries.read)
        if ad is None:
            raise ApiError(ApiStatus.NO_MATCH, f"Unknown job {ref}")
        return ad

    def _lookup(self, ref: JobRef) -> classad2.ClassAd | None:
        """A live job, else one from the history (on the backend's thread)."""
        ad = self._backend.get_job(ref.cluster, ref.proc)
        if ad is None and Capability.HISTORY in self._backend.capabilities:
            found = self._backend.history(parse_constraint(f"ClusterId == {ref.cluster} && ProcId == {ref.proc}"), 1)
            ad = found[0] if found else None
        return ad

    async def summaries(self, caller: Caller, jobs: Sequence[str],
                        attributes: Sequence[str] = SUMMARY_ATTRIBUTES) -> list[dict[str, Any]]:
        """Summary attributes of the given jobs, each looked up alone (queued or in the history), or of all live
        jobs when the list is empty, read with ``attributes`` alone (a count per state needs two of them, not
        whole ads)."""
        self._check(caller, Permission.READ)
        if jobs:
            ads = [await self._find(JobRef.parse(job)) for job in jobs]
        else:
            ads = await self._query(caller, self._backend.query, None, list(attributes))
        return [_summary(ad, attributes) for ad in ads]

    async def history(self, caller: Caller, constraint: str | None = None,
                      limit: int | None = None) -> list[tuple[JobRef, list[Attr]]]:
        """Whole ads of the jobs that left the queue and match ``constraint``, newest first: by the time they
        entered their final state (``EnteredCurrentStatus``), then by id, as condor_history lists them by when they
        left; at most ``limit`` of them (None: all)."""
        self._check(caller, Permission.READ)
        if limit is not None and limit < 0:
            raise fail(f"limit must not be negative (got {limit})")
        if Capability.HISTORY not in self._backend.capabilities:
            raise fail("This backend keeps no history of the jobs that left the queue")
        expr = None
        if constraint is not None and constraint.strip():
            try:
                expr = self._queries.settings.limits.parse(constraint, "the constraint")
            except ExpressionRefused as exc:
                raise fail(str(exc)) from None
            except classad2.ClassAdException:
                raise fail(f"cannot parse the constraint {constraint!r}") from None
        ads = await self._query(caller, self._backend.history, expr)
        ads = sorted(ads, key=_left_order, reverse=True)[:limit]
        return [(JobRef(*_left_order(ad)[1:]), self._wire_ad(ad)) for ad in ads]

    async def submissions(self, caller: Caller, name: str | None = None) -> list[SubmissionInfo]:
        """Submissions (live and finished jobs), with owner, oldest QDate and per-state counts, by name in natural
        order (``#2`` before ``#10``, as a person numbers them)."""
        self._check(caller, Permission.READ)
        ads = await self._query(caller, self._everything, name)
        groups: dict[str, list[classad2.ClassAd]] = {}
        for ad in ads:
            groups.setdefault(_submission_of(ad, self.settings.schedd_name), []).append(ad)
        if name is not None and name not in groups:
            raise ApiError(ApiStatus.NO_MATCH, f"Unable to locate submission {name!r}")
        return [SubmissionInfo(group, str(groups[group][0].get("Owner", "")),
                               min(int(a.get("QDate", 0)) for a in groups[group]), _counts(groups[group]))
                for group in sorted(groups, key=natural_order)]

    async def submission_jobs(self, caller: Caller, name: str) -> list[dict[str, Any]]:
        self._check(caller, Permission.READ)
        ads = await self._query(caller, self._everything, name)
        members = [ad for ad in ads if _submission_of(ad, self.settings.schedd_name) == name]
        if not members:
            raise ApiError(ApiStatus.NO_MATCH, f"Unable to locate submission {name!r}")
        order = list(STATE_NAMES)
        return [_summary(ad) for ad in sorted(members, key=lambda a: (order.index(job_status(a)), a.get("ClusterId", 0),
                                                                      a.get("ProcId", 0)))]

    def _everything(self, name: str | None, *, budget: float) -> list[classad2.ClassAd]:
        """The jobs of submission ``name`` (all jobs when None), live and finished, and perhaps a few more that the
        caller's :func:`_submission_of` leaves out: its name, or for a name ``<schedd>#<n>`` of this schedd the
        jobs that are in it by their cluster or DAG (``n``) unless they name another."""
        constraint = parse_constraint(_submission_constraint(name, self.settings.schedd_name)) if name else None
        ads = list(self._backend.query(constraint, budget=budget))
        if Capability.HISTORY in self._backend.capabilities:
            ads += self._backend.history(constraint, budget=budget)
        return ads

    # -- output ---------------------------------------------------------------------------------------
    async def fetch(self, caller: Caller, job: str, file: str, start: int, end: int) -> bytes:
        """Bytes of the job's Out, Err or UserLog (wherever they are, read with the owner's rights) or of a file in
        its spool by name, with QMF's (start, end) range rules; only for a caller that may act on the job's owner."""
        return (await self.job_file(caller, job, file, start, end)).data

    async def job_file(self, caller: Caller, job: str, file: str, start: int, end: int) -> JobFile:
        """:meth:`fetch`'s bytes with the file's name and whole size (Aviary's GetJobData answers both)."""
        self._check(caller, Permission.READ)
        ref = JobRef.parse(job)
        ad = await self._find(ref)
        self._check_owner(caller, ref, ad)
        path = _spool_file(ad, file, self._backend.spool_directory(ref.cluster, ref.proc))
        size, _ = await self._run(self._backend.read_job_file, ref.cluster, ref.proc, path, 0, 0)
        offset, length = _range(start, end, size)
        if length > self.settings.max_read_bytes:
            raise fail(f"{length:,} bytes of {file!r} were asked for at once, more than one answer carries "
                       f"({self.settings.max_read_bytes:,}: max_request_bytes in [gateway]); fetch it in pieces")
        _, data = await self._run(self._backend.read_job_file, ref.cluster, ref.proc, path, offset, length)
        return JobFile(path, size, data)


@dataclass(frozen=True)
class JobFile:
    """Part of a job's file: its name, its whole size and the bytes read."""

    name: str
    size: int
    data: bytes


@contextmanager
def _statuses() -> Iterator[None]:
    """The backend's errors, and those of the staging areas' own files (a full disk, say), as the API's statuses."""
    try:
        yield
    except UnknownJob as exc:
        raise ApiError(ApiStatus.NO_MATCH, str(exc)) from None
    except BackendError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(_os_reason(exc)) from None


def api_ad(attrs: Sequence[Attr], limits: ExpressionLimits, *, spooled: bool) -> TextedAd:
    """A new job's ad by the submission API's rules (QMF's and Aviary's): the client's attributes strictly typed
    (:func:`api_value`), what the schedd assigns dropped, and the attributes the API requires present (``Iwd`` only
    when no staged input makes the spool the job's directory); FAIL saying what is wrong, in the texts whose
    beginnings QMF's status numbers follow ("Invalid attribute name", "Failed to parse", "Job ad is missing")."""
    ad = TextedAd()
    for attr in attrs:
        _check_name(attr.name)
        if replaced_at_submit(attr.name):
            continue  # the schedd assigns it (ids, QDate, User...), as QMF's late overrides did
        ad[attr.name] = api_value(attr.name, attr.type, attr.value, limits)
    required = ["Cmd", "Requirements"] + ([] if spooled else ["Iwd"])
    missing = [name for name in required if name not in ad]
    if missing:
        raise fail(f"Job ad is missing required attributes: {', '.join(missing)}")
    return ad


def api_value(name: str, type_: AttrType, value: str, limits: ExpressionLimits) -> Any:
    """A client's value as its type says, or FAIL naming the attribute and the type."""
    try:
        return typed_value(name, type_, value, limits)
    except BadAttribute as exc:
        raise fail(f"Failed to parse job ad attribute {name} as {TYPE_NAMES.get(type_, type_.value)}: "
                   f"{exc.reason}") from None


def _check_name(name: str) -> None:
    try:
        check_attribute_name(name)
    except BadValue as exc:
        raise fail(f"Invalid attribute name: {exc}") from None


def _check_file_name(name: str) -> None:
    """A file of a job's spool to read (fetch keeps the plain-name rule; sending uses transfer_name_problem)."""
    if not is_plain_name(name):
        raise fail(f"{name!r} is not a plain file name")


def _os_reason(exc: OSError) -> str:
    """What an OSError says, without the path (which is the gateway's, not the client's business)."""
    return exc.strerror or str(exc)


def natural_order(name: str) -> tuple[str | int, ...]:
    """The sort key of a name whose runs of digits compare as numbers (``s#2`` < ``s#10``): the name's text split at
    its numbers, so that text always meets text and a number a number."""
    return tuple(int(part) if index % 2 else part for index, part in enumerate(_DIGITS.split(name)))


_DIGITS = re.compile(r"(\d+)")


def _submission_of(ad: classad2.ClassAd, schedd: str) -> str:
    value = ad.get("Submission")
    if isinstance(value, str) and value:
        return value
    dag = ad.get("DAGManJobId")
    return f"{schedd}#{dag if isinstance(dag, int) else ad.get('ClusterId')}"


def _submission_constraint(name: str, schedd: str) -> str:
    """A constraint true for every job of submission ``name`` (:func:`_submission_of`'s, which picks them out
    after): its Submission, or for a name of this schedd's ``<schedd>#<n>`` form, the cluster or the DAG ``n`` when
    the job names no other.  One pass over the queue, handing over only the submission's jobs (a remote schedd
    sends no other)."""
    named = f"Submission == {classad2.quote(name)}"
    prefix, _, number = name.rpartition("#")
    if prefix != schedd or not number.isdigit() or len(number) > 18:  # (no cluster id is longer than an int64)
        return named
    return f"{named} || ((!isString(Submission) || Submission == \"\") && (DAGManJobId =?= {int(number)} || " \
           f"(!isInteger(DAGManJobId) && ClusterId =?= {int(number)})))"


def _counts(ads: Iterable[classad2.ClassAd]) -> dict[str, int]:
    counts = {name: 0 for name in STATE_NAMES.values()}
    for ad in ads:
        counts[STATE_NAMES[job_status(ad)]] += 1
    return counts


def _left_order(ad: classad2.ClassAd) -> tuple[int, int, int]:
    """When a job left the queue, for sorting the history: the time it entered its final state, then its id."""
    return literal_int(ad, "EnteredCurrentStatus"), literal_int(ad, "ClusterId"), literal_int(ad, "ProcId")


def _summary(ad: classad2.ClassAd, attributes: Sequence[str] = SUMMARY_ATTRIBUTES) -> dict[str, Any]:
    summary = {}
    for name in attributes:
        if name in ad:
            value = ad[name]
            summary[name] = expression_text(ad, name, value) if isinstance(value, classad2.ExprTree) else value
    return summary


def _spool_file(ad: classad2.ClassAd, name: str, spool: str) -> str:
    """What the backend reads for the file ``name`` asks for: the job's Out, Err, UserLog or Log (by attribute
    name or value) as a plain name when it lies directly in the spool, else as its absolute path (which the backend
    reads with the job owner's rights, never the gateway's, and without following a link in its place), or a plain
    spool file name."""
    iwd = ad.get("Iwd") if isinstance(ad.get("Iwd"), str) else spool
    for attribute in ("Out", "Err", "UserLog", "Log"):
        value = ad.get(attribute)
        if isinstance(value, str) and value not in ("", "/dev/null") and name in (attribute.upper(), attribute, value):
            path = os.path.normpath(os.path.join(iwd, value))  # an absolute value replaces iwd
            if os.path.dirname(path) == os.path.normpath(spool) and is_plain_name(os.path.basename(path)):
                return os.path.basename(path)
            if not os.path.isabs(path):
                raise fail(f"the job's {attribute} {value!r} is not a path (its Iwd {iwd!r} is relative)")
            return path
    _check_file_name(name)
    return name


def _range(start: int, end: int, size: int) -> tuple[int, int]:
    """QMF FetchJobData's rules, with the from-the-end length computed after clamping."""
    if start >= 0:
        if end < start:
            raise ApiError(ApiStatus.INVALID_OFFSET, f"Invalid start and end values ({start}, {end})")
        offset = min(start, size)
        return offset, min(end, size) - offset
    if end > 0:
        end = 0
    if end < start:
        raise ApiError(ApiStatus.INVALID_OFFSET, f"Invalid start and end values ({start}, {end})")
    offset = max(0, size + start)
    return offset, max(0, size + end - offset)
