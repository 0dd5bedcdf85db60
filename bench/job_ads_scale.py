"""getJobAds(TRUE) over a large queue: time per attribute end to end, against the gSOAP anchor answering as many ads.

The queue is filled without the wire (it is not what is measured): one job is submitted through SOAP, the gateway is
stopped, its ad is copied ``--jobs`` times into the queue file as procs of its cluster (``JobStore.apply``, the local
backend's one write path), and the gateway is started again on that queue.  Then, ``--runs`` times interleaved with
the anchor (``--jobs`` ads of 40 attributes), one client posts getJobAds with the constraint TRUE and reads the whole
answer; the time from the request to the answer's last byte, divided by the attributes in the answer, is the figure.
It also prints the gateway's resident memory before the first query and its peak (VmHWM) after the last, next to the
answer's size: an answer held whole several times shows as a peak several times its size.

Run: ``python bench/job_ads_scale.py [--jobs 100000] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import http.client
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    print(f"== getJobAds(TRUE) over {args.jobs:,} queued jobs")
    binary, anchor_note = gsoap_anchor()
    print(anchor_note)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        fill(Path(tmp), args.jobs)
        print(f"queue filled in {time.perf_counter() - started:.1f} s (not a figure: written straight to the store)")
        gw = gateway(Path(tmp))
        anchor = gsoap_server(binary, args.jobs) if binary is not None else None
        try:
            before = memory(gw.process.pid)
            ours, theirs = Figure("getJobAds(TRUE), gateway", "us/attribute", higher_is_better=False), \
                Figure("getJobAds(TRUE), gSOAP anchor", "us/attribute", higher_is_better=False)
            counted: dict[str, list[tuple[int, int]]] = {"gateway": [], "gSOAP": []}

            def per_attribute(port: int, who: str) -> float:
                seconds = query_seconds(port, counted[who])
                return seconds / counted[who][-1][0] * 1e6

            measurements = [(ours, lambda: per_attribute(gw.port, "gateway"))]
            if anchor is not None:
                measurements.append((theirs, lambda: per_attribute(anchor.port, "gSOAP")))
            interleaved(measurements, args.runs)
            after = memory(gw.process.pid)
        finally:
            gw.stop()
            if anchor is not None:
                anchor.stop()
    print_figures(f"getJobAds(TRUE), {args.jobs:,} jobs (median of {args.runs})",
                  [(ours, theirs if theirs.samples else None), (theirs, None)])
    attributes, size = counted["gateway"][-1]
    print(f"gateway answer: {attributes:,} attributes, {size / 2**20:.0f} MiB, "
          f"{ours.median * attributes / 1e6:.2f} s; gateway RSS before the queries {before['VmRSS'] / 2**20:.0f} MiB, "
          f"peak {after['VmHWM'] / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
