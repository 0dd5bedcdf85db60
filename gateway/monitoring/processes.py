"""The worker processes' figures (``workers = N``): what each worker tells the core when /metrics is scraped — the
requests it served (a :class:`~.events.RequestTally`), its resident memory and its CPU time — and the metrics the
core makes of the last figures each worker sent, labelled by the worker's index."""

from __future__ import annotations

import resource
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from gateway.memory import resident_mib

from .events import RequestCounter, RequestTally


@dataclass
class WorkerFigures:
    """One worker as it saw itself when asked."""

    index: int
    requests: RequestTally
    resident_bytes: int
    cpu_seconds: float


def own_figures(index: int, requests: RequestCounter) -> WorkerFigures:
    """This process's figures, as worker ``index``."""
    usage = resource.getrusage(resource.RUSAGE_SELF)  # its CPU time (its resident set: getrusage has only the peak)
    resident = resident_mib()
    return WorkerFigures(index, requests.tally(), int(resident * 1024 * 1024) if resident is not None else 0,
                         usage.ru_utime + usage.ru_stime)


class WorkerProcesses(Collector):
    """Each worker's resident memory and CPU time (``seen``: the figures the core last gathered), and how many
    refused to start (``refused``: their configuration edited since the gateway started)."""

    def __init__(self, seen: Callable[[], Iterable[WorkerFigures]], refused: Callable[[], int] = lambda: 0) -> None:
        self.seen = seen
        self.refused = refused

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        workers = sorted(self.seen(), key=lambda figures: figures.index)
        memory = GaugeMetricFamily("birdbath_worker_resident_memory_bytes", "Resident memory of each worker "
                                   "process", labels=["worker"])
        cpu = CounterMetricFamily("birdbath_worker_cpu_seconds", "CPU time (user and system) of each worker "
                                  "process since it started", labels=["worker"])
        for figures in workers:
            memory.add_metric([str(figures.index)], figures.resident_bytes)
            cpu.add_metric([str(figures.index)], figures.cpu_seconds)
        yield memory
        yield cpu
        yield GaugeMetricFamily("birdbath_workers_refused", "Worker processes that refused to start because the "
                                "configuration, or a file it names, changed since the gateway started (their slots "
                                "stay empty until it restarts)", value=self.refused())
