"""Jobs grouped by the values of the literals clients select them by, so that a query reading one of them is
evaluated once per value instead of once per job (``backends.evaluation.true_values``): the local store's queue
(``JobStore.selected``), and a worker process's view of the jobs' literals (``gateway/workers/jobview.py``).

A job's ``ClusterId``, ``ProcId``, ``JobStatus``, ``Owner``, ``User`` and ``QDate`` are literals the schedd sets
itself, shared by many jobs: ten jobs a cluster, thousands an owner or a state.  Monitors poll with constraints over
them (``ClusterId == 12``, ``Owner == "alice" ``, ``JobStatus == 2``), and before this index every poll evaluated
the constraint over every job of the queue, holding the interpreter for milliseconds per thousand jobs.
(``GlobalJobId`` and ``EnteredCurrentStatus`` are literals too, but nearly one value per job: grouping by them
would cost memory and gain nothing, so a constraint reading them is evaluated job by job.)

An index is kept by the code that publishes its ads (the store's ``JobStore.apply`` and loader, under the store's
lock; a view's update, on the worker's reactor), and read without a lock by the query threads, as the ads are: a
reader copies the groups it wants in one operation under the GIL (:meth:`LiteralIndex.members`), and the writer
moves a job into its new group before taking it out of the old one, so a job whose value does not change is never
missed and one that is changing is found in one of its groups; each job found is then checked against its current
ad.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

import classad2

from backends import evaluation
from backends.evaluation import MISSING
from jobmodel.classads import matches

JobKey = tuple[int, int]

#: the attributes jobs are grouped by (lower case, as ``backends.evaluation.literals_read`` names them)
INDEXED = ("clusterid", "procid", "jobstatus", "owner", "user", "qdate")
_INDEXED_SET = frozenset(INDEXED)
#: the fewest jobs per value, on average, for which the index answers: evaluating one value on an ad of its own costs
#: about two evaluations on a job's ad (classad2's attribute setting), and each job found is read and checked again
SHARED = 4
#: the index answers only when it finds at most one job in MOST of the queue
MOST = 2
#: the group of jobs whose value is not a literal (an expression a client set): each is evaluated on its own ad
IRREGULAR = object()


def value_of(ad: classad2.ClassAd, name: str) -> Hashable:
    """The job's value of ``name``, as a grouping key: ``(type, value)`` for a literal (so that ``1``, ``1.0`` and
    ``true``, equal in Python, stay apart as ClassAds keep them), :data:`MISSING`, or :data:`IRREGULAR`."""
    try:
        value = ad[name]
    except KeyError:
        return MISSING
    kind = type(value)
    if kind not in evaluation.LITERAL_TYPES or (kind is float and math.isnan(value)):  # (NaN is no key)
        return IRREGULAR
    return kind, value


def _literal(group: Hashable) -> Hashable:
    """The value a grouping key stands for."""
    return group if group is MISSING else group[1]  # type: ignore[index]


class LiteralIndex:
    """For each :data:`INDEXED` attribute: grouping key (:func:`value_of`) -> the keys of the jobs that have it."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[Hashable, set[JobKey]]] = {name: {} for name in INDEXED}

    def replace(self, key: JobKey, old: classad2.ClassAd | None, new: classad2.ClassAd | None) -> None:
        """Job ``key``'s ad goes from ``old`` to ``new`` (None: it was not parsed, or it leaves).  Only the groups
        that change are touched, the new one before the old: a reader never misses a job whose value did not change,
        and finds one that is changing in one of its groups at least."""
        for name, groups in self._groups.items():
            before = MISSING_JOB if old is None else value_of(old, name)
            after = MISSING_JOB if new is None else value_of(new, name)
            if before == after:
                continue
            if after is not MISSING_JOB:
                members = groups.get(after)
                if members is None:
                    groups[after] = {key}
                else:
                    members.add(key)
            if before is not MISSING_JOB:
                members = groups.get(before)
                if members is not None:
                    members.discard(key)
                    if not members:
                        del groups[before]

    def distinct(self, name: str) -> int:
        """How many values of ``name`` the jobs have."""
        return len(self._groups[name])

    def values(self, name: str) -> list[Hashable]:
        """The grouping keys of ``name`` now (a copy)."""
        return list(self._groups[name])

    def count(self, name: str, groups: Iterable[Hashable]) -> int:
        """How many jobs these groups of ``name`` hold now."""
        found = self._groups[name]
        return sum(len(found.get(group, ())) for group in groups)

    def members(self, name: str, groups: Iterable[Hashable]) -> set[JobKey]:
        """The jobs of these groups of ``name``, copied in one operation under the GIL (C code from end to end: the
        writer's thread cannot change a group half-way through the copy)."""
        return set().union(*map(self._groups[name].get, groups, itertools.repeat(())))


#: no job (a job not parsed yet, or leaving): not a value
MISSING_JOB = object()

#: the constraints whose answers a store or a view remembers (an answer of every job of 100,000 is a list of 0.8 MB)
REMEMBERED = 32

T = TypeVar("T")


class RememberedAnswers(Generic[T]):
    """Constraint text -> (a change number, what was found true at that number), the oldest constraint out beyond
    ``capacity``: polling monitors ask the same constraint again and again, and over jobs that did not change since,
    a constraint that depends on nothing else (:func:`timeless`) is true for the same jobs.  The local store's
    (``JobStore.selected``) and a worker's view's (``gateway/workers/jobview.py``); used by several threads."""

    def __init__(self, capacity: int = REMEMBERED) -> None:
        self.capacity = capacity
        self._answers: dict[str, tuple[int, T]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, constraint: str, number: int) -> T | None:
        """What ``constraint`` was found true for at change number ``number``; None if not at that number.  A
        constraint found again is the last to go."""
        kept = self._answers.get(constraint)
        if kept is None or kept[0] != number:
            return None
        with self._lock:
            if self._answers.get(constraint) is kept:
                self._answers[constraint] = self._answers.pop(constraint)
        return kept[1]

    def put(self, constraint: str, number: int, found: T) -> None:
        """Remember ``found`` at ``number``, unless an answer at a later number is remembered (a slow query's)."""
        with self._lock:
            answers = self._answers
            kept = answers.pop(constraint, None)
            if kept is not None and kept[0] > number:
                answers[constraint] = kept
                return
            if len(answers) >= self.capacity:
                del answers[next(iter(answers))]
            answers[constraint] = (number, found)


def timeless(index: LiteralIndex, constraint: classad2.ExprTree) -> bool:
    """Whether ``constraint`` is true for the same jobs for as long as the jobs do not change: a simple constraint (it
    calls no function, such as ``time()``, and reads only the schedd's literals) reading indexed attributes only, none
    of them an expression in any job (the index's :data:`IRREGULAR` groups are empty: an expression a client set in
    its place might call ``time()``)."""
    names = evaluation.literals_read(constraint)
    return (names is not None and names <= _INDEXED_SET
            and all(index.count(name, (IRREGULAR,)) == 0 for name in names))


def select(index: LiteralIndex, constraint: classad2.ExprTree, budget: float | None,
           get: Callable[[JobKey], classad2.ClassAd | None], jobs: int) -> list[tuple[JobKey, classad2.ClassAd]] | None:
    """The jobs (key and ad, in key order) for which ``constraint`` is true, when it is simple and reads one
    :data:`INDEXED` literal that ``jobs`` (how many the index covers) share, at least :data:`SHARED` jobs a value,
    and selects at most one job in :data:`MOST`; None when the index cannot answer it cheaper than evaluating it job
    by job (which the caller then does).

    The constraint is evaluated once per value; then each job of the groups it is true for (and of the irregular
    group) is read as it is now (``get``) and answered when its value is one of those, evaluated on its own ad when
    its value is one not evaluated (it changed meanwhile, or is not a literal), and left out when it has left."""
    names = evaluation.literals_read(constraint)
    if names is None or len(names) != 1 or not names <= _INDEXED_SET:
        return None
    (name,) = names
    if index.distinct(name) * SHARED > jobs:
        return None
    groups = index.values(name)
    regular = [group for group in groups if group is not IRREGULAR]
    wanted = set(evaluation.true_values(constraint, name, ((group, _literal(group)) for group in regular), budget))
    if index.count(name, [*wanted, IRREGULAR]) * MOST > jobs:
        return None  # (most of the jobs: reading and checking each one found costs more than evaluating it)
    known = set(regular)
    found: list[tuple[JobKey, classad2.ClassAd]] = []
    for key in index.members(name, [*wanted, IRREGULAR]):
        ad = get(key)
        if ad is None:
            continue
        group = value_of(ad, name)
        if group in wanted or (group not in known and matches(constraint, ad)):
            found.append((key, ad))
    found.sort(key=_first)
    return found


def _first(pair: tuple[JobKey, classad2.ClassAd]) -> JobKey:
    return pair[0]
