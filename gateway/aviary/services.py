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
from gateway.soap.answer import Maybe, started
from gateway.soap.codec import ContractService, Handler
from gateway.soap.contract import Contract
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


def _run(context: AviaryContext, work: Callable[[SubmissionsContract, Caller], Awaitable[Any]],
         answer: Callable[[Any], Any], failed: Callable[[dict[str, Any]], Any]) -> Maybe[Any]:
    """Run a core coroutine: its result through ``answer``, an ApiError as ``failed`` of its status."""

    async def run() -> Any:
        try:
            result = await work(context.service, context.caller)
        except ApiError as exc:
            context.status = exc.code
            return failed(_status(exc.code, str(exc)))
        context.status = ApiStatus.OK
        return answer(result)

    return started(run())


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


def _submit(context: AviaryContext, p: Wire) -> Maybe[Any]:
    origin = Origin.of(context)

    def answer(job: str) -> dict[str, Any]:
        local = _local_id(job)
        submission = p.get("submission_name") or f"{origin.scheduler}#{local.partition('.')[0]}"
        return {"id": origin.job(local, origin.submission(submission, p.get("owner"))),
                "status": _status(ApiStatus.OK)}

    return _run(context, lambda s, c: s.submit(c, submit_attrs(p)), answer, lambda failed: {"status": failed})


def _control(action: JobAction) -> Handler:
    return lambda context, p: _run(
        context, lambda s, c: s.act(c, aviary_job(p.get("id") or {}), action, p.get("reason")),
        lambda _: {"status": _status(ApiStatus.OK)}, lambda failed: {"status": failed})


def _set_attribute(context: AviaryContext, p: Wire) -> Maybe[Any]:
    attribute = p.get("attribute") or {}
    return _run(context, lambda s, c: s.set_attribute(c, aviary_job(p.get("id") or {}), attribute.get("name") or "",
                                                      None, attribute.get("value") or ""),
                lambda _: {"status": _status(ApiStatus.OK)}, lambda failed: {"status": failed})


JOB_HANDLERS: dict[str, Handler] = {
    "SubmitJob": _submit,
    "HoldJob": _control(JobAction.HOLD),
    "ReleaseJob": _control(JobAction.RELEASE),
    "RemoveJob": _control(JobAction.REMOVE),
    "SuspendJob": _control(JobAction.SUSPEND),
    "ContinueJob": _control(JobAction.CONTINUE),
    "SetJobAttribute": _set_attribute,
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


def _per_job(entry: Callable[[Mapping[str, Any], Origin], dict[str, Any]]) -> Handler:
    """GetJobStatus and GetJobSummary: every live job without ids, else one entry per id (a status for an id that
    names no job)."""

    def handler(context: AviaryContext, p: Wire) -> Maybe[Any]:
        origin = Origin.of(context)
        ids = [aviary_job(i or {}) for i in p.get("ids") or ()]

        async def work(s: SubmissionsContract, c: Caller) -> list[dict[str, Any]]:
            if not ids:
                return [entry(summary, origin) for summary in await s.summaries(c, [])]
            jobs = []
            for job in ids:
                try:
                    (summary,) = await s.summaries(c, [job])
                except ApiError as exc:
                    jobs.append({"id": {"job": job}, "status": _status(exc.code, str(exc))})
                    continue
                jobs.append(entry(summary, origin))
            return jobs

        return _run(context, work, lambda jobs: {"jobs": jobs}, lambda failed: {"jobs": []})

    return handler


_API_TYPES = {AttrType.INTEGER: "INTEGER", AttrType.FLOAT: "FLOAT", AttrType.STRING: "STRING",
              AttrType.EXPRESSION: "EXPRESSION", AttrType.BOOLEAN: "BOOLEAN", AttrType.UNDEFINED: "UNDEFINED",
              AttrType.ERROR: "ERROR"}


def _details(context: AviaryContext, p: Wire) -> Maybe[Any]:
    origin = Origin.of(context)
    ids = [aviary_job(i or {}) for i in p.get("ids") or ()]

    async def work(s: SubmissionsContract, c: Caller) -> list[dict[str, Any]]:
        jobs = []
        for job in ids or [f"{x['ClusterId']}.{x['ProcId']}" for x in await s.summaries(c, [])]:
            try:
                ad = await s.job_ad(c, job)
            except ApiError as exc:
                jobs.append({"id": {"job": job}, "status": _status(exc.code, str(exc))})
                continue
            attrs = [{"name": a.name, "type": _API_TYPES[a.type], "value": a.value} for a in ad]
            jobs.append({"id": origin.job(_local_id(job)), "status": _status(ApiStatus.OK),
                         "details": attrs})
        return jobs

    return _run(context, work, lambda jobs: {"jobs": jobs}, lambda failed: {"jobs": []})


#: GetJobData's file types as the job attributes naming the files
_DATA_FILES = {"OUT": "Out", "ERR": "Err", "LOG": "UserLog"}


def _data(context: AviaryContext, p: Wire) -> Maybe[Any]:
    data = p.get("data") or {}
    job = aviary_job(data.get("id") or {})
    size = p.get("max_bytes")
    size = 1024 if size is None else size
    start, end = (-size, 0) if p.get("from_end") else (0, size)
    echo = {"id": {"job": job}, "type": data.get("type")}
    found_here = {**echo, "id": Origin.of(context).job(job)}
    return _run(context, lambda s, c: s.job_file(c, job, _DATA_FILES[data.get("type") or "OUT"], start, end),
                lambda found: {"data": found_here, "status": _status(ApiStatus.OK), "file_name": found.name,
                               "file_size": found.size, "content": found.data.decode("utf-8", "replace")},
                lambda failed: {"data": echo, "status": failed})


def _submission_id(info: SubmissionInfo, origin: Origin) -> dict[str, Any]:
    return origin.submission(info.name, info.owner, info.qdate)


def _submission_summary(context: AviaryContext, p: Wire) -> Maybe[Any]:
    origin = Origin.of(context)
    with_jobs = _flag(p.get("includeJobSummaries"), False)
    asked = [i for i in p.get("ids") or () if i is not None]

    async def work(s: SubmissionsContract, c: Caller) -> list[dict[str, Any]]:
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

    return _run(context, work, lambda submissions: {"submissions": submissions}, lambda failed: {"submissions": []})


def _submission_ids(context: AviaryContext, p: Wire) -> Maybe[Any]:
    """A page of submission ids (``gateway.core.submission_pages`` holds the original's rules)."""
    origin = Origin.of(context)
    offset = p.get("offset")
    start = None if offset is None else PageOffset(offset.get("name"), offset.get("owner"), offset.get("qdate") or 0)
    mode = None if p.get("mode") is None else ScanMode(p["mode"])

    def answer(found: list[SubmissionInfo]) -> dict[str, Any]:
        page = submission_page(found, p.get("size") or 0, mode, start)
        return {"ids": [_submission_id(info, origin) for info in page.submissions], "remaining": page.remaining}

    return _run(context, lambda s, c: s.submissions(c), answer, lambda failed: {"remaining": 0})


QUERY_HANDLERS: dict[str, Handler] = {
    "GetJobSummary": _per_job(_summary_entry),
    "GetJobStatus": _per_job(_status_entry),
    "GetJobDetails": _details,
    "GetJobData": _data,
    "GetSubmissionSummary": _submission_summary,
    "GetSubmissionID": _submission_ids,
}


def job_service() -> ContractService:
    """Aviary's job service as published in ``wsdl/aviary-job.wsdl``."""
    return ContractService(Contract.load(wsdl_path("aviary-job.wsdl"), whole_answers=True), JOB_HANDLERS)


def query_service() -> ContractService:
    """Aviary's query service as published in ``wsdl/aviary-query.wsdl``."""
    return ContractService(Contract.load(wsdl_path("aviary-query.wsdl"), whole_answers=True), QUERY_HANDLERS)
