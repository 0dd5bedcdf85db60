"""A SOAP service as the site serves it: the resource at its path, which hands a POST's body to the service's
dispatcher and publishes its WSDL; the transport (:mod:`gateway.http`) knows none of it, a front end mounts it
(:func:`publish`).

gSOAP's servers answered every path: a :class:`SoapResource` takes its path and every path below it, and a GET of a
WSDL's file name at the end of any path is that WSDL (the tree's ``documents``, :class:`gateway.routes.Routes`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twisted.web import resource, server

from gateway.core.auth import Caller
from gateway.http import Answering, GatewayRequest, base_url, document_by_name, not_found
from gateway.routes import Routes

from .answer import Dispatcher
from .codec import fault_document
from .wsdl import PublishedWsdl, wsdl_path

XML = b"text/xml; charset=utf-8"

#: the local name of a SOAP body's first element (comments or processing instructions before it: not recognised)
_FIRST_IN_BODY = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?Body\b[^>]*>\s*<(?:[A-Za-z_][\w.-]*:)?([A-Za-z_][\w.-]*)")


def operation_of(body: bytes) -> str | None:
    """The operation a SOAP request names, read from the first bytes after ``<...:Body ...>`` without parsing the
    document (the schedd's requests must not pay for a second parse); None when it cannot be read so."""
    found = _FIRST_IN_BODY.search(body)
    return found.group(1).decode("ascii") if found else None


@dataclass(frozen=True)
class Service:
    """A SOAP front end as the tree serves it: its dispatcher, and how it makes a request's context from the
    caller."""

    dispatcher: Dispatcher
    context_for: Callable[[Caller], Any]


class SoapResource(Answering):
    """A SOAP service at a path and every path below it: POST is an operation; GET with ``?wsdl``, or of its WSDL's
    file name, is the WSDL, its address set to the one the client used.

    ``service`` picks the front end for a request's body (the schedd or the collector, on a port both share).  A
    GET whose last segment names another service's WSDL (``/x/condorCollector.wsdl``) is that service's:
    ``documents``, the tree's table of them, shared by its resources."""

    def __init__(self, service: Callable[[bytes], Service], wsdl: PublishedWsdl | None = None, location: str = "",
                 file_name: bytes = b"", documents: dict[bytes, resource.Resource] | None = None) -> None:
        super().__init__()
        self.service = service
        self.wsdl = wsdl
        self.location = location
        self.file_name = file_name
        self.documents = {} if documents is None else documents

    content_type = XML

    def refusal(self, message: str) -> bytes:
        """A refusal as a SOAP fault (the codec's)."""
        return fault_document(message)

    def getChild(self, path: bytes, request: server.Request) -> resource.Resource:
        """Any path below is this service's, but a WSDL's file name that ends the path (GET only)."""
        return document_by_name(self.documents, path, request) or self

    def render_GET(self, request: GatewayRequest) -> bytes:
        if request.refusal is not None:
            return self.refuse(request, request.refusal)
        last = request.path.rstrip(b"/").rsplit(b"/", 1)[-1]
        wants_wsdl = last == self.file_name or (request.args is not None and b"wsdl" in request.args) \
            or request.uri.lower().endswith(b"?wsdl")
        if self.wsdl is None or not wants_wsdl:
            return not_found(request)
        request.setHeader(b"content-type", XML)
        return self.wsdl.render(base_url(request) + self.location)

    def render_POST(self, request: GatewayRequest) -> int | bytes:
        if request.refusal is not None:
            return self.refuse(request, request.refusal)
        body = request.content.read() if request.content is not None else b""
        service = self.service(body)
        context = service.context_for(request.caller)
        return self.answer_with(service.dispatcher.dispatch(body, context), request, context)


def publish(routes: Routes, path: str, service: Callable[[bytes], Service], wsdl: str | None = None) -> SoapResource:
    """A SOAP service at ``path`` and below it (``""``: the tree's fallback, every path no other resource holds);
    ``wsdl``, a file of ``wsdl/``, is published at ``?wsdl`` and by its file name anywhere in the tree."""
    served = SoapResource(service, PublishedWsdl(wsdl_path(wsdl)) if wsdl else None, path.strip("/"),
                          wsdl.encode() if wsdl else b"", routes.documents)
    if wsdl:
        routes.documents[served.file_name] = served
        routes.signposts.append(f"GET /{wsdl} (or /{served.location}?wsdl)")
    if path.strip("/"):
        routes.mount(path, served)
        routes.signposts.append(f"POST SOAP requests to /{served.location}")
    else:
        routes.fallback = served
        routes.signposts.append("POST SOAP requests to any path")
    return served
