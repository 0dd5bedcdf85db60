"""A submit of a large job ad: ``newJob`` + ``submit`` with ``--attributes`` attributes (half strings, half
expressions), over HTTP and, for the request reader alone, in process.

Over HTTP: one kept-alive connection posts ``--pairs`` newJob+submit pairs into one transaction of a gateway whose
backend runs nothing, interleaved ``--runs`` times with as many ``getVersionString`` requests (the baseline: a
request with nothing to read or do); each figure is the wall time per pair (per request for the baseline) and the
gateway's CPU time over the same (``/proc``).  In process: the condorSchedd codec reading that submit request
(``ContractService.read``), against lxml parsing the same bytes (the floor of any reader).

Run: ``python bench/submit_ad.py [--attributes 40] [--pairs 300] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import RUNS, Figure, interleaved, print_figures  # noqa: E402
from job_ads_scale import cpu_seconds  # noqa: E402
from servers import ENVELOPE, Soap, gateway, item, transaction  # noqa: E402


def job_ad(attributes: int) -> str:
    return "".join(item(f"Attribute{n}", "STRING", f"value number {n}") if n % 2 else
                   item(f"Attribute{n}", "EXPRESSION", f"Attribute{n - 1} + {n}") for n in range(attributes))


def submit_inner(txn: int, cluster: int, proc: int, ad: str) -> str:
    return f"{transaction(txn)}<clusterId>{cluster}</clusterId><jobId>{proc}</jobId><jobAd>{ad}</jobAd>"


def in_process(attributes: int, runs: int) -> None:
    from lxml import etree

    from gateway.birdbath.schedd import schedd_service
    from gateway.soap.protocol import parse_envelope

    service = schedd_service()
    body = ENVELOPE.format(op="submit", inner=submit_inner(5, 1, 0, job_ad(attributes))).encode()
    assert len(service.read(body).arguments["jobAd"]) == attributes
    parser = etree.XMLParser(resolve_entities=False)
    repeat = 500

    def timed(function) -> float:
        started = time.perf_counter()
        for _ in range(repeat):
            function()
        return (time.perf_counter() - started) / repeat * 1e6

    read = Figure(f"submit request read ({attributes} attributes), codec", "us", higher_is_better=False)
    parse = Figure("  the same bytes parsed by lxml alone", "us", higher_is_better=False)
    envelope = Figure("  parse_envelope (the codec's parse)", "us", higher_is_better=False)
    interleaved([(read, lambda: timed(lambda: service.read(body))),
                 (parse, lambda: timed(lambda: etree.fromstring(body, parser))),
                 (envelope, lambda: timed(lambda: parse_envelope(body)))], runs * 3)
    print_figures(f"reading a submit of {attributes} attributes, in process (median of {runs * 3})",
                  [(read, parse), (envelope, parse), (parse, None)])


def over_http(attributes: int, pairs: int, runs: int) -> None:
    ad = job_ad(attributes)
    with tempfile.TemporaryDirectory() as tmp:
        gw = gateway(Path(tmp))
        try:
            pid = gw.process.pid
            soap = Soap(gw.port)
            pair_wall = Figure(f"newJob+submit ({attributes} attributes), wall", "ms/pair", higher_is_better=False)
            pair_cpu = Figure("  gateway CPU", "ms/pair", higher_is_better=False)
            version_wall = Figure("getVersionString, wall", "ms/request", higher_is_better=False)
            version_cpu = Figure("  gateway CPU", "ms/request", higher_is_better=False)

            def submits() -> float:
                txn = soap.number("beginTransaction", "<duration>600</duration>")
                cluster = soap.number("newCluster", transaction(txn))
                used, started = cpu_seconds(pid), time.perf_counter()
                for _ in range(pairs):
                    proc = soap.number("newJob", f"{transaction(txn)}<clusterId>{cluster}</clusterId>")
                    soap.call("submit", submit_inner(txn, cluster, proc, ad))
                wall = (time.perf_counter() - started) / pairs * 1000
                pair_cpu.add((cpu_seconds(pid) - used) / pairs * 1000)
                soap.call("abortTransaction", transaction(txn))
                return wall

            def versions() -> float:
                used, started = cpu_seconds(pid), time.perf_counter()
                for _ in range(pairs):
                    soap.post("getVersionString")
                wall = (time.perf_counter() - started) / pairs * 1000
                version_cpu.add((cpu_seconds(pid) - used) / pairs * 1000)
                return wall

            submits()  # (warm-up: imports, caches of the first requests)
            pair_cpu.samples.clear()
            interleaved([(pair_wall, submits), (version_wall, versions)], runs)
            soap.close()
        finally:
            gw.stop()
    print_figures(f"newJob+submit over HTTP, {pairs} pairs a run (median of {runs})",
                  [(pair_wall, version_wall), (pair_cpu, version_cpu), (version_wall, None), (version_cpu, None)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attributes", type=int, default=40)
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    in_process(args.attributes, args.runs)
    over_http(args.attributes, args.pairs, args.runs)


if __name__ == "__main__":
    main()
