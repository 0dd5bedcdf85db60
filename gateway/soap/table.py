"""One declarative handler table per contract: each operation an :class:`Entry` (which core call, with which
arguments from the request; how its result becomes the answer; what the answer holds when the core refuses), run by
the one piece of code here.

A standard (:class:`Standard`: Birdbath's condorSchedd, Aviary, the submission API) says how its core refuses (the
exception its core raises) and how its statuses read: what the request's context records for the log, and what the
answer holds.  An entry is a handler as the codec calls it, ``(context, parameters) -> answer`` (a coroutine): the
Birdbath and Aviary tables are the codec's handlers as they stand, and the submission API's spyne methods are made
from its table.  A refusal is the operation's answer with its status, never a fault; anything else the call raises
is the codec's (a Server fault, logged).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

#: the request's parameters by their wire names (absent or None: left out)
Wire = Mapping[str, Any]
Refusal = TypeVar("Refusal", bound=Exception)


@dataclass(frozen=True)
class Standard(Generic[Refusal]):
    """How one standard's core refuses, and how its statuses read."""

    #: the exception by which its core refuses a request
    refusal: type[Refusal]
    #: a refusal's status as the context records it, and as the answer holds it
    recorded: Callable[[Refusal], Any]
    written: Callable[[Refusal], Any]
    #: success's status as the context records it, and as the answer holds it
    ok: Any
    ok_written: Callable[[], Any]


def _status_itself(status: Any, parameters: Wire) -> Any:
    return status


@dataclass(frozen=True)
class Entry:
    """One operation of a contract's table, and its handler (``entry(context, parameters)``)."""

    standard: Standard[Any]
    #: the core call: (the request's context, its parameters) -> the core's coroutine
    call: Callable[[Any, Wire], Awaitable[Any]]
    #: the answer: (success's status as written, the call's result) -> the operation's answer
    answer: Callable[[Any, Any], Any]
    #: the answer to a refusal: (the refusal's status as written, the parameters) -> the operation's answer
    failed: Callable[[Any, Wire], Any] = _status_itself

    async def __call__(self, context: Any, parameters: Wire) -> Any:
        """The operation's answer; the status it answered recorded as the context's ``status``."""
        standard = self.standard
        try:
            result = await self.call(context, parameters)
        except standard.refusal as refusal:
            context.status = standard.recorded(refusal)
            return self.failed(standard.written(refusal), parameters)
        context.status = standard.ok
        return self.answer(standard.ok_written(), result)
