"""A worker process's view of the queued jobs, so that getJobAds' constraint is evaluated in the workers and not all
in the core.

With ``workers = N`` every getJobAds used to evaluate its constraint over the whole queue in the core (about a
microsecond a job): polling clients shared one core's CPU however many workers served them.  Each worker now keeps,
for every queued job, a small ClassAd of the job's literals only (``backends.evaluation.VIEW_LITERALS``: ids, owner,
state, times, which the schedd sets itself) and the backend's change number that table reflects (``JobView``).  A
simple constraint (``backends.evaluation.literals_read``: it reads those literals alone and calls no function)
evaluates on such an ad exactly as on the job's whole ad, so the worker evaluates it over its view, and asks the
core (``BirdbathSchedd.get_job_ads_among``) for the jobs it found (the *candidates*, with the jobs whose literal is
an expression, which the view cannot evaluate) and its change number ``seen``.  The core evaluates the constraint
again on the current ads of the candidates and of every job changed since ``seen`` (the backend's ``changes_since``)
and answers the matching ads, the new change number, and the literals of the jobs changed since ``seen``, which the
view takes in.  A worker's first query (an empty view at number 0), or one whose number the backend no longer
remembers, is answered from the whole queue by the core, with every job's literals: the view starts again from them.
The view of a worker holds about 1.1 KB a job and its revision number (110 MB and more at 100,000 jobs: bench/README.md
has the measured figures); the core holds nothing per worker.

Why the answer is exact, and reads the caller's own writes whichever worker served them: the core asks
``changes_since(seen)`` before it reads any ad, and the backend counts a write only once its ads are readable, so
every write that ended before the query began is counted at or before the number ``N`` answered.  A job changed
after ``seen`` (up to ``N``) is in the change set and evaluated by the core on its current ad, a job that left is
not answered (its ad is gone).  A job not changed since ``seen`` has, in the view, the literals it had at ``seen``
and still has: the worker's evaluation of it is the one its whole ad would give, so it is a candidate exactly when
it matches (the core evaluates each candidate again, which also covers one changed after ``N``).  Nothing that
matched before the query began is left out, nothing that did not is answered; jobs written while the query runs
are seen or not, as by a getJobAds of the single process.  The view's update holds literals read after ``N`` (maybe
newer): such a job changed after ``N`` and is in the next query's change set.  Answers may come back out of order
(several queries at once): an update applies only when its number is above the view's, and each update carries every
change since the ``seen`` it was asked with, which is at most the view's number when it arrives.

Reads answered without the core: the core publishes the backend's change number in shared memory
(``gateway/workers/changenumber.py``), written before each write returns.  A worker whose view is at that number
knows that no job changed since its view was read; the view also holds each job's revision (the number of the ad its
literals were read from), and the worker's link keeps the ads the core sent it, stamped with theirs
(``wire.Codec.held``).  So outside a transaction, when the view is current, getJobAds with a simple constraint is
answered from the view's evaluation and the ads held at the view's revisions, and getJobAd from the ad held at the
job's revision, with the core's checks (READ, then the owner check, ``readable_job``): nothing crosses.  Exact for
the same reasons as above: every write that ended before the read began was published before it ended, so a view at
the published number is at least as new as every such write (a job whose literals were read while a write was
counted may be newer, which a concurrent read may see).  When a job's ad is not held at its revision, a job's
literal is an expression, or the view is behind, the read crosses as before; getJobAd finding the view behind also
asks the core for the view's update in the background (``BirdbathSchedd.view_since``, one at a time), so that the
next reads need not cross while the queue stays as it is.  A poll of a quiet queue, the load monitors make, costs
the core nothing.  Evaluations over the view take the caller's turns (``max_queries_per_caller``) in this worker,
and the view keeps the keys each constraint was found true for at its number (``JobView.answers``): the same
constraint polled again over a quiet queue is not evaluated again.

A constraint that is not simple, a getJobAds inside a transaction (the core checks the transaction before anything
else, as one process does, and no evaluation is spent on a caller it then refuses), or a backend without
``Capability.CHANGES`` (``BirdbathSchedd.job_views``, sent with the link's constants), goes to the core's
``get_job_ads`` as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import classad2
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionLost
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.failure import Failure

from backends import evaluation, literals
from backends.interface import JobKey, QueryFailed, revision
from backends.literals import LiteralIndex, RememberedAnswers
from gateway.core.adstruct import JobAdStruct
from gateway.core.auth import AccessPolicy, Caller, Permission
from gateway.core.grants import Begins
from gateway.core.queries import QueryRunner, QuerySettings, client_constraint
from gateway.core.schedd import JobAdStructs, ViewAnswer, readable_job
from gateway.core.status import BirdbathError
from gateway.core.transactions import Transaction, TransactionRef, names_none
from gateway.workers.changenumber import PublishedNumber
from gateway.workers.link import CallingLink, RemoteObject
from jobmodel.expressions import ExpressionRefused

log = Logger(namespace="birdbath.workers")


class JobView:
    """Job key -> the ClassAd of the job's literals, as of change number :attr:`number` of the backend, and the
    number of the revision they were read from; and the jobs whose literals are not all literals (always
    candidates).  Replaced entries are new objects, never changed in place, so a thread evaluating the table
    (:meth:`matching`) reads consistent ads; a reset's tables are built whole before they replace the old ones, in
    one assignment (:attr:`tables`), so a thread never evaluates half of them."""

    def __init__(self) -> None:
        self.number = 0
        #: the table of the jobs' literals, and the same jobs grouped by value, as the local store groups its own
        #: (``backends.literals``: a constraint over a literal many jobs share is evaluated once per value here too);
        #: one attribute, read once by :meth:`matching` on its thread
        self.tables: tuple[dict[JobKey, classad2.ClassAd], LiteralIndex] = ({}, LiteralIndex())
        self.irregular: set[JobKey] = set()
        #: every job's revision number (``backends.interface.Revision``): its ad as the view knows it
        self.revisions: dict[JobKey, int] = {}
        #: constraint text -> the keys :meth:`matching` found for it, at the view's number: a monitor polling the same
        #: constraint over a quiet queue costs no evaluation at all (the view's constraints are simple: a view's
        #: jobs whose literals are expressions are never among what it finds)
        self.answers: RememberedAnswers[list[JobKey]] = RememberedAnswers()

    def matching(self, constraint: classad2.ExprTree, budget: float) -> list[JobKey]:
        """The keys of the jobs a simple ``constraint`` is true for (on a thread, while the reactor may update the
        view): from the groups by value when that is cheaper, otherwise over a copy of the table (:meth:`entries`).
        A view newer than the number the query is asked with is as good: the core evaluates again every job changed
        since that number."""
        ads, groups = self.tables  # (the objects of now: a reset replaces them, an update changes them)
        found = literals.select(groups, constraint, budget, ads.get, len(ads))
        if found is not None:
            return [key for key, _ in found]
        return evaluation.true_keys(self.entries(ads), constraint, budget)

    @property
    def ads(self) -> dict[JobKey, classad2.ClassAd]:
        return self.tables[0]

    def entries(self, ads: dict[JobKey, classad2.ClassAd] | None = None) -> list[tuple[JobKey, classad2.ClassAd]]:
        """The table (``ads``, the view's now by default) copied in one operation under the GIL, which an update on
        the reactor cannot interleave."""
        return list((self.ads if ads is None else ads).items())

    def update(self, answer: ViewAnswer) -> bool:
        """Take in an answer's update unless the view is already at or past its number; whether it did."""
        if answer.number <= self.number:
            return False
        if answer.reset:  # (irregular and revisions are read on the reactor's thread only: never half of them)
            (ads, groups), self.irregular, self.revisions = ({}, LiteralIndex()), set(), {}
        else:
            ads, groups = self.tables
        for cluster, proc, values, number in answer.changes:
            key = (cluster, proc)
            ad = None if values is None else evaluation.literals_ad(values)
            old = ads.pop(key, None) if ad is None else ads.get(key)
            if ad is not None:
                ads[key] = ad
            groups.replace(key, old, ad)
            if values is not None and ad is None:
                self.irregular.add(key)
            else:
                self.irregular.discard(key)
            if values is None:
                self.revisions.pop(key, None)
            else:
                self.revisions[key] = number
        self.tables = ads, groups
        self.number = answer.number
        return True


class ViewedSchedd(RemoteObject):
    """The core's ``schedd`` as a worker's front ends see it: every call crosses to the core
    (:class:`~gateway.workers.link.RemoteObject`), but getJobAds with a simple constraint goes through this worker's
    :class:`JobView`, and getJobAd and such getJobAds are answered here while the view is current."""

    #: sent by the core at link time (``link.CONSTANTS``): whether its backend tells what changed
    job_views: bool = False

    def __init__(self, link: CallingLink, service: str, reactor: Any, settings: QuerySettings, policy: AccessPolicy,
                 published: PublishedNumber | None = None, *,
                 begins: Begins, call_in_thread: Callable[..., Deferred[Any]] | None = None) -> None:
        super().__init__(link, service)
        #: beginTransaction answered in this worker (``gateway.core.grants``)
        self._begins = begins
        self.view = JobView()
        self._reactor = reactor
        self._settings = settings
        self._policy = policy
        self._published = published
        #: the callers' turns for evaluations over the view (``max_queries_per_caller`` each, in this worker)
        self._queries = QueryRunner(call_in_thread or self._on_thread, settings)
        self._refreshing = False

    def current(self) -> bool:
        """Whether the view is at the change number the core publishes: no job changed since it was read, and no
        write is under way (the core publishes a write's number before its ads are readable)."""
        number = self.view.number
        return (number > 0 and self._published is not None and self._published.value == number
                and self._link.alive)

    def begin_transaction(self, caller: Caller, duration: int) -> Awaitable[Transaction]:
        """Begun in this worker, from the ids and allowances the core grants it."""
        return self._begins.begin(caller, duration)

    async def get_job_ad(self, caller: Caller, ref: TransactionRef | None, cluster: int, proc: int) -> JobAdStruct:
        if names_none(ref) and self.job_views:
            if not self.current():
                self._refresh()
            else:
                ad = self._held((cluster, proc))
                if ad is not None:
                    self._policy.check(caller, Permission.READ)
                    return JobAdStruct(readable_job(self._policy, caller, ad), self._now())
        return await self._link.call(self._service, "get_job_ad", caller, ref, cluster, proc)

    async def get_job_ads(self, caller: Caller, ref: TransactionRef | None, constraint: str | None) -> JobAdStructs:
        parsed = self._simple(constraint)
        if parsed is None or not names_none(ref):  # (in a transaction, the core checks it before anything else)
            return await self._link.call(self._service, "get_job_ads", caller, ref, constraint)
        self._policy.check(caller, Permission.READ)
        seen, irregular = self.view.number, list(self.view.irregular)
        found = self.view.answers.get(constraint, seen)  # type: ignore[arg-type]
        if found is None:
            try:
                found = await self._queries.run(caller, self.view.matching, parsed)
            except QueryFailed as exc:
                raise BirdbathError.fail(f"Query failed: {exc}") from None
            if self.view.number == seen:  # (the view did not change during the evaluation)
                self.view.answers.put(constraint, seen, found)  # type: ignore[arg-type]
        if not irregular and self.view.number == seen and self.current():
            ads = [self._held(key) for key in sorted(found)]
            if not any(ad is None for ad in ads):
                return JobAdStructs(ads, self._now())  # type: ignore[arg-type]
        answer: ViewAnswer = await self._link.call(self._service, "get_job_ads_among", caller, ref, constraint,
                                                   [*found, *irregular], seen)
        self.view.update(answer)
        return answer.ads

    def _held(self, key: JobKey) -> classad2.ClassAd | None:
        """The job's ad at the revision the view has for it, when this worker's link holds it."""
        ad = self._link.codec.held(key)
        held = None if ad is None else revision(ad)
        return ad if held is not None and held.number == self.view.revisions.get(key) else None

    def _refresh(self) -> None:
        """Ask the core for the view's update (``view_since``), unless that is under way; the reads go on as they
        are meanwhile."""
        if self._refreshing or self._published is None or not self._link.alive:
            return
        self._refreshing = True

        def done(result: Any) -> None:
            self._refreshing = False
            if not isinstance(result, Failure):
                self.view.update(result)
            elif not result.check(ConnectionLost):
                log.failure("bringing the worker's view of the jobs up to date", result)

        self._link.call(self._service, "view_since", self.view.number).addCallback(done).addErrback(done)

    def _now(self) -> int:
        return int(self._reactor.seconds())

    def _on_thread(self, function: Callable[..., Any], *args: Any) -> Deferred[Any]:
        """Evaluations over the view run on the reactor's thread pool (unless ``call_in_thread`` says otherwise): a
        large view takes milliseconds, which the worker's other connections need not wait for."""
        return deferToThreadPool(self._reactor, self._reactor.getThreadPool(), function, *args)

    def _simple(self, constraint: str | None) -> classad2.ExprTree | None:
        """The constraint parsed as the core parses it, when the view can evaluate it; None otherwise (the core
        then answers it whole, and refuses it if it must)."""
        if not self.job_views or not constraint:
            return None
        try:
            parsed = client_constraint(constraint, self._settings.limits, blank_is_every=False)
        except ExpressionRefused:
            return None
        if parsed is None or evaluation.literals_read(parsed) is None:
            return None
        return parsed
