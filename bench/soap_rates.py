"""Requests per second of small condorSchedd operations: the gateway against a bare Twisted + lxml server answering
the same bytes, and against the gSOAP anchor (when it can be built).

A gateway (local backend, no slots) gets one job whose ``getJobAd`` answer has 50 attributes; its answers to
``beginTransaction``, ``getVersionString`` and that ``getJobAd`` are captured and served by ``bench/bare_server.py``.
``wrk`` (16 kept-alive connections, one thread) then posts each operation for ``--seconds`` to each server in turn,
``--runs`` times interleaved; the figures are the median, min and max requests/s and the ratios of the medians, and
the gateway's CPU time per request (user + system, from ``/proc``), which other load on the machine disturbs much
less than a rate.

``--workers N`` measures the gateway with N worker processes (issue #30's target: 1.3 times the bare server).
``--tree DIR`` (repeatable) also measures the gateway of another checkout, each operation's runs interleaved with
this tree's, so that a change is measured against the tree before it under the same load.

Run: ``python bench/soap_rates.py [--seconds 5] [--runs 3] [--workers 0] [--tree /path/to/other/checkout]``.
"""

from __future__ import annotations

import argparse
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
    parser.add_argument("--tree", type=Path, action="append", default=[],
                        help="another checkout whose gateway is measured too, interleaved with this tree's")
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
        gateways: dict[str, GatewayProcess] = {}
        try:
            bodies: dict[str, dict[str, bytes]] = {}
            for number, tree in enumerate([None, *args.tree]):
                name = "gateway" if tree is None else f"gateway of {tree}"
                (Path(tmp) / str(number)).mkdir()
                gw = gateways[name] = gateway(Path(tmp) / str(number), CONFIG, args.workers, tree)
                soap = Soap(gw.port)
                cluster, proc = job_with_attributes(soap, ATTRIBUTES)
                asked = parameters(cluster, proc)
                if tree is None:
                    answers = {op: soap.call(op, inner) for op, inner in asked.items()}
                soap.close()
                bodies[name] = {op: soap_envelope(op, inner) for op, inner in asked.items()}
            servers += [bare_server(answers, Path(tmp)), bare_server(answers, Path(tmp), tuned=True)]
            if binary is not None:
                servers.append(gsoap_server(binary))
            measure(gateways, servers, bodies, args.seconds, args.runs)
        finally:
            for server in servers:
                server.stop()
            for gw in gateways.values():
                gw.stop()


def measure(gateways: dict[str, GatewayProcess], servers: list[Process], bodies: dict[str, dict[str, bytes]],
            seconds: float, runs: int) -> None:
    """wrk each operation against each gateway (this tree's first) and each baseline, interleaved; print the figures
    and ratios (each baseline's to this tree's gateway)."""
    rows: list[tuple[Figure, Figure | None]] = []
    cpu_rows: list[tuple[Figure, Figure | None]] = []
    measurements = []
    for op in bodies["gateway"]:
        body = bodies["gateway"][op]
        ours = None
        others: list[tuple[Figure, Figure | None]] = []
        for name, gw in gateways.items():
            figure = Figure(f"{op} ({name})", "req/s")
            cpu = Figure(f"{op} ({name} CPU per request)", "us", higher_is_better=False)
            measurements.append((figure, lambda gw=gw, body=bodies[name][op], cpu=cpu:
                                 gateway_rate(gw, body, seconds, cpu)))
            cpu_rows.append((cpu, None))
            if ours is None:
                ours = figure
            else:
                others.append((figure, ours))
        assert ours is not None
        baselines = []
        for server in servers:
            figure = Figure(f"{op} ({server.name})", "req/s")
            measurements.append((figure, lambda body=body, url=server.url: wrk_rate(url, body, seconds)))
            baselines.append(figure)
        rows += [(ours, baseline) for baseline in baselines] or [(ours, None)]
        rows += [(baseline, None) for baseline in baselines]
        rows += others
    interleaved(measurements, runs)
    print_figures("small operations (median of %d runs of %g s)" % (runs, seconds), rows + cpu_rows)


def gateway_rate(gw: GatewayProcess, body: bytes, seconds: float, cpu: Figure) -> float:
    """The gateway's requests/s for ``body``; its CPU time per request goes to ``cpu``."""
    assert gw.process is not None
    before = cpu_seconds(gw.process.pid)[0]
    rate = wrk_rate(gw.url, body, seconds)
    cpu.add((cpu_seconds(gw.process.pid)[0] - before) / (rate * max(1, round(seconds))) * 1e6)
    return rate


if __name__ == "__main__":
    main()
