"""Counters and histograms fed by the gateway's own log events: one ``birdbath.request`` event per request (its
operation, outcome and duration), one ``birdbath.jobs`` event per state a job enters and per run that ends.

The log already says everything the counters count, so a log observer counts it: no operation, front end or backend
is edited for the metrics, and a new operation is counted the day it logs.

Requests are counted where they are served, as plain tallies (:class:`RequestTally`) that add up: the single
process counts its own; with worker processes each worker counts its own and the core adds the workers' tallies,
asked for when /metrics is scraped, to its own (nothing crosses between the processes per request)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from twisted.logger import LogLevel

from jobmodel.figures import Buckets
from jobmodel.jobs import JobStatus

from .figures import cumulated

REQUESTS = "birdbath.request"
JOBS = "birdbath.jobs"

#: at most this many distinct values of one label (operations, outcomes are words the gateway chooses, but a
#: client names the operation it calls); later ones are counted as "other"
MAX_LABEL_VALUES = 64

#: request latencies: the gateway answers a small operation in about a millisecond, a large query in seconds
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: job run times: from a few seconds to days
RUN_TIME_BUCKETS = (1, 10, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400)


class BoundedLabel:
    """A label's values as first seen, up to ``limit`` of them; the rest become ``other``."""

    def __init__(self, limit: int = MAX_LABEL_VALUES) -> None:
        self._seen: set[str] = set()
        self._limit = limit

    def __call__(self, value: object) -> str:
        text = str(value)
        if text in self._seen:
            return text
        if len(self._seen) >= self._limit:
            return "other"
        self._seen.add(text)
        return text


@dataclass
class RequestTally:
    """The requests one process answered (by operation and outcome, and their durations by operation) and refused
    (by HTTP status): plain counts, so that the tallies of several processes add up."""

    answered: dict[str, dict[str, int]] = field(default_factory=dict)
    latency: dict[str, Buckets] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)

    def merge(self, other: RequestTally) -> RequestTally:
        """Both tallies added (neither is changed)."""
        answered = {operation: dict(outcomes) for operation, outcomes in self.answered.items()}
        for operation, outcomes in other.answered.items():
            mine = answered.setdefault(operation, {})
            for outcome, count in outcomes.items():
                mine[outcome] = mine.get(outcome, 0) + count
        latency = dict(self.latency)
        for operation, buckets in other.latency.items():
            latency[operation] = latency[operation].merge(buckets) if operation in latency else buckets.copy()
        refused = dict(self.refused)
        for code, count in other.refused.items():
            refused[code] = refused.get(code, 0) + count
        return RequestTally(answered, latency, refused)


class RequestCounter:
    """A twisted.logger observer that tallies the requests of its process (answered or refused)."""

    def __init__(self) -> None:
        self._tally = RequestTally()
        self._operation = BoundedLabel()
        self._outcome = BoundedLabel()
        #: requests may be logged from threads: each count is one step under the lock
        self._lock = threading.Lock()

    def __call__(self, event: Mapping[str, Any]) -> None:
        if event.get("log_namespace") != REQUESTS:
            return
        if "outcome" in event and "ms" in event:
            tally = self._tally
            with self._lock:
                outcomes = tally.answered.get(event.get("operation", "-"))
                if outcomes is None:
                    operation = self._operation(event.get("operation", "-"))
                    outcomes = tally.answered.setdefault(operation, {})
                    tally.latency.setdefault(operation, Buckets(LATENCY_BUCKETS))
                else:
                    operation = event.get("operation", "-")
                outcome = event["outcome"]
                if outcome not in outcomes:
                    outcome = self._outcome(outcome)
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
                tally.latency[operation].observe(event["ms"] / 1000)
        elif "code" in event and event.get("log_level") is LogLevel.warn:
            code = str(event["code"])
            with self._lock:
                self._tally.refused[code] = self._tally.refused.get(code, 0) + 1

    def tally(self) -> RequestTally:
        """A copy of the counts so far."""
        with self._lock:
            return RequestTally().merge(self._tally)


class RequestFamilies(Collector):
    """The request metrics: this process's tally and the others' (``others``: the worker processes' tallies, as the
    core last gathered them), added."""

    def __init__(self, counter: RequestCounter, others: Callable[[], Iterable[RequestTally]]) -> None:
        self.counter = counter
        self.others = others

    def collect(self) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        tally = self.counter.tally()
        for other in self.others():
            tally = tally.merge(other)
        requests = CounterMetricFamily("birdbath_requests", "Requests answered, by operation and outcome (the status, "
                                       "fault or FAIL the log line shows)", labels=["operation", "outcome"])
        for operation, outcomes in sorted(tally.answered.items()):
            for outcome, count in sorted(outcomes.items()):
                requests.add_metric([operation, outcome], count)
        yield requests
        latency = HistogramMetricFamily("birdbath_request_duration_seconds", "Time from a request's body to its "
                                        "answer", labels=["operation"])
        for operation, buckets in sorted(tally.latency.items()):
            latency.add_metric([operation], cumulated(buckets), buckets.total)
        yield latency
        refused = CounterMetricFamily("birdbath_requests_refused", "Requests refused for who the caller is or where "
                                      "it calls from, by HTTP status (401: no or wrong credentials, 403: host not "
                                      "allowed)", labels=["code"])
        for code, count in sorted(tally.refused.items()):
            refused.add_metric([code], count)
        yield refused


class EventMetrics:
    """A twisted.logger observer (add it to the global log publisher) that counts what the events say: the jobs'
    events here, the requests by its :class:`RequestCounter` (``others``: the tallies of other processes serving
    requests, added to this one's)."""

    def __init__(self, registry: CollectorRegistry, others: Callable[[], Iterable[RequestTally]] = tuple) -> None:
        self.requests = RequestCounter()
        registry.register(RequestFamilies(self.requests, others))
        self.transitions = Counter("birdbath_job_transitions", "Jobs entering a state (submitted counts as the "
                                   "state it was submitted in; running is a start)", ["state"], registry=registry)
        self.submitted = Counter("birdbath_jobs_submitted", "Jobs submitted", registry=registry)
        self.run_time = Histogram("birdbath_job_run_duration_seconds", "Wall-clock time of runs that ended",
                                  buckets=RUN_TIME_BUCKETS, registry=registry)
        for state in JobStatus:  # every state has a series from the start: a rule can see "none in 15 minutes"
            self.transitions.labels(state.name.lower())

    def __call__(self, event: Mapping[str, Any]) -> None:
        namespace = event.get("log_namespace")
        if namespace == REQUESTS:
            self.requests(event)
        elif namespace == JOBS:
            self._job(event)

    def _job(self, event: Mapping[str, Any]) -> None:
        if "wall_seconds" in event:
            self.run_time.observe(event["wall_seconds"])
        elif "status" in event and "requeued" not in event:
            if "previous" not in event:
                self.submitted.inc()
            self.transitions.labels(str(event["status"])).inc()
