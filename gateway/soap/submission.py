"""The simplified submission API as one spyne service, exposed twice: SOAP 1.1 (document/literal, namespace
``urn:birdbath:submission``, WSDL in ``wsdl/submission.wsdl``) and JSON over HTTP (``POST /submission/json/<op>``
with the parameters as a JSON object).  Every operation answers with a ``status`` (code and text); application
errors are never faults.

In JSON, job ads are typed maps as QMF's ``mrg.grid`` encoding had them, ``{"Cmd": {"TYPE": 3, "VALUE":
"/bin/sleep"}}`` (0 EXPR, 1 INTEGER, 2 FLOAT, 3 STRING), and on input also native JSON values; binary data is
base64.  In SOAP they are lists of typed attributes (name, type, value) with BOOLEAN as a fifth type.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from lxml import etree
from spyne import Application, Array, ByteArray, ComplexModel, Enum, Fault, Integer32, Long, Service, Unicode, rpc
from spyne.model import SimpleModel
from spyne.protocol.json import JsonDocument
from spyne.protocol.soap import Soap11
from twisted.internet.defer import Deferred

from gateway.core.adstruct import Attr, AttrType
from gateway.core.auth import Caller
from gateway.core.submissions import API_TYPES, TYPE_NAMES, ApiError, ApiStatus, SubmissionService, aviary_job, fail
from jobmodel.jobs import JobAction
from jobmodel.values import excerpt

from .base64data import Base64Text
from .base64data import decode as decode_base64
from .protocol import HardenedSoap11

TNS = "urn:birdbath:submission"
#: how deep a JSON request may nest (the API's own documents nest 4 levels at most)
MAX_JSON_DEPTH = 32

#: QMF's numeric type codes; a boolean travels as an expression, as in QMF
QMF_CODES = {"EXPR": 0, "INTEGER": 1, "FLOAT": 2, "STRING": 3, "BOOLEAN": 0}
FROM_QMF = {0: "EXPR", 1: "INTEGER", 2: "FLOAT", 3: "STRING"}


class _Model(ComplexModel):
    __namespace__ = TNS


StatusCode = Enum(*[code.value for code in ApiStatus], type_name="StatusCode")


class AttributeType(Enum(*API_TYPES, type_name="AttributeType")):  # type: ignore[misc]
    """The WSDL's enumeration of attribute types, read leniently: a value outside it reaches the operation as its
    plain text (see :class:`OpenEnums`), which answers FAIL naming it; spyne would answer a fault."""

    @staticmethod
    def validate_string(cls: Any, value: Any) -> bool:
        return SimpleModel.validate_string(cls, value)


class OpenEnums:
    """Protocol mixin: an enumeration's value read as its member when it is one, else as the text itself."""

    @staticmethod
    def _member(cls: Any, text: str | None) -> Any:
        return getattr(cls, text) if text in cls.__values__ else text

    def enum_from_element(self, ctx: Any, cls: Any, element: Any) -> Any:  # the SOAP form
        return self._member(cls, element.text)

    def enum_base_from_bytes(self, cls: Any, value: Any) -> Any:  # the JSON form
        return self._member(cls, value.decode() if isinstance(value, bytes) else value)


class Status(_Model):
    _type_info = [("code", StatusCode), ("text", Unicode)]


class Attribute(_Model):
    _type_info = [("name", Unicode), ("type", AttributeType), ("value", Unicode)]


JobAd = Array(Attribute, type_name="JobAd")


class IdResult(_Model):
    _type_info = [("status", Status), ("id", Unicode)]


class SizeResult(_Model):
    _type_info = [("status", Status), ("size", Long)]


class StatusResult(_Model):
    _type_info = [("status", Status)]


class JobAdResult(_Model):
    _type_info = [("status", Status), ("ad", JobAd)]


class JobSummary(_Model):
    _type_info = [("id", Unicode), ("ad", JobAd)]


class JobsResult(_Model):
    _type_info = [("status", Status), ("jobs", Array(JobSummary, type_name="JobSummaryList"))]


class SubmissionSummary(_Model):
    _type_info = [("name", Unicode), ("owner", Unicode), ("qdate", Long), ("idle", Integer32),
                  ("running", Integer32), ("removed", Integer32), ("completed", Integer32), ("held", Integer32),
                  ("transferring_output", Integer32), ("suspended", Integer32)]


class SubmissionsResult(_Model):
    _type_info = [("status", Status), ("submissions", Array(SubmissionSummary, type_name="SubmissionList"))]


class DataResult(_Model):
    _type_info = [("status", Status), ("data", ByteArray)]


@dataclass
class SubmissionContext:
    caller: Caller
    service: SubmissionService
    status: Any = None  # the ApiStatus answered, for the request log


# -- conversions -------------------------------------------------------------------------------------------
def attrs_from_wire(ad: Any) -> list[Attr]:
    """The typed attributes of a request's ad (no type: EXPR); an attribute without a name is kept, for the core
    to refuse."""
    return [Attr(item.name or "", attr_type(item.name or "", item.type) or AttrType.EXPRESSION, item.value or "")
            for item in ad or () if item is not None]


def attr_type(name: str, wire: Any) -> AttrType | None:
    """The type an attribute was sent with (None: none given); FAIL naming a value outside the enumeration."""
    if wire is None:
        return None
    kind = API_TYPES.get(str(wire))  # a member, or the plain text of a value outside the set (see OpenEnums)
    if kind is None:
        raise fail(f"Failed to parse job ad attribute {name}: unknown type {excerpt(str(wire), 40)}; the types are "
                   f"{', '.join(API_TYPES)} (in a JSON typed map TYPE 0 to 3)")
    return kind


def attrs_to_wire(attrs: list[Attr]) -> list[Attribute]:
    return [Attribute(name=a.name, type=TYPE_NAMES.get(a.type, "EXPR"), value=a.value) for a in attrs]


def summary_to_wire(summary: dict[str, Any]) -> JobSummary:
    return JobSummary(id=f"{summary.get('ClusterId')}.{summary.get('ProcId')}", ad=_typed_values(summary))


def _typed_values(summary: dict[str, Any]) -> list[Attribute]:
    out = []
    for name, value in summary.items():
        if isinstance(value, bool):
            out.append(Attribute(name=name, type="BOOLEAN", value="TRUE" if value else "FALSE"))
        elif isinstance(value, int):
            out.append(Attribute(name=name, type="INTEGER", value=str(value)))
        elif isinstance(value, float):
            out.append(Attribute(name=name, type="FLOAT", value=repr(value)))
        elif isinstance(value, str):
            out.append(Attribute(name=name, type="STRING", value=value))
    return out


def _run(ctx: Any, operation: Callable[[SubmissionService, Caller], Awaitable[Any]],
         answer: Callable[[Status, Any], Any], model: type) -> Deferred:
    context: SubmissionContext = ctx.udc

    async def run() -> Any:
        try:
            result = await operation(context.service, context.caller)
        except ApiError as exc:
            context.status = exc.code
            return model(status=Status(code=exc.code.value, text=exc.text))
        context.status = ApiStatus.OK
        return answer(Status(code="OK", text="OK"), result)

    return Deferred.fromCoroutine(run())


class SubmissionApi(Service):
    """submit/create/send, job control and queries; see gateway.core.submissions for the semantics."""

    __service_name__ = "Submission"

    @rpc(JobAd, Unicode, _returns=IdResult)
    def submit(ctx, ad, staging):
        return _run(ctx, lambda s, c: s.submit(c, attrs_from_wire(ad), staging),
                    lambda ok, job: IdResult(status=ok, id=job), IdResult)

    @rpc(Unicode, _returns=IdResult)
    def create(ctx, submission):
        return _run(ctx, lambda s, c: s.create(c, submission), lambda ok, staging: IdResult(status=ok, id=staging),
                    IdResult)

    @rpc(Unicode, Unicode, Long, Base64Text, Unicode, _returns=SizeResult)
    def send(ctx, staging, name, offset, data, md5):
        return _run(ctx, lambda s, c: s.send(c, staging, name or "", offset or 0, _send_data(name, data), md5),
                    lambda ok, size: SizeResult(status=ok, size=size), SizeResult)

    @rpc(Unicode, _returns=StatusResult)
    def abort(ctx, staging):
        return _run(ctx, lambda s, c: s.abort(c, staging), lambda ok, _: StatusResult(status=ok), StatusResult)

    @rpc(Unicode, Unicode, _returns=StatusResult)
    def hold(ctx, id, reason):
        return _act(ctx, id, JobAction.HOLD, reason)

    @rpc(Unicode, Unicode, _returns=StatusResult)
    def release(ctx, id, reason):
        return _act(ctx, id, JobAction.RELEASE, reason)

    @rpc(Unicode, Unicode, _returns=StatusResult)
    def remove(ctx, id, reason):
        return _act(ctx, id, JobAction.REMOVE, reason)

    @rpc(Unicode, Unicode, _returns=StatusResult)
    def suspend(ctx, id, reason):
        return _act(ctx, id, JobAction.SUSPEND, reason)

    @rpc(Unicode, Unicode, _returns=StatusResult, _operation_name="continue")
    def continue_(ctx, id, reason):
        return _act(ctx, id, JobAction.CONTINUE, reason)

    @rpc(Unicode, Unicode, AttributeType, Unicode, _returns=StatusResult)
    def setAttribute(ctx, id, name, type, value):
        return _run(ctx, lambda s, c: s.set_attribute(c, id or "", name or "", attr_type(name or "", type),
                                                      value or ""),
                    lambda ok, _: StatusResult(status=ok), StatusResult)

    @rpc(Unicode, _returns=JobAdResult)
    def getJobAd(ctx, id):
        return _run(ctx, lambda s, c: s.job_ad(c, id or ""),
                    lambda ok, ad: JobAdResult(status=ok, ad=attrs_to_wire(ad)), JobAdResult)

    @rpc(Array(Unicode), _returns=JobsResult)
    def getJobSummaries(ctx, ids):
        return _run(ctx, lambda s, c: s.summaries(c, list(ids or [])),
                    lambda ok, jobs: JobsResult(status=ok, jobs=[summary_to_wire(j) for j in jobs]), JobsResult)

    @rpc(Unicode, _returns=SubmissionsResult)
    def getSubmissions(ctx, name):
        return _run(ctx, lambda s, c: s.submissions(c, name or None),
                    lambda ok, found: SubmissionsResult(status=ok, submissions=[
                        SubmissionSummary(name=i.name, owner=i.owner, qdate=i.qdate, idle=i.counts["Idle"],
                                          running=i.counts["Running"], removed=i.counts["Removed"],
                                          completed=i.counts["Completed"], held=i.counts["Held"],
                                          transferring_output=i.counts["TransferringOutput"],
                                          suspended=i.counts["Suspended"]) for i in found]), SubmissionsResult)

    @rpc(Unicode, _returns=JobsResult)
    def getSubmissionJobs(ctx, name):
        return _run(ctx, lambda s, c: s.submission_jobs(c, name or ""),
                    lambda ok, jobs: JobsResult(status=ok, jobs=[summary_to_wire(j) for j in jobs]), JobsResult)

    @rpc(Unicode, Integer32, _returns=JobsResult)
    def getHistory(ctx, constraint, limit):
        return _run(ctx, lambda s, c: s.history(c, constraint, limit),
                    lambda ok, jobs: JobsResult(status=ok, jobs=[JobSummary(id=str(ref), ad=attrs_to_wire(ad))
                                                                 for ref, ad in jobs]), JobsResult)

    @rpc(Unicode, Unicode, Long, Long, _returns=DataResult)
    def fetch(ctx, id, file, start, end):
        return _run(ctx, lambda s, c: s.fetch(c, id or "", file or "", start or 0, end or 0),
                    lambda ok, data: DataResult(status=ok, data=[data]), DataResult)


def _send_data(name: str | None, text: str | None) -> bytes:
    """send's data, decoded; text that is not base64 is the client's mistake: FAIL naming the file."""
    try:
        return decode_base64(text)
    except ValueError as exc:
        raise fail(f"Failed to write to {name or ''!r}: {exc}") from None


def _act(ctx: Any, job: str | None, action: JobAction, reason: str | None) -> Deferred:
    return _run(ctx, lambda s, c: s.act(c, job or "", action, reason), lambda ok, _: StatusResult(status=ok),
                StatusResult)


OPERATIONS = ("submit", "create", "send", "abort", "hold", "release", "remove", "suspend", "continue",
              "setAttribute", "getJobAd", "getJobSummaries", "getSubmissions", "getSubmissionJobs", "getHistory",
              "fetch")


#: the parameters that hold a job id, and those that hold a list of them: each may also be an Aviary JobID
ID_PARAMETERS = frozenset({"id"})
ID_LISTS = frozenset({"ids"})


class SubmissionSoap11(OpenEnums, HardenedSoap11):
    """The SOAP form's input: hardened, with enumerations read leniently, and a job id also taken as Aviary wrote
    it, ``<id><job>1.0</job><pool>…</pool><scheduler>…</scheduler></id>`` (beyond the WSDL, which says string)."""

    def decompose_incoming_envelope(self, ctx: Any, message: str = Soap11.REQUEST) -> None:
        super().decompose_incoming_envelope(ctx, message)
        if ctx.in_body_doc is not None:
            for parameter in ctx.in_body_doc:
                name = etree.QName(parameter).localname if isinstance(parameter.tag, str) else None
                items = [parameter] if name in ID_PARAMETERS else list(parameter) if name in ID_LISTS else []
                for item in items:
                    _flatten_job_id(item)


def _flatten_job_id(element: etree._Element) -> None:
    """An id element holding a JobID structure becomes one holding the id it names."""
    fields = {etree.QName(child).localname: (child.text or "").strip() for child in element
              if isinstance(child.tag, str)}
    if fields:
        element[:] = []
        element.text = aviary_job(fields)


def soap_application() -> Application:
    return Application([SubmissionApi], tns=TNS, name="Submission", in_protocol=SubmissionSoap11(validator="soft"),
                       out_protocol=Soap11())


class UnknownOperation(ValueError):
    """A JSON request to a path that names no operation: HTTP 404, with a FAIL status listing the operations."""

    http_status = 404

    def __init__(self, operation: str) -> None:
        super().__init__(f"unknown operation {excerpt(operation, 60)}; the operations are {', '.join(OPERATIONS)}")


class TypedMapJson(OpenEnums, JsonDocument):
    """JSON whose answers carry job ads as QMF typed maps (requests are converted by :func:`json_request`)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("ignore_wrappers", True)
        super().__init__(**kwargs)

    def create_out_string(self, ctx: Any, *args: Any, **kwargs: Any) -> Any:
        ctx.out_document = _maps_for_ads(ctx.out_document)
        return super().create_out_string(ctx, *args, **kwargs)

    @staticmethod
    def fault_answer(fault: Fault) -> tuple[int, bytes]:
        """A request spyne could not read (a parameter of the wrong type, say) is answered like malformed JSON: HTTP
        400 with a FAIL status; only a failure of the gateway itself is a 500."""
        client = str(fault.faultcode).startswith("Client")
        return (400 if client else 500), fail_document(f"Bad request: {excerpt(str(fault.faultstring), 300)}"
                                                       if client else str(fault.faultstring))


def fail_document(reason: str) -> bytes:
    """The JSON API's answer that carries only a FAIL status."""
    return json.dumps({"status": {"code": ApiStatus.FAIL.value, "text": reason}}).encode()


def typed_map_to_attributes(ad: dict[str, Any]) -> list[dict[str, str]]:
    items = []
    for name, value in ad.items():
        if isinstance(value, dict) and "TYPE" in value:
            code = value["TYPE"]
            kind = FROM_QMF.get(code) if isinstance(code, int) and not isinstance(code, bool) else None
            # a code outside the set goes on as the text "TYPE <code>", for the operation to refuse naming it
            items.append({"name": name, "type": kind or f"TYPE {json.dumps(code)}",
                          "value": str(value.get("VALUE", ""))})
        elif isinstance(value, bool):
            items.append({"name": name, "type": "BOOLEAN", "value": "TRUE" if value else "FALSE"})
        elif isinstance(value, int):
            items.append({"name": name, "type": "INTEGER", "value": str(value)})
        elif isinstance(value, float):
            items.append({"name": name, "type": "FLOAT", "value": repr(value)})
        elif isinstance(value, str):
            items.append({"name": name, "type": "STRING", "value": value})
        elif value is not None:
            raise ValueError(f"attribute {name}: a JSON {type(value).__name__} is not a ClassAd value")
    return items


def _maps_for_ads(document: Any) -> Any:
    """Turn every list of {name, type, value} (an ad) in an answer into a QMF typed map."""
    if isinstance(document, tuple):
        return tuple(_maps_for_ads(item) for item in document)
    if isinstance(document, list):
        if document and all(isinstance(i, dict) and set(i) == {"name", "type", "value"} for i in document):
            return {i["name"]: {"TYPE": QMF_CODES.get(i["type"], 0), "VALUE": i["value"]} for i in document}
        return [_maps_for_ads(item) for item in document]
    if isinstance(document, dict):
        return {key: _maps_for_ads(value) for key, value in document.items()}
    return document


def json_application() -> Application:
    return Application([SubmissionApi], tns=TNS, name="Submission", in_protocol=TypedMapJson(validator="soft"),
                       out_protocol=TypedMapJson())


def json_request(operation: str, body: bytes) -> bytes:
    """The spyne JSON document for ``POST /submission/json/<operation>`` with a parameter object; ValueError (an
    HTTP 400) for a body that is not one, nests deeper than MAX_JSON_DEPTH or holds text that is not Unicode, and
    UnknownOperation (404) for an operation the API does not have."""
    if operation not in OPERATIONS:
        raise UnknownOperation(operation)
    try:
        params = json.loads(body or b"{}")
    except RecursionError:
        raise ValueError(f"the JSON nests too deeply (at most {MAX_JSON_DEPTH} levels)") from None
    _check_json_values(params)
    if not isinstance(params, dict):
        raise ValueError("the request body must be a JSON object of parameters")
    if isinstance(params.get("ad"), dict):
        params["ad"] = typed_map_to_attributes(params["ad"])
    for name in ID_PARAMETERS & params.keys():
        params[name] = _job_id(params[name])
    for name in ID_LISTS & params.keys():
        if isinstance(params[name], list):
            params[name] = [_job_id(item) for item in params[name]]
    return json.dumps({operation: params}).encode()


def _job_id(value: Any) -> Any:
    """A JSON job id: an Aviary JobID object becomes the id it names; anything else is spyne's to read."""
    return aviary_job(value) if isinstance(value, dict) else value


def _check_json_values(document: Any) -> None:
    """ValueError when a parsed JSON document nests deeper than MAX_JSON_DEPTH, or holds a string with an unpaired
    surrogate (``"\\ud800"``: valid JSON, but not text, and the ClassAd library crashes on it); walked without
    recursion."""
    pending = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str):
            _check_text(value)
        elif isinstance(value, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise ValueError(f"the JSON nests more than {MAX_JSON_DEPTH} levels deep")
            items = list(value.items()) if isinstance(value, dict) else [(None, item) for item in value]
            for key, item in items:
                if key is not None:
                    _check_text(key)
                pending.append((item, depth + 1))


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"the JSON string {excerpt(text, 40)} is not Unicode text (an unpaired surrogate)") from None


def generated_wsdl(address: str = "http://localhost:1984/submission") -> bytes:
    """The WSDL spyne derives from the service definition; ``wsdl/submission.wsdl`` is this, pretty-printed
    (``python -m gateway.soap.submission > wsdl/submission.wsdl``; a test keeps the two equal)."""
    from lxml import etree
    from spyne.interface.wsdl import Wsdl11

    application = soap_application()
    application.transport = "http://schemas.xmlsoap.org/soap/http"  # what spyne's HTTP servers would set
    document = Wsdl11(application.interface)
    document.build_interface_document(address)
    tree = etree.fromstring(document.get_interface_document(), etree.XMLParser(remove_blank_text=True))
    for schema in tree.iter("{http://www.w3.org/2001/XMLSchema}schema"):  # spyne's order varies run to run
        schema[:] = sorted(schema, key=lambda child: (etree.QName(child).localname, child.get("name", "")))
    return etree.tostring(tree, pretty_print=True, xml_declaration=True, encoding="UTF-8")


if __name__ == "__main__":
    import os
    import sys

    os.environ.setdefault("CONDOR_CONFIG", "/dev/null")
    sys.stdout.buffer.write(generated_wsdl())
