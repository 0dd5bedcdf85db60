"""The submission API's JSON form: ``POST /submission/json/<operation>`` with the parameters as one JSON object.

One parse and one write: the body is read with ``json.loads`` (checked for depth and for text that is not Unicode),
each parameter is read by the reader of its type, the operation is the SOAP form's own (a method of
:class:`~gateway.submission.service.SubmissionApi`, called with the same arguments), and its answer is written with
``json.dumps``.  The operations, their parameters and their answers' shapes are read once from that service's
declaration (spyne's method descriptors), so the two forms cannot drift apart.

In JSON, job ads are typed maps as QMF's ``mrg.grid`` encoding had them, ``{"Cmd": {"TYPE": 3, "VALUE":
"/bin/sleep"}}`` (0 EXPR, 1 INTEGER, 2 FLOAT, 3 STRING), and on input also native JSON values or the SOAP form's list
of ``{name, type, value}``; a job id may be an Aviary ``JobID`` object; binary data is base64.  A body that cannot be
read, or a parameter of the wrong JSON type, is HTTP 400 with a FAIL status; an unknown operation is a 404 whose
FAIL status lists the operations.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from spyne import Array, ByteArray, ComplexModelBase, Integer, Unicode
from spyne.model.enum import EnumBase
from twisted.logger import Logger
from twisted.python.failure import Failure

from gateway.core.submissions import FROM_QMF, QMF_CODES, ApiStatus, aviary_job
from gateway.soap.answer import LOGGED_FAULT, SoapAnswer
from jobmodel.values import excerpt

from .service import ID_LISTS, ID_PARAMETERS, JobAd, SubmissionApi, SubmissionContext

log = Logger()

JSON = b"application/json"
#: how deep a JSON request may nest (the API's own documents nest 4 levels at most)
MAX_JSON_DEPTH = 32


class BadRequest(ValueError):
    """A request the API cannot read: HTTP 400 with a FAIL status saying why."""

    http_status = 400


class UnknownOperation(BadRequest):
    """A path that names no operation: HTTP 404, with a FAIL status listing the operations."""

    http_status = 404


class WireAttribute(NamedTuple):
    """One attribute of a request's job ad, as the SOAP form's ``Attribute`` reads (name, type, value)."""

    name: str
    type: str | None
    value: str


@dataclass(frozen=True)
class OperationCall:
    """What an operation of :class:`SubmissionApi` reads of its call besides the parameters: the context."""

    udc: SubmissionContext


Reader = Callable[[str, Any], Any]
Writer = Callable[[Any], Any]


@dataclass(frozen=True)
class Operation:
    """One operation: its name on the wire, the service's method, its parameters' readers and its answer's writer."""

    name: str
    method: Callable[..., Any]
    parameters: tuple[tuple[str, Reader], ...]
    write: Writer


class JsonApi:
    """The operations of :class:`SubmissionApi` in JSON (read from its descriptors when made)."""

    def __init__(self) -> None:
        self.operations = {operation.name: operation for operation in _operations()}

    async def answer(self, operation: str, body: bytes, context: SubmissionContext) -> SoapAnswer:
        """The answer to ``POST /submission/json/<operation>``."""
        try:
            found = self.operations.get(operation)
            if found is None:
                raise UnknownOperation(f"unknown operation {excerpt(operation, 60)}; the operations are "
                                       f"{', '.join(self.operations)}")
            arguments = found_arguments(found, parse(body))
        except BadRequest as exc:
            reason = f"Bad request: {exc}" if exc.http_status == 400 else str(exc)
            return SoapAnswer(exc.http_status, fail_document(reason), operation or None, status=ApiStatus.FAIL.value,
                              reason=reason)
        try:
            return _written(await found.method(OperationCall(context), *arguments), found)
        except Exception as exc:  # noqa: BLE001 - a bug in an operation: a 500, never a crash
            return self._failed(Failure(), found.name, exc)

    @staticmethod
    def _failed(failure: Failure, operation: str, exc: BaseException) -> SoapAnswer:
        log.failure("operation {operation} failed", failure, operation=operation)
        text = f"Internal error in {operation}: {exc}"
        return SoapAnswer(500, fail_document(text), operation, status=ApiStatus.FAIL.value,
                          reason=f"Server: {text}"[:LOGGED_FAULT])


def _written(result: Any, operation: Operation) -> SoapAnswer:
    status = result.status
    return SoapAnswer(200, json.dumps(operation.write(result)).encode(), operation.name, status=status.code,
                      reason=status.text)


def found_arguments(operation: Operation, params: Any) -> list[Any]:
    """The operation's arguments, in order, read from the parameter object (a name it does not have is ignored)."""
    if not isinstance(params, dict):
        raise BadRequest("the request body must be a JSON object of parameters")
    return [read(name, params.get(name)) for name, read in operation.parameters]


# -- reading ---------------------------------------------------------------------------------------------------------
def parse(body: bytes) -> Any:
    """The JSON document of a request body (none: an empty object); BadRequest for one that is not JSON, nests
    deeper than MAX_JSON_DEPTH or holds text that is not Unicode."""
    try:
        document = json.loads(body or b"{}")
    except RecursionError:
        raise BadRequest(f"the JSON nests too deeply (at most {MAX_JSON_DEPTH} levels)") from None
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8, -16 or -32
        raise BadRequest(str(exc)) from None
    _check_json_values(document)
    return document


def _check_json_values(document: Any) -> None:
    """BadRequest when a parsed JSON document nests deeper than MAX_JSON_DEPTH, or holds a string with an unpaired
    surrogate (``"\\ud800"``: valid JSON, but not text, and the ClassAd library crashes on it); walked without
    recursion."""
    pending = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str):
            _check_text(value)
        elif isinstance(value, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise BadRequest(f"the JSON nests more than {MAX_JSON_DEPTH} levels deep")
            items = list(value.items()) if isinstance(value, dict) else [(None, item) for item in value]
            for key, item in items:
                if key is not None:
                    _check_text(key)
                pending.append((item, depth + 1))


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(f"the JSON string {excerpt(text, 40)} is not Unicode text (an unpaired surrogate)") from None


def _wrong(name: str, value: Any, expected: str) -> BadRequest:
    shown = json.dumps(value)
    return BadRequest(f"parameter {name}: expected {expected}, not {shown if len(shown) <= 60 else shown[:60] + '…'}")


def read_text(name: str, value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _wrong(name, value, "a string")


def read_job_id(name: str, value: Any) -> str | None:
    """A job id: its text, or the id an Aviary JobID object names."""
    if isinstance(value, dict):
        return aviary_job(value)
    if value is None or isinstance(value, str):
        return value
    raise _wrong(name, value, "a job id (a string or a JobID object)")


def integer_reader(low: int, high: int) -> Reader:
    def read_integer(name: str, value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise _wrong(name, value, f"an integer from {low} to {high}")
        return value

    return read_integer


def list_reader(item: Reader) -> Reader:
    def read_list(name: str, value: Any) -> list[Any] | None:
        if value is None:
            return None
        if not isinstance(value, list):
            raise _wrong(name, value, "a list")
        return [item(name, element) for element in value]

    return read_list


def read_ad(name: str, value: Any) -> list[WireAttribute] | None:
    """A job ad: a typed map (or a map of native JSON values), or the SOAP form's list of {name, type, value}."""
    if value is None:
        return None
    if isinstance(value, dict):
        return [_map_entry(attribute, item) for attribute, item in value.items() if item is not None]
    if isinstance(value, list):
        return [_list_entry(name, item) for item in value]
    raise _wrong(name, value, "a job ad (a map of attributes)")


def _map_entry(name: str, value: Any) -> WireAttribute:
    """One attribute of a typed map: ``{"TYPE": code, "VALUE": text}`` or a native JSON value; a code outside the set
    goes on as the text ``TYPE <code>``, for the operation to refuse naming it."""
    if isinstance(value, dict) and "TYPE" in value:
        code = value["TYPE"]
        kind = FROM_QMF.get(code) if isinstance(code, int) and not isinstance(code, bool) else None
        return WireAttribute(name, kind or f"TYPE {json.dumps(code)}", str(value.get("VALUE", "")))
    if isinstance(value, bool):
        return WireAttribute(name, "BOOLEAN", "TRUE" if value else "FALSE")
    if isinstance(value, int):
        return WireAttribute(name, "INTEGER", str(value))
    if isinstance(value, float):
        return WireAttribute(name, "FLOAT", repr(value))
    if isinstance(value, str):
        return WireAttribute(name, "STRING", value)
    raise BadRequest(f"attribute {name}: a JSON {type(value).__name__} is not a ClassAd value")


def _list_entry(name: str, item: Any) -> WireAttribute:
    fields = item if isinstance(item, dict) else {}
    parts = [fields.get(field) for field in ("name", "type", "value")]
    if not isinstance(item, dict) or not all(part is None or isinstance(part, str) for part in parts):
        raise _wrong(name, item, "attributes as {name, type, value} strings")
    return WireAttribute(parts[0] or "", parts[1], parts[2] or "")


def reader_for(name: str, kind: Any) -> Reader:
    """The reader of a parameter declared as ``kind`` (a spyne type of the service's declaration)."""
    if kind is JobAd:
        return read_ad
    if issubclass(kind, Array):
        (item,) = kind._type_info.values()
        return list_reader(reader_for(name if name not in ID_LISTS else "id", item))
    if issubclass(kind, Integer):
        return integer_reader(int(kind.Attributes.min_bound), int(kind.Attributes.max_bound))
    if name in ID_PARAMETERS:
        return read_job_id
    if issubclass(kind, (Unicode, EnumBase)):  # an enumeration's value outside the set reaches the operation
        return read_text
    raise TypeError(f"no JSON reader for parameter {name} of type {kind.__name__}")


# -- writing ---------------------------------------------------------------------------------------------------------
def writer_for(kind: Any) -> Writer:
    """The writer of an answer part declared as ``kind``: a dict of a structure's members that are not None, a job
    ad as a typed map, binary data as base64."""
    if kind is JobAd:
        return lambda attributes: {a.name: {"TYPE": QMF_CODES.get(a.type, 0), "VALUE": a.value} for a in attributes}
    if issubclass(kind, ByteArray):
        return lambda chunks: base64.b64encode(b"".join(chunks)).decode("ascii")
    if issubclass(kind, Array):
        (item,) = kind._type_info.values()
        write_item = writer_for(item)
        return lambda items: [write_item(element) for element in items]
    if issubclass(kind, ComplexModelBase):
        members = [(name, writer_for(member)) for name, member in kind._type_info.items()]

        def write_structure(value: Any) -> dict[str, Any]:
            written = {}
            for name, write in members:
                member = getattr(value, name, None)
                if member is not None:
                    written[name] = write(member)
            return written

        return write_structure
    return lambda value: value


def _operations() -> list[Operation]:
    """Every operation of the service, in its declaration's order."""
    operations = []
    for descriptor in SubmissionApi.public_methods.values():
        parameters = tuple((name, reader_for(name, kind)) for name, kind in descriptor.in_message._type_info.items())
        (result,) = descriptor.out_message._type_info.values()
        operations.append(Operation(descriptor.operation_name, descriptor.function, parameters, writer_for(result)))
    return operations


def fail_document(reason: str) -> bytes:
    """The JSON API's answer that carries only a FAIL status."""
    return json.dumps({"status": {"code": ApiStatus.FAIL.value, "text": reason}}).encode()
