"""getJobAds(TRUE) over a large queue: time per attribute end to end, against the gSOAP anchor answering as many ads.

The queue is filled without the wire (it is not what is measured): one job is submitted through SOAP, the gateway is
stopped, its ad is copied ``--jobs`` times into the queue file as procs of its cluster (``JobStore.apply``, the local
backend's one write path), and the gateway is started again on that queue, ``--restarts`` times.  After each start
(once the store has parsed every ad: the gateway's CPU time stops growing), one client posts getJobAds with the
constraint TRUE twice and reads each whole answer: the *cold* figure is the first query after a restart (every ad
converted), the *second* the next (converted again, and its text kept: ``gateway.birdbath.adtexts`` keeps a job's text at
its revision from its second writing).  After the last start, ``--runs`` further queries interleaved with the anchor
(``--jobs`` ads of 40 attributes) give the *warm* figure (answered from kept texts).  Each figure is the time from the
request to
the answer's last byte divided by the attributes in the answer, and (less disturbed by other load on the machine)
the gateway process's CPU time over the same.  It also prints the gateway's resident memory before the first query
and its peak (VmHWM) after the last, next to the answer's size: an answer held whole several times shows as a peak
several times its size.

Run: ``python bench/job_ads_scale.py [--jobs 100000] [--runs 3] [--restarts 2]``.
"""

from __future__ import annotations

import argparse
import http.client
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import RUNS, Figure, interleaved, print_figures  # noqa: E402
from servers import SOAP_HEADERS, Soap, envelope, gateway, gsoap_anchor, gsoap_server, item, transaction  # noqa: E402

QUERY = envelope("getJobAds", "<constraint>TRUE</constraint>")
CHUNK = 10_000


def fill(tmp: Path, jobs: int) -> tuple[int, int]:
    """A queue of ``jobs`` copies of one submitted job, in ``tmp/state``; returns the job's (cluster, proc)."""
    import classad2

    from backends.local.store import JobStore

    gw = gateway(tmp)
    try:
        soap = Soap(gw.port)
        txn = soap.number("beginTransaction", "<duration>600</duration>")
        cluster = soap.number("newCluster", transaction(txn))
        proc = soap.number("newJob", f"{transaction(txn)}<clusterId>{cluster}</clusterId>")
        soap.call("submit", f"{transaction(txn)}<clusterId>{cluster}</clusterId><jobId>{proc}</jobId><jobAd>"
                            f"{item('Cmd', 'STRING', '/bin/true')}{item('Arguments', 'STRING', 'a b c')}"
                            f"{item('Requirements', 'EXPRESSION', 'TRUE')}</jobAd>")
        soap.call("commitTransaction", transaction(txn))
        soap.close()
    finally:
        gw.stop()
    store = JobStore(tmp / "state" / "queue.sqlite3")
    try:
        template = str(store.get((cluster, proc)))
        for first in range(proc + 1, jobs, CHUNK):
            copies = {}
            for number in range(first, min(first + CHUNK, jobs)):
                ad = classad2.ClassAd(template)
                ad["ProcId"] = number
                copies[(cluster, number)] = ad
            store.apply(copies)
    finally:
        store.close()
    return cluster, proc


def query_seconds(port: int, answers: list[tuple[int, int]]) -> float:
    """One getJobAds(TRUE) on a fresh connection, to the answer's last byte; appends the attributes it counted and
    the answer's size in bytes to ``answers``."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    started = time.perf_counter()
    connection.request("POST", "/", QUERY, SOAP_HEADERS)
    response = connection.getresponse()
    names = 0
    size = 0
    tail = b""
    while chunk := response.read(1 << 20):
        names += (tail + chunk).count(b"<name>") - tail.count(b"<name>")
        tail = chunk[-5:]
        size += len(chunk)
    seconds = time.perf_counter() - started
    connection.close()
    if response.status != 200:
        raise RuntimeError(f"getJobAds: HTTP {response.status}")
    answers.append((names, size))
    return seconds


def memory(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024
    return fields


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pid: int, quiet: float = 1.0) -> None:
    """Wait until the process has used no CPU for ``quiet`` seconds (its store has parsed the whole queue)."""
    used = cpu_seconds(pid)
    while True:
        time.sleep(quiet)
        now = cpu_seconds(pid)
        if now - used < 0.02:
            return
        used = now


class Measured:
    """A figure in us per attribute end to end, and the gateway's CPU in us per attribute over the same queries."""

    def __init__(self, name: str) -> None:
        self.wall = Figure(f"getJobAds(TRUE), gateway, {name}", "us/attribute", higher_is_better=False)
        self.cpu = Figure(f"  gateway CPU, {name}", "us/attribute", higher_is_better=False)
        self.answers: list[tuple[int, int]] = []

    def query(self, port: int, pid: int) -> float:
        used = cpu_seconds(pid)
        seconds = query_seconds(port, self.answers)
        attributes = self.answers[-1][0]
        self.cpu.add((cpu_seconds(pid) - used) / attributes * 1e6)
        self.wall.add(seconds / attributes * 1e6)
        return self.wall.samples[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--restarts", type=int, default=2)
    args = parser.parse_args()
    print(f"== getJobAds(TRUE) over {args.jobs:,} queued jobs")
    binary, anchor_note = gsoap_anchor()
    print(anchor_note)
    cold, second, warm = Measured("cold (1st after a restart)"), Measured("2nd (keeps texts)"), Measured("warm")
    theirs = Figure("getJobAds(TRUE), gSOAP anchor", "us/attribute", higher_is_better=False)
    anchored: list[tuple[int, int]] = []
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        fill(Path(tmp), args.jobs)
        print(f"queue filled in {time.perf_counter() - started:.1f} s (not a figure: written straight to the store)")
        anchor = gsoap_server(binary, args.jobs) if binary is not None else None
        try:
            for restart in range(args.restarts):
                gw = gateway(Path(tmp))
                try:
                    pid = gw.process.pid
                    settle(pid)
                    before = memory(pid)
                    cold.query(gw.port, pid)
                    second.query(gw.port, pid)
                    if restart == args.restarts - 1:
                        measurements = [(warm.wall, lambda gw=gw, pid=pid: warm.query(gw.port, pid))]
                        if anchor is not None:
                            measurements.append(
                                (theirs, lambda: query_seconds(anchor.port, anchored) / anchored[-1][0] * 1e6))
                        interleaved(measurements, args.runs)
                    after = memory(pid)
                finally:
                    gw.stop()
        finally:
            if anchor is not None:
                anchor.stop()
    baseline = theirs if theirs.samples else None
    print_figures(f"getJobAds(TRUE), {args.jobs:,} jobs (median of {args.runs} warm, {args.restarts} cold)",
                  [(warm.wall, baseline), (warm.cpu, None), (cold.wall, baseline), (cold.cpu, None),
                   (second.wall, baseline), (second.cpu, None), (theirs, None)])
    attributes, size = warm.answers[-1]
    print(f"gateway answer: {attributes:,} attributes, {size / 2**20:.0f} MiB, warm "
          f"{warm.wall.median * attributes / 1e6:.2f} s, cold {cold.wall.median * attributes / 1e6:.2f} s; "
          f"gateway RSS before the queries {before['VmRSS'] / 2**20:.0f} MiB, peak {after['VmHWM'] / 2**20:.0f} MiB, "
          f"after {after['VmRSS'] / 2**20:.0f} MiB ({(after['VmRSS'] - before['VmRSS']) / args.jobs:.0f} bytes/job "
          f"more once texts are kept)")


if __name__ == "__main__":
    main()
