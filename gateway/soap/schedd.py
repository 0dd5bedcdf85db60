"""The condorSchedd SOAP service: 23 operations that turn wire values into Python values, call the core
(:class:`gateway.core.schedd.BirdbathSchedd`), and turn its answer, or its status, back into wire values."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable, Sequence, TypeVar

from spyne import Boolean, Integer32, Service, Unicode, rpc
from twisted.internet.defer import fail

from gateway.core.adstruct import Attr, AttrType
from gateway.core.schedd import BirdbathSchedd, TemplateResult
from gateway.core.status import OK, BirdbathError
from gateway.core.status import Status as CoreStatus
from gateway.core.status import StatusCode as CoreStatusCode
from gateway.core.transactions import Transaction as CoreTransaction
from gateway.core.transactions import TransactionRef
from jobmodel.jobs import Universe

from . import models as m
from .adwriter import AdAnswers, xml_text
from .base64data import Base64Text
from .base64data import decode as decode_base64
from .context import RequestContext
from .dispatch import Maybe, Prebuilt, started

OPERATIONS = (
    "getVersionString", "getPlatformString", "beginTransaction", "commitTransaction", "abortTransaction",
    "extendTransaction", "newCluster", "removeCluster", "newJob", "removeJob", "holdJob", "releaseJob",
    "submit", "getJobAds", "getJobAd", "declareFile", "sendFile", "getFile", "closeSpool", "listSpool",
    "requestReschedule", "discoverJobRequirements", "createJobTemplate",
)


# -- answer models ------------------------------------------------------------------------------------------
Model = TypeVar("Model")

#: each answer model's members as spyne's ``__init__`` leaves them, or None for a model it must make itself
_STARTS: dict[type, dict[str, Any] | None] = {}


def build(cls: type[Model], **members: Any) -> Model:
    """``cls(**members)`` as spyne makes it, without its generic ``__init__``, which asks every field of every
    model for defaults, read-only flags and database mappings: a few us a model, several models an answer.  A model
    where those could matter (a default factory, a read-only field, a property) is made by spyne."""
    start = _STARTS.get(cls, _UNKNOWN)
    if start is _UNKNOWN:
        start = _STARTS[cls] = _start(cls)
    if start is None or not members.keys() <= start.keys():
        return cls(**members)  # spyne ignores members the model does not have
    made = cls.__new__(cls)
    made.__dict__.update(start)
    made.__dict__.update(members)
    return made


_UNKNOWN: Any = object()


def _start(cls: type) -> dict[str, Any] | None:
    fields = cls.get_flat_type_info(cls)  # type: ignore[attr-defined]
    if cls.__orig__ is not None or any(kind.Attributes.default_factory is not None or kind.Attributes.read_only or hasattr(cls, name)
           for name, kind in fields.items()):
        return None
    start = dict(vars(cls()))
    return start if start.keys() == set(fields) else None


# -- wire <-> core conversions ----------------------------------------------------------------------------
def status(core: CoreStatus) -> m.Status:
    return build(m.Status, code=core.code.value, message=core.message)


def transaction_ref(wire: m.Transaction | None) -> TransactionRef | None:
    return None if wire is None else TransactionRef(wire.id, wire.duration)


def attrs(wire: Iterable[m.ClassAdStructAttr | None] | None) -> list[Attr]:
    return [Attr(item.name or "", attr_type(item.type), item.value) for item in wire or () if item is not None]


#: each attribute type by its wire name (a dictionary look-up instead of an Enum call per attribute of a submit)
_ATTR_TYPES: dict[str, AttrType] = {kind.value: kind for kind in AttrType}


def attr_type(wire: Any) -> AttrType:
    """An attribute's type as the client sent it (spyne's enum value, or the fast reader's text); none is an
    expression."""
    if wire is None:
        return AttrType.EXPRESSION
    known = _ATTR_TYPES.get(wire) if type(wire) is str else None
    return known if known is not None else AttrType(str(wire))


def struct(core: Sequence[Attr]) -> list[m.ClassAdStructAttr]:
    return [build(m.ClassAdStructAttr, name=xml_text(a.name), type=a.type.value, value=xml_text(a.value))
            for a in core]


def wire_transaction(core: CoreTransaction | None) -> m.Transaction:
    return build(m.Transaction, id=core.id if core else 0, duration=core.duration if core else 0)


def universe(wire: Any) -> Universe:
    name = str(wire) if wire is not None else "VANILLA"
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
def _run(ctx: Any, operation: Callable[[BirdbathSchedd, RequestContext], Awaitable[Any]],
         answer: Callable[[m.Status, Any], Any], failed: Callable[[m.Status], Any]) -> Maybe[Any]:
    """Run a core coroutine; a BirdbathError becomes the operation's answer with that status, never a fault.  An
    operation that finishes without waiting is answered at once; any other exception is a failed Deferred, as it
    was when every operation ran in one (the dispatcher makes it a Server fault)."""
    request: RequestContext = ctx.udc

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


def _status_only(ctx: Any, operation: Callable[[BirdbathSchedd, RequestContext], Awaitable[Any]]) -> Maybe[Any]:
    return _run(ctx, operation, lambda ok, _: ok, lambda failure: failure)


async def _sync(value: Any) -> Any:
    return value


class CondorScheddService(Service):
    """Each method is one Birdbath operation; parameter names and order are those of the shipped WSDL."""

    __service_name__ = "condorSchedd"

    @rpc(_returns=m.StringAndStatus, _out_variable_name="response")
    def getVersionString(ctx):
        return _info(ctx, BirdbathSchedd.version_string)

    @rpc(_returns=m.StringAndStatus, _out_variable_name="response")
    def getPlatformString(ctx):
        return _info(ctx, BirdbathSchedd.platform_string)

    @rpc(Integer32, _returns=m.TransactionAndStatus, _out_variable_name="response")
    def beginTransaction(ctx, duration):
        return _run(ctx, lambda s, r: s.begin_transaction(r.caller, _int(duration)),
                    lambda ok, txn: build(m.TransactionAndStatus, status=ok, transaction=wire_transaction(txn)),
                    lambda failure: build(m.TransactionAndStatus, status=failure, transaction=wire_transaction(None)))

    @rpc(m.NullableTransaction, _returns=m.Status, _out_variable_name="response")
    def commitTransaction(ctx, transaction):
        return _status_only(ctx, lambda s, r: s.commit_transaction(r.caller, transaction_ref(transaction)))

    @rpc(m.NullableTransaction, _returns=m.Status, _out_variable_name="response")
    def abortTransaction(ctx, transaction):
        return _status_only(ctx, lambda s, r: s.abort_transaction(r.caller, transaction_ref(transaction)))

    @rpc(m.NullableTransaction, Integer32, _returns=m.TransactionAndStatus, _out_variable_name="response")
    def extendTransaction(ctx, transaction, duration):
        return _run(ctx, lambda s, r: s.extend_transaction(r.caller, transaction_ref(transaction), _int(duration)),
                    lambda ok, txn: build(m.TransactionAndStatus, status=ok, transaction=wire_transaction(txn)),
                    lambda failure: build(m.TransactionAndStatus, status=failure, transaction=wire_transaction(None)))

    @rpc(m.NullableTransaction, _returns=m.IntAndStatus, _out_variable_name="response")
    def newCluster(ctx, transaction):
        return _int_answer(ctx, lambda s, r: s.new_cluster(r.caller, transaction_ref(transaction)))

    @rpc(m.NullableTransaction, Integer32, Unicode, _returns=m.Status, _out_variable_name="response")
    def removeCluster(ctx, transaction, clusterId, reason):
        return _status_only(ctx, lambda s, r: s.remove_cluster(r.caller, transaction_ref(transaction),
                                                               _int(clusterId), reason))

    @rpc(m.NullableTransaction, Integer32, _returns=m.IntAndStatus, _out_variable_name="response")
    def newJob(ctx, transaction, clusterId):
        return _int_answer(ctx, lambda s, r: s.new_job(r.caller, transaction_ref(transaction), _int(clusterId)))

    @rpc(m.NullableTransaction, Integer32, Integer32, Unicode, Boolean, _returns=m.Status,
         _out_variable_name="response", _in_arg_names={"force_removal": "force-removal"})
    def removeJob(ctx, transaction, clusterId, jobId, reason, force_removal):
        return _status_only(ctx, lambda s, r: s.remove_job(r.caller, transaction_ref(transaction),
                                                           _int(clusterId), _int(jobId), reason))

    @rpc(m.NullableTransaction, Integer32, Integer32, Unicode, Boolean, Boolean, Boolean, _returns=m.Status,
         _out_variable_name="response",
         _in_arg_names={"email_user": "email-user", "email_admin": "email-admin", "system_hold": "system-hold"})
    def holdJob(ctx, transaction, clusterId, jobId, reason, email_user, email_admin, system_hold):
        return _status_only(ctx, lambda s, r: s.hold_job(r.caller, transaction_ref(transaction), _int(clusterId),
                                                         _int(jobId), reason, bool(system_hold)))

    @rpc(m.NullableTransaction, Integer32, Integer32, Unicode, Boolean, Boolean, _returns=m.Status,
         _out_variable_name="response", _in_arg_names={"email_user": "email-user", "email_admin": "email-admin"})
    def releaseJob(ctx, transaction, clusterId, jobId, reason, email_user, email_admin):
        return _status_only(ctx, lambda s, r: s.release_job(r.caller, transaction_ref(transaction),
                                                            _int(clusterId), _int(jobId), reason))

    @rpc(m.NullableTransaction, Integer32, Integer32, m.NullableClassAdStruct, _returns=m.RequirementsAndStatus,
         _out_variable_name="response")
    def submit(ctx, transaction, clusterId, jobId, jobAd):
        return _run(ctx, lambda s, r: s.submit(r.caller, transaction_ref(transaction), _int(clusterId),
                                               _int(jobId), attrs(jobAd)),
                    lambda ok, _: build(m.RequirementsAndStatus, status=ok),
                    lambda failure: build(m.RequirementsAndStatus, status=failure))

    @rpc(m.NullableTransaction, Unicode, _returns=m.ClassAdStructArrayAndStatus, _out_variable_name="response")
    def getJobAds(ctx, transaction, constraint):
        return _run(ctx, lambda s, r: s.get_job_ads(r.caller, transaction_ref(transaction), constraint),
                    lambda ok, ads: _job_ads_answer(ctx.udc.answers, ads),
                    lambda failure: build(m.ClassAdStructArrayAndStatus, status=failure))

    @rpc(m.NullableTransaction, Integer32, Integer32, _returns=m.ClassAdStructAndStatus,
         _out_variable_name="response")
    def getJobAd(ctx, transaction, clusterId, jobId):
        return _run(ctx, lambda s, r: s.get_job_ad(r.caller, transaction_ref(transaction), _int(clusterId),
                                                   _int(jobId)),
                    lambda ok, ad: Prebuilt(ctx.udc.answers.write_job_ad(ad)),
                    lambda failure: build(m.ClassAdStructAndStatus, status=failure))

    @rpc(m.NullableTransaction, Integer32, Integer32, Unicode, Integer32, m.HashType, Unicode, _returns=m.Status,
         _out_variable_name="response")
    def declareFile(ctx, transaction, clusterId, jobId, name, size, hashType, hash):
        md5 = hash if str(hashType) == "MD5HASH" else None
        return _status_only(ctx, lambda s, r: s.declare_file(r.caller, transaction_ref(transaction),
                                                             _int(clusterId), _int(jobId), name, _int(size), md5))

    @rpc(m.NullableTransaction, Integer32, Integer32, Unicode, Integer32, Base64Text, _returns=m.Status,
         _out_variable_name="response")
    def sendFile(ctx, transaction, clusterId, jobId, name, offset, data):
        return _status_only(ctx, lambda s, r: s.send_file(r.caller, transaction_ref(transaction), _int(clusterId),
                                                          _int(jobId), name, _int(offset), _file_data(name, data)))

    @rpc(m.NullableTransaction, Integer32, Integer32, Unicode, Integer32, Integer32,
         _returns=m.Base64DataAndStatus, _out_variable_name="response")
    def getFile(ctx, transaction, clusterId, jobId, name, offset, length):
        return _run(ctx, lambda s, r: s.get_file(r.caller, transaction_ref(transaction), _int(clusterId),
                                                 _int(jobId), name, _int(offset), _int(length)),
                    lambda ok, data: build(m.Base64DataAndStatus, status=ok, data=[data]),
                    lambda failure: build(m.Base64DataAndStatus, status=failure))

    @rpc(m.NullableTransaction, Integer32, Integer32, _returns=m.Status, _out_variable_name="response")
    def closeSpool(ctx, transaction, clusterId, jobId):
        return _status_only(ctx, lambda s, r: s.close_spool(r.caller, transaction_ref(transaction),
                                                            _int(clusterId), _int(jobId)))

    @rpc(m.NullableTransaction, Integer32, Integer32, _returns=m.FileInfoArrayAndStatus,
         _out_variable_name="response")
    def listSpool(ctx, transaction, clusterId, jobId):
        return _run(ctx, lambda s, r: s.list_spool(r.caller, transaction_ref(transaction), _int(clusterId),
                                                   _int(jobId)),
                    lambda ok, files: build(
                        m.FileInfoArrayAndStatus, status=ok,
                        info=[build(m.FileInfo, name=f.name, size=f.size) for f in files] or None),
                    lambda failure: build(m.FileInfoArrayAndStatus, status=failure))

    @rpc(_returns=m.Status, _out_variable_name="response")
    def requestReschedule(ctx):
        return _status_only(ctx, lambda s, r: s.request_reschedule(r.caller))

    @rpc(m.NullableClassAdStruct, _returns=m.RequirementsAndStatus, _out_variable_name="response")
    def discoverJobRequirements(ctx, jobAd):
        return _run(ctx, lambda s, r: _sync(s.discover_job_requirements(r.caller, attrs(jobAd))),
                    lambda ok, files: build(m.RequirementsAndStatus, status=ok, requirements=files),
                    lambda failure: build(m.RequirementsAndStatus, status=failure))

    @rpc(Integer32, Integer32, Unicode, m.UniverseType, Unicode, Unicode, Unicode,
         _returns=m.ClassAdStructAndStatus, _out_variable_name="response")
    def createJobTemplate(ctx, clusterId, jobId, owner, type, cmd, args, requirements):
        return _run(ctx, lambda s, r: _sync(s.create_job_template(r.caller, _int(clusterId), _int(jobId), owner,
                                                                  universe(type), cmd, args, requirements)),
                    _template_answer,
                    lambda failure: build(m.ClassAdStructAndStatus, status=failure))


#: answers of more ads than this are streamed (written as they are sent, without a Content-Length)
STREAMED_ADS = 1000


def _job_ads_answer(answers: AdAnswers, ads: Sequence[Sequence[Attr]]) -> Prebuilt:
    if len(ads) > STREAMED_ADS:
        return Prebuilt(chunks=answers.stream_job_ads(ads))
    return Prebuilt(answers.write_job_ads(ads))


def _template_answer(ok: m.Status, result: TemplateResult) -> m.ClassAdStructAndStatus:
    answer = ok if result.error is None else status(CoreStatus(CoreStatusCode.FAIL, result.error))
    return build(m.ClassAdStructAndStatus, status=answer, classAd=struct(result.ad))


def _info(ctx: Any, which: Callable[[BirdbathSchedd], str]) -> Maybe[Any]:
    """getVersionString/getPlatformString: SUCCESS with no status message (as the original), no checks."""
    return _run(ctx, lambda s, r: _sync(which(s)),
                lambda ok, text: build(m.StringAndStatus, status=build(m.Status, code="SUCCESS"), message=text),
                lambda failure: build(m.StringAndStatus, status=failure))


def _int_answer(ctx: Any, operation: Callable[[BirdbathSchedd, RequestContext], Awaitable[int]]) -> Maybe[Any]:
    return _run(ctx, operation, lambda ok, value: build(m.IntAndStatus, status=ok, integer=value),
                lambda failure: build(m.IntAndStatus, status=failure, integer=0))
