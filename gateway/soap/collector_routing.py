"""One port for both services: a request whose body names a collector-only operation goes to condorCollector, every
other request to condorSchedd.

gSOAP dispatched on the name of the body's first element and ignored the path, so a legacy collector client pointed
at the gateway's port (any path) is answered as the collector would.  The name is read from the first bytes after
``<...:Body ...>`` without parsing the document (the schedd's requests must not pay for a second parse); whatever
cannot be read so goes to the schedd, which answers it as it always did.  getVersionString and getPlatformString
are the schedd's here; on the collector's own port (``collector_port``) every operation is the collector's.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from gateway.core.auth import Caller

from .answer import Dispatcher, Maybe, SoapAnswer, then
from .collector import COLLECTOR_ONLY

#: the local name of the body's first element (comments or processing instructions before it: not recognised)
_FIRST_IN_BODY = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?Body\b[^>]*>\s*<(?:[A-Za-z_][\w.-]*:)?([A-Za-z_][\w.-]*)")


def operation_of(body: bytes) -> str | None:
    found = _FIRST_IN_BODY.search(body)
    return found.group(1).decode("ascii") if found else None


class ByOperation:
    """Hands each request to the schedd's dispatcher or, for a collector-only operation, to the collector's with a
    context of its own (made by ``collector_context`` from the caller of the schedd's context)."""

    def __init__(self, schedd: Dispatcher, collector: Dispatcher,
                 collector_context: Callable[[Caller], Any]) -> None:
        self._schedd = schedd
        self._collector = collector
        self._collector_context = collector_context

    def dispatch(self, body: bytes, udc: Any) -> Maybe[SoapAnswer]:
        if operation_of(body) not in COLLECTOR_ONLY:
            return self._schedd.dispatch(body, udc)
        context = self._collector_context(udc.caller)
        return then(self._collector.dispatch(body, context), with_status, context)


def with_status(answer: SoapAnswer, context: Any) -> SoapAnswer:
    """The answer with the status its context recorded, for the request log (a query's answer carries none)."""
    status = getattr(context, "status", None)
    if answer.fault is None and answer.status is None and status is not None:
        answer.status = status.code.value
        answer.reason = status.message
    return answer


class CollectorOnly:
    """The collector's own port (``collector_port``): every request is the collector's, as on a real collector."""

    def __init__(self, collector: Dispatcher) -> None:
        self._collector = collector

    def dispatch(self, body: bytes, udc: Any) -> Maybe[SoapAnswer]:
        return then(self._collector.dispatch(body, udc), with_status, udc)
