"""Queries over a literal many jobs share (``backends/literals.py``) against evaluating the constraint on every
job, in process, on the local store.

Two queues of ``--jobs`` jobs are written through ``JobStore.apply`` (one job a cluster, as the Birdbath submit flow
makes them, and ten a cluster, as queue_scale.py writes its large queues), one job in 500 running, every job of one
owner.  For each of a few polling constraints, ``JobStore.selected`` (which answers from the groups by value when
that is cheaper, and otherwise evaluates job by job) is timed against ``backends.evaluation.filtered`` over the same
ads (job by job, the baseline), interleaved, and the two answers are checked to be the same jobs.
``python bench/query_values.py [--jobs 10000] [--runs 3]``.  Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import classad2  # noqa: E402
from figures import Figure, interleaved, print_figures  # noqa: E402

from backends import evaluation  # noqa: E402
from backends.local.store import JobStore  # noqa: E402

CONSTRAINTS = ("JobStatus == 2", "ClusterId % 100 == 0", "ClusterId == 77", 'Owner == "alice"')
#: what every job holds besides its ids and state (a typical submitted job's attributes)
AD = ('[Cmd = "/bin/echo"; Arguments = "hello world"; Requirements = TRUE; QDate = 1700000000; In = "/dev/null"; '
      'Out = "out.txt"; Err = "err.txt"; Iwd = "/tmp/x"; JobUniverse = 5; RequestMemory = 128; RequestCpus = 1; '
      'Owner = "alice"; User = "alice@here"; x1 = 1; x2 = "two"; x3 = 3.5]')


def filled(path: Path, jobs: int, per_cluster: int) -> JobStore:
    store = JobStore(path)
    store.loaded.wait()
    for cluster in range(1, jobs // per_cluster + 1):
        ads = {}
        for proc in range(per_cluster):
            ad = classad2.parseOne(AD)
            ad["ClusterId"], ad["ProcId"] = cluster, proc
            ad["JobStatus"] = 2 if (cluster * per_cluster + proc) % 500 == 0 else 1
            ads[(cluster, proc)] = ad
        store.apply(ads)
    return store


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a small queue, one run (checks the harness)")
    args = parser.parse_args()
    if args.quick:
        args.jobs, args.runs = 1000, 1
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for per_cluster in (1, 10):
            store = filled(Path(tmp) / f"queue-{per_cluster}.db", args.jobs, per_cluster)
            for text in CONSTRAINTS:
                constraint = classad2.ExprTree(text)
                by_values = [ad["ClusterId"] for ad in store.selected(constraint, 30)]
                each = sorted(ad["ClusterId"] for ad in evaluation.filtered(store.values(), constraint, 30))
                if by_values != each:
                    raise SystemExit(f"{text}: the two answers differ")
                name = f"{text} ({per_cluster} a cluster, {len(by_values)} of {args.jobs:,} jobs)"
                selected = Figure(f"{name}, JobStore.selected", "ms", higher_is_better=False)
                scan = Figure(f"{name}, every job evaluated", "ms", higher_is_better=False)

                def time_selected(s: JobStore = store, c: classad2.ExprTree = constraint) -> float:
                    return timed(lambda: s.selected(c, 30))

                def time_each_job(s: JobStore = store, c: classad2.ExprTree = constraint) -> float:
                    return timed(lambda: evaluation.filtered(s.values(), c, 30))

                interleaved([(selected, time_selected), (scan, time_each_job)], args.runs)
                rows.append((selected, scan))
            store.close()
    print_figures("a query answered by value where that is cheaper, against every job evaluated", rows)


if __name__ == "__main__":
    main()
