"""The condorSchedd SOAP service: 23 operations that turn wire values into Python values, call the core
(:class:`gateway.core.schedd.BirdbathSchedd`), and turn its answer, or its status, back into wire values.

Each handler takes the request's context and its parameters as the contract read them (by their names in the
shipped WSDL, ``wsdl/condorSchedd.wsdl``), and answers a mapping of the operation's answer type, which the codec
writes (``codec.ContractService``); job ads are written by ``adwriter``.  A Birdbath status is the operation's answer
with that status, never a fault.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable, Mapping, Sequence

from twisted.internet.defer import fail

from gateway.core.adstruct import Attr, AttrType
from gateway.core.schedd import JobAdStructs, TemplateResult
from gateway.core.services import ScheddContract
from gateway.core.status import OK, BirdbathError
from gateway.core.status import Status as CoreStatus
from gateway.core.status import StatusCode as CoreStatusCode
from gateway.core.transactions import Transaction as CoreTransaction
from gateway.core.transactions import TransactionRef
from gateway.soap.answer import Maybe, Prebuilt, started
from gateway.soap.base64data import decode as decode_base64
from gateway.soap.codec import ContractService, Handler
from gateway.soap.contract import Contract
from gateway.soap.wsdl import wsdl_path
from gateway.soap.xsd import xml_text
from jobmodel.jobs import Universe

from .adwriter import AdAnswers
from .context import RequestContext

#: a structure on the wire: its members by name (absent or None: left out)
Wire = Mapping[str, Any]

#: answers of more ads than this are streamed (written as they are sent, without a Content-Length)
STREAMED_ADS = 1000


# -- wire <-> core conversions ----------------------------------------------------------------------------
def status(core: CoreStatus) -> dict[str, Any]:
    return {"code": core.code.value, "message": core.message}


def transaction_ref(wire: Wire | None) -> TransactionRef | None:
    return None if wire is None else TransactionRef(wire.get("id"), wire.get("duration"))


#: each attribute type by its wire name (a dictionary look-up instead of an Enum call per attribute of a submit)
_ATTR_TYPES: dict[str, AttrType] = {kind.value: kind for kind in AttrType}


def attrs(wire: Iterable[Wire | None] | None) -> list[Attr]:
    """A job ad's attributes as the client sent them; an attribute without a type is an expression."""
    return [Attr(item.get("name") or "", _ATTR_TYPES.get(item.get("type"), AttrType.EXPRESSION),  # type: ignore[arg-type]
                 item.get("value")) for item in wire or () if item is not None]


def struct(core: Sequence[Attr]) -> list[dict[str, str]]:
    return [{"name": xml_text(a.name), "type": a.type.value, "value": xml_text(a.value)} for a in core]


def wire_transaction(core: CoreTransaction | None) -> dict[str, int]:
    return {"id": core.id if core else 0, "duration": core.duration if core else 0}


def universe(wire: str | None) -> Universe:
    name = wire if wire is not None else "VANILLA"
    return Universe.LOCAL if name == "LOCALUNIVESE" else Universe[name]


def _int(value: int | None) -> int:
    """gSOAP read a missing xsd:int as 0."""
    return value or 0


def _file_data(name: str | None, text: str | None) -> bytes:
    """sendFile's data, decoded; text that is not base64 is the client's mistake: FAIL naming the file."""
    try:
        return decode_base64(text)
    except ValueError as exc:
        raise BirdbathError.fail(f"Failed to write to '{name or ''}': {exc}") from None


# -- running one operation ----------------------------------------------------------------------------------
Work = Callable[[ScheddContract, RequestContext], Awaitable[Any]]


def _run(request: RequestContext, operation: Work, answer: Callable[[dict[str, Any], Any], Any],
         failed: Callable[[dict[str, Any]], Any]) -> Maybe[Any]:
    """Run a core coroutine; a BirdbathError becomes the operation's answer with that status, never a fault.  An
    operation that finishes without waiting is answered at once; any other exception is a failed Deferred (the
    codec makes it a Server fault)."""

    async def run() -> Any:
        try:
            result = await operation(request.schedd, request)
        except BirdbathError as exc:
            request.status = exc.status
            return failed(status(exc.status))
        request.status = OK
        return answer(status(OK), result)

    try:
        return started(run())
    except Exception:
        return fail()


def _status_only(request: RequestContext, operation: Work) -> Maybe[Any]:
    return _run(request, operation, lambda ok, _: ok, lambda failure: failure)


def _with_status(request: RequestContext, operation: Work, member: str | None = None,
                 to_wire: Callable[[Any], Any] = lambda value: value, **failed: Any) -> Maybe[Any]:
    """An answer of a status and one ``member`` (its value from the core's result by ``to_wire``); on failure the
    status and the ``failed`` members."""
    return _run(request, operation,
                lambda ok, result: {"status": ok} if member is None else {"status": ok, member: to_wire(result)},
                lambda failure: {"status": failure, **failed})


def _transaction_answer(request: RequestContext, operation: Work) -> Maybe[Any]:
    return _with_status(request, operation, "transaction", wire_transaction, transaction=wire_transaction(None))


def _int_answer(request: RequestContext, operation: Work) -> Maybe[Any]:
    return _with_status(request, operation, "integer", integer=0)


def _info(which: Callable[[ScheddContract], str]) -> Handler:
    """getVersionString/getPlatformString: SUCCESS with no status message (as the original), no checks."""
    def handler(request: RequestContext, p: Wire) -> dict[str, Any]:  # (a constant of the core: no call)
        request.status = OK
        return {"status": {"code": "SUCCESS"}, "message": which(request.schedd)}

    return handler


def _job_ads_answer(answers: AdAnswers, found: JobAdStructs) -> Prebuilt:
    """getJobAds' answer, written from the ads the query found (streamed when there are many)."""
    if len(found.ads) > STREAMED_ADS:
        return Prebuilt(chunks=answers.stream_job_ads(found.ads, found.now))
    return Prebuilt(answers.write_job_ads(found.ads, found.now))


def _template_answer(ok: dict[str, Any], result: TemplateResult) -> dict[str, Any]:
    answer = ok if result.error is None else status(CoreStatus(CoreStatusCode.FAIL, result.error))
    return {"status": answer, "classAd": struct(result.ad)}


def _job(p: Wire) -> tuple[TransactionRef | None, int, int]:
    """The transaction, cluster and job a request names."""
    return transaction_ref(p.get("transaction")), _int(p.get("clusterId")), _int(p.get("jobId"))


#: each operation's handler: (the request's context, its parameters) -> its answer
HANDLERS: dict[str, Handler] = {
    "getVersionString": _info(lambda schedd: schedd.backend_info.version),
    "getPlatformString": _info(lambda schedd: schedd.backend_info.platform),
    "beginTransaction": lambda request, p: _transaction_answer(
        request, lambda s, r: s.begin_transaction(r.caller, _int(p.get("duration")))),
    "commitTransaction": lambda request, p: _status_only(
        request, lambda s, r: s.commit_transaction(r.caller, transaction_ref(p.get("transaction")))),
    "abortTransaction": lambda request, p: _status_only(
        request, lambda s, r: s.abort_transaction(r.caller, transaction_ref(p.get("transaction")))),
    "extendTransaction": lambda request, p: _transaction_answer(
        request, lambda s, r: s.extend_transaction(r.caller, transaction_ref(p.get("transaction")),
                                                   _int(p.get("duration")))),
    "newCluster": lambda request, p: _int_answer(
        request, lambda s, r: s.new_cluster(r.caller, transaction_ref(p.get("transaction")))),
    "removeCluster": lambda request, p: _status_only(
        request, lambda s, r: s.remove_cluster(r.caller, transaction_ref(p.get("transaction")),
                                               _int(p.get("clusterId")), p.get("reason"))),
    "newJob": lambda request, p: _int_answer(
        request, lambda s, r: s.new_job(r.caller, transaction_ref(p.get("transaction")), _int(p.get("clusterId")))),
    "removeJob": lambda request, p: _status_only(
        request, lambda s, r: s.remove_job(r.caller, *_job(p), p.get("reason"))),
    "holdJob": lambda request, p: _status_only(
        request, lambda s, r: s.hold_job(r.caller, *_job(p), p.get("reason"), bool(p.get("system-hold")))),
    "releaseJob": lambda request, p: _status_only(
        request, lambda s, r: s.release_job(r.caller, *_job(p), p.get("reason"))),
    "submit": lambda request, p: _with_status(
        request, lambda s, r: s.submit(r.caller, *_job(p), attrs(p.get("jobAd")))),
    "getJobAds": lambda request, p: _run(
        request, lambda s, r: s.get_job_ads(r.caller, transaction_ref(p.get("transaction")), p.get("constraint")),
        lambda ok, ads: _job_ads_answer(request.answers, ads), lambda failure: {"status": failure}),
    "getJobAd": lambda request, p: _run(
        request, lambda s, r: s.get_job_ad(r.caller, *_job(p)),
        lambda ok, found: Prebuilt(request.answers.write_job_ad(found.ad, found.server_time)),
        lambda failure: {"status": failure}),
    "declareFile": lambda request, p: _status_only(
        request, lambda s, r: s.declare_file(r.caller, *_job(p), p.get("name"), _int(p.get("size")),
                                             p.get("hash") if p.get("hashType") == "MD5HASH" else None)),
    "sendFile": lambda request, p: _status_only(
        request, lambda s, r: s.send_file(r.caller, *_job(p), p.get("name"), _int(p.get("offset")),
                                          _file_data(p.get("name"), p.get("data")))),
    "getFile": lambda request, p: _with_status(
        request, lambda s, r: s.get_file(r.caller, *_job(p), p.get("name"), _int(p.get("offset")),
                                         _int(p.get("length"))), "data"),
    "closeSpool": lambda request, p: _status_only(request, lambda s, r: s.close_spool(r.caller, *_job(p))),
    "listSpool": lambda request, p: _with_status(
        request, lambda s, r: s.list_spool(r.caller, *_job(p)), "info",
        lambda files: [{"name": f.name, "size": f.size} for f in files] or None),
    "requestReschedule": lambda request, p: _status_only(request, lambda s, r: s.request_reschedule(r.caller)),
    "discoverJobRequirements": lambda request, p: _with_status(
        request, lambda s, r: s.discover_job_requirements(r.caller, attrs(p.get("jobAd"))), "requirements"),
    "createJobTemplate": lambda request, p: _run(
        request, lambda s, r: s.create_job_template(
            r.caller, _int(p.get("clusterId")), _int(p.get("jobId")), p.get("owner"), universe(p.get("type")),
            p.get("cmd"), p.get("args"), p.get("requirements")),
        _template_answer, lambda failure: {"status": failure}),
}


def schedd_service() -> ContractService:
    """condorSchedd as published in ``wsdl/condorSchedd.wsdl``."""
    return ContractService(Contract.load(wsdl_path("condorSchedd.wsdl")), HANDLERS)


def job_ad_answers(service: ContractService) -> AdAnswers:
    """The writers of getJobAds/getJobAd answers, around envelopes cut from the service's own answers."""
    ok = status(OK)
    return AdAnswers(job_ads=service.split("getJobAds", {"status": ok, "classAdArray": []}, "classAdArray"),
                     job_ad=service.split("getJobAd", {"status": ok, "classAd": []}, "classAd"))
