"""The queue's idle jobs in the order they start, kept up to date as jobs change.

The store tells this index about every job it writes (``JobStore.apply``), so a scheduling cycle reads the idle jobs
already ordered, with the CPUs each needs, instead of evaluating the state, priority and universe of every job in the
queue: with thousands of jobs queued that took the backend's one thread most of its time, on every cycle.  A job's
place is worked out when it is written (``JobPrio``, ``QDate``, then its id), so an expression that would rank it
differently as time passes (a ``JobPrio`` reading ``time()``) is ranked as it was then.

A cycle must cost what it starts, not what is queued (cycles follow every commit): jobs that take no slot
(scheduler and local universe) are kept apart from those that do, so a cycle with every slot busy never looks at the
latter; and a job whose ``Requirements`` did not match this machine is set aside (:meth:`IdleJobs.set_aside`) until it
changes or :meth:`IdleJobs.reconsider` puts it back (the periodic evaluation, as a negotiator matches again every
cycle), so that it is not matched again at every commit.
"""

from __future__ import annotations

import bisect
from typing import Iterable, Iterator, NamedTuple

import classad2

from jobmodel.classads import evaluate_number, job_status
from jobmodel.jobs import JobStatus

from . import dedicated, jobspec

JobKey = tuple[int, int]
#: how the idle jobs are ordered: higher JobPrio first, then older QDate, then lower id
Rank = tuple[float, float, int, int]


class Entry(NamedTuple):
    """What scheduling needs of an idle job: its place in the order, and the CPUs it takes while it runs."""

    rank: Rank
    cpus: int

    @property
    def key(self) -> JobKey:
        return self.rank[2], self.rank[3]


def cpus_needed(ad: classad2.ClassAd) -> int:
    """The CPUs a job takes while it runs: RequestCpus for a job that uses a slot, none for the others (scheduler and
    local universe)."""
    return dedicated.slots_needed(ad, jobspec.request_cpus(ad)) if jobspec.uses_slot(ad) else 0


def entry_of(key: JobKey, ad: classad2.ClassAd | None) -> Entry | None:
    """The job's entry if it is idle (None for any other job, or one that left the queue)."""
    return None if ad is None else entry_from_columns(key, *columns(ad))


def columns(ad: classad2.ClassAd) -> tuple[int, float, float, int]:
    """What the store keeps of a job in columns, for this index to be built without parsing its ad: its state,
    JobPrio, QDate and the CPUs it needs."""
    return (int(job_status(ad)), evaluate_number(ad, "JobPrio"), evaluate_number(ad, "QDate"), cpus_needed(ad))


def entry_from_columns(key: JobKey, status: int | None, prio: float | None, qdate: float | None,
                       cpus: int | None) -> Entry | None:
    if status != JobStatus.IDLE:
        return None
    return Entry((-(prio or 0.0), qdate or 0.0, key[0], key[1]), cpus or 0)


class IdleJobs:
    def __init__(self) -> None:
        self._with_slot: list[Entry] = []  # sorted
        self._without_slot: list[Entry] = []  # sorted (scheduler and local universe)
        self._entries: dict[JobKey, Entry] = {}
        self._aside: set[JobKey] = set()  # entries not in the sorted lists: they did not match the machine
        #: jobs that did not match the machine when last matched (also once reconsidered, until they change)
        self._unmatched: set[JobKey] = set()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def update(self, key: JobKey, ad: classad2.ClassAd | None) -> None:
        """Job ``key`` is now ``ad`` (None: it left the queue)."""
        self.put(key, entry_of(key, ad))

    def put(self, key: JobKey, entry: Entry | None) -> None:
        """Job ``key``'s entry is now ``entry`` (None: it is not idle); a changed job is matched again."""
        self._remove(key)
        if entry is not None:
            self._entries[key] = entry
            bisect.insort(self._sorted(entry), entry)

    def put_all(self, entries: Iterable[Entry]) -> None:
        """Add many idle jobs at once (the queue read at start-up): one sort, not one insertion each."""
        for entry in entries:
            self._remove(entry.key)
            self._entries[entry.key] = entry
            self._sorted(entry).append(entry)
        self._with_slot.sort()
        self._without_slot.sort()

    def in_order(self, free_cpus: int | None = None) -> Iterator[tuple[JobKey, int]]:
        """The idle jobs (not set aside) and the CPUs each needs, first to start first: those that take no slot, then,
        when ``free_cpus`` is not 0, those that do.  Read as it is: nothing may change the index while it is read
        (the scheduler writes its decisions after the loop)."""
        lists = (self._without_slot, self._with_slot) if free_cpus != 0 else (self._without_slot,)
        for entries in lists:
            for entry in entries:
                yield entry.key, entry.cpus

    def set_aside(self, key: JobKey) -> None:
        """Job ``key`` did not match this machine: leave it out of :meth:`in_order` until it changes or
        :meth:`reconsider`."""
        entry = self._entries.get(key)
        if entry is not None and key not in self._aside:
            self._take_out(entry)
            self._aside.add(key)
            self._unmatched.add(key)

    @property
    def unmatched(self) -> int:
        """Idle jobs that matched no slot of this machine when last matched (until they change or leave)."""
        return len(self._unmatched)

    def reconsider(self) -> None:
        """Put the jobs set aside back in order (the machine, or what a job's Requirements read, may have changed)."""
        aside, self._aside = self._aside, set()
        for key in aside:
            entry = self._entries[key]
            bisect.insort(self._sorted(entry), entry)

    def _sorted(self, entry: Entry) -> list[Entry]:
        return self._with_slot if entry.cpus else self._without_slot

    def _take_out(self, entry: Entry) -> None:
        entries = self._sorted(entry)
        del entries[bisect.bisect_left(entries, entry)]

    def _remove(self, key: JobKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        self._unmatched.discard(key)
        if key in self._aside:
            self._aside.discard(key)
        else:
            self._take_out(entry)
