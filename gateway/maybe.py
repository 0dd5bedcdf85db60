"""The one async currency where the front ends meet the transport: a coroutine, driven once by :func:`settle`.

A front end answers a request with a coroutine (a handler's, the codec's ``dispatch``, the JSON form's ``answer``)
and awaits the core's coroutines inside it; only the transport drives one, here.  What finishes without waiting is
answered at once, with no Deferred made: a Deferred, its callbacks and a driver at each layer cost a small request
more than its operation (bench/README "Backend calls answered at once").  What waits is handed to twisted's driver
(``Deferred.fromCoroutine``).  Kept apart from every protocol so that the transport (:mod:`gateway.http`) and the
front ends share it without one importing the other.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

Result = TypeVar("Result")


def settle(coroutine: Coroutine[Any, Any, Result], done: Callable[[Result], object],
           failed: Callable[[Failure], object]) -> None:
    """Run ``coroutine``: ``done`` with its result, at once when it finishes without waiting, else when it does;
    ``failed`` with the failure when it raises (what ``done`` raises is not ``failed``'s)."""
    try:
        coroutine.send(None)
    except StopIteration as finished:
        result = finished.value
    except Exception:  # noqa: BLE001 - the coroutine's own failure, handed on
        failed(Failure())
        return
    else:
        # it waits for a Deferred: twisted's driver resumes it, and a Deferred awaited again while it has no result
        # just waits again (``Deferred.__await__``)
        Deferred.fromCoroutine(coroutine).addCallbacks(done, failed)
        return
    done(result)
