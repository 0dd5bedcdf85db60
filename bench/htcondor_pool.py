"""What the gateway adds in front of a real schedd (issue #41 item 6): the Birdbath submit flow and a 1 % getJobAds
through the gateway on the htcondor backend, against HTCondor's own ``htcondor2`` bindings doing the same directly
on the same personal pool, interleaved in one run.

Needs an HTCondor install (``BIRDBATH_HTCONDOR``, a RELEASE_DIR, or ``condor_master`` on PATH); without one it says
so and measures nothing.  The pool has no startd: submitted jobs stay idle (``Requirements = false`` too).

- submit: one job per transaction, ``--jobs`` of them; the gateway's five SOAP calls (beginTransaction, newCluster,
  newJob, submit of 30 attributes, commitTransaction) against one ``Schedd.submit`` of the same job;
- query: ``--queued`` jobs in the queue, a constraint that selects 1 % of them, answered ``--seconds`` long,
  ``getJobAds`` against ``Schedd.query`` with the same constraint (whole ads both).

``python bench/htcondor_pool.py [--jobs 200] [--queued 2000] [--seconds 5] [--runs 3] [--workers 0]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import Figure, interleaved, print_figures  # noqa: E402
from queue_scale import JOB_STATUS, Client, job_ad  # noqa: E402
from servers import gateway, item  # noqa: E402

from gateway.testing_htcondor import PersonalPool, find_release  # noqa: E402

#: what the submitted jobs carry besides queue_scale's 30 attributes: an owner the schedd accepts, an Iwd of their
#: own (so the gateway does not spool them), and requirements that never match
EXTRA = item("Owner", "STRING", "nobody") + item("Iwd", "STRING", "/tmp") + item("Tag", "INTEGER", "-1")
DIRECT = {"executable": "/bin/sleep", "arguments": "3600", "requirements": "false", "initialdir": "/tmp",
          "+Tag": "-1"}


def start_pool(release: Path, directory: Path) -> PersonalPool:
    pool = PersonalPool(release, directory, daemons=("MASTER", "COLLECTOR", "SCHEDD"))
    pool.start(slots=0)
    os.environ["CONDOR_CONFIG"] = str(pool.config)  # the bindings of this process talk to that pool
    return pool


def fill(schedd, queued: int) -> None:
    """``queued`` jobs with Tag = 0 .. 99 over and over: the constraint ``Tag == 7`` selects 1 %."""

    description = dict(DIRECT, **{"+Tag": "$(Process) % 100"})
    schedd.submit(submit_description(description, queued))


def submit_description(commands: dict[str, str], count: int):
    """A submit description with its own ``queue`` statement, its count written with two digits at least: the 24.0
    ``htcondor2.Schedd.submit`` reads the character before a missing "from" in the queue arguments, an IndexError
    for ``count=1`` or ``queue 1``."""
    import htcondor2

    text = "".join(f"{name} = {value}\n" for name, value in commands.items())
    return htcondor2.Submit(f"{text}queue {count:02d}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--queued", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args()
    release, reason = find_release()
    if release is None:
        print(f"htcondor_pool: {reason}; nothing measured")
        return 0
    directory = Path(tempfile.mkdtemp(prefix="birdbath-bench-pool-", dir="/tmp"))
    directory.chmod(0o755)
    pool = start_pool(release, directory / "pool")
    (directory / "gateway").mkdir()
    config = f'[gateway]\nbackend = "htcondor"\n[backends.htcondor]\ncollector = "{pool.collector_host}"\n'
    served = gateway(directory / "gateway", config, args.workers)
    try:
        import htcondor2

        schedd = htcondor2.Schedd(htcondor2.Collector(pool.collector_host).locate(htcondor2.DaemonType.Schedd))
        client = Client(served.port)
        ad = job_ad() + EXTRA
        through, direct = (Figure("submit flow through the gateway", "jobs/s"),
                           Figure("Schedd.submit directly (htcondor2)", "jobs/s"))

        def submitted_through() -> float:
            started = time.perf_counter()
            for _ in range(args.jobs):
                client.submit_jobs(ad)
            return args.jobs / (time.perf_counter() - started)

        def submitted_directly() -> float:
            description = submit_description(DIRECT, 1)
            started = time.perf_counter()
            for _ in range(args.jobs):
                schedd.submit(description)
            return args.jobs / (time.perf_counter() - started)

        interleaved([(through, submitted_through), (direct, submitted_directly)], args.runs)
        schedd.act(htcondor2.JobAction.Remove, "true")
        fill(schedd, args.queued)
        expected = args.queued // 100
        queried, asked = (Figure(f"getJobAds Tag == 7 through the gateway ({expected} of {args.queued})", "queries/s"),
                          Figure("Schedd.query Tag == 7 directly (htcondor2)", "queries/s"))

        def rate(query) -> float:
            done, deadline = 0, time.perf_counter() + args.seconds
            started = time.perf_counter()
            while time.perf_counter() < deadline:
                assert query() == expected
                done += 1
            return done / (time.perf_counter() - started)

        interleaved([(queried, lambda: rate(lambda: len(JOB_STATUS.findall(
                         client.soap("getJobAds", "<constraint>Tag == 7</constraint>"))))),
                     (asked, lambda: rate(lambda: len(schedd.query("Tag == 7"))))], args.runs)
        client.close()
        print_figures(f"the gateway on the htcondor backend against the bindings, one personal pool "
                      f"(gateway workers: {args.workers})", [(through, direct), (direct, None), (queried, asked),
                                                             (asked, None)])
    finally:
        served.stop()
        pool.stop()
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
