"""What counting costs a request: the gateway's per-request log event published with and without the metrics'
observer (:class:`gateway.monitoring.events.EventMetrics`).

The metrics are counted from the ``birdbath.request`` event every request already logs, so the whole added cost
on the hot path is that observer's call.  Both sides publish the same event (the one ``GatewaySite.log`` emits beside
the access log's line) through a twisted ``LogPublisher`` to the text formatter the gateway writes its log with
(which makes no line of it: the access log writes the request's); the figures are microseconds per event, and the
observer's share of the ~1 ms the gateway spends on a small operation (``soap_rates.py`` measures that).

Run: ``python bench/metrics_cost.py [--events 200000] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from figures import RUNS, Figure, interleaved, print_figures
from prometheus_client import CollectorRegistry
from twisted.logger import Logger, LogLevel, LogPublisher

from gateway.logging import line_of
from gateway.monitoring.events import EventMetrics

FIELDS = {"operation": "getJobAd", "client": "127.0.0.1", "outcome": "SUCCESS", "reason": None, "ms": 0.8,
          "who": "alice by socket", "user": "alice", "authentication": "socket"}


def publishing(events: int, *, counted: bool) -> float:
    """Microseconds per request event published to the log's formatter (and to the metrics when ``counted``)."""
    publisher = LogPublisher(line_of)
    if counted:
        publisher.addObserver(EventMetrics(CollectorRegistry()))
    log = Logger(namespace="birdbath.request", observer=publisher)
    started = time.perf_counter()
    for _ in range(events):
        log.emit(LogLevel.info, None, **FIELDS)
    return (time.perf_counter() - started) / events * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    plain = Figure("request event, log only", "us", higher_is_better=False)
    counted = Figure("request event, log and metrics", "us", higher_is_better=False)
    interleaved([(plain, lambda: publishing(args.events, counted=False)),
                 (counted, lambda: publishing(args.events, counted=True))], args.runs)
    added = Figure("added by the metrics per request", "us", higher_is_better=False,
                   samples=[with_ - without for with_, without in zip(counted.samples, plain.samples)])
    print_figures("metrics on the hot path (issue #32)", [(plain, None), (counted, plain), (added, None)])
    print(f"share of a 1 ms small operation: {added.median / 1000:.1%}")


if __name__ == "__main__":
    main()
