"""One client's submit flow call by call, in the single process (``workers = 0``) and with worker processes (issue #30).

The lone client's submit flow is the figure the workers lose: each of its five calls (beginTransaction, newCluster,
newJob, submit of 30 attributes, commitTransaction) crosses from the worker to the core and back.  This benchmark
says where that goes: for each layout, in turn (``--runs`` times, interleaved), one client in this process times
each call of ``--jobs`` submit flows on a kept-alive connection, and /proc gives the CPU time each of the gateway's
processes spent per job (user and system), read around the loop.  It prints each call's median latency in both
layouts (the workers' ratio to the single process: below 1 is slower), then the CPU per job of each process.

``--pin CPU`` binds every thread of the gateway's processes to that CPU and the client to another: whether the
workers' loss is the wake-ups between CPUs (it would shrink) or work (it stays).

``python bench/submit_calls.py [--jobs 1500] [--runs 2] [--workers 2] [--pin 1]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import Figure, print_figures
from queue_scale import Client, job_ad
from workers import processes, started

CALLS = ("beginTransaction", "newCluster", "newJob", "submit", "commitTransaction")


class TimedClient(Client):
    """A client that keeps the latency of each of its SOAP calls, by operation."""

    def __init__(self, port: int) -> None:
        super().__init__(port)
        self.latencies: dict[str, list[float]] = {call: [] for call in CALLS}

    def soap(self, op: str, inner: str) -> bytes:
        started = time.perf_counter()
        answer = super().soap(op, inner)
        self.latencies[op].append(time.perf_counter() - started)
        return answer


def cpu_times(pid: int) -> tuple[float, float]:
    """A process's user and system CPU seconds, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def pin(pids: list[int], cpu: int) -> None:
    """Every thread of the gateway's processes on ``cpu``, this process on the others."""
    for pid in pids:
        for thread in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(thread), {cpu})
    os.sched_setaffinity(0, set(range(os.cpu_count() or 1)) - {cpu})


def measure(workers: int, tmp: Path, jobs: int, cpu: int | None, figures: dict[str, Figure]) -> None:
    gateway = started(workers, tmp, lone_in_core=False)  # (the lone client's calls crossing to the core)
    everywhere = os.sched_getaffinity(0)
    try:
        pids = processes(gateway)
        if cpu is not None:
            pin(pids, cpu)
        client, ad = TimedClient(gateway.port), job_ad()
        before = [cpu_times(pid) for pid in pids]
        for _ in range(jobs):
            client.submit_jobs(ad)
        after = [cpu_times(pid) for pid in pids]
        client.close()
        for call, latencies in client.latencies.items():
            figures[call].add(statistics.median(latencies) * 1e6)
        figures["whole flow"].add(sum(statistics.median(latencies) for latencies in client.latencies.values()) * 1e6)
        for index, (start, end) in enumerate(zip(before, after)):
            name = "the single process" if not workers else "the core" if index == 0 else f"worker {index}"
            for part, spent in zip(("user", "system"), (end[0] - start[0], end[1] - start[1])):
                key = f"{name}, {part}"
                figures.setdefault(key, Figure(f"{key} (workers = {workers})", "ms CPU/job", higher_is_better=False))
                figures[key].add(spent / jobs * 1000)
    finally:
        os.sched_setaffinity(0, everywhere)
        gateway.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1500, help="submit flows per layout and run")
    parser.add_argument("--runs", type=int, default=2, help="runs of each layout, interleaved")
    parser.add_argument("--workers", type=int, default=2, help="the multi-process layout's workers")
    parser.add_argument("--pin", type=int, default=None, metavar="CPU", help="bind the gateway to this CPU")
    args = parser.parse_args()
    layouts = (0, args.workers)
    figures = {workers: {name: Figure(f"{name} (workers = {workers})", "us", higher_is_better=False)
                         for name in (*CALLS, "whole flow")} for workers in layouts}
    pinned = "not pinned" if args.pin is None else f"the gateway on CPU {args.pin}"
    print(f"workers = 0 against workers = {args.workers}: {args.runs} runs of {args.jobs} jobs, "
          f"{os.cpu_count()} CPUs, {pinned}, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            for workers in layouts:
                measure(workers, Path(tmp), args.jobs, args.pin, figures[workers])
    single, multi = figures[0], figures[args.workers]
    print_figures(f"median latency of each call, workers = {args.workers} against the single process",
                  [(multi[name], single[name]) for name in (*CALLS, "whole flow")])
    for workers in layouts:
        print_figures(f"CPU time per job (workers = {workers})",
                      [(figure, None) for name, figure in figures[workers].items() if name.endswith(("user", "system"))])
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
