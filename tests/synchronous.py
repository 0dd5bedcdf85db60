"""Running the core's coroutines to their end in a test where every backend call answers synchronously."""

from __future__ import annotations

from typing import Any, Coroutine

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure


def run(coroutine: Coroutine) -> Any:
    """Run an operation to its end and return or raise its outcome (it must not wait on the reactor)."""
    outcome: list = []
    Deferred.fromCoroutine(coroutine).addBoth(outcome.append)
    (result,) = outcome
    if isinstance(result, Failure):
        result.raiseException()
    return result
