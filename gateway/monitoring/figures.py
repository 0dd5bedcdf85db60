"""The queue's and the gateway's figures, read when Prometheus scrapes: jobs by state, by owner (the busiest owners,
the rest as ``other``) and held by ``HoldReasonCode``; open transactions; the state directory's free space; the
slots the Scheduler ad offers; the low-latency (AMQP) front end's counters.

The backend is asked once per scrape (:func:`snapshot`, off the reactor on the query pool, as clients' queries
are); :meth:`QueueFigures.collect` then reports that snapshot, as prometheus_client calls collectors synchronously."""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from backends.interface import Capability, ScheddBackend
from jobmodel.classads import job_status, literal_int, literal_string
from jobmodel.jobs import JobStatus
from jobmodel.pool import AdType

#: the owners reported by name, most jobs first; the others are summed as "other"
TOP_OWNERS = 20
#: what the figures read of each job
PROJECTION = ("JobStatus", "Owner", "HoldReasonCode")


@dataclass
class Snapshot:
    """The queue as one scrape saw it."""

    by_state: collections.Counter[str] = field(default_factory=collections.Counter)
    by_owner_state: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    held_by_code: collections.Counter[int] = field(default_factory=collections.Counter)
    slots: int | None = None


def snapshot(backend: ScheddBackend, contact: str | None) -> Snapshot:
    """Read the queue (and the Scheduler ad's slots when the backend has a pool); runs on the query pool."""
    seen = Snapshot()
    owners: collections.Counter[str] = collections.Counter()
    for ad in backend.query(None, PROJECTION):
        state = job_status(ad).name.lower()
        owner = literal_string(ad, "Owner") or "?"
        seen.by_state[state] += 1
        owners[owner] += 1
        seen.by_owner_state[owner, state] += 1
        if job_status(ad) is JobStatus.HELD:
            seen.held_by_code[literal_int(ad, "HoldReasonCode", 0)] += 1
    top = {owner for owner, _ in owners.most_common(TOP_OWNERS)}
    bounded: collections.Counter[tuple[str, str]] = collections.Counter()
    for (owner, state), count in seen.by_owner_state.items():
        bounded[owner if owner in top else "other", state] += count
    seen.by_owner_state = bounded
    if Capability.POOL in backend.capabilities:
        schedds = backend.pool_ads(AdType.SCHEDD, None, contact=contact)  # type: ignore[attr-defined]
        if schedds:
            seen.slots = literal_int(schedds[0], "MaxJobsRunning", 0)
    return seen


class QueueFigures(Collector):
    """A prometheus_client collector of the figures read at scrape time."""

    def __init__(self, state_dir: Path, open_transactions: Callable[[], int],
                 lowlatency: Callable[[], Any]) -> None:
        self.state_dir = state_dir
        self._open_transactions = open_transactions
        self._lowlatency = lowlatency
        self.last = Snapshot()

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        last = self.last
        jobs = GaugeMetricFamily("birdbath_jobs", "Jobs in the queue by state", labels=["state"])
        for state in JobStatus:
            jobs.add_metric([state.name.lower()], last.by_state.get(state.name.lower(), 0))
        yield jobs
        owners = GaugeMetricFamily("birdbath_owner_jobs", f"Jobs in the queue by owner (the {TOP_OWNERS} with "
                                   "most jobs; the others as \"other\") and state", labels=["owner", "state"])
        for (owner, state), count in sorted(last.by_owner_state.items()):
            owners.add_metric([owner, state], count)
        yield owners
        held = GaugeMetricFamily("birdbath_held_jobs", "Held jobs by HoldReasonCode", labels=["code"])
        for code, count in sorted(last.held_by_code.items()):
            held.add_metric([str(code)], count)
        yield held
        if last.slots is not None:
            yield GaugeMetricFamily("birdbath_slots", "CPUs the schedd runs jobs on (MaxJobsRunning)",
                                    value=last.slots)
        yield GaugeMetricFamily("birdbath_transactions_open", "Open SOAP transactions",
                                value=self._open_transactions())
        try:
            disk = os.statvfs(self.state_dir)
        except OSError:
            pass
        else:
            yield GaugeMetricFamily("birdbath_state_directory_free_bytes", "Space left for the state directory "
                                    "(to an unprivileged writer)", value=disk.f_bavail * disk.f_frsize)
            yield GaugeMetricFamily("birdbath_state_directory_size_bytes", "Size of the state directory's file "
                                    "system", value=disk.f_blocks * disk.f_frsize)
        yield from self._amqp()

    def _amqp(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        service = self._lowlatency()
        if service is None:
            return
        yield GaugeMetricFamily("birdbath_amqp_connected", "1 while the AMQP broker is connected",
                                value=1 if amqp_connected(service) else 0)
        yield CounterMetricFamily("birdbath_amqp_connections", "Connections made to the broker (more than one: "
                                  "reconnects)", value=service.broker.connections)
        stats = service.stats()
        for name, help in (("taken", "Messages taken as jobs"), ("rejected", "Messages rejected"),
                           ("errors", "Messages answered with an error"), ("finals", "Final replies sent"),
                           ("requeued", "Messages given back to the broker")):
            yield CounterMetricFamily(f"birdbath_amqp_messages_{name}", help, value=stats[name])
        yield GaugeMetricFamily("birdbath_amqp_jobs_tracked", "Low-latency jobs being followed to their end",
                                value=stats["tracked"])


def amqp_connected(service: Any) -> bool:
    """Whether the low-latency service's broker connection is up now."""
    link = service.broker.link
    return link is not None and link.open and link.connection.is_open
