"""Memory of each process of the gateway with worker processes against the single process, at a large queue
(issue #30: "RSS of each process and the total at 100,000 queued jobs; the workers together add at most one core
process's worth").

One queue of ``--jobs`` jobs is written straight into a state directory through the store's own API (as
``queue_scale.py`` does), then, for ``workers = 0`` and ``workers = --workers`` in turn, a gateway is started on a
copy of it and measured three times: idle once every queued ad is parsed, after a getJobAds of the whole queue
(the largest answer a worker carries), and after a getJobAds of 1 % of it.  Each figure is VmRSS in MiB, the core's
each process's after a full garbage collection (SIGUSR1; the workers once each said it serves).

Run: ``python bench/workers_memory.py [--jobs 100000] [--workers 2]``.  Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import collected, queue_length, rss_mib  # noqa: E402
from queue_scale import ONE_PERCENT, PARSED, QUEUE_ONLY, Client, all_parsed, fill, template_ad  # noqa: E402

from gateway.testing import GatewayProcess  # noqa: E402

SERVING = re.compile(r"worker \d+ \(pid (\d+)\) serving")


def workers_of(gateway: GatewayProcess, count: int, timeout: float = 120) -> list[int]:
    """The worker processes of a core, once ``count`` of them said they serve (the core logs each)."""
    deadline = time.monotonic() + timeout
    while len(pids := [int(pid) for pid in SERVING.findall(gateway.log())]) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(pids)} of {count} workers serve")
        time.sleep(0.1)
    return pids


def snapshot(gateway: GatewayProcess, workers: list[int]) -> tuple[float, list[float]]:
    """The core's RSS and each worker's, in MiB, each after a full collection (SIGUSR1)."""
    collected(gateway, every=True)
    return rss_mib(gateway.process.pid), [rss_mib(pid) for pid in workers]


def measure(state: Path, tmp: Path, workers: int) -> list[tuple[str, float, list[float]]]:
    copy = tmp / f"state-{workers}"
    shutil.copytree(state, copy)
    gateway = GatewayProcess(copy, QUEUE_ONLY, tmp=tmp, extra_args=("--workers", str(workers)))
    before = gateway.log().count(PARSED)
    started = time.monotonic()
    gateway.start()
    try:
        all_parsed(gateway, started, before)
        pids = workers_of(gateway, workers) if workers else []
        rows = [("idle, every ad parsed", *snapshot(gateway, pids))]
        assert gateway.port is not None
        length = queue_length(gateway.port)
        rows.append((f"after getJobAds of all {length:,}", *snapshot(gateway, pids)))
        client = Client(gateway.port)
        client.count(ONE_PERCENT)
        client.close()
        rows.append(("after getJobAds of 1 %", *snapshot(gateway, pids)))
        return rows
    finally:
        gateway.stop()
        shutil.rmtree(copy, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000, help="queued jobs")
    parser.add_argument("--workers", type=int, default=2, help="the multi-process layout's workers")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-workers-memory-") as name:
        tmp = Path(name)
        state = tmp / "state"
        fill(state, template_ad(tmp), args.jobs)
        print(f"VmRSS in MiB at {args.jobs:,} queued jobs (each process after a full garbage collection)")
        for workers in (0, args.workers):
            for label, core, each in measure(state, tmp, workers):
                shown = " + ".join(f"{rss:.0f}" for rss in each)
                print(f"workers = {workers}  {label:<32} core {core:7.0f}  workers {shown or '-':>15}  "
                      f"total {core + sum(each):7.0f}")


if __name__ == "__main__":
    main()
