"""The simplified submission API as one spyne service: its operations, their parameters and answers, declared once.

spyne serves its SOAP 1.1 form (document/literal, namespace ``urn:birdbath:submission``) and generates its WSDL
(``wsdl/submission.wsdl``); the JSON form (``POST /submission/json/<op>``, :mod:`gateway.submission.jsonapi`) reads the
same declaration and calls the same methods.  Every operation answers with a ``status`` (code and text);
application errors are never faults.  In SOAP, job ads are lists of typed attributes (name, type, value) with
BOOLEAN as a fifth type.
"""

# spyne declares a model by a class attribute list (_type_info) and validators as static methods taking cls:
# ruff: noqa: RUF012, PLW0211
from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lxml import etree
from spyne import Application, Array, ByteArray, ComplexModel, Enum, Integer32, Long, Service, Unicode, rpc
from spyne.model import SimpleModel
from spyne.protocol.soap import Soap11

from gateway.core.adstruct import Attr, AttrType
from gateway.core.auth import Caller
from gateway.core.services import SubmissionsContract
from gateway.core.submissions import API_TYPES, TYPE_NAMES, ApiError, ApiStatus, aviary_job, fail
from gateway.soap.base64data import Base64Text
from gateway.soap.base64data import decode as decode_base64
from gateway.soap.protocol import HardenedSoap11
from gateway.soap.table import Entry, Standard
from jobmodel.jobs import JobAction
from jobmodel.values import excerpt

TNS = "urn:birdbath:submission"
#: a request's parameters by their names in the declaration
Wire = Mapping[str, Any]


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

    def enum_from_element(self, ctx: Any, cls: Any, element: Any) -> Any:
        text = element.text
        return getattr(cls, text) if text in cls.__values__ else text


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
    service: SubmissionsContract
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


#: the submission API's statuses: an ApiError's code and text are the answer's status, its code the request log's
SUBMISSION: Standard[ApiError] = Standard(ApiError, lambda refusal: refusal.code,
                                          lambda refusal: Status(code=refusal.code.value, text=refusal.text),
                                          ApiStatus.OK, lambda: Status(code="OK", text="OK"))


@dataclass(frozen=True)
class Operation:
    """One operation of the API: its parameters and answer type as spyne declares them, and its table entry (the
    core call with its arguments, the answer made of its result)."""

    parameters: tuple[tuple[str, Any], ...]
    returns: type
    call: Callable[[SubmissionContext, Wire], Awaitable[Any]]
    #: (the OK status, the call's result) -> the answer (by default the status alone)
    answer: Callable[[Status, Any], Any] | None = None
    #: the name on the wire, when not the table's (``continue``, a Python keyword)
    wire_name: str | None = None

    def entry(self) -> Entry:
        returns = self.returns
        answer = self.answer or (lambda ok, result: returns(status=ok))
        return Entry(SUBMISSION, self.call, answer, lambda status, p: returns(status=status))


def _act(action: JobAction) -> Operation:
    return Operation((("id", Unicode), ("reason", Unicode)), StatusResult,
                     lambda c, p: c.service.act(c.caller, p["id"] or "", action, p["reason"]))


def _jobs(ok: Status, jobs: list[dict[str, Any]]) -> JobsResult:
    return JobsResult(status=ok, jobs=[summary_to_wire(job) for job in jobs])


def _submissions(ok: Status, found: list[Any]) -> SubmissionsResult:
    return SubmissionsResult(status=ok, submissions=[
        SubmissionSummary(name=i.name, owner=i.owner, qdate=i.qdate, idle=i.counts["Idle"], running=i.counts["Running"],
                          removed=i.counts["Removed"], completed=i.counts["Completed"], held=i.counts["Held"],
                          transferring_output=i.counts["TransferringOutput"], suspended=i.counts["Suspended"])
        for i in found])


#: the API's operations, in the declaration's order: each its parameters (spyne's types), answer type, core call
#: (the request's context ``c``, its parameters ``p`` by name) and answer; see gateway.core.submissions
TABLE: dict[str, Operation] = {
    "submit": Operation((("ad", JobAd), ("staging", Unicode)), IdResult,
                        lambda c, p: c.service.submit(c.caller, attrs_from_wire(p["ad"]), p["staging"]),
                        lambda ok, job: IdResult(status=ok, id=job)),
    "create": Operation((("submission", Unicode),), IdResult, lambda c, p: c.service.create(c.caller, p["submission"]),
                        lambda ok, staging: IdResult(status=ok, id=staging)),
    "send": Operation((("staging", Unicode), ("name", Unicode), ("offset", Long), ("data", Base64Text),
                       ("md5", Unicode)), SizeResult,
                      lambda c, p: c.service.send(c.caller, p["staging"], p["name"] or "", p["offset"] or 0,
                                                  _send_data(p["name"], p["data"]), p["md5"]),
                      lambda ok, size: SizeResult(status=ok, size=size)),
    "abort": Operation((("staging", Unicode),), StatusResult, lambda c, p: c.service.abort(c.caller, p["staging"])),
    "hold": _act(JobAction.HOLD),
    "release": _act(JobAction.RELEASE),
    "remove": _act(JobAction.REMOVE),
    "suspend": _act(JobAction.SUSPEND),
    "continue_": dataclasses.replace(_act(JobAction.CONTINUE), wire_name="continue"),
    "setAttribute": Operation(
        (("id", Unicode), ("name", Unicode), ("type", AttributeType), ("value", Unicode)), StatusResult,
        lambda c, p: c.service.set_attribute(c.caller, p["id"] or "", p["name"] or "",
                                             attr_type(p["name"] or "", p["type"]), p["value"] or "")),
    "getJobAd": Operation((("id", Unicode),), JobAdResult, lambda c, p: c.service.job_ad(c.caller, p["id"] or ""),
                          lambda ok, ad: JobAdResult(status=ok, ad=attrs_to_wire(ad))),
    "getJobSummaries": Operation((("ids", Array(Unicode)),), JobsResult,
                                 lambda c, p: c.service.summaries(c.caller, list(p["ids"] or [])), _jobs),
    "getSubmissions": Operation((("name", Unicode),), SubmissionsResult,
                                lambda c, p: c.service.submissions(c.caller, p["name"] or None), _submissions),
    "getSubmissionJobs": Operation((("name", Unicode),), JobsResult,
                                   lambda c, p: c.service.submission_jobs(c.caller, p["name"] or ""), _jobs),
    "getHistory": Operation((("constraint", Unicode), ("limit", Integer32)), JobsResult,
                            lambda c, p: c.service.history(c.caller, p["constraint"], p["limit"]),
                            lambda ok, jobs: JobsResult(status=ok, jobs=[JobSummary(id=str(ref), ad=attrs_to_wire(ad))
                                                                         for ref, ad in jobs])),
    "fetch": Operation((("id", Unicode), ("file", Unicode), ("start", Long), ("end", Long)), DataResult,
                       lambda c, p: c.service.fetch(c.caller, p["id"] or "", p["file"] or "", p["start"] or 0,
                                                    p["end"] or 0),
                       lambda ok, data: DataResult(status=ok, data=[data])),
}


def _method(name: str, operation: Operation) -> Any:
    """The spyne method of a table entry: its arguments by their names to the entry, with the request's context."""
    names = tuple(parameter for parameter, _ in operation.parameters)
    entry = operation.entry()

    def method(ctx: Any, *arguments: Any) -> Awaitable[Any]:
        return entry(ctx.udc, dict(zip(names, arguments)))

    method.__name__ = name
    extra = {} if operation.wire_name is None else {"_operation_name": operation.wire_name}
    return rpc(*(kind for _, kind in operation.parameters), _args=names, _returns=operation.returns,
               **extra)(method)


def _send_data(name: str | None, text: str | None) -> bytes:
    """send's data, decoded; text that is not base64 is the client's mistake: FAIL naming the file."""
    try:
        return decode_base64(text)
    except ValueError as exc:
        raise fail(f"Failed to write to {name or ''!r}: {exc}") from None


#: submit/create/send, job control and queries as one spyne service, made from the table
SubmissionApi = type("SubmissionApi", (Service,), {
    "__doc__": "The submission API's operations (``TABLE``), as spyne serves them.", "__service_name__": "Submission",
    "__module__": __name__, **{name: _method(name, operation) for name, operation in TABLE.items()}})


#: the operations' names on the wire, in the declaration's order
OPERATIONS = tuple(descriptor.operation_name for descriptor in SubmissionApi.public_methods.values())


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


def generated_wsdl(address: str = "http://localhost:1984/submission") -> bytes:
    """The WSDL spyne derives from the service definition; ``wsdl/submission.wsdl`` is this, pretty-printed
    (``python -m gateway.submission.service > wsdl/submission.wsdl``; a test keeps the two equal)."""
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
