"""The condorCollector SOAP service (docs/birdbath.md §12): ten operations that turn wire values into Python values,
call the core (:class:`gateway.core.collector.BirdbathCollector`), and turn its answer back into wire values.

The shapes are the original's: a query answers ``<result>`` holding one ``item`` per ad (each a list of attribute
``item`` elements) and no status, so a query that fails answers an empty ``result`` (its reason goes to the request
log); ``insertAd`` answers ``<status>``.  Ads are written by the same writer as getJobAds' (``adwriter``), around a
``result`` element cut from spyne's own answer.  The ``ClassAdType`` and each attribute's ``type`` are read here,
by name or by C value as gSOAP accepted them, so that a value the WSDL does not know is a FAIL, not a fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from spyne import Application, ComplexModel, Service, Unicode, rpc
from spyne.model.complex import Array
from twisted.internet.defer import Deferred

from gateway.core.adstruct import Attr, AttrType
from gateway.core.auth import Caller
from gateway.core.collector import BirdbathCollector
from gateway.core.status import OK, BirdbathError, StatusCode
from gateway.core.status import Status as CoreStatus
from jobmodel.pool import AdType

from . import models as m
from .adwriter import SplitAnswer, ad_items
from .dispatch import Prebuilt, SoapDispatcher
from .protocol import GsoapSoap11
from .schedd import status

#: the operations of the shipped WSDL, in its order
OPERATIONS = ("getVersionString", "getPlatformString", "insertAd", "queryStartdAds", "queryScheddAds",
              "queryMasterAds", "querySubmittorAds", "queryLicenseAds", "queryStorageAds", "queryAnyAds")
#: what each query operation asks for
QUERIES = {"queryStartdAds": AdType.STARTD, "queryScheddAds": AdType.SCHEDD, "queryMasterAds": AdType.MASTER,
           "querySubmittorAds": AdType.SUBMITTOR, "queryLicenseAds": AdType.LICENSE,
           "queryStorageAds": AdType.STORAGE, "queryAnyAds": AdType.ANY}
#: the operations only the collector has (the schedd has getVersionString and getPlatformString too)
COLLECTOR_ONLY = frozenset({"insertAd", *QUERIES})

_ATTR_TYPES = {**{t.value: t for t in AttrType}, **{str(t.code): t for t in AttrType}}


class _Model(ComplexModel):
    __namespace__ = m.TNS


class AdAttribute(_Model):
    """An attribute of an advertised ad, its ``type`` read by this service (see the module's docstring)."""

    __type_name__ = "ClassAdStructAttr"
    _type_info = [("name", Unicode), ("type", Unicode), ("value", Unicode)]


AdStruct = Array(AdAttribute, member_name="item", type_name="ClassAdStruct")
AdStructArray = Array(AdStruct, member_name="item", type_name="ClassAdStructArray")


@dataclass
class CollectorContext:
    caller: Caller
    collector: BirdbathCollector
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


def ad_attributes(wire: list[AdAttribute | None] | None) -> list[Attr] | None:
    if wire is None:
        return None
    return [Attr(item.name or "", attribute_type(item.name, item.type), item.value)  # type: ignore[arg-type]
            for item in wire if item is not None]


def ad_type(text: str | None) -> AdType:
    try:
        return AdType.from_wire(text or "")
    except ValueError:
        raise BirdbathError.fail(f"Unknown type {str(text)[:64]!r}") from None


def _query(ctx: Any, operation: str, constraint: str | None) -> Deferred:
    """A query: its ads written around the envelope of ``result``; when it fails, an empty ``result`` (the original
    had no status to say why; the request log has it)."""
    request: CollectorContext = ctx.udc

    async def run() -> Prebuilt:
        try:
            ads = await request.collector.query(request.caller, QUERIES[operation], constraint)
        except BirdbathError as exc:
            request.status = exc.status
            ads = []
        else:
            request.status = OK
        return Prebuilt(request.answers[operation].fill(ad_items(ads)))

    return Deferred.fromCoroutine(run())


def _status(ctx: Any, operation: Callable[[CollectorContext], Awaitable[CoreStatus]]) -> Deferred:
    request: CollectorContext = ctx.udc

    async def run() -> m.Status:
        try:
            result = await operation(request)
        except BirdbathError as exc:
            result = exc.status
        request.status = result
        return status(result)

    return Deferred.fromCoroutine(run())


async def _insert(request: CollectorContext, type_text: str | None, ad: list[AdAttribute | None] | None) -> CoreStatus:
    inserted = await request.collector.insert(request.caller, ad_type(type_text), ad_attributes(ad))
    return CoreStatus(StatusCode.SUCCESS, inserted.message)


def _info(ctx: Any, text: str) -> m.StringAndStatus:
    ctx.udc.status = OK
    return m.StringAndStatus(status=m.Status(code="SUCCESS"), message=text)


def _query_operation(operation: str) -> Any:
    """The spyne method of one query operation: ``constraint`` in, ``result`` out."""

    def query(ctx, constraint):
        return _query(ctx, operation, constraint)

    query.__name__ = query.__qualname__ = operation  # spyne names the method after the function
    return rpc(Unicode, _returns=AdStructArray, _out_variable_name="result")(query)


class CondorCollectorService(Service):
    """Each method is one operation of the shipped condorCollector WSDL, with its parameter names."""

    __service_name__ = "condorCollector"

    @rpc(_returns=m.StringAndStatus, _out_variable_name="response")
    def getVersionString(ctx):
        return _info(ctx, ctx.udc.collector.backend.info().version)

    @rpc(_returns=m.StringAndStatus, _out_variable_name="response")
    def getPlatformString(ctx):
        return _info(ctx, ctx.udc.collector.backend.info().platform)

    @rpc(Unicode, AdStruct, _returns=m.Status, _out_variable_name="status")
    def insertAd(ctx, type, ad):
        return _status(ctx, lambda request: _insert(request, type, ad))

    # the seven queries differ only in the kind of ad they ask for
    for _operation in QUERIES:
        vars()[_operation] = _query_operation(_operation)
    del _operation


def collector_application() -> Application:
    protocol = GsoapSoap11(namespace=m.TNS, operations=frozenset(OPERATIONS))
    return Application([CondorCollectorService], tns=m.TNS, name="condorCollector", in_protocol=protocol,
                       out_protocol=GsoapSoap11(namespace=m.TNS, operations=frozenset()))


def query_answers(dispatcher: SoapDispatcher) -> dict[str, SplitAnswer]:
    """Each query's answer cut around its (empty) ``result``, from spyne's own serialisation."""
    return {operation: SplitAnswer.around(dispatcher.render(operation, []), "result") for operation in QUERIES}
