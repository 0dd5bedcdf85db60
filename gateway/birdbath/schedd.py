"""The condorSchedd SOAP service: 23 operations that turn wire values into Python values, call the core
(:class:`gateway.core.schedd.BirdbathSchedd`), and turn its answer, or its status, back into wire values.

Each handler takes the request's context and its parameters as the contract read them (by their names in the
shipped WSDL, ``wsdl/condorSchedd.wsdl``), and answers a mapping of the operation's answer type, which the codec
writes (``codec.ContractService``); job ads are written by ``adwriter``.  A Birdbath status is the operation's answer
with that status, never a fault.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable, Mapping, Sequence

from gateway.core.adstruct import Attr, AttrType
from gateway.core.schedd import TemplateResult
from gateway.core.services import ScheddContract
from gateway.core.status import OK, BirdbathError
from gateway.core.status import Status as CoreStatus
from gateway.core.status import StatusCode as CoreStatusCode
from gateway.core.transactions import Transaction as CoreTransaction
from gateway.core.transactions import TransactionRef
from gateway.soap.answer import Prebuilt
from gateway.soap.base64data import decode as decode_base64
from gateway.soap.codec import ContractService, Handler
from gateway.soap.contract import Contract
from gateway.soap.table import Entry, Standard
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


# -- the table ---------------------------------------------------------------------------------------------
#: Birdbath's statuses: a BirdbathError's is the answer's (and the request log's)
BIRDBATH: Standard[BirdbathError] = Standard(BirdbathError, lambda refusal: refusal.status,
                                             lambda refusal: status(refusal.status), OK, lambda: status(OK))

#: the core call of an entry: (the request's context, its parameters) -> the core's coroutine
Call = Callable[[RequestContext, Wire], Awaitable[Any]]


def _same(value: Any) -> Any:
    return value


def status_only(call: Call) -> Entry:
    """An operation whose answer is its status alone."""
    return Entry(BIRDBATH, call, lambda ok, result: ok)


def with_status(call: Call, member: str | None = None, to_wire: Callable[[Any], Any] = _same, **failed: Any) -> Entry:
    """An operation answering a status and one ``member`` (its value from the core's result by ``to_wire``); on
    failure the status and the ``failed`` members."""
    if member is None:
        return Entry(BIRDBATH, call, lambda ok, result: {"status": ok}, lambda refused, p: {"status": refused})
    return Entry(BIRDBATH, call, lambda ok, result: {"status": ok, member: to_wire(result)},
                 lambda refused, p: {"status": refused, **failed})


def _answered(call: Call, answer: Callable[[dict[str, Any], Any], Any]) -> Entry:
    """An operation whose answer ``answer`` makes from its result (its status alone on failure)."""
    return Entry(BIRDBATH, call, answer, lambda refused, p: {"status": refused})


def _info(which: Callable[[ScheddContract], str]) -> Handler:
    """getVersionString/getPlatformString: SUCCESS with no status message (as the original), no checks."""
    async def handler(request: RequestContext, p: Wire) -> dict[str, Any]:  # (a constant of the core: no call)
        request.status = OK
        return {"status": {"code": "SUCCESS"}, "message": which(request.schedd)}

    return handler


async def _job_ads(request: RequestContext, p: Wire) -> Prebuilt:
    """getJobAds' answer, written from the ads the query found (streamed when there are many)."""
    found = await request.schedd.get_job_ads(request.caller, _ref(p), p.get("constraint"))
    if len(found.ads) > STREAMED_ADS:
        return Prebuilt(chunks=request.answers.stream_job_ads(found.ads, found.now))
    return Prebuilt(request.answers.write_job_ads(found.ads, found.now))


async def _job_ad(request: RequestContext, p: Wire) -> Prebuilt:
    """getJobAd's answer, written from the ad found."""
    found = await request.schedd.get_job_ad(request.caller, *_job(p))
    return Prebuilt(request.answers.write_job_ad(found.ad, found.server_time))


def _written(ok: dict[str, Any], answer: Prebuilt) -> Prebuilt:
    """An answer its call wrote (job ads; SUCCESS is the envelope's own)."""
    return answer


def _template_answer(ok: dict[str, Any], result: TemplateResult) -> dict[str, Any]:
    answer = ok if result.error is None else status(CoreStatus(CoreStatusCode.FAIL, result.error))
    return {"status": answer, "classAd": struct(result.ad)}


def _ref(p: Wire) -> TransactionRef | None:
    """The transaction a request names."""
    return transaction_ref(p.get("transaction"))


def _job(p: Wire) -> tuple[TransactionRef | None, int, int]:
    """The transaction, cluster and job a request names."""
    return _ref(p), _int(p.get("clusterId")), _int(p.get("jobId"))


#: each operation: its core call (the request's context ``r``, its parameters ``p``), its answer (``Entry``)
HANDLERS: dict[str, Handler] = {
    "getVersionString": _info(lambda schedd: schedd.backend_info.version),
    "getPlatformString": _info(lambda schedd: schedd.backend_info.platform),
    "beginTransaction": with_status(lambda r, p: r.schedd.begin_transaction(r.caller, _int(p.get("duration"))),
                                    "transaction", wire_transaction, transaction=wire_transaction(None)),
    "commitTransaction": status_only(lambda r, p: r.schedd.commit_transaction(r.caller, _ref(p))),
    "abortTransaction": status_only(lambda r, p: r.schedd.abort_transaction(r.caller, _ref(p))),
    "extendTransaction": with_status(
        lambda r, p: r.schedd.extend_transaction(r.caller, _ref(p), _int(p.get("duration"))),
        "transaction", wire_transaction, transaction=wire_transaction(None)),
    "newCluster": with_status(lambda r, p: r.schedd.new_cluster(r.caller, _ref(p)), "integer", integer=0),
    "removeCluster": status_only(
        lambda r, p: r.schedd.remove_cluster(r.caller, _ref(p), _int(p.get("clusterId")), p.get("reason"))),
    "newJob": with_status(lambda r, p: r.schedd.new_job(r.caller, _ref(p), _int(p.get("clusterId"))),
                          "integer", integer=0),
    "removeJob": status_only(lambda r, p: r.schedd.remove_job(r.caller, *_job(p), p.get("reason"))),
    "holdJob": status_only(
        lambda r, p: r.schedd.hold_job(r.caller, *_job(p), p.get("reason"), bool(p.get("system-hold")))),
    "releaseJob": status_only(lambda r, p: r.schedd.release_job(r.caller, *_job(p), p.get("reason"))),
    "submit": with_status(lambda r, p: r.schedd.submit(r.caller, *_job(p), attrs(p.get("jobAd")))),
    "getJobAds": _answered(_job_ads, _written),
    "getJobAd": _answered(_job_ad, _written),
    "declareFile": status_only(
        lambda r, p: r.schedd.declare_file(r.caller, *_job(p), p.get("name"), _int(p.get("size")),
                                           p.get("hash") if p.get("hashType") == "MD5HASH" else None)),
    "sendFile": status_only(
        lambda r, p: r.schedd.send_file(r.caller, *_job(p), p.get("name"), _int(p.get("offset")),
                                        _file_data(p.get("name"), p.get("data")))),
    "getFile": with_status(lambda r, p: r.schedd.get_file(r.caller, *_job(p), p.get("name"), _int(p.get("offset")),
                                                          _int(p.get("length"))), "data"),
    "closeSpool": status_only(lambda r, p: r.schedd.close_spool(r.caller, *_job(p))),
    "listSpool": with_status(lambda r, p: r.schedd.list_spool(r.caller, *_job(p)), "info",
                             lambda files: [{"name": f.name, "size": f.size} for f in files] or None),
    "requestReschedule": status_only(lambda r, p: r.schedd.request_reschedule(r.caller)),
    "discoverJobRequirements": with_status(
        lambda r, p: r.schedd.discover_job_requirements(r.caller, attrs(p.get("jobAd"))), "requirements"),
    "createJobTemplate": _answered(
        lambda r, p: r.schedd.create_job_template(r.caller, _int(p.get("clusterId")), _int(p.get("jobId")),
                                                  p.get("owner"), universe(p.get("type")), p.get("cmd"),
                                                  p.get("args"), p.get("requirements")),
        _template_answer),
}


def schedd_service() -> ContractService:
    """condorSchedd as published in ``wsdl/condorSchedd.wsdl``."""
    return ContractService(Contract.load(wsdl_path("condorSchedd.wsdl")), HANDLERS)


def job_ad_answers(service: ContractService) -> AdAnswers:
    """The writers of getJobAds/getJobAd answers, around envelopes cut from the service's own answers."""
    ok = status(OK)
    return AdAnswers(job_ads=service.split("getJobAds", {"status": ok, "classAdArray": []}, "classAdArray"),
                     job_ad=service.split("getJobAd", {"status": ok, "classAd": []}, "classAd"))
