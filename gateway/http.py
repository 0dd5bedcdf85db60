"""The HTTP face of the gateway: one twisted.web resource for every path.

POST (any path, any SOAPAction, HTTP/1.0 or 1.1, chunked or not) is SOAP; GET ``/condorSchedd.wsdl`` or any
``?wsdl`` serves the WSDL with this server's address (``/condorCollector.wsdl`` the collector's).  The same site serves the plain port and the SSL port.
Peers outside ``allow_soap`` are closed when accepted, and requests too slow to arrive are cut off
(:mod:`gateway.connections`); bodies over the size cap are refused while they arrive; then the caller is
identified (:mod:`gateway.identity.callers`: the owner of a local peer's socket, worked out when its connection is
accepted, the client certificate's mapped user, or HTTP Basic over TLS), and a caller refused there gets 401, 403 or
429 (:mod:`gateway.identity.throttle`) with the
reason in the endpoint's own form (a SOAP fault, or the JSON API's status).  Every request is logged with its
operation, client, status (with the reason of a FAIL), duration and who the caller was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Iterator
from xml.sax.saxutils import escape

from OpenSSL import SSL
from twisted.internet.address import UNIXAddress
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IProtocolNegotiationFactory, IPullProducer, ISSLTransport, ITransport
from twisted.logger import Logger
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory
from twisted.python.failure import Failure
from twisted.web import resource, server
from zope.interface import implementer

from gateway.connections import DEFAULT_DEADLINES, DeadlineChannel, RequestDeadlines
from gateway.core.auth import LOCAL_SOCKET_HOST, Caller
from gateway.identity.callers import Connection, Identification, Refusal, describe
from gateway.identity.tls import openssl_reason, peer_certificate
from gateway.soap.answer import Dispatcher, SoapAnswer, started
from gateway.soap.jsonapi import fail_document
from gateway.soap.wsdl import PublishedWsdl

log = Logger(namespace="birdbath.request")

XML = b"text/xml; charset=utf-8"

#: the status code, the same in both APIs, that needs its text to mean anything in the request log
FAIL = "FAIL"

FAULT = (b'<?xml version="1.0" encoding="UTF-8"?>\n<SOAP-ENV:Envelope '
         b'xmlns:SOAP-ENV="http://schemas.xmlsoap.org/soap/envelope/"><SOAP-ENV:Body><SOAP-ENV:Fault>'
         b"<faultcode>SOAP-ENV:Client</faultcode><faultstring>%s</faultstring></SOAP-ENV:Fault></SOAP-ENV:Body>"
         b"</SOAP-ENV:Envelope>")


def fault_document(message: str) -> bytes:
    return FAULT % escape(message).encode("utf-8")


class GatewayRequest(server.Request):
    """A request that refuses oversized bodies before buffering them, and knows its caller (``caller``) or why it
    has none (``refusal``) before the resource sees it."""

    max_body: int = 16 * 1024 * 1024
    identification: Identification = Identification()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._received = 0
        self._refused = False
        self.caller: Caller | None = None
        self.refusal: Refusal | None = None

    @property
    def client_host(self) -> str:
        """The peer's address (``localhost`` on the local socket)."""
        return self.connection().peer_host

    def gotLength(self, length: int | None) -> None:
        if length is not None and length > self.max_body:
            self._refuse_size()
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self._refused:
            return
        self._received += len(data)
        if self._received > self.max_body:
            self._refuse_size()
            return
        super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if self._refused:
            return
        super().requestReceived(command, path, version)

    def process(self) -> None:
        """Identify the caller (a password check runs off the reactor thread), then serve the request."""
        try:
            identified = started(self.identification.caller(self.connection(), self.getHeader(b"authorization")))
        except Exception:
            self._not_identified(Failure())
            return
        if isinstance(identified, Deferred):
            identified.addCallbacks(self._identified, self._not_identified)
        else:
            self._identified(identified)

    def connection(self) -> Connection:
        """What this request's connection says about the client: worked out when a plain or local-socket connection
        was accepted (:class:`GatewayChannel`), at the first request of a TLS one (its certificate is known once
        the handshake is done)."""
        channel = self.channel
        known = getattr(channel, "birdbath_connection", None)
        if known is None:
            known = channel.birdbath_connection = connection_of(channel.transport)
        return known

    def _identified(self, caller: Caller) -> None:
        self.caller = caller
        self._serve()

    def _not_identified(self, failure: Failure) -> None:
        if failure.check(Refusal):
            self.refusal = failure.value
        else:
            log.failure("identifying a caller failed", failure)
            self.refusal = Refusal(500, "Internal server error")
        self._serve()

    def _serve(self) -> None:
        if not self._disconnected:
            super().process()

    def _refuse_size(self) -> None:
        self._refuse(413, b"Request Entity Too Large",
                     f"Request body larger than the gateway's limit of {self.max_body} bytes (max_request_bytes)")

    def _refuse(self, code: int, phrase: bytes, message: str) -> None:
        """Answer at once and close the connection (the body is not read, so it cannot be answered politely)."""
        if self._refused:
            return
        self._refused = True
        body = fault_document(message)
        log.warn("refused request from {client}: {message}", client=self.client_host or "?", message=message)
        self.channel.transport.write(
            b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
            % (code, phrase, XML, len(body), body))
        self.channel.loseConnection()


@dataclass
class Endpoint:
    """One service of the site: requests whose path starts with ``prefix`` (the empty prefix takes the rest)."""

    prefix: bytes
    dispatcher: Dispatcher
    context_for: Callable[[Caller], Any]
    wsdl: PublishedWsdl | None = None
    wsdl_name: bytes = b""
    content_type: bytes = XML
    #: turns (path below the prefix, body) into what the dispatcher reads; None = the body as it is
    body_for: Callable[[bytes, bytes], bytes] | None = None

    def matches(self, path: bytes) -> bool:
        return path == self.prefix or path.startswith(self.prefix + b"/") or not self.prefix


class GatewayResource(resource.Resource):
    isLeaf = True

    #: how many request paths the resource remembers the endpoint of (clients use a handful; any path is valid)
    KNOWN_PATHS = 256

    def __init__(self, endpoints: list[Endpoint], clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._endpoints = endpoints
        self._clock = clock
        self._by_path: dict[bytes, Endpoint] = {}

    def _endpoint(self, request: server.Request) -> Endpoint:
        """The endpoint serving the request's path, remembered for the first paths seen (matching the prefixes
        again cost a small request several per cent of its time)."""
        path = request.path
        endpoint = self._by_path.get(path)
        if endpoint is None:
            stripped = path.rstrip(b"/")
            endpoint = next(endpoint for endpoint in self._endpoints if endpoint.matches(stripped))
            if len(self._by_path) < self.KNOWN_PATHS:
                self._by_path[path] = endpoint
        return endpoint

    def render_GET(self, request: GatewayRequest) -> bytes:
        path = request.path.rstrip(b"/").rsplit(b"/", 1)[-1]
        # a WSDL asked for by its file name (condorCollector.wsdl) is its service's, whatever the path before it
        endpoint = next((endpoint for endpoint in self._endpoints if endpoint.wsdl is not None
                         and path == endpoint.wsdl_name), None) or self._endpoint(request)
        if request.refusal is not None:
            return self._refuse(request, endpoint, request.refusal)
        wants_wsdl = path == endpoint.wsdl_name or (request.args is not None and b"wsdl" in request.args) \
            or request.uri.lower().endswith(b"?wsdl")
        if endpoint.wsdl is None or not wants_wsdl:
            request.setResponseCode(404)
            request.setHeader(b"content-type", b"text/plain; charset=utf-8")
            return (b"Not found. WSDLs: GET /condorSchedd.wsdl (or /?wsdl), /condorCollector.wsdl and "
                    b"/submission?wsdl; "
                    b"POST SOAP requests to any path, JSON to /submission/json/<operation>.\n")
        request.setHeader(b"content-type", XML)
        log.info("GET {path} (WSDL) from {client} ({who})", path=request.uri.decode("latin-1"),
                 client=request.client_host, who=describe(request.caller))
        return endpoint.wsdl.render(_base_url(request) + endpoint.prefix.decode().lstrip("/"))

    def render_HEAD(self, request: GatewayRequest) -> bytes:
        return self.render_GET(request)

    def render_POST(self, request: GatewayRequest) -> int | bytes:
        started = self._clock()
        endpoint = self._endpoint(request)
        if request.refusal is not None:
            return self._refuse(request, endpoint, request.refusal)
        caller = request.caller
        udc = endpoint.context_for(caller)
        body = request.content.read() if request.content is not None else b""
        if endpoint.body_for is not None:
            operation = request.path[len(endpoint.prefix):].strip(b"/")
            try:
                body = endpoint.body_for(operation, body)
            except ValueError as exc:
                code = getattr(exc, "http_status", 400)  # 404: a JSON path that names no operation
                reason = f"Bad request: {exc}" if code == 400 else str(exc)
                self._log_request(operation.decode("latin-1") or "-", caller, FAIL, reason, started)
                request.setResponseCode(code)
                request.setHeader(b"content-type", endpoint.content_type)
                return fail_document(reason)
        try:
            answer = endpoint.dispatcher.dispatch(body, udc)
            if not isinstance(answer, Deferred):
                self._respond(answer, request, endpoint, udc, caller, started)
                return server.NOT_DONE_YET
        except Exception:
            self._crashed(Failure(), request, caller)
            return server.NOT_DONE_YET
        answer.addCallback(self._respond, request, endpoint, udc, caller, started)
        answer.addErrback(self._crashed, request, caller)
        return server.NOT_DONE_YET

    def _respond(self, answer: SoapAnswer, request: server.Request, endpoint: Endpoint, udc: Any, caller: Caller,
                 started: float) -> None:
        status = getattr(udc, "status", None)
        outcome = answer.fault or answer.status or getattr(getattr(status, "code", status), "value", status) or "?"
        logged = partial(self._log_request, answer.operation or "-", caller, outcome, answer.reason, started)
        if request.finished or request._disconnected:
            logged()
            return
        request.setResponseCode(answer.code)
        request.setHeader(b"content-type", endpoint.content_type)
        if answer.chunks is not None:
            StreamedBody(request, answer.chunks, logged).start()
            return
        logged()
        request.write(answer.body)
        request.finish()

    def _log_request(self, operation: str, caller: Caller, outcome: str, reason: str | None,
                     started: float) -> None:
        """One line per request; a FAIL says why, since that code alone explains nothing (the other codes name
        the problem, and keep their text in the event's ``reason`` field)."""
        fields = {"operation": operation, "client": caller.host, "outcome": outcome, "reason": reason,
                  "ms": (self._clock() - started) * 1000, "who": describe(caller), "user": caller.user,
                  "authentication": caller.authentication.value}
        if outcome == FAIL and reason:
            log.info("{operation} from {client}: {outcome} in {ms:.1f} ms ({who}): {reason}", **fields)
        else:
            log.info("{operation} from {client}: {outcome} in {ms:.1f} ms ({who})", **fields)

    def _refuse(self, request: GatewayRequest, endpoint: Endpoint, refusal: Refusal) -> bytes:
        """Answer a caller refused for who it is (or is not), in the endpoint's own form."""
        log.warn("{method} {path} from {client} refused ({code}): {message}", method=request.method.decode("latin-1"),
                 path=request.path.decode("latin-1"), client=request.client_host,
                 code=refusal.code, message=refusal.message)
        request.setResponseCode(refusal.code)
        if refusal.challenge:
            request.setHeader(b"www-authenticate", b'Basic realm="birdbath", charset="UTF-8"')
        if refusal.retry_after is not None:
            request.setHeader(b"retry-after", b"%d" % refusal.retry_after)
        if endpoint.content_type == XML:
            request.setHeader(b"content-type", XML)
            return fault_document(refusal.message)
        request.setHeader(b"content-type", endpoint.content_type)
        return fail_document(refusal.message)

    def _crashed(self, failure: Any, request: server.Request, caller: Caller) -> None:
        log.failure("unhandled error answering {client}", failure, client=caller.host)
        if request.finished or request._disconnected:
            return
        request.setResponseCode(500)
        request.setHeader(b"content-type", XML)
        request.write(fault_document("Internal server error"))
        request.finish()


@implementer(IPullProducer)
class StreamedBody:
    """A streamed answer written a piece at a time, each when the connection has sent the one before (a pull
    producer): the whole answer is never in memory, and other requests are served between pieces.  Without a
    Content-Length, twisted frames it with chunked encoding (HTTP/1.1) or closes the connection after it (1.0).
    ``done`` runs once it is all written (or the client went away)."""

    def __init__(self, request: server.Request, chunks: Iterator[bytes], done: Callable[[], None]) -> None:
        self._request = request
        self._chunks = chunks
        self._done: Callable[[], None] | None = done

    def start(self) -> None:
        self._request.registerProducer(self, False)

    def resumeProducing(self) -> None:
        try:
            chunk = next(self._chunks)
        except StopIteration:
            self._request.unregisterProducer()
            self._request.finish()
            self._finished()
            return
        except Exception:  # a bug while writing: the status line is sent, so the answer can only be cut short
            log.failure("writing a streamed answer failed")
            self._request.unregisterProducer()
            self._request.channel.loseConnection()
            self._finished()
            return
        self._request.write(chunk)

    def stopProducing(self) -> None:
        """The client went away: the rest is never made."""
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()
        self._finished()

    def _finished(self) -> None:
        done, self._done = self._done, None
        if done is not None:
            done()


def _base_url(request: server.Request) -> str:
    host = request.getHeader(b"host")
    if not host:
        address = request.getHost()
        host = f"{address.host}:{address.port}".encode()
    scheme = b"https" if request.isSecure() else b"http"
    return (scheme + b"://" + host + b"/").decode("latin-1")


def connection_of(transport: ITransport) -> Connection:
    """What a transport says about its client: its addresses, and its certificate on TLS."""
    peer, local = transport.getPeer(), transport.getHost()
    if isinstance(peer, UNIXAddress):
        return Connection(False, LOCAL_SOCKET_HOST, 0, "", 0, unix=True)
    secure = ISSLTransport(transport, None) is not None
    return Connection(secure, getattr(peer, "host", ""), getattr(peer, "port", 0), getattr(local, "host", ""),
                      getattr(local, "port", 0), peer_certificate(transport) if secure else None)


class GatewayChannel(DeadlineChannel):
    """An HTTP connection whose plain or local-socket peer is identified the moment it is accepted, before anything
    it sends is read (:meth:`Identification.accepted`)."""

    def connectionMade(self) -> None:
        super().connectionMade()
        if ISSLTransport(self.transport, None) is None:
            connection = connection_of(self.transport)
            self.site.identification.accepted(connection, getattr(self.transport, "socket", None))
            self.birdbath_connection = connection


class GatewaySite(server.Site):
    """A Site whose requests carry the size cap and the caller's identification, on channels that give each
    request's headers and body a deadline (``reactor``: twisted's, or a Clock in tests)."""

    def __init__(self, root: resource.Resource, *, max_body: int, identification: Identification,
                 deadlines: RequestDeadlines = DEFAULT_DEADLINES, reactor: Any = None) -> None:
        # bodies are SOAP or JSON, never forms: twisted would parse a form body into request.args (multipart ones in
        # memory), and works out every request's Content-Type with the email package, at a cost as large as a
        # short request's whole answer
        super().__init__(root, parsePOSTFormSubmission=False, reactor=reactor)
        self.identification = identification
        self.requestFactory = type("Request", (GatewayRequest,), {"max_body": max_body,
                                                                 "identification": identification})
        self.deadlines = deadlines
        self.noisy = False

    def protocol(self) -> GatewayChannel:  # type: ignore[override]
        return GatewayChannel(self.deadlines)

    def acceptableProtocols(self) -> list[bytes]:
        """HTTP/1.1 only: the deadlines are the HTTP/1.1 channel's."""
        return [b"http/1.1"]

    def log(self, request: server.Request) -> None:
        """Requests are logged by the resource, with their SOAP operation; no access log line twice."""


class _HandshakeLogging(ProtocolWrapper):
    def connectionLost(self, reason: Failure) -> None:  # type: ignore[override]
        if reason.check(SSL.Error):
            log.info("TLS connection from {client} failed: {reason}", client=getattr(self.getPeer(), "host", "?"),
                     reason=openssl_reason(reason.value))
        super().connectionLost(reason)


@implementer(IProtocolNegotiationFactory)
class HandshakeLogging(WrappingFactory):
    """The SSL port's factory: the site's, plus a log line when a TLS connection fails (no client certificate, one
    from an unknown authority or expired...), which the client alone would otherwise know about.

    It offers the site's protocols for ALPN (``http/1.1``): a TLS factory that offers none fails every client
    that asks (urllib3 and curl do)."""

    protocol = _HandshakeLogging
    noisy = False

    def acceptableProtocols(self) -> list[bytes]:
        return self.wrappedFactory.acceptableProtocols()
