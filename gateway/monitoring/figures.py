"""The queue's and the gateway's figures, read when Prometheus scrapes: jobs by state, by owner (the busiest owners,
the rest as ``other``) and held by ``HoldReasonCode``; slots and busy slots, idle jobs that match no slot, the
negotiation cycle's and the launchers' times, the spool's bytes (a backend that runs jobs); open transactions,
staging areas and the state directory's free space (the gateway's); the figures of what the front ends run (a
broker's connection and messages: :meth:`gateway.frontend.FrontEndService.figures`).

The queue's figures are the backend's own (``Capability.FIGURES``: the local backend tallies them as its Scheduler
ad counts them, so ``birdbath status -schedd`` and the metrics never disagree), else tallied here the same way
(``jobmodel.figures``) from a query.  The backend is asked once per scrape (:func:`snapshot`, off the reactor on the
query pool, as clients' queries are); :meth:`ScrapedFigures.collect` then reports that snapshot, as prometheus_client
calls collectors synchronously."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from backends.interface import Capability, ScheddBackend
from jobmodel.classads import literal_int
from jobmodel.figures import PROJECTION, BackendFigures, Buckets, ExecutionFigures, QueueFigures, facts_of, tally
from jobmodel.jobs import JobStatus
from jobmodel.pool import AdType

#: the owners reported by name, most jobs first; the others are summed as "other"
TOP_OWNERS = 20
Metric = GaugeMetricFamily | CounterMetricFamily | HistogramMetricFamily


@dataclass
class Snapshot:
    """The backend as one scrape saw it; ``slots``: the Scheduler ad's, for a backend with no execution figures."""

    figures: BackendFigures = field(default_factory=lambda: BackendFigures(QueueFigures()))
    slots: int | None = None


def snapshot(backend: ScheddBackend, contact: str | None) -> Snapshot:
    """Read the backend's figures (a backend without: its queue, and the Scheduler ad's slots when it has a pool);
    runs on the query pool."""
    if Capability.FIGURES in backend.capabilities:
        return Snapshot(backend.figures())  # type: ignore[attr-defined]
    seen = Snapshot(BackendFigures(tally(facts_of(ad) for ad in backend.query(None, PROJECTION))))
    if Capability.POOL in backend.capabilities:
        schedds = backend.pool_ads(AdType.SCHEDD, None, contact=contact)  # type: ignore[attr-defined]
        if schedds:
            seen.slots = literal_int(schedds[0], "MaxJobsRunning", 0)
    return seen


class ScrapedFigures(Collector):
    """A prometheus_client collector of the figures read at scrape time."""

    def __init__(self, state_dir: Path, open_transactions: Callable[[], int], staging_areas: Callable[[], int],
                 front_ends: Callable[[], Iterable[Metric]] = lambda: ()) -> None:
        self.state_dir = state_dir
        self._open_transactions = open_transactions
        self._staging_areas = staging_areas
        self._front_ends = front_ends
        self.last = Snapshot()

    def collect(self) -> Iterator[Metric]:
        queue = self.last.figures.queue
        jobs = GaugeMetricFamily("birdbath_jobs", "Jobs in the queue by state", labels=["state"])
        for state in JobStatus:
            jobs.add_metric([state.name.lower()], queue.count(state))
        yield jobs
        yield _owners(queue)
        held = GaugeMetricFamily("birdbath_held_jobs", "Held jobs by HoldReasonCode", labels=["code"])
        for code, count in sorted(queue.held_by_code.items()):
            held.add_metric([str(code)], count)
        yield held
        execution = self.last.figures.execution
        if execution is not None:
            yield from _execution(execution)
        elif self.last.slots is not None:
            yield GaugeMetricFamily("birdbath_slots", "CPUs the schedd runs jobs on (MaxJobsRunning)",
                                    value=self.last.slots)
        yield GaugeMetricFamily("birdbath_transactions_open", "Open SOAP transactions",
                                value=self._open_transactions())
        yield GaugeMetricFamily("birdbath_staging_areas", "Staging areas of the submission API (create/send) not "
                                "yet submitted from or expired", value=self._staging_areas())
        try:
            disk = os.statvfs(self.state_dir)
        except OSError:
            pass
        else:
            yield GaugeMetricFamily("birdbath_state_directory_free_bytes", "Space left for the state directory "
                                    "(to an unprivileged writer)", value=disk.f_bavail * disk.f_frsize)
            yield GaugeMetricFamily("birdbath_state_directory_size_bytes", "Size of the state directory's file "
                                    "system", value=disk.f_blocks * disk.f_frsize)
        yield from self._front_ends()

def _owners(queue: QueueFigures) -> GaugeMetricFamily:
    """Jobs by owner and state: the owners with most jobs by name, the others summed as ``other``."""
    top = {owner for owner, _ in queue.by_owner().most_common(TOP_OWNERS)}
    bounded: Counter[tuple[str, str]] = Counter()
    for (owner, state, _), count in queue.jobs.items():
        if state is not None:
            bounded[(owner or "?") if owner in top else "other", state.name.lower()] += count
    owners = GaugeMetricFamily("birdbath_owner_jobs", f"Jobs in the queue by owner (the {TOP_OWNERS} with most "
                               "jobs; the others as \"other\") and state", labels=["owner", "state"])
    for (owner, state), count in sorted(bounded.items()):
        owners.add_metric([owner, state], count)
    return owners


def _execution(execution: ExecutionFigures) -> Iterator[Metric]:
    yield GaugeMetricFamily("birdbath_slots", "CPUs the schedd runs jobs on (MaxJobsRunning)", value=execution.slots)
    yield GaugeMetricFamily("birdbath_slots_busy", "CPUs that running jobs hold", value=execution.busy_slots)
    yield GaugeMetricFamily("birdbath_idle_jobs_unmatchable", "Idle jobs whose Requirements matched no slot when "
                            "last matched (matched again when they change, and at each periodic evaluation)",
                            value=execution.unmatchable_idle)
    yield _histogram("birdbath_negotiation_cycle_duration_seconds", "Time the scheduler took to record the runs "
                     "that ended and choose the jobs to start, per negotiation cycle", execution.cycles)
    yield _histogram("birdbath_launcher_start_duration_seconds", "Time from a job's start to its launcher having "
                     "started its first process (observed when the run ends)", execution.launcher_starts)
    yield GaugeMetricFamily("birdbath_spool_bytes", "Bytes of the files in the spool (jobs' input and output)",
                            value=execution.spool_bytes)


def _histogram(name: str, help: str, buckets: Buckets) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, help, buckets=cumulated(buckets), sum_value=buckets.total)


def cumulated(buckets: Buckets) -> list[tuple[str, int]]:
    """A histogram's buckets as Prometheus writes them: each bound's count of observations at or below it."""
    running, counts = 0, []
    for bound, count in zip((*map(floatToGoString, buckets.bounds), "+Inf"), buckets.counts):
        running += count
        counts.append((bound, running))
    return counts
