"""Running blocking backend calls off the reactor thread."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorThreads
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

T = TypeVar("T")


class BlockingCaller:
    """A private thread pool sized for one backend (a pool of one serialises every call, in order)."""

    def __init__(self, reactor: IReactorThreads, threads: int, name: str) -> None:
        self._reactor = reactor
        self._pool = ThreadPool(minthreads=1, maxthreads=max(1, threads), name=f"backend-{name}")
        self._pool.start()

    def __call__(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> "Deferred[T]":
        return deferToThreadPool(self._reactor, self._pool, function, *args, **kwargs)

    def stop(self) -> None:
        """Wait for queued calls to finish and join the threads."""
        self._pool.stop()
