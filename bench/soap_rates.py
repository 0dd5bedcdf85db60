"""Requests per second of small condorSchedd operations: the gateway against a bare Twisted + lxml server answering
the same bytes, and against the gSOAP anchor (when it can be built).

A gateway (local backend, no slots) gets one job whose ``getJobAd`` answer has 50 attributes; its answers to
``beginTransaction``, ``getVersionString`` and that ``getJobAd`` are captured and served by ``bench/bare_server.py``.
``wrk`` (16 kept-alive connections, one thread) then posts each operation for ``--seconds`` to each server in turn,
``--runs`` times interleaved; the figures are the median, min and max requests/s and the ratios of the medians, and
the gateway's CPU time per request (user + system, from ``/proc``), which other load on the machine disturbs much
less than a rate.

``--workers N`` measures the gateway with N worker processes (issue #30's target: 1.3 times the bare server).
``--tree DIR`` also measures the gateway of another checkout (the tree before a change), interleaved with this
tree's, and prints this tree's rates and CPU per request against it.

Run: ``python bench/soap_rates.py [--seconds 5] [--runs 3] [--workers 0] [--tree /path/to/other/checkout]``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import RUNS, Figure, interleaved, print_figures  # noqa: E402
from load import cpu_seconds  # noqa: E402
from servers import (  # noqa: E402
    Process,
    Soap,
    bare_server,
    gateway,
    gsoap_anchor,
    gsoap_server,
    item,
    transaction,
    wrk_missing,
    wrk_rate,
)
from servers import envelope as soap_envelope  # noqa: E402

from gateway.testing import GatewayProcess  # noqa: E402

#: transactions expire after a second, so a run of thousands of begins does not pile them up; one caller may hold
#: as many as it begins in that second
CONFIG = "[birdbath]\nmax_transactions_per_caller = 1000000\n"
ATTRIBUTES = 50
ITEM = re.compile(rb"<item>")


def job_with_attributes(soap: Soap, count: int) -> tuple[int, int]:
    """Submit a job whose getJobAd answer has ``count`` attributes (padding the ad with string attributes)."""
    base = [item("Cmd", "STRING", "/bin/true"), item("Requirements", "EXPRESSION", "TRUE")]

    def submit(extra: int) -> tuple[int, int]:
        txn = soap.number("beginTransaction", "<duration>600</duration>")
        cluster = soap.number("newCluster", transaction(txn))
        proc = soap.number("newJob", f"{transaction(txn)}<clusterId>{cluster}</clusterId>")
        padding = [item(f"Padding{i}", "STRING", f"value-{i}") for i in range(extra)]
        soap.call("submit", f"{transaction(txn)}<clusterId>{cluster}</clusterId><jobId>{proc}</jobId>"
                            f"<jobAd>{''.join(base + padding)}</jobAd>")
        soap.call("commitTransaction", transaction(txn))
        return cluster, proc

    cluster, proc = submit(0)
    have = len(ITEM.findall(soap.call("getJobAd", f"<clusterId>{cluster}</clusterId><jobId>{proc}</jobId>")))
    cluster, proc = submit(count - have)
    answer = soap.call("getJobAd", f"<clusterId>{cluster}</clusterId><jobId>{proc}</jobId>")
    assert len(ITEM.findall(answer)) == count, answer
    return cluster, proc


def parameters(cluster: int, proc: int) -> dict[str, str]:
    """What each measured operation is asked (the request's body inside the operation's element)."""
    return {"beginTransaction": "<duration>1</duration>", "getVersionString": "",
            "getJobAd": f"<clusterId>{cluster}</clusterId><jobId>{proc}</jobId>"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5, help="length of one wrk run (s)")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--workers", type=int, default=0, help="the gateway's worker processes (0: one process)")
    parser.add_argument("--tree", type=Path, help="another checkout whose gateway is measured too (the 'before')")
    args = parser.parse_args()
    print("== small operations: requests/s, 16 kept-alive connections (wrk -t1 -c16)")
    missing = wrk_missing()
    if missing:
        print(missing)
        return
    binary, anchor_note = gsoap_anchor()
    print(anchor_note)
    with tempfile.TemporaryDirectory() as tmp:
        servers: list[Process] = []
        gateways = {"gateway": gateway(Path(tmp), CONFIG, args.workers)}
        try:
            if args.tree is not None:
                gateways[f"gateway of {args.tree}"] = gateway(Path(tmp), CONFIG, args.workers, args.tree.resolve())
            jobs = set()
            for gw in gateways.values():
                soap = Soap(gw.port)
                jobs.add(job_with_attributes(soap, ATTRIBUTES))
                (cluster, proc), = jobs  # (the same job ids in each: their getJobAd requests are the same)
                asked = parameters(cluster, proc)
                answers = {op: soap.call(op, inner) for op, inner in asked.items()}
                soap.close()
            servers += [bare_server(answers, Path(tmp)), bare_server(answers, Path(tmp), tuned=True)]
            if binary is not None:
                servers.append(gsoap_server(binary))
            measure(gateways, servers, {op: soap_envelope(op, inner) for op, inner in asked.items()}, args.seconds,
                    args.runs)
        finally:
            for server in [*servers, *gateways.values()]:
                server.stop()


def measure(gateways: dict[str, GatewayProcess], servers: list[Process], bodies: dict[str, bytes], seconds: float,
            runs: int) -> None:
    """wrk each operation against each gateway and each baseline, interleaved (each round in the reverse order of
    the one before); print the figures, the ratios, and the first gateway's against each other one."""
    rows: list[tuple[Figure, Figure | None]] = []
    cpu_rows: list[tuple[Figure, Figure | None]] = []
    against: list[tuple[str, Figure, Figure, Figure, Figure]] = []
    measurements = []
    for op, body in bodies.items():
        ours: dict[str, tuple[Figure, Figure]] = {}
        for name, gw in gateways.items():
            rate = Figure(f"{op} ({name})", "req/s")
            cpu = Figure(f"{op} ({name} CPU per request)", "us", higher_is_better=False)
            measurements.append((rate, lambda body=body, cpu=cpu, gw=gw: gateway_rate(gw, body, seconds, cpu)))
            ours[name] = rate, cpu
        baselines = []
        for server in servers:
            figure = Figure(f"{op} ({server.name})", "req/s")
            measurements.append((figure, lambda body=body, url=server.url: wrk_rate(url, body, seconds)))
            baselines.append(figure)
        for rate, cpu in ours.values():
            rows += [(rate, baseline) for baseline in baselines] or [(rate, None)]
            cpu_rows.append((cpu, None))
        rows += [(baseline, None) for baseline in baselines]
        (first_rate, first_cpu), *others = ours.values()
        against += [(op, first_rate, first_cpu, rate, cpu) for rate, cpu in others]
    for run in range(runs):  # (the first server of a round ran faster in a fixed order)
        interleaved(measurements if run % 2 == 0 else measurements[::-1], 1)
    print_figures("small operations (median of %d runs of %g s, load average %.1f at the end)"
                  % (runs, seconds, os.getloadavg()[0]), rows + cpu_rows)
    for op, first_rate, first_cpu, rate, cpu in against:
        print(f"{op}: {first_rate.ratio_to(rate):.2f} the requests/s, {first_cpu.ratio_to(cpu):.2f} the CPU per "
              f"request of {rate.name.split('(', 1)[1][:-1]} (> 1: better)")


def gateway_rate(gw: GatewayProcess, body: bytes, seconds: float, cpu: Figure) -> float:
    """The gateway's requests/s for ``body``; its CPU time per request goes to ``cpu``."""
    assert gw.process is not None
    before = cpu_seconds(gw.process.pid)[0]
    rate = wrk_rate(gw.url, body, seconds)
    cpu.add((cpu_seconds(gw.process.pid)[0] - before) / (rate * max(1, round(seconds))) * 1e6)
    return rate


if __name__ == "__main__":
    main()
