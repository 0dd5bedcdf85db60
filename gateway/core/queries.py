"""Running clients' queries apart from job control and from each other.

A query over a large queue, or with a pathological constraint, must not delay a commit or another client's
``getJobAd``.  So queries (getJobAds, the submission API's summaries, submissions and history) run on a pool of
their own (``query_workers`` threads; the backend's worker thread stays free for everything else), at most
``max_queries_per_caller`` at once per caller (more wait their turn), each within ``max_query_seconds`` (the
backend evaluates a client's constraint in a forked worker that is killed then), and a constraint is checked
against the expression limits before anything parses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, TypeVar

import classad2
from twisted.internet.defer import DeferredSemaphore
from twisted.internet.interfaces import IReactorThreads
from twisted.logger import Logger

from jobmodel.classads import parse_constraint
from jobmodel.expressions import ExpressionLimits

from .auth import Caller
from .threads import BlockingCaller

T = TypeVar("T")

log = Logger(namespace="birdbath.queries")


def _unparsable(text: str) -> None:
    log.warn("a query's constraint does not parse, so it matches no job: {constraint}", constraint=text[:200])


def client_constraint(text: str | None, limits: ExpressionLimits, *, blank_is_every: bool = True,
                      logged: bool = True) -> classad2.ExprTree | None:
    """A client's constraint, parsed once checked against the limits (raises ExpressionRefused); one that does not
    parse matches nothing, as HTCondor answered it, and the log says so (the client learns nothing else) unless
    ``logged`` is false: another process parsed it first and said so.

    Without ``blank_is_every``, white space alone is a constraint that does not parse, as the schedd's job queue
    took it (only NULL and the empty text matched every job)."""
    unparsable = _unparsable if logged else None
    if not blank_is_every and text and not text.strip():
        if unparsable is not None:
            unparsable(text)
        return classad2.ExprTree("false")
    return parse_constraint(text, limits, unparsable)


@dataclass(frozen=True)
class QuerySettings:
    workers: int = 4  # query_workers: queries that run at once, over all callers
    per_caller: int = 2  # max_queries_per_caller: queries one caller (host, user, authentication) runs at once
    budget: float = 20.0  # max_query_seconds: a query still evaluating then fails
    limits: ExpressionLimits = field(default_factory=ExpressionLimits)


class QueryRunner:
    """``run(caller, function, *args)`` calls ``function(*args, budget=...)`` through ``call`` (the query pool, a
    :class:`~gateway.core.threads.BlockingCaller`, or in tests any function returning a Deferred)."""

    def __init__(self, call: Callable[..., Any], settings: QuerySettings = QuerySettings()) -> None:
        self.settings = settings
        self._call = call
        self._turns: dict[Caller, DeferredSemaphore] = {}

    @classmethod
    def pool(cls, reactor: IReactorThreads, settings: QuerySettings) -> "QueryRunner":
        """The gateway's: ``settings.workers`` threads of their own, with stacks for the deepest ads allowed."""
        return cls(BlockingCaller(reactor, settings.workers, "queries", stack=settings.limits.stack_bytes()), settings)

    def constraint(self, text: str | None, *, blank_is_every: bool = True,
                   logged: bool = True) -> classad2.ExprTree | None:
        """A client's constraint within this runner's limits (:func:`client_constraint`)."""
        return client_constraint(text, self.settings.limits, blank_is_every=blank_is_every, logged=logged)

    async def run(self, caller: Caller, function: Callable[..., T], *args: Any) -> T:
        turns = self._turns.get(caller)
        if turns is None:
            turns = self._turns[caller] = DeferredSemaphore(self.settings.per_caller)
        await turns.acquire()
        try:
            return await self._call(partial(function, budget=self.settings.budget), *args)
        finally:
            turns.release()
            if turns.tokens == turns.limit and not turns.waiting:
                self._turns.pop(caller, None)  # no state kept for callers that have nothing running

    def read(self, function: Callable[..., T], *args: Any) -> Any:
        """Look one job up (``function`` needs no budget) on the query pool: a key lookup costs next to nothing, so it
        takes none of the caller's turns, and it never waits behind the backend's writes (a durable commit holds the
        backend's one thread for milliseconds, and under load every getJobAd queued behind them).  A worker's view
        brought up to date is read so too: it is no caller's, and it costs what changed since the view's number (the
        whole queue once per worker, for its first view)."""
        return self._call(function, *args)

    def stop(self) -> None:
        stop = getattr(self._call, "stop", None)
        if stop is not None:
            stop()
