"""The REST face: jobs, their files, the history and the pool as HTTP resources under ``/api/v1``, with
``/openapi.json`` describing them.  A thin adapter: every operation is a call of the core the SOAP and JSON APIs use
(``BirdbathSchedd`` for the queue and its transactions, ``SubmissionService`` for job control, edits and history,
``BirdbathCollector`` for the pool), with the caller the site identified, so owner checks and limits are theirs.

Submitting is one whole transaction of the core (``BirdbathSchedd.submit_transaction``, as every front end
submits): the jobs of a submit description, or a DAG's DAGMan job with the archive's files; when no job needs input
from the client it is committed at once, else it stays open (its lease is ``staging_lifetime``) until the input of
every job was PUT, and is committed then.  Until then the jobs are not in the queue, and a transaction
that expires is rolled back as any other.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import classad2
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.interfaces import IPushProducer
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web import resource, server
from zope.interface import implementer

from gateway.core.adstruct import AttrType
from gateway.core.auth import Caller
from gateway.core.described import InputNotAwaited, Submitted
from gateway.core.services import CollectorContract, DescribedContract, ScheddContract, SubmissionsContract
from gateway.core.transactions import InputFile, NewCluster, TransactionRef, WholeTransaction
from gateway.http import GatewayRequest, RequestOutcome, refused, write_whole
from jobmodel.dagman import DagDescription
from jobmodel.files import transfer_name_problem
from jobmodel.jobs import JobAction
from jobmodel.pool import AdType
from jobmodel.submitfile import SPOOLED_LEAVE_IN_QUEUE, SubmitDescriptionError, clusters

from . import tarfiles
from .adjson import ad_to_json, attrs_to_json, json_to_attrs, json_value_type
from .contract import Contract
from .problems import CONTENT_TYPE as PROBLEM
from .problems import Problem, from_core

log = Logger()

JSON = b"application/json"
DEFAULT_LIMIT = 50
#: PATCH's {type, value} names, as other HTCondor HTTP APIs send them
EDIT_TYPES = {"string": AttrType.STRING, "integer": AttrType.INTEGER, "int": AttrType.INTEGER,
              "real": AttrType.FLOAT, "float": AttrType.FLOAT, "boolean": AttrType.BOOLEAN, "bool": AttrType.BOOLEAN,
              "raw": None, "expression": None}


#: the largest id Birdbath's ``xsd:int`` carries (the htcondor backend's own cluster ids start at 1,000,000,000)
XSD_INT_MAX = 2**31 - 1


def _bounded(digits: str) -> int:
    """The number, or one past ``XSD_INT_MAX`` when it has more digits than any id (never a huge parse)."""
    return int(digits) if len(digits) <= 10 else XSD_INT_MAX + 1


@dataclass(frozen=True)
class JobId:
    cluster: int
    proc: int | None  # None: the whole cluster

    @classmethod
    def parse(cls, text: str, whole_cluster: bool = True) -> JobId:
        cluster, _, proc = text.partition(".")
        if not cluster.isdigit() or (proc and not proc.isdigit()) or (not proc and "." in text) \
                or not 0 < _bounded(cluster) <= XSD_INT_MAX or (proc and _bounded(proc) > XSD_INT_MAX):
            raise Problem(404, f"no job {text!r}: a job is cluster.proc" + (", a cluster its number" if whole_cluster
                                                                              else ""))
        if not proc and not whole_cluster:
            raise Problem(400, f"{text!r} is a cluster: this operation takes one job, cluster.proc")
        return cls(int(cluster), int(proc) if proc else None)

    def __str__(self) -> str:
        return f"{self.cluster}" if self.proc is None else f"{self.cluster}.{self.proc}"


@dataclass
class Reply:
    code: int
    body: Any


class RestApi(resource.Resource):
    """``/api/...``: the operations the contract names, routed by it."""

    isLeaf = True

    def __init__(self, contract: Contract, schedd: ScheddContract, submissions: SubmissionsContract,
                 collector: CollectorContract, described: DescribedContract, *, lease: int,
                 max_upload: int, offload: tarfiles.Offload) -> None:
        super().__init__()
        self.contract = contract
        self.schedd = schedd
        self.submissions = submissions
        self.collector = collector
        self.lease = lease
        self.max_upload = max_upload
        #: where uploaded archives are checked and read: a thread pool, never the reactor
        self.offload = offload
        self.described = described
        self.handlers: dict[str, Callable[..., Awaitable[Reply | None]]] = {
            "listJobs": self.list_jobs, "submitJobs": self.submit_jobs, "getJob": self.get_job,
            "removeJob": self.remove_job, "editJob": self.edit_job,
            "holdJob": self._action(JobAction.HOLD), "releaseJob": self._action(JobAction.RELEASE),
            "suspendJob": self._action(JobAction.SUSPEND), "continueJob": self._action(JobAction.CONTINUE),
            "putJobInput": self.put_input, "getJobOutput": self.get_output, "listHistory": self.list_history,
            "listPoolAds": self.list_pool, "submitDag": self.submit_dag, "whoAmI": self.who_am_i,
            "getContract": self.get_contract}
        contract.check(self.handlers)

    # -- dispatch -----------------------------------------------------------------------------------
    def render(self, request: GatewayRequest) -> Any:
        path = request.path.decode("utf-8", "replace")
        refusal = getattr(request, "refusal", None)
        if refusal is not None:
            refused(request, refusal)
            return self._problem(request, Problem(refusal.code, refusal.message))
        found = self.contract.match(request.method, path.rstrip("/") or "/")
        if found is None:
            return self._problem(request, Problem(404, f"no resource {path}: see /openapi.json"))
        if isinstance(found, list):
            request.setHeader(b"allow", b", ".join(sorted(set(found))))
            return self._problem(request, Problem(405, f"{path} takes {', '.join(m.decode() for m in found)}"))
        operation, parameters = found
        caller = request.caller
        answer = ensureDeferred(self.handlers[operation](request, caller, **parameters))
        answer.addCallbacks(self._reply, self._failed, callbackArgs=(request, operation),
                            errbackArgs=(request, operation, caller))
        return server.NOT_DONE_YET

    def _reply(self, reply: Reply | None, request: GatewayRequest, operation: str) -> None:
        self._log(request, operation, str(reply.code if reply else 200))
        if reply is None or request.finished or request._disconnected:
            return  # written as it went (a tar)
        request.setResponseCode(reply.code)
        request.setHeader(b"content-type", JSON)
        write_whole(request, json.dumps(reply.body).encode())

    def _failed(self, failure: Failure, request: GatewayRequest, operation: str, caller: Caller) -> None:
        problem = from_core(failure.value)
        if problem is None:
            log.failure("unhandled error in REST {operation} for {client}", failure, operation=operation,
                        client=caller.host)
            problem = Problem(500, "Internal server error")
        self._log(request, operation, f"{problem.status} {problem.reason}: {problem.detail}")
        if request.finished or request._disconnected:
            return
        if request.startedWriting:  # a streamed answer cut short: the status line is gone
            request.channel.loseConnection()
            return
        write_whole(request, self._problem(request, problem))

    @staticmethod
    def _problem(request: GatewayRequest, problem: Problem) -> bytes:
        request.setResponseCode(problem.status)
        request.setHeader(b"content-type", PROBLEM)
        return problem.document(request.uri.decode("utf-8", "replace"))

    @staticmethod
    def _log(request: GatewayRequest, operation: str, outcome: str) -> None:
        """What the access log's line for this request says (twisted.web writes it when the request ends)."""
        request.outcome = RequestOutcome(f"REST {operation}", outcome)

    # -- the queue ----------------------------------------------------------------------------------
    async def list_jobs(self, request: GatewayRequest, caller: Caller) -> Reply:
        constraint, projection, limit = _query(request)
        ads = (await self.schedd.get_job_ads(caller, None, constraint)).ads
        ads = sorted(ads, key=_job_key)
        token = _arg(request, "page_token")
        if token is not None:
            after = _page_token(token)
            ads = [ad for ad in ads if _job_key(ad) > after]
        page = ads if limit is None else ads[:limit]
        now = int(time.time())
        body: dict[str, Any] = {"jobs": [ad_to_json(ad, now, projection) for ad in page],
                                "total_returned": len(page), "has_more": len(page) < len(ads)}
        if body["has_more"]:
            last_cluster, last_proc = _job_key(page[-1])
            body["next_page_token"] = f"{last_cluster}.{last_proc}"
        return Reply(200, body)

    async def get_job(self, request: GatewayRequest, caller: Caller, job: str) -> Reply:
        ident = JobId.parse(job)
        projection = _projection(request)
        if ident.proc is None:
            ads = (await self.schedd.get_job_ads(caller, None, f"ClusterId == {ident.cluster}")).ads
            if not ads:
                raise Problem(404, f"no cluster {ident.cluster} in the queue", "UNKNOWNCLUSTER")
            now = int(time.time())
            return Reply(200, {"jobs": [ad_to_json(ad, now, projection) for ad in sorted(ads, key=_job_key)]})
        struct = await self.schedd.get_job_ad(caller, None, ident.cluster, ident.proc)
        return Reply(200, attrs_to_json(struct, projection))

    async def submit_jobs(self, request: GatewayRequest, caller: Caller) -> Reply:
        body = _json_body(request)
        if not isinstance(body, dict) or ("submit_file" in body) == ("ad" in body) or len(body) != 1:
            raise Problem(400, "send {\"submit_file\": \"<submit description>\"} or {\"ad\": {<ClassAd>}}")
        if "submit_file" in body:
            if not isinstance(body["submit_file"], str):
                raise Problem(400, "submit_file must be the text of a submit description")
            try:
                made = clusters(body["submit_file"])
            except SubmitDescriptionError as exc:
                raise Problem(400, str(exc), "SUBMIT_DESCRIPTION") from None
            return await self._submitted(request, self.described.submit(caller, descriptions=made))
        return await self._submitted(request, self.described.submit(caller, ad=json_to_attrs(body["ad"])))

    @staticmethod
    async def _submitted(request: GatewayRequest, submitting: Awaitable[Submitted]) -> Reply:
        try:
            made = await submitting
        except SubmitDescriptionError as exc:
            raise Problem(400, str(exc), "SUBMIT_DESCRIPTION") from None
        request.setHeader(b"location", f"/api/v1/jobs/{made.first_cluster}".encode())
        return Reply(201, {"cluster_id": made.first_cluster, "job_ids": made.job_ids,
                           "awaiting_input": made.awaiting_input})

    async def remove_job(self, request: GatewayRequest, caller: Caller, job: str) -> Reply:
        ident = JobId.parse(job)
        reason = _arg(request, "reason") or "Removed by the REST API"
        if ident.proc is None:
            await self.schedd.remove_cluster(caller, None, ident.cluster, reason)
        else:
            await self.submissions.act(caller, str(ident), JobAction.REMOVE, reason)
        return Reply(200, {"message": f"job {ident} removed", "job_id": str(ident)})

    async def edit_job(self, request: GatewayRequest, caller: Caller, job: str) -> Reply:
        ident = JobId.parse(job, whole_cluster=False)
        body = _json_body(request)
        attributes = body.get("attributes") if isinstance(body, dict) and set(body) == {"attributes"} else None
        if not isinstance(attributes, dict) or not attributes:
            raise Problem(400, "send {\"attributes\": {\"<name>\": <value>, ...}}")
        for name, value in attributes.items():
            type_, text = _edit_value(name, value)
            await self.submissions.set_attribute(caller, str(ident), name, type_, text)
        return Reply(200, {"message": f"job {ident} edited: {', '.join(attributes)}", "job_id": str(ident)})

    def _action(self, action: JobAction) -> Callable[..., Awaitable[Reply]]:
        async def act(request: GatewayRequest, caller: Caller, job: str) -> Reply:
            ident = JobId.parse(job, whole_cluster=False)
            body = _json_body(request, empty={})
            if not isinstance(body, dict) or set(body) - {"reason"} or not isinstance(body.get("reason", ""), str):
                raise Problem(400, "send nothing, or {\"reason\": \"<why>\"}")
            reason = body.get("reason")
            await self.submissions.act(caller, str(ident), action, reason)
            return Reply(200, {"message": f"job {ident}: {action.value} done", "job_id": str(ident)})
        return act

    # -- files --------------------------------------------------------------------------------------
    async def put_input(self, request: GatewayRequest, caller: Caller, job: str) -> Reply:
        ident = JobId.parse(job)
        try:
            awaited = await self.described.start_input(caller, ident.cluster, ident.proc)
        except InputNotAwaited as exc:
            raise Problem(409, f"job {ident} is not waiting for input: {exc}") from None
        members = await tarfiles.checked_upload(self.offload, request.content, self.max_upload)
        await self._send_archive(request, caller, awaited.ref, awaited.jobs)
        queued = await self.described.received(caller, awaited)
        return Reply(200, {"message": f"input of job {ident} received", "job_id": str(ident),
                           "files": [member.name for member in members], "queued": queued})

    async def _send_archive(self, request: GatewayRequest, caller: Caller, ref: TransactionRef,
                            targets: list[tuple[int, int]]) -> None:
        """Every file of the (checked) uploaded archive into the spool of each job of the transaction named."""
        async for member, chunks in tarfiles.uploaded_files(self.offload, request.content):
            for cluster, proc in targets:
                await self.schedd.declare_file(caller, ref, cluster, proc, member.name, member.size, None)
            offset = 0
            async for chunk in chunks:
                for cluster, proc in targets:
                    await self.schedd.send_file(caller, ref, cluster, proc, member.name, offset, chunk)
                offset += len(chunk)

    async def submit_dag(self, request: GatewayRequest, caller: Caller) -> Reply:
        """A DAG: its .dag file and the node files in one archive, in the spool of one DAGMan job (as
        condor_submit_dag makes it), committed in one whole transaction."""
        dag = _arg(request, "dag") or ""
        problem = transfer_name_problem(dag)
        if problem is not None:
            raise Problem(400, f"dag must name the .dag file in the archive: {problem}")
        names = [member.name for member in await tarfiles.checked_upload(self.offload, request.content, self.max_upload)]
        if dag not in names:
            raise Problem(400, f"the archive does not hold the DAG file {dag!r} (it holds {', '.join(names) or 'nothing'})")
        files = [InputFile(member.name, b"".join([chunk async for chunk in chunks]))
                 async for member, chunks in tarfiles.uploaded_files(self.offload, request.content)]
        made = await self.schedd.submit_transaction(caller, WholeTransaction(
            [NewCluster(files=files, described=DagDescription(dag, SPOOLED_LEAVE_IN_QUEUE))]))
        cluster, proc = made.jobs[0]
        request.setHeader(b"location", f"/api/v1/jobs/{cluster}.{proc}".encode())
        return Reply(201, {"cluster_id": cluster, "job_ids": [f"{cluster}.{proc}"], "awaiting_input": []})

    async def get_output(self, request: GatewayRequest, caller: Caller, job: str) -> None:
        ident = JobId.parse(job, whole_cluster=False)
        assert ident.proc is not None
        files = await self.schedd.list_spool(caller, None, ident.cluster, ident.proc)
        request.setResponseCode(200)
        request.setHeader(b"content-type", b"application/x-tar")
        request.setHeader(b"content-disposition", f'attachment; filename="job-{ident}-output.tar"'.encode())
        now = int(time.time())
        flow = Backpressure(request)
        try:
            for info in sorted(files, key=lambda info: info.name):
                request.write(tarfiles.header(info.name, info.size, now))
                offset = 0
                while offset < info.size:
                    length = min(tarfiles.CHUNK, info.size - offset)
                    data = await self.schedd.get_file(caller, None, ident.cluster, ident.proc, info.name, offset,
                                                      length)
                    data = data[:length] or b"\0" * length  # a file the job shortened meanwhile: zeros, as tar's size
                    request.write(data)
                    offset += len(data)
                    if not await flow.sent():
                        return  # the client went away
                request.write(tarfiles.padding(info.size))
            request.write(tarfiles.END)
        finally:
            flow.close()
        request.finish()

    # -- history, pool, contract ------------------------------------------------------------------------
    async def list_history(self, request: GatewayRequest, caller: Caller) -> Reply:
        constraint, projection, limit = _query(request)
        found = await self.submissions.history(caller, constraint, limit)
        return Reply(200, {"jobs": [attrs_to_json(attrs, projection) for _, attrs in found],
                           "total_returned": len(found)})

    async def who_am_i(self, request: GatewayRequest, caller: Caller) -> Reply:
        return Reply(200, await self.schedd.who_am_i(caller))

    async def list_pool(self, request: GatewayRequest, caller: Caller) -> Reply:
        constraint, projection, _ = _query(request)
        kind = _arg(request, "type")
        kind = "Any" if kind is None else kind
        ad_type = next((ad_type for ad_type in AdType if ad_type.my_type.lower() == kind.lower()), None)
        if ad_type is None:
            raise Problem(400, f"no kind of ad {kind!r}: Machine, Scheduler, Submitter, DaemonMaster, Collector, "
                               f"Negotiator, Generic or Any")
        ads = await self.collector.query(caller, ad_type, constraint)
        return Reply(200, {"ads": [attrs_to_json(attrs, projection) for attrs in ads]})

    async def get_contract(self, request: GatewayRequest, caller: Caller) -> Reply:
        return Reply(200, self.contract.document)


@implementer(IPushProducer)
class Backpressure:
    """Waits between the pieces of a streamed answer while the connection's buffer is full (twisted pauses its
    producer), so that a large output is never held in memory whole; tells whether the client is still there."""

    def __init__(self, request: GatewayRequest) -> None:
        self._request = request
        self._resumed: Deferred[None] | None = None
        self._gone = False
        request.registerProducer(self, True)

    async def sent(self) -> bool:
        if self._resumed is not None:
            await self._resumed
        return not self._gone and not self._request._disconnected

    def pauseProducing(self) -> None:
        if self._resumed is None:
            self._resumed = Deferred()

    def resumeProducing(self) -> None:
        resumed, self._resumed = self._resumed, None
        if resumed is not None:
            resumed.callback(None)

    def stopProducing(self) -> None:
        self._gone = True
        self.resumeProducing()

    def close(self) -> None:
        if not self._request._disconnected:
            self._request.unregisterProducer()


class ContractPage(resource.Resource):
    """``/openapi.json``: the document, to anyone who may connect."""

    isLeaf = True

    def __init__(self, contract: Contract) -> None:
        super().__init__()
        self.contract = contract

    def render_GET(self, request: GatewayRequest) -> bytes:
        request.setHeader(b"content-type", JSON)
        return self.contract.text


def _arg(request: GatewayRequest, name: str) -> str | None:
    values = (request.args or {}).get(name.encode())
    if not values:
        return None
    try:
        return values[0].decode()
    except UnicodeDecodeError:
        raise Problem(400, f"the {name} parameter is not UTF-8") from None


def _projection(request: GatewayRequest) -> frozenset[str] | None:
    text = _arg(request, "projection")
    if not text or text.strip() == "*":
        return None
    return frozenset(name.strip().lower() for name in text.split(",") if name.strip())


def _query(request: GatewayRequest) -> tuple[str | None, frozenset[str] | None, int | None]:
    """The constraint, projection and limit of a listing (limit ``*``: none; default 50)."""
    text = _arg(request, "limit")
    if text is None:
        limit: int | None = DEFAULT_LIMIT
    elif text == "*":
        limit = None
    elif text.isdigit() and int(text) > 0:
        limit = int(text)
    else:
        raise Problem(400, f"limit must be a number above 0 or *, not {text!r}")
    return _arg(request, "constraint") or None, _projection(request), limit


def _json_body(request: GatewayRequest, empty: Any = None) -> Any:
    request.content.seek(0)
    raw = request.content.read()
    if not raw.strip() and empty is not None:
        return empty
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Problem(400, f"the body is not JSON: {exc}") from None


def _edit_value(name: str, value: Any) -> tuple[AttrType | None, str]:
    """A PATCH value as the core's set_attribute takes it: a string is expression text (as condor_qedit takes
    it), a number or boolean that literal, ``{type, value}`` the value of that type (``raw``: expression text)."""
    if isinstance(value, dict):
        kind, text = value.get("type"), value.get("value")
        if set(value) != {"type", "value"} or not isinstance(kind, str) or kind.lower() not in EDIT_TYPES or not isinstance(text, str):
            raise Problem(400, f"attribute {name!r}: a typed value is {{\"type\": string|integer|real|boolean|raw, "
                               f"\"value\": \"<text>\"}}")
        return EDIT_TYPES[kind.lower()], text
    if isinstance(value, str):
        return None, value
    if value is None or isinstance(value, (list, dict)):
        raise Problem(400, f"attribute {name!r}: a value is a string (expression text), a number, a boolean or "
                           f"{{type, value}}")
    return json_value_type(name, value)


def _page_token(text: str) -> tuple[int, int]:
    """The job a page ended with, from its ``next_page_token`` (``cluster.proc``)."""
    cluster, _, proc = text.partition(".")
    if not (cluster.isdigit() and proc.isdigit()):
        raise Problem(400, f"page_token {text!r} is not a next_page_token this API gave")
    return int(cluster), int(proc)


def _job_key(ad: classad2.ClassAd) -> tuple[int, int]:
    cluster, proc = ad.get("ClusterId"), ad.get("ProcId")
    return (cluster if isinstance(cluster, int) else 0, proc if isinstance(proc, int) else 0)
