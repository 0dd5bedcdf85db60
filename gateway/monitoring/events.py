"""Counters and histograms fed by the gateway's own log events: one ``birdbath.request`` event per request (its
operation, outcome and duration), one ``birdbath.jobs`` event per state a job enters and per run that ends.

The log already says everything the counters count, so a log observer counts it: no operation, front end or backend
is edited for the metrics, and a new operation is counted the day it logs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from twisted.logger import LogLevel

from jobmodel.jobs import JobStatus

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


class EventMetrics:
    """A twisted.logger observer (add it to the global log publisher) that counts what the events say."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter("birdbath_requests", "Requests answered, by operation and outcome (the status, "
                                "fault or FAIL the log line shows)", ["operation", "outcome"], registry=registry)
        self.latency = Histogram("birdbath_request_duration_seconds", "Time from a request's body to its answer",
                                 ["operation"], buckets=LATENCY_BUCKETS, registry=registry)
        self.refused = Counter("birdbath_requests_refused", "Requests refused for who the caller is or where it "
                               "calls from, by HTTP status (401: no or wrong credentials, 403: host not allowed)",
                               ["code"], registry=registry)
        self.transitions = Counter("birdbath_job_transitions", "Jobs entering a state (submitted counts as the "
                                   "state it was submitted in; running is a start)", ["state"], registry=registry)
        self.submitted = Counter("birdbath_jobs_submitted", "Jobs submitted", registry=registry)
        self.run_time = Histogram("birdbath_job_run_duration_seconds", "Wall-clock time of runs that ended",
                                  buckets=RUN_TIME_BUCKETS, registry=registry)
        for state in JobStatus:  # every state has a series from the start: a rule can see "none in 15 minutes"
            self.transitions.labels(state.name.lower())
        self._operation = BoundedLabel()
        self._outcome = BoundedLabel()
        #: the series of each (operation, outcome) seen: prometheus_client's labels() costs more than the count
        self._series: dict[tuple[object, object], tuple[Any, Any]] = {}

    def __call__(self, event: Mapping[str, Any]) -> None:
        namespace = event.get("log_namespace")
        if namespace == REQUESTS:
            self._request(event)
        elif namespace == JOBS:
            self._job(event)

    def _request(self, event: Mapping[str, Any]) -> None:
        if "outcome" in event and "ms" in event:
            key = (event.get("operation", "-"), event["outcome"])
            series = self._series.get(key)
            if series is None:
                operation = self._operation(key[0])
                series = (self.requests.labels(operation, self._outcome(key[1])), self.latency.labels(operation))
                if len(self._series) < MAX_LABEL_VALUES * 4:
                    self._series[key] = series
            series[0].inc()
            series[1].observe(event["ms"] / 1000)
        elif "code" in event and event.get("log_level") is LogLevel.warn:
            self.refused.labels(str(event["code"])).inc()

    def _job(self, event: Mapping[str, Any]) -> None:
        if "wall_seconds" in event:
            self.run_time.observe(event["wall_seconds"])
        elif "status" in event and "requeued" not in event:
            if "previous" not in event:
                self.submitted.inc()
            self.transitions.labels(str(event["status"])).inc()
