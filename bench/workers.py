"""The single-process gateway (``workers = 0``) against the core with worker processes (``workers = 2``), issue #30.

Both layouts are started in turn, ``--runs`` times (interleaved, so that a machine that slows down slows both), on
a gateway whose jobs stay queued (no slots) and whose per-caller limits are raised for 8 clients.  Each run measures:

- the submit flow (beginTransaction, newCluster, newJob, submit of 30 attributes, commitTransaction), 1 client and
  8 clients, each on its own kept-alive connection in its own process;
- small operations with 16 kept-alive connections (``wrk -t1 -c16``): getVersionString and getJobAd (30 attributes);
- getJobAds polling over the queue the submit flows filled (plus ``--jobs`` more): 1 client and 8 clients looping
  a constraint that matches 1 % of it.

It prints each figure per layout, the workers' ratio to the single process, and 8 clients' ratio to one client in
each layout; then the CPU time the gateway's processes spent per job, request or query (read from /proc around each
figure): the core's alone, and all its processes' (the core and its workers).  The CPU figures say what each layout
costs per operation, which a loaded machine disturbs much less than the rates.
``python bench/workers.py [--seconds 8] [--runs 3] [--jobs 2000] [--workers 2]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import Figure, print_figures
from queue_scale import ONE_PERCENT, QUEUE_ONLY, Client, job_ad, looped, submit_flow
from servers import ENVELOPE, wrk_missing, wrk_rate

from gateway.testing import GatewayProcess

#: QUEUE_ONLY's limits, with room for 16 connections of one caller holding transactions
CONFIG = QUEUE_ONLY.replace("max_transactions_per_caller = 64", "max_transactions_per_caller = 256")


def polls(port: int, clients: int, seconds: float) -> float:
    """getJobAds/s of ``clients`` processes polling the 1 % constraint for ``seconds``."""
    return looped(port, clients, seconds, lambda client: client.count(ONE_PERCENT))


#: "beside an idle connection": a lone client while another connection is open, which the workers serve (the lone
#: connection alone is the core's, ``lone_connection_in_core``); in one process the same as alone
LAYOUT_FIGURES = ("submit flow, 1 client", "submit flow, 1 client beside an idle connection", "submit flow, 8 clients",
                  "getVersionString, 16 connections", "getJobAd, 16 connections", "getJobAds 1 % polling, 1 client",
                  "getJobAds 1 % polling, 1 client beside an idle connection", "getJobAds 1 % polling, 8 clients")
UNITS = ("jobs/s", "jobs/s", "jobs/s", "req/s", "req/s", "queries/s", "queries/s", "queries/s")
#: what each rate counts, for the CPU figures' units
OPERATIONS = ("job", "job", "job", "request", "request", "query", "query", "query")


#: the CPU figures: the core's alone and the gateway's processes' together, per unit of each rate
CPU_FIGURES = ("core", "all processes")


@contextmanager
def idle_connection(port: int) -> Iterator[None]:
    """A connection held open (answered once, so that it is served) while the block runs."""
    client = Client(port)
    client.soap("getVersionString", "")
    try:
        yield
    finally:
        client.close()


def processes(gateway: GatewayProcess) -> list[int]:
    """The gateway's pids: its core (or single process) first, then its workers."""
    pid = gateway.process.pid
    return [pid, *map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time of the processes (those that ended meanwhile count nothing)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def measured(gateway: GatewayProcess, name: str, seconds: float, rate: Callable[[], float],
             figures: dict[str, Figure]) -> None:
    """Add ``rate()`` to its figure, and the CPU time the gateway spent per unit of it (ms) to the CPU figures."""
    pids = processes(gateway)
    core, every = cpu_seconds(pids[:1]), cpu_seconds(pids)
    value = rate()
    figures[name].add(value)
    done = value * seconds  # (the rate is over the measurement's seconds)
    figures[f"{name}: core"].add((cpu_seconds(pids[:1]) - core) / done * 1000)
    figures[f"{name}: all processes"].add((cpu_seconds(pids) - every) / done * 1000)


def started(workers: int, tmp: Path, lone_in_core: bool = True) -> GatewayProcess:
    """A gateway of this layout, its workers serving, warmed up (each process's first requests load the service's
    schemas); ``lone_in_core``: its ``lone_connection_in_core`` (the default, on, unless a benchmark of what
    crosses between the processes turns it off)."""
    gateway = GatewayProcess(tmp / f"state-{workers}-{time.time_ns()}", CONFIG, tmp=tmp,
                             extra_args=("--workers", str(workers), "--lone-connection-in-core",
                                         "yes" if lone_in_core else "no")).start()
    deadline = time.monotonic() + 120
    while gateway.log().count(") serving") < workers and time.monotonic() < deadline:  # the workers' start
        time.sleep(0.2)
    submit_flow(gateway.port, 4, 1.0)
    return gateway


def measure(workers: int, tmp: Path, seconds: float, jobs: int, figures: dict[str, Figure]) -> None:
    gateway = started(workers, tmp)
    try:
        measured(gateway, "submit flow, 1 client", seconds, lambda: submit_flow(gateway.port, 1, seconds), figures)
        with idle_connection(gateway.port):
            measured(gateway, "submit flow, 1 client beside an idle connection", seconds,
                     lambda: submit_flow(gateway.port, 1, seconds), figures)
        measured(gateway, "submit flow, 8 clients", seconds, lambda: submit_flow(gateway.port, 8, seconds), figures)
        if jobs:
            submit_flow(gateway.port, 8, 600, limit=max(1, jobs // 8))
        if not wrk_missing():
            version = ENVELOPE.format(op="getVersionString", inner="").encode()
            measured(gateway, "getVersionString, 16 connections", seconds,
                     lambda: wrk_rate(gateway.url, version, seconds), figures)
            client = Client(gateway.port)
            cluster = client.submit_jobs(job_ad())
            client.close()
            body = ENVELOPE.format(op="getJobAd", inner=f"<clusterId>{cluster}</clusterId><jobId>0</jobId>").encode()
            measured(gateway, "getJobAd, 16 connections", seconds, lambda: wrk_rate(gateway.url, body, seconds),
                     figures)
        measured(gateway, "getJobAds 1 % polling, 1 client", seconds, lambda: polls(gateway.port, 1, seconds),
                 figures)
        with idle_connection(gateway.port):
            measured(gateway, "getJobAds 1 % polling, 1 client beside an idle connection", seconds,
                     lambda: polls(gateway.port, 1, seconds), figures)
        measured(gateway, "getJobAds 1 % polling, 8 clients", seconds, lambda: polls(gateway.port, 8, seconds),
                 figures)
    finally:
        gateway.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each measurement (s)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each layout, interleaved")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs added to the queue before the polling")
    parser.add_argument("--workers", type=int, default=2, help="the multi-process layout's workers")
    parser.add_argument("--quick", action="store_true", help="one short run of each (checks the harness)")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.runs, args.jobs = 2.0, 1, 200
    layouts = (0, args.workers)
    figures = {workers: {name: Figure(f"{name} (workers = {workers})", unit)
                         for name, unit in zip(LAYOUT_FIGURES, UNITS)} for workers in layouts}
    for workers in layouts:
        figures[workers].update({f"{name}: {part}": Figure(f"{name}, {part} (workers = {workers})",
                                                           f"ms CPU/{operation}", higher_is_better=False)
                                 for name, operation in zip(LAYOUT_FIGURES, OPERATIONS) for part in CPU_FIGURES})
    print(f"workers = 0 against workers = {args.workers}: {args.runs} runs of {args.seconds:g} s, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            for workers in layouts:
                measure(workers, Path(tmp), args.seconds, args.jobs, figures[workers])
    single, multi = figures[0], figures[args.workers]
    print_figures(f"workers = {args.workers} against the single process",
                  [(multi[name], single[name]) for name in LAYOUT_FIGURES])
    for part in CPU_FIGURES:
        print_figures(f"CPU time per operation, the {part} of workers = {args.workers} against the single process",
                      [(multi[f"{name}: {part}"], single[f"{name}: all processes"]) for name in LAYOUT_FIGURES])
    for workers in layouts:
        print_figures(f"8 clients against 1 (workers = {workers})", [
            (figures[workers]["submit flow, 8 clients"], figures[workers]["submit flow, 1 client"]),
            (figures[workers]["getJobAds 1 % polling, 8 clients"], figures[workers]["getJobAds 1 % polling, 1 client"])])
    print(f"\nload average at the end {os.getloadavg()[0]:.1f} (other work on the machine shares its cores)")


if __name__ == "__main__":
    main()
