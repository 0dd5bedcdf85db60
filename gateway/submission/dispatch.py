"""Running one request of the submission API's SOAP form through spyne, which generates that API's WSDL: bytes in,
(HTTP status, bytes) out.  (The Birdbath services, whose WSDLs are fixed, are served by ``codec``; the JSON form by
``jsonapi``, without spyne's protocols.)

spyne's own Twisted transport is not used: it mis-handles bytes on Python 3 (see ``compat``), parses every body
as a form, and hides the request/response cycle we need for logging.  This module drives spyne's
``ServerBase`` steps directly and awaits the coroutine each operation answers (``service.TABLE``).
"""

from __future__ import annotations

from typing import Any

from spyne import Application, Fault
from spyne.context import MethodContext
from spyne.server import ServerBase
from twisted.logger import Logger
from twisted.python.failure import Failure

from gateway.soap.answer import LOGGED_FAULT, SoapAnswer

from .compat import install as install_compat

log = Logger()


class SoapDispatcher:
    def __init__(self, application: Application) -> None:
        install_compat()
        self._server = ServerBase(application)

    async def dispatch(self, body: bytes, udc: Any) -> SoapAnswer:
        """The answer through spyne's whole request cycle (an operation answers a coroutine, awaited here)."""
        ctx = MethodContext(self._server, MethodContext.SERVER)
        ctx.in_string = [body]
        contexts = self._server.generate_contexts(ctx)
        p_ctx = contexts[0]
        p_ctx.udc = udc
        operation = _operation_name(p_ctx)
        if p_ctx.in_error is None:
            self._server.get_in_object(p_ctx)
        if p_ctx.in_error is not None:
            return self._fault(p_ctx, p_ctx.in_error, operation)
        self._server.get_out_object(p_ctx)
        if p_ctx.out_error is not None:
            return self._fault(p_ctx, p_ctx.out_error, operation)
        try:
            result = await p_ctx.out_object[0]
        except Exception as exc:  # noqa: BLE001 - a bug in an operation: a Server fault, never a crash
            p_ctx.close()
            return self.operation_failed(operation, exc)
        p_ctx.out_object = [result]
        self._server.get_out_string(p_ctx)
        answer = SoapAnswer(200, b"".join(p_ctx.out_string), operation, status=status_code(result),
                            reason=status_text(result))
        p_ctx.close()
        return answer

    def operation_failed(self, operation: str | None, exc: BaseException, failure: Failure | None = None) -> SoapAnswer:
        """The Server fault for an operation that raised (a bug: logged with its traceback, never a crash);
        ``failure`` is the exception's, outside the ``except`` block that caught it."""
        log.failure("operation {operation} failed", failure, operation=operation)
        return self._fault(MethodContext(self._server, MethodContext.SERVER),
                           Fault("Server", f"Internal error in {operation}: {exc}"), operation)

    def _fault(self, p_ctx: Any, fault: Exception, operation: str | None) -> SoapAnswer:
        if not isinstance(fault, Fault):
            fault = Fault("Server", str(fault))
        # gSOAP sent plain SOAP-ENV:Client / SOAP-ENV:Server; spyne adds subcodes ("Client.ValidationError")
        fault = Fault(fault.faultcode.split(".", 1)[0], fault.faultstring)
        described = f"{fault.faultcode}: {fault.faultstring}"[:LOGGED_FAULT]
        p_ctx.out_error = fault
        p_ctx.out_document = None
        p_ctx.out_string = None
        self._server.get_out_string(p_ctx)
        answer = SoapAnswer(500, b"".join(p_ctx.out_string), operation, fault=described)
        p_ctx.close()
        return answer


def _status_of(result: Any) -> Any:
    """The status element of an answer: its ``status`` member, or the answer itself for status-only operations."""
    return getattr(result, "status", None) or result


def status_code(result: Any) -> str | None:
    code = getattr(_status_of(result), "code", None)
    return None if code is None else str(getattr(code, "value", code))


def status_text(result: Any) -> str | None:
    """Birdbath's ``Status.message`` or the submission API's ``status.text``."""
    status = _status_of(result)
    return getattr(status, "message", None) or getattr(status, "text", None)


def _operation_name(ctx: Any) -> str | None:
    name = getattr(ctx, "method_request_string", None)
    return name.rsplit("}", 1)[-1] if name else None
