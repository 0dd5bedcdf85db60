"""A schedd's figures, counted one way for everyone who shows them: the Scheduler and Submitter ads a collector
answers (and so ``birdbath status -schedd``) and the gateway's Prometheus metrics read the same :class:`QueueFigures`,
tallied by :func:`tally` from the same jobs, and the local backend's execution figures (:class:`ExecutionFigures`).

Every figure here adds up: a process that runs several schedd workers (or a parent that scrapes its children) sums
them with :meth:`QueueFigures.merge`, :meth:`ExecutionFigures.merge` and :meth:`Buckets.merge` -- histograms are
kept as bucket counts and a sum, never as samples, for that reason.
"""

from __future__ import annotations

import bisect
import enum
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

import classad2

from jobmodel.classads import literal_int, literal_string
from jobmodel.jobs import JobStatus, Universe

#: what :func:`facts_of` reads of a job
PROJECTION = ("JobStatus", "Owner", "JobUniverse", "RequestCpus", "HoldReasonCode")


class Kind(str, enum.Enum):
    """How a schedd tallies a job: on a slot (its ``Total*Jobs``), or apart as a local or scheduler universe job
    (``TotalLocalJobs*``, ``TotalSchedulerJobs*``), which run beside the schedd."""

    SLOT = "slot"
    LOCAL = "local"
    SCHEDULER = "scheduler"

    @classmethod
    def of(cls, universe: int) -> Kind:
        return {Universe.LOCAL: cls.LOCAL, Universe.SCHEDULER: cls.SCHEDULER}.get(universe, cls.SLOT)


class CountedJob(Protocol):
    """What the tally reads of one job."""

    owner: str
    status: JobStatus | None
    universe: int
    cpus: int  # the CPUs it asks of a slot (0: none)
    hold_code: int  # HoldReasonCode, for a held job


@dataclass(frozen=True)
class JobFacts:
    owner: str
    status: JobStatus | None
    universe: int
    cpus: int
    hold_code: int


def facts_of(ad: classad2.ClassAd) -> JobFacts:
    """What the tally needs of a job's ad, read as literals (a backend with no figures of its own: every job asks
    its literal ``RequestCpus``, else one)."""
    try:
        status: JobStatus | None = JobStatus(literal_int(ad, "JobStatus", 0))
    except ValueError:
        status = None
    universe = literal_int(ad, "JobUniverse", int(Universe.VANILLA))
    return JobFacts(literal_string(ad, "Owner"), status, universe,
                    max(1, literal_int(ad, "RequestCpus", 1)) if Kind.of(universe) is Kind.SLOT else 0,
                    literal_int(ad, "HoldReasonCode", 0) if status is JobStatus.HELD else 0)


Key = tuple[str, JobStatus | None, Kind]


@dataclass
class QueueFigures:
    """The queue's jobs by owner, state and kind; the CPUs they ask (each at least one: HTCondor's weighted counts);
    held jobs by ``HoldReasonCode``."""

    jobs: Counter[Key] = field(default_factory=Counter)
    weighted: Counter[Key] = field(default_factory=Counter)
    held_by_code: Counter[int] = field(default_factory=Counter)

    def count(self, state: JobStatus | None = None, *, owner: str | None = None, kind: Kind | None = None,
              weighted: bool = False) -> int:
        """Jobs (or their weight) in ``state`` (None: any), of ``owner`` and ``kind`` (None: every one)."""
        counter = self.weighted if weighted else self.jobs
        return sum(number for (who, status, what), number in counter.items()
                   if (state is None or status is state) and (owner is None or who == owner)
                   and (kind is None or what is kind))

    @property
    def total(self) -> int:
        return sum(self.jobs.values())

    def owners(self) -> list[str]:
        """The owners with jobs, sorted."""
        return sorted({owner for owner, _, _ in self.jobs})

    def by_owner(self) -> Counter[str]:
        found: Counter[str] = Counter()
        for (owner, _, _), number in self.jobs.items():
            found[owner] += number
        return found

    def merge(self, other: QueueFigures) -> QueueFigures:
        return QueueFigures(self.jobs + other.jobs, self.weighted + other.weighted,
                            self.held_by_code + other.held_by_code)


def tally(jobs: Iterable[CountedJob]) -> QueueFigures:
    figures = QueueFigures()
    for job in jobs:
        key = (job.owner, job.status, Kind.of(job.universe))
        figures.jobs[key] += 1
        figures.weighted[key] += max(job.cpus, 1)
        if job.status is JobStatus.HELD:
            figures.held_by_code[job.hold_code] += 1
    return figures


@dataclass
class Buckets:
    """A histogram as Prometheus keeps one: how many observations fell at or below each bound (not cumulated here:
    ``counts[i]`` is the bucket ending at ``bounds[i]``, the last one above every bound), and their sum."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def copy(self) -> Buckets:
        return Buckets(self.bounds, list(self.counts), self.total)

    def merge(self, other: Buckets) -> Buckets:
        if other.bounds != self.bounds:
            raise ValueError("only histograms with the same buckets add up")
        return Buckets(self.bounds, [a + b for a, b in zip(self.counts, other.counts)], self.total + other.total)


#: a negotiation cycle: a millisecond for a quiet queue, seconds for a long one
CYCLE_BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: a launcher's start: a millisecond from the fork server, a tenth of a second for an interpreter of its own
LAUNCHER_BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class ExecutionFigures:
    """What a backend that runs jobs knows of its running: CPUs (slots) it runs jobs on and how many jobs hold;
    idle jobs whose ``Requirements`` matched no slot when last matched; how long each negotiation cycle took and
    each launcher took to start; the bytes in its spool."""

    slots: int = 0
    busy_slots: int = 0
    unmatchable_idle: int = 0
    cycles: Buckets = field(default_factory=lambda: Buckets(CYCLE_BOUNDS))
    launcher_starts: Buckets = field(default_factory=lambda: Buckets(LAUNCHER_BOUNDS))
    spool_bytes: int = 0

    def merge(self, other: ExecutionFigures) -> ExecutionFigures:
        return ExecutionFigures(self.slots + other.slots, self.busy_slots + other.busy_slots,
                                self.unmatchable_idle + other.unmatchable_idle, self.cycles.merge(other.cycles),
                                self.launcher_starts.merge(other.launcher_starts), self.spool_bytes + other.spool_bytes)


@dataclass
class BackendFigures:
    """A backend's figures at one moment (``Capability.FIGURES``): its queue, and its execution when it runs jobs."""

    queue: QueueFigures
    execution: ExecutionFigures | None = None
