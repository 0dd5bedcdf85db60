"""The condorSchedd service's requests read with lxml and answered by :class:`~gateway.soap.writer.AnswerWriter`,
with spyne's whole request cycle kept for what they do not cover.

For a small operation spyne's cycle (a ``MethodContext``, its protocol's events, the parameters read into a model
instance, an lxml tree built for the answer and walked again) cost several times the operation itself.  This
dispatcher parses the body with the same hardened parser (``protocol.parse_envelope``), finds the operation the
same way (``protocol.operation_element``), reads each parameter with spyne's own ``from_element`` for its type (so
values, ``xsi:nil`` and validation are spyne's), calls the operation's function from ``schedd.CondorScheddService``
and writes its answer from the answer's model.  Anything unusual (a fault to send: malformed XML, an unknown
operation, an invalid value, a duplicated parameter; an unqualified attribute or ``xsi:nil`` on the operation
element; an answer the writer does not know) goes through :class:`SoapDispatcher` instead, which answers it exactly
as before.  ``tests/test_schedd_wire.py`` proves both paths give the same bytes for every operation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from lxml import etree
from spyne import Application, Fault, Integer32, Unicode
from spyne.const.xml import XSI
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from gateway.core.adstruct import AttrType

from . import models as m
from .dispatch import Maybe, Prebuilt, SoapAnswer, SoapDispatcher, status_code, status_text
from .protocol import ATTR_TYPE_CODES, normalise_enums, operation_element, parse_envelope
from .schedd import build
from .writer import AnswerWriter, Unwritable

NIL = XSI("nil")

#: the parameter type read here rather than by spyne: a job ad, the one large parameter (spyne built a model instance
#: per attribute and validated it field by field, most of a submit's cost)
_JOB_AD = m.NullableClassAdStruct
_ATTRIBUTE_TYPE_VALUES = frozenset(kind.value for kind in AttrType)


class WireAttr(NamedTuple):
    """One ``ClassAdStructAttr`` as read from the request: what ``schedd.attrs`` reads of spyne's model."""

    name: str | None
    type: str | None
    value: str | None


#: what rules a job ad out of the fast reader, in one query instead of a look at every element: attributes anywhere,
#: text other than white space around the items or between their fields (XPath's white space is narrower than
#: Python's, so it rules out more: what it rules out, spyne reads)
_NOT_PLAIN = etree.XPath("descendant-or-self::*/@* or text()[normalize-space()] or item/text()[normalize-space()]")
_FIELDS = frozenset({"name", "type", "value"})


def read_job_ad(element: etree._Element) -> list[WireAttr] | None:
    """A ``ClassAdStruct`` parameter read the way spyne reads it after ``protocol.normalise_enums`` (a type's decimal
    C value is its name), or None for anything spyne must read itself (attributes anywhere, qualified or unknown
    children, markup inside a value, a field twice, a type outside the enumeration): then its answer, a value or a
    fault, stays spyne's.  ``tests/test_schedd_wire.py`` compares the two readers."""
    if _NOT_PLAIN(element):
        return None
    attributes = []
    for item in element:
        if item.tag != "item":
            return None  # another element, or a comment (which spyne reads as an empty item)
        fields: dict[str, str] = {}
        for child in item:
            tag = child.tag
            if type(tag) is not str:
                continue  # a comment
            if tag not in _FIELDS or tag in fields or len(child):
                return None
            fields[tag] = child.text or ""
        kind = fields.get("type")
        if kind is not None:
            kind = ATTR_TYPE_CODES.get(kind.strip(), kind)
            if kind not in _ATTRIBUTE_TYPE_VALUES:
                return None
        attributes.append(WireAttr(fields.get("name"), kind, fields.get("value")))
    return attributes


#: what a fast reader answers for a value it leaves to spyne's ``from_element``
SPYNE: Any = object()

#: an xsd:int in its one canonical spelling (transaction ids have ten digits); spyne refuses more than ten
#: characters (so a ten-digit negative number) and values outside Integer32's range: those are left to it
_CANONICAL_INT = re.compile(r"(?:0|-?[1-9][0-9]{0,9})\Z")
_INT_CHARACTERS = 10
_INT32 = range(-2 ** 31, 2 ** 31)
_TRANSACTION_FIELDS = ("id", "duration")


def read_int(element: etree._Element) -> Any:
    """An ``Integer32`` parameter written plainly (no attributes, no children, canonical digits), else ``SPYNE``."""
    text = read_string(element)
    if text is SPYNE or len(text) > _INT_CHARACTERS or not _CANONICAL_INT.match(text):
        return SPYNE
    value = int(text)
    return value if value in _INT32 else SPYNE


def read_string(element: etree._Element) -> Any:
    """A ``Unicode`` parameter with text and nothing else (no attributes, no children), else ``SPYNE``."""
    text = element.text
    if element.attrib or len(element) or text is None:
        return SPYNE
    return text


def read_transaction(element: etree._Element) -> Any:
    """A ``Transaction`` parameter that is exactly ``<id>`` and ``<duration>``, each a plain int, with nothing else
    but white space between them; else ``SPYNE``.  Made as spyne makes it (an instance of the model it customises,
    the members set)."""
    if element.attrib or _text(element.text):
        return SPYNE
    values: dict[str, int] = {}
    for child in element:
        tag = child.tag
        if tag not in _TRANSACTION_FIELDS or tag in values or _text(child.tail):
            return SPYNE  # a comment, another member, a member twice
        value = values[tag] = read_int(child)
        if value is SPYNE:
            return SPYNE
    if len(values) != len(_TRANSACTION_FIELDS):
        return SPYNE
    return build(m.Transaction, **values)


#: the parameter types read here rather than by spyne's ``from_element`` (a few us each for a value of a few bytes)
FAST_READERS: dict[type, Callable[[etree._Element], Any]] = {
    Integer32: read_int, Unicode: read_string, m.NullableTransaction: read_transaction,
    _JOB_AD: lambda element: _or_spyne(read_job_ad(element))}


def _or_spyne(value: Any) -> Any:
    return SPYNE if value is None else value


def _text(text: str | None) -> bool:
    """Whether text between elements is more than white space (spyne would not ignore it)."""
    return bool(text) and not text.isspace()


@dataclass
class OperationContext:
    """What an operation's function reads of spyne's ``MethodContext``: the transport's context."""

    udc: Any


@dataclass(frozen=True)
class Signature:
    """An operation's function and its parameters in its order, each with its type and the reader that reads it
    without spyne (None: spyne's ``from_element`` reads it), worked out once rather than per request."""

    function: Any
    parameters: tuple[tuple[str, type, Callable[[etree._Element], Any] | None], ...]
    names: frozenset[str]

    @classmethod
    def of(cls, descriptor: Any) -> Signature:
        parameters = tuple((name, kind, FAST_READERS.get(kind))
                           for name, kind in descriptor.in_message._type_info.items())
        return cls(descriptor.function, parameters, frozenset(name for name, _, _ in parameters))


@dataclass(frozen=True)
class Call:
    """A request read: the operation, its function and its arguments in the function's order."""

    operation: str
    function: Any
    arguments: list[Any]


class ScheddDispatcher(SoapDispatcher):
    def __init__(self, application: Application) -> None:
        super().__init__(application)
        protocol = application.in_protocol
        self._protocol = protocol
        self._namespace = application.tns
        methods = {name.rsplit("}", 1)[-1]: descriptors[0]
                   for name, descriptors in application.interface.service_method_map.items()}
        self._operations = frozenset(methods)
        self._signatures = {operation: Signature.of(descriptor) for operation, descriptor in methods.items()}
        self._writer = AnswerWriter(application.out_protocol, {
            operation: descriptor.out_message._type_info["response"] for operation, descriptor in methods.items()},
            self.render)

    def dispatch(self, body: bytes, udc: Any) -> Maybe[SoapAnswer]:
        call = self.read(body)
        if call is None:
            return super().dispatch(body, udc)
        try:
            result = call.function(OperationContext(udc), *call.arguments)
        except Exception:  # raised before the operation ran (a conversion): spyne's fault for it
            return super().dispatch(body, udc)
        if isinstance(result, Deferred):
            return result.addCallbacks(self._answer, self._failed, callbackArgs=(call,), errbackArgs=(call,))
        return self._answer(result, call)

    def _answer(self, result: Any, call: Call) -> SoapAnswer:
        if isinstance(result, Prebuilt):
            return SoapAnswer(200, result.body, call.operation, chunks=result.chunks)
        try:
            document = self._writer.write(call.operation, result)
        except Unwritable:
            document = self.render(call.operation, result)
        return SoapAnswer(200, document, call.operation, status=status_code(result), reason=status_text(result))

    def _failed(self, failure: Failure, call: Call) -> SoapAnswer | Failure:
        """A bug in an operation: a Server fault, never a crash."""
        if not failure.check(Exception):
            return failure
        return self.operation_failed(call.operation, failure.value, failure)

    def read(self, body: bytes) -> Call | None:
        """The call a request asks for, or None when spyne's cycle must answer it."""
        try:
            wrapper = operation_element(parse_envelope(body), self._namespace, self._operations)
        except Fault:
            return None
        if _special_attributes(wrapper):
            return None
        operation = wrapper.tag.rpartition("}")[2]  # qualified by operation_element
        signature = self._signatures[operation]
        elements: dict[str, etree._Element] = {}
        for child in wrapper:
            tag = child.tag
            if type(tag) is not str:
                continue  # a comment (processing instructions are dropped by the parser)
            name = tag.rpartition("}")[2]
            if name not in signature.names:
                continue  # spyne skips members the operation does not have
            if name in elements or _special_attributes(child, nil_allowed=True):
                return None  # a parameter twice is spyne's frequency fault
            elements[name] = child
        arguments = []
        normalised = False
        for name, kind, read in signature.parameters:
            child = elements.get(name)
            if child is None:
                arguments.append(None)
                continue
            value = SPYNE if read is None else read(child)
            if value is SPYNE:
                if not normalised:  # spyne reads enums by name (the fast readers know both)
                    normalise_enums(wrapper, operation)
                    normalised = True
                try:
                    value = self._protocol.from_element(None, kind, child)
                except Exception:  # a value spyne refuses: its fault
                    return None
            arguments.append(value)
        return Call(operation, signature.function, arguments)


def _special_attributes(element: etree._Element, nil_allowed: bool = False) -> bool:
    """Attributes spyne would read: unqualified ones (taken as members) and, where not allowed, ``xsi:nil``."""
    return any(not key.startswith("{") or (key == NIL and not nil_allowed) for key in element.attrib)
