"""The queue's idle jobs in the order they start, kept up to date as jobs change.

The store tells this index about every job it writes (``JobStore.apply``), so a scheduling cycle reads the idle jobs
already ordered, with the CPUs each needs, instead of evaluating the state, priority and universe of every job in the
queue: with thousands of jobs queued that took the backend's one thread most of its time, on every cycle.  A job's
place is worked out when it is written (``JobPrio``, ``QDate``, then its id), so an expression that would rank it
differently as time passes (a ``JobPrio`` reading ``time()``) is ranked as it was then.
"""

from __future__ import annotations

import bisect
from typing import Iterator

import classad2

from jobmodel.classads import evaluate_number, job_status
from jobmodel.jobs import JobStatus

from . import dedicated, jobspec

JobKey = tuple[int, int]
#: how the idle jobs are ordered: higher JobPrio first, then older QDate, then lower id
Rank = tuple[float, float, int, int]


def rank(key: JobKey, ad: classad2.ClassAd) -> Rank:
    return -evaluate_number(ad, "JobPrio"), evaluate_number(ad, "QDate"), key[0], key[1]


def cpus_needed(ad: classad2.ClassAd) -> int:
    """The CPUs a job takes while it runs: RequestCpus for a job that uses a slot, none for the others (scheduler and
    local universe)."""
    return dedicated.slots_needed(ad, jobspec.request_cpus(ad)) if jobspec.uses_slot(ad) else 0


class IdleJobs:
    def __init__(self) -> None:
        self._ranked: list[tuple[Rank, int]] = []  # (rank, cpus), sorted; the key is the rank's last two fields
        self._entries: dict[JobKey, tuple[Rank, int]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def update(self, key: JobKey, ad: classad2.ClassAd | None) -> None:
        """Job ``key`` is now ``ad`` (None: it left the queue)."""
        self._remove(key)
        if ad is not None and job_status(ad) is JobStatus.IDLE:
            entry = rank(key, ad), cpus_needed(ad)
            self._entries[key] = entry
            bisect.insort(self._ranked, entry)

    def in_order(self) -> Iterator[tuple[JobKey, int]]:
        """The idle jobs and the CPUs each needs, first to start first (a snapshot: changes made while it is read do
        not show)."""
        for (_, _, cluster, proc), cpus in list(self._ranked):
            yield (cluster, proc), cpus

    def _remove(self, key: JobKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            del self._ranked[bisect.bisect_left(self._ranked, entry)]
