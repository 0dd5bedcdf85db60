"""What every SOAP service hands the transport: a :class:`SoapAnswer`, now or later (:data:`Maybe`).

Shared by the Birdbath services (``codec``) and the submission API (``dispatch``, spyne's cycle); ``gateway.http``
sees only :class:`Dispatcher`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Coroutine, Iterator, Protocol, TypeVar, Union

from twisted.internet.defer import Deferred

Result = TypeVar("Result")
Then = TypeVar("Then")
#: a value, or a Deferred that fires with it: what answers at once is not wrapped in a Deferred (a Deferred, its
#: callbacks and a coroutine's driver at each layer cost a small request more than its operation)
Maybe = Union[Result, Deferred]

#: how much of a fault's text the request log keeps (a fault may quote the whole offending value)
LOGGED_FAULT = 500


def started(coroutine: Coroutine[Any, Any, Result]) -> Maybe[Result]:
    """The coroutine's result if it finishes without waiting (raising what it raises), else a Deferred of it."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    # it waits for a Deferred: twisted's driver resumes it, and a Deferred awaited again while it has no result
    # just waits again (``Deferred.__await__``)
    return Deferred.fromCoroutine(coroutine)


def then(value: Maybe[Result], function: Callable[..., Then], *args: Any) -> Maybe[Then]:
    """``function(value, *args)``, now or when the Deferred fires."""
    if isinstance(value, Deferred):
        return value.addCallback(function, *args)
    return function(value, *args)


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

    def dispatch(self, body: bytes, udc: Any) -> Maybe[SoapAnswer]:
        """The answer to one request (a Deferred of it when the operation waits)."""


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
