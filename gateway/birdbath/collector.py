"""The condorCollector SOAP service: ten operations that turn wire values into Python values,
call the core (:class:`gateway.core.collector.BirdbathCollector`), and turn its answer back into wire values.

The shapes are the original's: a query answers ``<result>`` holding one ``item`` per ad (each a list of attribute
``item`` elements) and no status, so a query that fails answers an empty ``result`` (its reason goes to the request
log); ``insertAd`` answers ``<status>``.  Ads are written by the same writer as getJobAds' (``adwriter``), around a
``result`` element cut from the codec's own answer.  The ``ClassAdType`` and each attribute's ``type`` are read here,
by name or by C value as gSOAP accepted them, so that a value the WSDL does not know is a FAIL, not a fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from gateway.core.adstruct import Attr, AttrType
from gateway.core.auth import Caller
from gateway.core.services import CollectorContract
from gateway.core.status import OK, BirdbathError, StatusCode
from gateway.core.status import Status as CoreStatus
from gateway.soap.answer import Prebuilt, SplitAnswer
from gateway.soap.codec import ContractService, Handler
from gateway.soap.contract import Contract
from gateway.soap.wsdl import wsdl_path
from jobmodel.pool import AdType

from .adwriter import ad_items
from .schedd import status

#: what each query operation asks for
QUERIES = {"queryStartdAds": AdType.STARTD, "queryScheddAds": AdType.SCHEDD, "queryMasterAds": AdType.MASTER,
           "querySubmittorAds": AdType.SUBMITTOR, "queryLicenseAds": AdType.LICENSE,
           "queryStorageAds": AdType.STORAGE, "queryAnyAds": AdType.ANY}
#: the operations only the collector has (the schedd has getVersionString and getPlatformString too)
COLLECTOR_ONLY = frozenset({"insertAd", *QUERIES})

_ATTR_TYPES = {**{t.value: t for t in AttrType}, **{str(t.code): t for t in AttrType}}


@dataclass
class CollectorContext:
    caller: Caller
    collector: CollectorContract
    #: the query answers' envelopes, cut around ``result``, by operation
    answers: dict[str, SplitAnswer] = field(default_factory=dict)
    #: the status the operation answered with, or the reason a query answered nothing, for the request log
    status: CoreStatus | None = None


def attribute_type(name: str | None, text: str | None) -> AttrType:
    """An attribute's type by name or C value; a FAIL naming the attribute for anything else."""
    found = _ATTR_TYPES.get((text or "").strip())
    if found is None:
        raise BirdbathError.fail(f"Failed to parse the ClassAdStruct: attribute {name!r} has type {text!r}, not one "
                                 f"of the ClassAdAttrType values")
    return found


def ad_attributes(wire: list[Mapping[str, Any] | None] | None) -> list[Attr] | None:
    if wire is None:
        return None
    return [Attr(item.get("name") or "", attribute_type(item.get("name"), item.get("type")), item.get("value"))
            for item in wire if item is not None]


def ad_type(text: str | None) -> AdType:
    try:
        return AdType.from_wire(text or "")
    except ValueError:
        raise BirdbathError.fail(f"Unknown type {str(text)[:64]!r}") from None


async def _query(request: CollectorContext, operation: str, constraint: str | None) -> Prebuilt:
    """A query: its ads written around the envelope of ``result``; when it fails, an empty ``result`` (the original
    had no status to say why; the request log has it)."""
    try:
        ads = await request.collector.query(request.caller, QUERIES[operation], constraint)
    except BirdbathError as exc:
        request.status = exc.status
        ads = []
    else:
        request.status = OK
    return Prebuilt(request.answers[operation].fill(ad_items(ads)))


async def _insert(request: CollectorContext, parameters: Mapping[str, Any]) -> dict[str, Any]:
    try:
        inserted = await request.collector.insert(request.caller, ad_type(parameters.get("type")),
                                                  ad_attributes(parameters.get("ad")))
        result = CoreStatus(StatusCode.SUCCESS, inserted.message)
    except BirdbathError as exc:
        result = exc.status
    request.status = result
    return status(result)


def _info(text: Callable[[CollectorContext], str]) -> Handler:
    async def answer(request: CollectorContext, parameters: Mapping[str, Any]) -> dict[str, Any]:
        request.status = OK
        return {"status": {"code": "SUCCESS"}, "message": text(request)}

    return answer


def _query_handler(operation: str) -> Handler:
    return lambda request, parameters: _query(request, operation, parameters.get("constraint"))


#: each operation's handler: (the request's context, its parameters) -> its answer
HANDLERS: dict[str, Handler] = {
    "getVersionString": _info(lambda request: request.collector.backend_info.version),
    "getPlatformString": _info(lambda request: request.collector.backend_info.platform),
    "insertAd": _insert,
    **{operation: _query_handler(operation) for operation in QUERIES},
}


def collector_service() -> ContractService:
    """condorCollector as published in ``wsdl/condorCollector.wsdl``."""
    return ContractService(Contract.load(wsdl_path("condorCollector.wsdl")), HANDLERS)


def query_answers(service: ContractService) -> dict[str, SplitAnswer]:
    """Each query's answer cut around its (empty) ``result``."""
    return {operation: service.split(operation, [], "result") for operation in QUERIES}
