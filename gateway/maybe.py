"""A value now, or a Deferred of it later (:data:`Maybe`): what the transport and the front ends hand each other.

What answers at once is not wrapped in a Deferred: a Deferred, its callbacks and a coroutine's driver at each layer
cost a small request more than its operation.  Kept apart from every protocol so that the transport
(:mod:`gateway.http`) and the SOAP codec (:mod:`gateway.soap.answer`) share it without one importing the other.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, Union

from twisted.internet.defer import Deferred

Result = TypeVar("Result")
Then = TypeVar("Then")
#: a value, or a Deferred that fires with it
Maybe = Union[Result, Deferred]


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
