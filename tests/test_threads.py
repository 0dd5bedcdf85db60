"""Blocking backend calls run off the reactor, and a call that hangs is reported instead of waited for."""

from __future__ import annotations

import threading
import time

from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred

from backends.interface import BackendUnavailable
from gateway.core.threads import BlockingCaller


def run(coroutine):
    """Drive the global reactor just long enough for one coroutine (no pytest-twisted here)."""
    result = {}
    deferred = ensureDeferred(coroutine)
    deferred.addBoth(lambda value: result.update(value=value))  # keeps the failure, consumes it from the chain
    deadline = time.monotonic() + 10
    while "value" not in result and time.monotonic() < deadline:
        reactor.runUntilCurrent()
        reactor.doIteration(0.01)
    return result["value"]


def test_calls_run_on_the_backends_thread_in_order():
    caller = BlockingCaller(reactor, 1, "test")
    names = []

    async def two_calls():
        await caller(lambda: names.append(threading.current_thread().name))
        await caller(lambda: names.append(threading.current_thread().name))

    try:
        run(two_calls())
    finally:
        caller.stop()
    assert len(names) == 2 and all("backend-test" in name for name in names)


def test_a_call_that_hangs_is_reported_after_the_timeout():
    caller = BlockingCaller(reactor, 1, "slow", timeout=0.2)
    release = threading.Event()

    def hang():
        release.wait(5)

    async def call():
        return await caller(hang)

    try:
        outcome = run(call())
    finally:
        release.set()
        caller.stop()
    assert isinstance(outcome.value, BackendUnavailable)
    assert "the slow backend did not answer hang within 0.2 s" in str(outcome.value)
