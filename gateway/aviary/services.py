"""Aviary's job and query services (Red Hat MRG Grid's SOAP API, docs in README "Aviary"): the contracts of the
shipped ``wsdl/aviary-job.wsdl`` and ``wsdl/aviary-query.wsdl`` served by the codec, each operation translated into
a call of the submission API's core (:class:`gateway.core.submissions.SubmissionService`) and its result or status
back into Aviary's answer.  Nothing here decides anything the core decides: owner checks, identity and the
statuses (OK, FAIL, NO_MATCH, INVALID_OFFSET) are the submission API's.

What only Aviary's front end does, as its server did: SubmitJob builds the Requirements expression from its
resource constraints, leaves out the basic attributes among ``extra`` unless ``allowOverrides``, and adds its
defaults for dynamic provisioning; the queries answer one status per job id asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping

from twisted.logger import Logger

from gateway.core.adstruct import Attr, AttrType
from gateway.core.auth import Caller
from gateway.core.services import SubmissionsContract
from gateway.core.submission_pages import PageOffset, ScanMode, submission_page
from gateway.core.submissions import ApiError, ApiStatus, SubmissionInfo, aviary_job
from gateway.soap.codec import ContractService, Handler
from gateway.soap.contract import Contract
from gateway.soap.table import Entry, Standard
from gateway.soap.wsdl import wsdl_path
from jobmodel.jobs import JobAction, JobStatus

log = Logger()

Wire = Mapping[str, Any]


@dataclass
class AviaryContext:
    caller: Caller
    service: SubmissionsContract
    #: the status code answered, for the request log
    status: Any = None


@dataclass(frozen=True)
class Origin:
    """Where this gateway's jobs and submissions are, as Aviary's ids say it: the pool (its central manager, as
    ``COLLECTOR_HOST`` names it) and the schedd.  A job or a submission found here is answered with both (a JobID's
    ``pool`` and ``scheduler`` elements, a SubmissionID's attributes of those names), as Aviary's servers did; an id
    that names nothing found is echoed without them."""

    pool: str
    scheduler: str

    @classmethod
    def of(cls, context: AviaryContext) -> Origin:
        settings = context.service.settings
        return cls(settings.pool_name, settings.schedd_name)

    def job(self, job: str, submission: dict[str, Any] | None = None) -> dict[str, Any]:
        """The JobID of a job found here."""
        return {"job": job, "pool": self.pool or None, "scheduler": self.scheduler, "submission": submission}

    def submission(self, name: str | None, owner: str | None, qdate: int | None = None) -> dict[str, Any]:
        """The SubmissionID of a submission found here."""
        return {"name": name, "owner": owner, "qdate": qdate, "pool": self.pool or None, "scheduler": self.scheduler}


def _status(code: ApiStatus | str, text: str | None = None) -> dict[str, Any]:
    return {"code": getattr(code, "value", code), "text": text}


#: Aviary's statuses: an ApiError's code and text are the answer's status, its code the request log's
AVIARY: Standard[ApiError] = Standard(ApiError, lambda refusal: refusal.code,
                                      lambda refusal: _status(refusal.code, str(refusal)), ApiStatus.OK,
                                      lambda: _status(ApiStatus.OK))


def _answer(member: str | None, failed: dict[str, Any] | None = None) -> dict[str, Any]:
    """An entry's answers: the call's result as ``member`` beside the status (None: the status alone); when the core
    refuses, the status, or ``failed`` instead when given."""
    def answer(ok: dict[str, Any], result: Any) -> dict[str, Any]:
        return {"status": ok} if member is None else {member: result, "status": ok}

    def refused(status: dict[str, Any], p: Wire) -> dict[str, Any]:
        return {"status": status} if failed is None else failed

    return {"answer": answer, "failed": refused}


def _flag(text: str | None, default: bool) -> bool:
    """An xsd:boolean attribute's text (absent: the schema's default)."""
    return default if text is None else text.strip().lower() in ("true", "1")


# -- the job service ------------------------------------------------------------------------------------------
#: the requirements Aviary built from its resource constraints, in its order
_REQUIREMENTS = "( TARGET.Arch {ARCH} ) && ( {OS} ) && ( TARGET.Disk {DISK} ) && ( ( TARGET.Memory * 1024 ) {MEMORY} ) " \
                "&& ( TARGET.FileSystemDomain {FILESYSTEM} )"
_UNSET = {"ARCH": " =!= undefined ", "OS": " =!= undefined ", "DISK": " >= 0 ", "MEMORY": " >= 0 ",
          "FILESYSTEM": " =!= undefined "}
_WINDOWS = ('TARGET.OpSys=="WINNT51" || TARGET.OpSys=="WINNT52" || TARGET.OpSys=="WINNT60" || '
            'TARGET.OpSys=="WINNT61"')
#: the attributes ``extra`` replaces only with allowOverrides (Aviary's "basic" ones)
_BASIC = frozenset({"cmd", "requirements", "owner", "iwd", "args"})
#: Aviary's extra types as the core's (BOOLEAN travels as an expression, as Aviary sent it)
_EXTRA_TYPES = {"INTEGER": AttrType.INTEGER, "FLOAT": AttrType.FLOAT, "STRING": AttrType.STRING,
                "EXPRESSION": AttrType.EXPRESSION, "BOOLEAN": AttrType.EXPRESSION}
#: what Aviary added for dynamic provisioning when the job did not say
_DEFAULTS = (Attr("RequestCpus", AttrType.INTEGER, "1"), Attr("DiskUsage", AttrType.INTEGER, "1"),
             Attr("ImageSize", AttrType.INTEGER, "0"), Attr("RequestDisk", AttrType.EXPRESSION, "DiskUsage"),
             Attr("RequestMemory", AttrType.EXPRESSION,
                  "ceiling(ifThenElse(JobVMMemory =!= undefined,JobVMMemory,ImageSize / 1024.000000))"))


def requirements(constraints: list[Wire | None]) -> str:
    """The Requirements expression Aviary built: TRUE without constraints, else its five-part template (each
    constraint's value as the client sent it)."""
    given = [c for c in constraints if c is not None]
    if not given:
        return "TRUE"
    parts = dict(_UNSET)
    for constraint in given:
        kind, value = constraint.get("type"), constraint.get("value") or ""
        if kind in ("ARCH", "FILESYSTEM"):
            parts[kind] = f' == "{value}"'
        elif kind == "OS":
            parts[kind] = _WINDOWS if value == "WINDOWS" else f'TARGET.OpSys == "{value}"'
        elif kind in ("DISK", "MEMORY"):
            parts[kind] = f" >= {value}"
    return _REQUIREMENTS.format(**parts)


def submit_attrs(p: Wire) -> list[Attr]:
    """The job ad SubmitJob asks for, as Aviary's server made it."""
    ad: dict[str, Attr] = {}

    def put(attr: Attr) -> None:
        ad[attr.name.lower()] = attr

    put(Attr("Cmd", AttrType.STRING, p.get("cmd") or ""))
    if p.get("args"):
        put(Attr("Args", AttrType.STRING, p["args"]))
    put(Attr("Owner", AttrType.STRING, p.get("owner") or ""))
    put(Attr("Iwd", AttrType.STRING, p.get("iwd") or ""))
    if p.get("submission_name"):
        put(Attr("Submission", AttrType.STRING, p["submission_name"]))
    put(Attr("Requirements", AttrType.EXPRESSION, requirements(p.get("requirements") or [])))
    overrides = _flag(p.get("allowOverrides"), False)
    for extra in p.get("extra") or ():
        if extra is None:
            continue
        name, kind = extra.get("name") or "", _EXTRA_TYPES.get(extra.get("type") or "")
        if not overrides and name.lower() in _BASIC:
            log.info("Aviary SubmitJob: extra attribute {name} left out (a basic attribute, allowOverrides is "
                     "false)", name=name)
            continue
        if kind is None:
            log.info("Aviary SubmitJob: extra attribute {name} left out (type {kind})", name=name,
                     kind=extra.get("type"))
            continue
        put(Attr(name, kind, extra.get("value") or ""))
    for default in _DEFAULTS:
        ad.setdefault(default.name.lower(), default)
    return list(ad.values())


def _local_id(job: str) -> str:
    """``schedd#cluster.proc`` -> ``cluster.proc`` (Aviary's JobID.job)."""
    return job.rpartition("#")[2]


async def _submit(context: AviaryContext, p: Wire) -> dict[str, Any]:
    """The JobID of the job SubmitJob made."""
    local = _local_id(await context.service.submit(context.caller, submit_attrs(p)))
    origin = Origin.of(context)
    submission = p.get("submission_name") or f"{origin.scheduler}#{local.partition('.')[0]}"
    return origin.job(local, origin.submission(submission, p.get("owner")))


def _control(action: JobAction) -> Entry:
    return Entry(AVIARY, lambda c, p: c.service.act(c.caller, aviary_job(p.get("id") or {}), action, p.get("reason")),
                 **_answer(None))


def _set_attribute(c: AviaryContext, p: Wire) -> Awaitable[None]:
    attribute = p.get("attribute") or {}
    return c.service.set_attribute(c.caller, aviary_job(p.get("id") or {}), attribute.get("name") or "", None,
                                   attribute.get("value") or "")


#: the job service's operations: each its core call (the request's context and parameters) and its answers
JOB_HANDLERS: dict[str, Handler] = {
    "SubmitJob": Entry(AVIARY, _submit, **_answer("id")),
    "HoldJob": _control(JobAction.HOLD),
    "ReleaseJob": _control(JobAction.RELEASE),
    "RemoveJob": _control(JobAction.REMOVE),
    "SuspendJob": _control(JobAction.SUSPEND),
    "ContinueJob": _control(JobAction.CONTINUE),
    "SetJobAttribute": Entry(AVIARY, _set_attribute, **_answer(None)),
}


# -- the query service ----------------------------------------------------------------------------------------
def _job_id(summary: Mapping[str, Any], origin: Origin) -> dict[str, Any]:
    return origin.job(f"{summary.get('ClusterId')}.{summary.get('ProcId')}",
                      origin.submission(summary.get("Submission"), summary.get("Owner")))


def _job_status(summary: Mapping[str, Any]) -> str:
    return JobStatus(summary.get("JobStatus", 1)).name


def _status_entry(summary: Mapping[str, Any], origin: Origin) -> dict[str, Any]:
    return {"id": _job_id(summary, origin), "status": _status(ApiStatus.OK), "job_status": _job_status(summary)}


def _summary_entry(summary: Mapping[str, Any], origin: Origin) -> dict[str, Any]:
    def text(name: str) -> str | None:
        value = summary.get(name)
        return str(value) if value not in (None, "") else None

    return {**_status_entry(summary, origin), "queued": summary.get("QDate", 0),
            "last_update": summary.get("EnteredCurrentStatus", summary.get("QDate", 0)),
            "cmd": str(summary.get("Cmd", "")), "args1": text("Args"), "args2": text("Arguments"),
            "held": text("HoldReason"), "released": text("ReleaseReason")}


def _per_job(entry: Callable[[Mapping[str, Any], Origin], dict[str, Any]]) -> Entry:
    """GetJobStatus and GetJobSummary: every live job without ids, else one entry per id (a status for an id that
    names no job)."""

    async def jobs(context: AviaryContext, p: Wire) -> list[dict[str, Any]]:
        origin = Origin.of(context)
        ids = [aviary_job(i or {}) for i in p.get("ids") or ()]
        s, c = context.service, context.caller
        if not ids:
            return [entry(summary, origin) for summary in await s.summaries(c, [])]
        found = []
        for job in ids:
            try:
                (summary,) = await s.summaries(c, [job])
            except ApiError as exc:
                found.append({"id": {"job": job}, "status": _status(exc.code, str(exc))})
                continue
            found.append(entry(summary, origin))
        return found

    return Entry(AVIARY, jobs, **_answer("jobs", {"jobs": []}))


_API_TYPES = {AttrType.INTEGER: "INTEGER", AttrType.FLOAT: "FLOAT", AttrType.STRING: "STRING",
              AttrType.EXPRESSION: "EXPRESSION", AttrType.BOOLEAN: "BOOLEAN", AttrType.UNDEFINED: "UNDEFINED",
              AttrType.ERROR: "ERROR"}


async def _details(context: AviaryContext, p: Wire) -> list[dict[str, Any]]:
    origin = Origin.of(context)
    ids = [aviary_job(i or {}) for i in p.get("ids") or ()]
    s, c = context.service, context.caller
    jobs = []
    for job in ids or [f"{x['ClusterId']}.{x['ProcId']}" for x in await s.summaries(c, [])]:
        try:
            ad = await s.job_ad(c, job)
        except ApiError as exc:
            jobs.append({"id": {"job": job}, "status": _status(exc.code, str(exc))})
            continue
        attrs = [{"name": a.name, "type": _API_TYPES[a.type], "value": a.value} for a in ad]
        jobs.append({"id": origin.job(_local_id(job)), "status": _status(ApiStatus.OK), "details": attrs})
    return jobs


#: GetJobData's file types as the job attributes naming the files
_DATA_FILES = {"OUT": "Out", "ERR": "Err", "LOG": "UserLog"}


def _data_asked(p: Wire) -> dict[str, Any]:
    """GetJobData's ``data`` as asked: the job's id and the file's type."""
    data = p.get("data") or {}
    return {"id": {"job": aviary_job(data.get("id") or {})}, "type": data.get("type")}


async def _data(context: AviaryContext, p: Wire) -> dict[str, Any]:
    """GetJobData's answer but its status: the part of the file asked for, its ``data`` naming the job found here."""
    asked = _data_asked(p)
    job = asked["id"]["job"]
    size = p.get("max_bytes")
    size = 1024 if size is None else size
    start, end = (-size, 0) if p.get("from_end") else (0, size)
    found = await context.service.job_file(context.caller, job, _DATA_FILES[asked["type"] or "OUT"], start, end)
    return {"data": {**asked, "id": Origin.of(context).job(job)}, "file_name": found.name, "file_size": found.size,
            "content": found.data.decode("utf-8", "replace")}


def _submission_id(info: SubmissionInfo, origin: Origin) -> dict[str, Any]:
    return origin.submission(info.name, info.owner, info.qdate)


async def _submission_summary(context: AviaryContext, p: Wire) -> list[dict[str, Any]]:
    origin = Origin.of(context)
    with_jobs = _flag(p.get("includeJobSummaries"), False)
    asked = [i for i in p.get("ids") or () if i is not None]
    s, c = context.service, context.caller
    found = await s.submissions(c)
    answers = []
    for wanted in asked or [{}]:
        name, owner = wanted.get("name"), wanted.get("owner")
        chosen = [info for info in found if (not name or info.name == name) and (name or not owner
                                                                                  or info.owner == owner)]
        if not chosen and (name or owner):
            answers.append({"id": {"name": name, "owner": owner},
                            "status": _status(ApiStatus.NO_MATCH, f"Unable to locate submission {name or owner}"),
                            "completed": 0, "held": 0, "idle": 0, "removed": 0, "running": 0, "suspended": 0,
                            "transferring_output": 0})
        for info in chosen:
            counts = info.counts
            summary = {"id": _submission_id(info, origin), "status": _status(ApiStatus.OK),
                       "completed": counts["Completed"], "held": counts["Held"], "idle": counts["Idle"],
                       "removed": counts["Removed"], "running": counts["Running"],
                       "suspended": counts["Suspended"], "transferring_output": counts["TransferringOutput"]}
            if with_jobs:
                summary["jobs"] = [_summary_entry(job, origin) for job in await s.submission_jobs(c, info.name)]
            answers.append(summary)
    return answers


async def _submission_ids(context: AviaryContext, p: Wire) -> dict[str, Any]:
    """A page of submission ids (``gateway.core.submission_pages`` holds the original's rules)."""
    offset = p.get("offset")
    start = None if offset is None else PageOffset(offset.get("name"), offset.get("owner"), offset.get("qdate") or 0)
    mode = None if p.get("mode") is None else ScanMode(p["mode"])
    found = await context.service.submissions(context.caller)
    page = submission_page(found, p.get("size") or 0, mode, start)
    origin = Origin.of(context)
    return {"ids": [_submission_id(info, origin) for info in page.submissions], "remaining": page.remaining}


#: the query service's operations: each its core call (the request's context and parameters) and its answers
QUERY_HANDLERS: dict[str, Handler] = {
    "GetJobSummary": _per_job(_summary_entry),
    "GetJobStatus": _per_job(_status_entry),
    "GetJobDetails": Entry(AVIARY, _details, **_answer("jobs", {"jobs": []})),
    "GetJobData": Entry(AVIARY, _data, lambda ok, found: {**found, "status": ok},
                        lambda status, p: {"data": _data_asked(p), "status": status}),
    "GetSubmissionSummary": Entry(AVIARY, _submission_summary, **_answer("submissions", {"submissions": []})),
    "GetSubmissionID": Entry(AVIARY, _submission_ids, lambda ok, page: page, lambda status, p: {"remaining": 0}),
}


def job_service() -> ContractService:
    """Aviary's job service as published in ``wsdl/aviary-job.wsdl``."""
    return ContractService(Contract.load(wsdl_path("aviary-job.wsdl"), whole_answers=True), JOB_HANDLERS)


def query_service() -> ContractService:
    """Aviary's query service as published in ``wsdl/aviary-query.wsdl``."""
    return ContractService(Contract.load(wsdl_path("aviary-query.wsdl"), whole_answers=True), QUERY_HANDLERS)
