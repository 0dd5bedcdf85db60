"""Running blocking backend calls off the reactor thread."""

from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorThreads
from twisted.internet.threads import deferToThreadPool
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from backends.interface import BackendUnavailable

T = TypeVar("T")


_stack_size_lock = threading.Lock()


def thread_factory(stack: int | None) -> Callable[..., threading.Thread]:
    """Threads with a stack of ``stack`` bytes (None: the default): job ads are evaluated on them, and the ClassAd
    library recurses once per level of an expression and per attribute reference (``jobmodel.expressions``)."""
    if stack is None:
        return threading.Thread

    class DeepStackThread(threading.Thread):
        def start(self) -> None:
            with _stack_size_lock:  # the size is process-wide state, read when a thread starts
                previous = threading.stack_size(stack)
                try:
                    super().start()
                finally:
                    threading.stack_size(previous)

    return DeepStackThread


class BlockingCaller:
    """A private thread pool sized for one backend (a pool of one serialises every call, in order).

    With a ``timeout``, a call that has not answered by then fails with BackendUnavailable (the thread itself
    cannot be interrupted; the caller stops waiting for it).  ``stack`` sizes the threads' stacks."""

    def __init__(self, reactor: IReactorThreads, threads: int, name: str, timeout: float | None = None, *,
                 stack: int | None = None) -> None:
        self._reactor = reactor
        self._name = name
        self._timeout = timeout
        self._pool = ThreadPool(minthreads=1, maxthreads=max(1, threads), name=f"backend-{name}")
        self._pool.threadFactory = thread_factory(stack)
        self._pool.start()

    def __call__(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> "Deferred[T]":
        called = deferToThreadPool(self._reactor, self._pool, function, *args, **kwargs)
        if self._timeout:
            called.addTimeout(self._timeout, self._reactor)
            called.addErrback(self._timed_out, getattr(function, "__name__", "call"))
        return called

    def _timed_out(self, failure: Failure, operation: str) -> Failure:
        if failure.check(defer.TimeoutError, defer.CancelledError):
            raise BackendUnavailable(f"the {self._name} backend did not answer {operation} within "
                                     f"{self._timeout:g} s")
        return failure

    def stop(self) -> None:
        """Wait for queued calls to finish and join the threads."""
        self._pool.stop()
