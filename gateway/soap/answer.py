"""What every SOAP service hands the transport: a :class:`SoapAnswer`, from a coroutine (see ``gateway.maybe``).

Shared by the Birdbath services (``codec``) and the submission API (``dispatch``, spyne's cycle); the SOAP
resource (:mod:`gateway.soap.resource`) sees only :class:`Dispatcher`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Protocol

#: how much of a fault's text the request log keeps (a fault may quote the whole offending value)
LOGGED_FAULT = 500


@dataclass(frozen=True)
class Prebuilt:
    """An operation's answer already serialised (job and machine ads: ``adwriter``).  A large one comes as
    ``chunks`` (``body`` is then empty), which the transport writes as it sends them."""

    body: bytes = b""
    chunks: Iterator[bytes] | None = None


@dataclass
class SoapAnswer:
    code: int
    body: bytes
    operation: str | None
    fault: str | None = None
    #: the application status the answer carries (code and text), for the request log
    status: str | None = None
    reason: str | None = None
    #: the body in pieces, made as they are written (a streamed answer; ``body`` is then empty)
    chunks: Iterator[bytes] | None = None


class Dispatcher(Protocol):
    """A service as the transport sees it: a request's body and the caller's context in, its answer out."""

    async def dispatch(self, body: bytes, udc: Any) -> SoapAnswer:
        """The answer to one request."""


@dataclass(frozen=True)
class SplitAnswer:
    """A serialised answer cut where an (empty) array element was: ``head`` + items + ``tail``."""

    head: bytes
    tail: bytes

    @classmethod
    def around(cls, document: bytes, element: str) -> "SplitAnswer":
        for empty in (f"<{element}/>".encode(), f"<{element}></{element}>".encode()):
            if document.count(empty) == 1:
                head, tail = document.split(empty)
                return cls(head + f"<{element}>".encode(), f"</{element}>".encode() + tail)
        raise ValueError(f"no single empty <{element}> in {document[:200]!r}")

    def fill(self, items: str) -> bytes:
        return b"".join((self.head, items.encode("utf-8"), self.tail))
