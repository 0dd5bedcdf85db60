"""One Birdbath service on the wire: a request read by its :class:`~gateway.soap.contract.Contract`, handed to the
operation's handler, and its answer written by the same contract, in gSOAP's shape (only the body's answer element
qualified, ``tns:<operation>Response``; every descendant unqualified).

A request that cannot be read (malformed XML, a DTD, not a SOAP 1.1 envelope, an operation the service does not
have, a value its type refuses) is a Client fault saying why; a handler that raises (a bug) is a Server fault, logged
with its traceback, never a crash.  A handler answers a value for its contract's answer type (a mapping for a
structure), or a :class:`~gateway.soap.answer.Prebuilt` document (job and machine ads, written by ``adwriter``
around an envelope cut from this codec's own: :meth:`ContractService.split`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping

from lxml import etree
from twisted.logger import Logger
from twisted.python.failure import Failure

from .answer import LOGGED_FAULT, Prebuilt, SoapAnswer, SplitAnswer
from .contract import Contract, Operation
from .protocol import BODY, SOAP_ENV, parse_envelope
from .xsd import NIL, WireFault, element, escape, read_element

log = Logger()

#: an operation's handler: the caller's context and the parameters present (by their wire names) -> its answer (a
#: coroutine: see ``gateway.maybe``)
Handler = Callable[[Any, Mapping[str, Any]], Awaitable[Any]]

_DECLARATION = "<?xml version='1.0' encoding='UTF-8'?>\n"
_FAULT = (_DECLARATION + f'<soap11env:Envelope xmlns:soap11env="{SOAP_ENV}"><soap11env:Body><soap11env:Fault>'
          "<faultcode>soap11env:{code}</faultcode><faultstring>{text}</faultstring><faultactor></faultactor>"
          "</soap11env:Fault></soap11env:Body></soap11env:Envelope>")


def fault_document(text: str, code: str = "Client") -> bytes:
    """A SOAP 1.1 fault, the one template of the gateway: the codec's answers to what it cannot read or run, and the
    transport's own (a request too large, too slow, or failing in the transport) alike."""
    return _FAULT.format(code=code, text=escape(text)).encode("utf-8")


def operation_element(envelope: etree._Element, namespace: str, operations: Mapping[str, Any]) -> etree._Element:
    """The body's operation element: a Client fault when the envelope is not SOAP 1.1, has no body, or names an
    operation the service does not have (an unqualified name is the service's, as gSOAP matched it)."""
    if envelope.tag != f"{{{SOAP_ENV}}}Envelope":
        raise WireFault(f"Not a SOAP 1.1 envelope: root element is {envelope.tag}")
    body = next((child for child in envelope if child.tag == BODY), None)
    if body is None or len(body) == 0:
        raise WireFault("The SOAP envelope has no Body, or an empty one")
    wrapper = body[0]
    qname = etree.QName(wrapper)
    if qname.localname not in operations or qname.namespace not in (None, namespace):
        raise WireFault(f"Method '{qname.localname}' not implemented: method name or namespace not recognized")
    return wrapper


@dataclass(frozen=True)
class Call:
    """A request read: its operation and the parameters it holds."""

    operation: Operation
    arguments: dict[str, Any]


class ContractService:
    """A contract's operations served by their handlers (one per operation, checked at start-up)."""

    def __init__(self, contract: Contract, handlers: Mapping[str, Handler]) -> None:
        missing = set(contract.operations) ^ set(handlers)
        if missing:
            raise ValueError(f"{contract.service}: operations and handlers differ: {sorted(missing)}")
        self.contract = contract
        self._handlers = handlers
        self._envelopes = {name: (_DECLARATION + f'<soap11env:Envelope xmlns:soap11env="{SOAP_ENV}" '
                                  f'xmlns:tns="{contract.namespace}"><soap11env:Body><tns:{operation.response}>',
                                  f"</tns:{operation.response}></soap11env:Body></soap11env:Envelope>")
                           for name, operation in contract.operations.items()}

    # -- the wire ---------------------------------------------------------------------------------------------
    def read(self, body: bytes) -> Call:
        """The call a request asks for; :class:`WireFault` when it cannot be read."""
        wrapper = operation_element(parse_envelope(body), self.contract.namespace, self.contract.operations)
        if wrapper.get(NIL):
            raise WireFault(f"The operation element {etree.QName(wrapper).localname} is nil")
        operation = self.contract.operations[etree.QName(wrapper).localname]
        try:
            return Call(operation, read_element(operation.parameters, wrapper, body))
        except WireFault as exc:
            exc.operation = operation.name
            raise

    def write(self, operation: str, value: Any) -> bytes:
        """The answer document of ``operation`` holding ``value``."""
        found = self.contract.operations[operation]
        head, tail = self._envelopes[operation]
        if found.answer_name is None:
            return (head + (found.answer.write(value) or "") + tail).encode("utf-8")
        return (head + element(found.answer_name, found.answer.write(value)) + tail).encode("utf-8")

    def split(self, operation: str, value: Any, member: str) -> SplitAnswer:
        """An answer of ``operation`` cut where its (empty) ``member`` is, for answers written around it."""
        return SplitAnswer.around(self.write(operation, value), member)

    # -- serving ------------------------------------------------------------------------------------------------
    async def dispatch(self, body: bytes, udc: Any) -> SoapAnswer:
        try:
            call = self.read(body)
        except WireFault as exc:
            return _fault(exc.code, exc.message, exc.operation)
        name = call.operation.name
        try:
            result = await self._handlers[name](udc, call.arguments)
        except Exception as exc:  # noqa: BLE001 - a bug in a handler: a Server fault, never a crash
            return _failed(name, exc, Failure())
        return self._answer(result, name)

    def _answer(self, result: Any, operation: str) -> SoapAnswer:
        if isinstance(result, Prebuilt):
            return SoapAnswer(200, result.body, operation, chunks=result.chunks)
        status = result.get("status", result) if isinstance(result, Mapping) else None
        code = None if status is None else status.get("code")
        return SoapAnswer(200, self.write(operation, result), operation,
                          status=None if code is None else str(getattr(code, "value", code)),
                          reason=None if status is None else status.get("message"))


def _fault(code: str, text: str, operation: str | None) -> SoapAnswer:
    return SoapAnswer(500, fault_document(text, code), operation, fault=f"{code}: {text}"[:LOGGED_FAULT])


def _failed(operation: str, exc: BaseException, failure: Failure) -> SoapAnswer:
    """The Server fault for an operation that raised (a bug: logged with its traceback, never a crash)."""
    log.failure("operation {operation} failed", failure, operation=operation)
    return _fault("Server", f"Internal error in {operation}: {exc}", operation)
