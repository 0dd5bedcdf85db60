"""The HTTP face of the gateway: its site, its requests, the answering resource every front end's answers go
through (:class:`Answering`) and the segments of a tree (:class:`Branch`; the tree is :mod:`gateway.routes`, which
the front ends fill).  It knows no protocol: a front end hands it an :class:`Answer`
(``tests/test_architecture.py`` keeps it importing none of their rooms).

Peers outside ``allow_soap`` are closed when accepted, and requests too slow to arrive are cut off
(:mod:`gateway.connections`); bodies over the size cap are refused while they arrive; then the caller is
identified (:mod:`gateway.identity.callers`: the owner of a local peer's socket, worked out when its connection is
accepted, the client certificate's mapped user, or HTTP Basic over TLS), and a caller refused there gets 401, 403 or
429 (:mod:`gateway.identity.throttle`) with the reason in the resource's own form (a SOAP fault, or the JSON API's
status).  twisted.web then finds the resource by the path (``getChildForRequest``) and renders it.

Every request is written to the access log by twisted.web itself when it finishes (:meth:`GatewaySite.log`), the
line made by :func:`request_line` (an ``IAccessLogFormatter``): the operation, client, outcome (with the reason of
a FAIL), duration and who the caller was.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from OpenSSL import SSL
from twisted.internet.address import UNIXAddress
from twisted.internet.interfaces import IProtocolNegotiationFactory, IPullProducer, ISSLTransport, ITransport
from twisted.logger import Logger, LogLevel
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory
from twisted.python.failure import Failure
from twisted.web import resource, server
from twisted.web.iweb import IAccessLogFormatter
from zope.interface import implementer, provider

from gateway.connections import DEFAULT_DEADLINES, DeadlineChannel, RequestDeadlines, admitted_owner
from gateway.core.auth import LOCAL_SOCKET_HOST, Caller
from gateway.identity.callers import Connection, Identification, Refusal, describe
from gateway.identity.tls import openssl_reason, peer_certificate
from gateway.logging import AccessLog, log_time
from gateway.maybe import settle

log = Logger(namespace="birdbath.request")

#: the form of a refusal or a 404 where no front end gives one
TEXT = b"text/plain; charset=utf-8"

#: the status code, the same in both APIs, that needs its text to mean anything in the request log
FAIL = "FAIL"

@dataclass(frozen=True)
class RequestOutcome:
    """What an operation's answer said, for the access log: the operation, its status or fault, and why."""

    operation: str
    outcome: str
    reason: str | None = None


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
        #: when the request was served (its body read and its caller identified), for the access log
        self.started = 0.0
        #: what an operation answered (None: the request was no operation, e.g. a WSDL)
        self.outcome: RequestOutcome | None = None
        self.access_logged = False

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
        settle(self.identification.caller(self.connection(), self.getHeader(b"authorization")), self._identified,
               self._not_identified)

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
            self.started = time.monotonic()
            super().process()

    def cut_short(self) -> None:
        """The client went away before the answer was written: twisted.web logs a request when it finishes, so this
        one is logged here (once)."""
        site = getattr(self, "site", None)
        if site is not None and not self.finished:
            site.log(self)

    def _refuse_size(self) -> None:
        self._refuse(413, b"Request Entity Too Large",
                     f"Request body larger than the gateway's limit of {self.max_body} bytes (max_request_bytes)")

    def _refuse(self, code: int, phrase: bytes, message: str) -> None:
        """Answer at once and close the connection (the body is not read, so it cannot be answered politely)."""
        if self._refused:
            return
        self._refused = True
        content_type, body = refusal_in_form(self.channel.site.resource, message)
        log.warn("refused request from {client}: {message}",  # twisted's Logger has no warning()
                 client=self.client_host or "?", message=message)
        self.channel.transport.write(
            b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
            % (code, phrase, content_type, len(body), body))
        self.channel.loseConnection()


class Answer(Protocol):
    """What a front end answers a request with, as the transport writes it (the SOAP codec's ``SoapAnswer``, the
    JSON form's): the HTTP status and body (or its pieces, streamed), and for the access log the operation, its
    fault or status, and why."""

    code: int
    body: bytes
    operation: str | None
    fault: str | None
    status: str | None
    reason: str | None
    chunks: Iterator[bytes] | None


def refused(request: server.Request, refusal: Refusal) -> None:
    """The status and headers of an answer to a caller refused for who it is, in every front end's form: the
    ``WWW-Authenticate`` challenges of the ways it may try again, and ``Retry-After`` during a login penalty."""
    request.setResponseCode(refusal.code)
    for challenge in refusal.challenges():
        request.responseHeaders.addRawHeader(b"www-authenticate", challenge)
    if refusal.retry_after is not None:
        request.setHeader(b"retry-after", b"%d" % refusal.retry_after)


class Answering(resource.Resource):
    """A resource that answers with a front end's answers (:class:`Answer`), in its own form (``content_type``, and
    :meth:`refusal` for what it refuses): a caller refused when identified is answered here, and each answer records
    the request's outcome for the access log."""

    content_type = TEXT

    def render_GET(self, request: GatewayRequest) -> bytes:
        if request.refusal is not None:
            return self.refuse(request, request.refusal)
        return not_found(request)

    def render_HEAD(self, request: GatewayRequest) -> bytes:
        return self.render_GET(request)

    def refusal(self, message: str) -> bytes:
        """The body of a refusal in this resource's form (a front end's: a SOAP fault, the JSON API's FAIL status;
        here, of no protocol, the text)."""
        return text_refusal(message)

    def refuse(self, request: GatewayRequest, refusal: Refusal) -> bytes:
        """Answer a caller refused for who it is (or is not), in this resource's own form."""
        log.warn("{method} {path} from {client} refused ({code}): {message}",  # twisted's Logger
                 method=request.method.decode("latin-1"), path=request.path.decode("latin-1"),
                 client=request.client_host, code=refusal.code, message=refusal.message)
        refused(request, refusal)
        request.setHeader(b"content-type", self.content_type)
        return self.refusal(refusal.message)

    def answer_with(self, answer: Coroutine[Any, Any, Answer], request: GatewayRequest, context: Any) -> int:
        """Write the answer, at once when it comes without waiting (``gateway.maybe``)."""
        settle(answer, lambda made: self._respond(made, request, context),
               lambda failure: self._crashed(failure, request))
        return server.NOT_DONE_YET

    def _respond(self, answer: Answer, request: GatewayRequest, context: Any) -> None:
        outcome, reason = answer.fault or answer.status, answer.reason
        status = getattr(context, "status", None)  # the status the operation recorded, when its answer has none
        if outcome is None and status is not None:
            outcome = getattr(getattr(status, "code", status), "value", status)
            reason = getattr(status, "message", None) or reason
        request.outcome = RequestOutcome(answer.operation or "-", str(outcome or "?"), reason)
        if request.finished or request._disconnected:
            request.cut_short()
            return
        request.setResponseCode(answer.code)
        request.setHeader(b"content-type", self.content_type)
        if answer.chunks is not None:
            StreamedBody(request, answer.chunks).start()
            return
        write_whole(request, answer.body)

    def _crashed(self, failure: Failure, request: GatewayRequest) -> None:
        log.failure("unhandled error answering {client}", failure, client=request.client_host)
        if request.finished or request._disconnected:
            request.cut_short()
            return
        request.setResponseCode(500)
        request.setHeader(b"content-type", self.content_type)
        write_whole(request, self.refusal("Internal server error"))


class Branch(resource.Resource):
    """A path segment that holds resources (``putChild``) and leaves every other name below it, and itself, to its
    tree's fallback (:attr:`gateway.routes.Routes.fallback`): the site's root, and the segments on the way to a
    resource mounted deeper (:meth:`gateway.routes.Routes.mount`).  A GET whose last segment is one of the tree's
    documents by file name (``documents``: a WSDL, say) is that document's resource, whatever the path before it."""

    def __init__(self, tree: Tree) -> None:
        super().__init__()
        self.tree = tree

    @property
    def fallback(self) -> resource.Resource:
        return self.tree.fallback

    def getChild(self, path: bytes, request: server.Request) -> resource.Resource:
        return document_by_name(self.tree.documents, path, request) or self.tree.fallback

    def render(self, request: server.Request) -> Any:
        return self.tree.fallback.render(request)


class Tree(Protocol):
    """What a :class:`Branch` reads of the tree it is in, at each request (a front end may set the fallback after
    the branch is made)."""

    fallback: resource.Resource
    documents: dict[bytes, resource.Resource]
    #: what the front ends serve, each in a few words, for a 404 to say
    signposts: list[str]


def document_by_name(documents: dict[bytes, resource.Resource], name: bytes,
                     request: server.Request) -> resource.Resource | None:
    """The resource whose document a GET's last path segment names (``/anything/condorCollector.wsdl``)."""
    if request.method in (b"GET", b"HEAD") and not any(request.postpath):
        return documents.get(name)
    return None


def write_whole(request: server.Request, body: bytes) -> None:
    """Answer with a body made whole, its length said: without a Content-Length twisted frames an answer written
    with ``write`` in chunks, which costs the client a parse of the framing (the largest part of a small answer's
    read in Python's http.client) and the server a second write; as ``render`` returning bytes does, but for answers
    that come later."""
    request.setHeader(b"content-length", b"%d" % len(body))
    request.write(body)
    request.finish()


def not_found(request: server.Request) -> bytes:
    """A 404, saying what the site serves (the signposts its front ends put on its tree)."""
    request.setResponseCode(404)
    request.setHeader(b"content-type", TEXT)
    tree = _tree(getattr(getattr(request, "site", None), "resource", None))
    signposts = "; ".join(tree.signposts) if tree is not None else ""
    return (f"Not found. {signposts}.\n" if signposts else "Not found.\n").encode("utf-8")


def refusal_in_form(root: resource.Resource | None, message: str) -> tuple[bytes, bytes]:
    """The content type and body of a refusal made before any resource is found (a body too large), in the form of
    the front end that answers any path of the site (its tree's fallback); the text when there is none."""
    tree = _tree(root)
    form = tree.fallback if tree is not None else None
    if isinstance(form, Answering):
        return form.content_type, form.refusal(message)
    return TEXT, text_refusal(message)


def text_refusal(message: str) -> bytes:
    """A refusal's body where no protocol gives it a form: the text, a line."""
    return message.encode("utf-8") + b"\n"


def _tree(root: resource.Resource | None) -> Tree | None:
    """The tree a site's root is the root of (None: a site of a plain resource, such as the monitoring port's)."""
    return root.tree if isinstance(root, Branch) else None


@implementer(IPullProducer)
class StreamedBody:
    """A streamed answer written a piece at a time, each when the connection has sent the one before (a pull
    producer): the whole answer is never in memory, and other requests are served between pieces.  Without a
    Content-Length, twisted frames it with chunked encoding (HTTP/1.1) or closes the connection after it (1.0)."""

    def __init__(self, request: GatewayRequest, chunks: Iterator[bytes]) -> None:
        self._request = request
        self._chunks = chunks

    def start(self) -> None:
        self._request.registerProducer(self, False)

    def resumeProducing(self) -> None:
        try:
            chunk = next(self._chunks)
        except StopIteration:
            self._request.unregisterProducer()
            self._request.finish()
            return
        except Exception:  # noqa: BLE001 - a bug while writing: the status line is sent, the answer can only be cut
            log.failure("writing a streamed answer failed")
            self._request.unregisterProducer()
            self._request.channel.loseConnection()
            self._request.cut_short()
            return
        self._request.write(chunk)

    def stopProducing(self) -> None:
        """The client went away: the rest is never made."""
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()
        self._request.cut_short()


def base_url(request: server.Request) -> str:
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
            self.site.identification.accepted(connection, admitted_owner(self.transport))
            self.birdbath_connection = connection

    def checkPersistence(self, request: server.Request, version: bytes) -> bool:
        """HTTP/1.1's rules, and the site's say (:attr:`GatewaySite.keep_open`): a connection it does not keep
        answers its request with ``Connection: close`` and ends, and its client connects again."""
        if not super().checkPersistence(request, version):
            return False
        if self.site.keep_open():
            return True
        request.responseHeaders.setRawHeaders(b"Connection", [b"close"])
        return False


class GatewaySite(server.Site):
    """A Site whose requests carry the size cap and the caller's identification, on channels that give each
    request's headers and body a deadline (``reactor``: twisted's, or a Clock in tests)."""

    #: whether a connection may stay open once its request is answered, asked as each request arrives: always here;
    #: the core with workers keeps the connections it serves only while that is right (``Gateway._keep_in_core``)
    keep_open: Callable[[], bool] = staticmethod(lambda: True)

    def __init__(self, root: resource.Resource, *, max_body: int, identification: Identification,
                 deadlines: RequestDeadlines = DEFAULT_DEADLINES, reactor: Any = None,
                 access_log: AccessLog | None = None) -> None:
        # bodies are SOAP or JSON, never forms: twisted would parse a form body into request.args (multipart ones in
        # memory), and works out every request's Content-Type with the email package, at a cost as large as a
        # short request's whole answer
        super().__init__(root, logFormatter=request_line, parsePOSTFormSubmission=False, reactor=reactor)
        #: where twisted.web's access log writes (the gateway's log, by its own thread)
        self.access_log = access_log if access_log is not None else AccessLog.default
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

    def startFactory(self) -> None:
        super().startFactory()
        self.logFile = self.access_log  # not twisted's default, its legacy log (every line an event to format)

    def log(self, request: server.Request) -> None:
        """twisted.web's access log (the line :func:`request_line` makes), once per request; and an operation's
        outcome as a ``birdbath.request`` event without text, for in-process observers (the metrics count it)."""
        if getattr(request, "access_logged", True):
            return
        request.access_logged = True
        super().log(request)
        outcome = request.outcome
        if outcome is not None:
            caller = request.caller
            log.emit(LogLevel.info, None, operation=outcome.operation, outcome=outcome.outcome, reason=outcome.reason,
                     ms=(time.monotonic() - request.started) * 1000, client=request.client_host,
                     user=caller.user if caller is not None else None,
                     authentication=caller.authentication.value if caller is not None else None)


@provider(IAccessLogFormatter)
def request_line(timestamp: str, request: server.Request) -> str:
    """The access log's line for a request, as the gateway's log writes every line (time, ``[namespace#level]``):
    ``submit from 127.0.0.1: SUCCESS in 1.2 ms (alice by socket)``, a FAIL with its reason after a colon; a request
    that was no operation by its method, path and HTTP status.  (``timestamp``, twisted's Common Log Format time,
    is not used: the line's time is the log's own.)"""
    outcome: RequestOutcome | None = getattr(request, "outcome", None)
    caller = getattr(request, "caller", None)
    who = describe(caller) if caller is not None else "not identified"
    ms = (time.monotonic() - request.started) * 1000 if getattr(request, "started", 0.0) else 0.0
    client = request.client_host if isinstance(request, GatewayRequest) else "-"
    if outcome is None:
        text = (f"{request.method.decode('latin-1')} {request.uri.decode('latin-1')} from {client}: {request.code} "
                f"in {ms:.1f} ms ({who})")
    else:
        text = f"{outcome.operation} from {client}: {outcome.outcome} in {ms:.1f} ms ({who})"
        if outcome.outcome == FAIL and outcome.reason:
            text += f": {outcome.reason}"
    return f"{log_time(time.time())} [birdbath.request#info] {text}".replace("\n", "\n\t")


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
