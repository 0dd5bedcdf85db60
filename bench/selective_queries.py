"""A getJobAds matching 1 % of a large queue, end to end, against the ClassAd library's own evaluation of the same
constraint over the same ads (issue #45: at most 3 times that floor), in both process layouts.

The queue (``--jobs``, ten procs a cluster) is written straight into the store, as ``queue_scale.py`` does, and a
gateway without slots is started on it once per layout (``--workers 0`` and ``2``; once every ad is parsed).  Each
constraint matches every hundredth cluster, written three ways, because the gateway answers each kind another way:

- ``literal``: ``ClusterId % 100 == 0`` (an expression over the job's own literals, evaluated in the query's
  thread, or by a worker's view of the jobs);
- ``function``: ``regexp("sleep", Cmd) && ClusterId % 100 == 0`` (a function call: evaluated in forked workers);
- ``string``: ``strcmp(Owner, "nobody") != 0 && ClusterId % 100 == 0`` (the same with a string comparison).

Each figure is the median of ``--runs`` (default 5) queries from one client on a kept-alive connection, each
interleaved with the floor: classad2 evaluating the constraint over every ad in this process.  Prints figures and
ratios; asserts nothing.

Run: ``python bench/selective_queries.py [--jobs 20000] [--runs 5] [--workers 0,2]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from xml.sax.saxutils import escape

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import classad2  # noqa: E402
from figures import Figure, interleaved, print_figures  # noqa: E402
from queue_scale import QUEUE_ONLY, Client, all_parsed, fill, stored_ads, template_ad, timed  # noqa: E402

from gateway.testing import GatewayProcess  # noqa: E402
from jobmodel.classads import matches  # noqa: E402

CONSTRAINTS = {
    "literal": "ClusterId % 100 == 0",
    "function": 'regexp("sleep", Cmd) && ClusterId % 100 == 0',
    "string": 'strcmp(Owner, "nobody") != 0 && ClusterId % 100 == 0',
}


def started(state_dir: Path, tmp: Path, workers: int) -> GatewayProcess:
    gateway = GatewayProcess(state_dir, QUEUE_ONLY, tmp=tmp, extra_args=("--workers", str(workers)))
    before, start = gateway.log().count("queued job ads parsed"), time.monotonic()
    gateway.start()
    all_parsed(gateway, start, before)
    return gateway


def measure(tmp: Path, jobs: int, runs: int, layouts: list[int]) -> None:
    state = tmp / "queue"
    fill(state, template_ad(tmp), jobs)
    ads = stored_ads(state)
    for workers in layouts:
        gateway = started(state, tmp, workers)
        try:
            assert gateway.port is not None
            client = Client(gateway.port)
            rows = []
            for name, text in CONSTRAINTS.items():
                expected = sum(1 for ad in ads if matches(classad2.ExprTree(text), ad))
                if client.count(escape(text)) != expected:
                    raise RuntimeError(f"{name}: the gateway's answer differs from classad2's {expected} ads")
                query = Figure(f"getJobAds {name}: {text}", "ms", higher_is_better=False)
                floor = Figure("  classad2 evaluating it over every ad", "ms", higher_is_better=False)
                tree = classad2.ExprTree(text)
                interleaved([(query, lambda text=text, client=client: 1000 * timed(lambda: client.count(escape(text)))),
                             (floor, lambda tree=tree: 1000 * timed(lambda: [ad for ad in ads if matches(tree, ad)]))],
                            runs)
                rows.append((query, floor))
            client.close()
        finally:
            gateway.stop()
        print_figures(f"1 % of {jobs:,} queued, workers = {workers} (ratio: to classad2's own evaluation)",
                      [row for pair in rows for row in (pair, (pair[1], None))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", default="0,2", help="the layouts, as --workers values")
    args = parser.parse_args()
    print(f"selective queries ({os.cpu_count()} CPUs), {time.strftime('%Y-%m-%d %H:%M')}, "
          f"load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as scratch:
        measure(Path(scratch), args.jobs, args.runs, [int(n) for n in args.workers.split(",")])


if __name__ == "__main__":
    main()
