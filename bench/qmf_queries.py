"""A QMF console's object query by object id on a large queue (gateway/qmf/objects.py ``Objects.named``: a job
read alone, a submission by its own jobs, the scheduler's counts from two attributes of each job) against the way
it was answered before, measured in the same run: the object's whole class read (every job's summary) and the one
object picked out.  In process, on the local backend (``tests/qmf_queue.py``), without a broker: the
broker's and the console's share of an answer does not change with the queue.
``python bench/qmf_queries.py [--clusters 100] [--per-cluster 100] [--runs 3]``.  Prints figures; asserts nothing
about time."""

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

from figures import Figure, interleaved, print_figures  # noqa: E402

from gateway.qmf.schema import MRG_JOB, SCHEDULER, SUBMISSION  # noqa: E402
from tests.qmf_queue import CALLER, SCHEDD, ManyJobs  # noqa: E402
from tests.synchronous import run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--per-cluster", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a small queue, one run (checks the harness)")
    args = parser.parse_args()
    if args.quick:
        args.clusters, args.per_cluster, args.runs = 20, 50, 1
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        many = ManyJobs(Path(tmp), args.clusters, args.per_cluster)
        middle = many.clusters[len(many.clusters) // 2]
        jobs = args.clusters * args.per_cluster
        for klass, key in ((MRG_JOB, f"{middle}.0"), (SUBMISSION, f"{SCHEDD}#{middle}"), (SCHEDULER, SCHEDD)):
            name = f"{klass.package}:{klass.name}:{key} among {jobs:,} jobs"
            now = Figure(f"{name}, by its id", "ms", higher_is_better=False)
            before = Figure(f"{name}, its class read and picked", "ms", higher_is_better=False)

            def by_id(k=klass, key=key) -> float:
                return timed(lambda: run(many.objects.named(CALLER, k, key)))

            def by_class(k=klass, key=key) -> float:
                return timed(lambda: [item for item in run(_whole_class(many, k)) if item.key == key])

            interleaved([(now, by_id), (before, by_class)], args.runs)
            rows.append((now, before))
        many.close()
    print_figures("an object query by object id, against its class read whole (the path it replaced)", rows)


async def _whole_class(many: ManyJobs, klass):
    """The path replaced: every job's whole summary read, then the class's objects made from them."""
    if klass is SUBMISSION:
        return many.objects._submissions_of(await many.submissions.submissions(CALLER))
    jobs = await many.submissions.summaries(CALLER, [])
    return [many.objects._job(job) for job in jobs] if klass is MRG_JOB else [many.objects._scheduler(jobs)]


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return (time.perf_counter() - started) * 1000


if __name__ == "__main__":
    main()
