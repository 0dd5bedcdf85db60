"""Every benchmark, one after the other, with their figures passed through: the one command of bench/README.md.

Each benchmark runs in its own process (each starts the servers it measures and stops them), with this Python; one
that is missing is skipped with a message, one that fails is reported and the others still run (the exit status
is then 1).  ``--only NAME`` runs the named ones; ``--quick`` asks each for its short form (fewer jobs, shorter
runs: a check that the harness works, not figures to keep).

Run: ``python bench/all.py [--quick] [--only soap_rates ...]`` (tox: ``./dev test -e bench``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent

#: (script, arguments for the figures kept in bench/README.md, arguments of --quick), in the order they run
BENCHMARKS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("soap_rates.py", (), ("--seconds", "2", "--runs", "1")),
    ("job_ads_scale.py", (), ("--jobs", "5000", "--runs", "1")),
    ("queue_scale.py", (), ()),  # scheduler core and execution figures (issue #15 items 2, 3)
    ("short_jobs.py", (), ("--jobs", "60", "--runs", "1")),  # /bin/true jobs against spawning (issue #45 item 1)
    ("soap_answers.py", (), ("--http-jobs", "200")),
    ("submit_ad.py", (), ("--pairs", "50", "--runs", "1")),  # a 40-attribute submit: the codec's reader
    ("dag_diamond.py", (), ("--runs", "2")),
    ("load.py", ("--seconds", "30"), ("--seconds", "10")),
    ("lowlatency.py", (), ("--quick",)),  # AMQP low-latency jobs against SOAP and JSON (issue #28)
    ("metrics_cost.py", (), ("--events", "20000", "--runs", "1")),  # counting on the hot path (issue #32)
    ("query_values.py", (), ("--quick",)),  # queries answered by value (the local store's groups)
    ("selective_queries.py", (), ("--jobs", "2000", "--runs", "1")),  # 1 % getJobAds against classad2 (#45)
    ("qmf_queries.py", (), ("--quick",)),  # QMF object queries by object id (issue #42 item 2)
    ("htcondor_pool.py", (), ("--jobs", "30", "--queued", "500", "--seconds", "1", "--runs", "1")),  # issue #41
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs that check the harness works")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="benchmarks to run (file name, .py optional)")
    args = parser.parse_args()
    wanted = {name.removesuffix(".py") for name in args.only or ()}
    failed = []
    for script, arguments, quick in BENCHMARKS:
        if wanted and script.removesuffix(".py") not in wanted:
            continue
        path = BENCH / script
        print(f"\n######## {script} {' '.join(quick if args.quick else arguments)}", flush=True)
        if not path.exists():
            print(f"{script}: not in this tree, skipped")
            continue
        started = time.monotonic()
        done = subprocess.run([sys.executable, str(path), *(quick if args.quick else arguments)], cwd=BENCH.parent)
        print(f"######## {script}: {'exit status %d' % done.returncode if done.returncode else 'done'} "
              f"in {time.monotonic() - started:.0f} s", flush=True)
        if done.returncode:
            failed.append(script)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
