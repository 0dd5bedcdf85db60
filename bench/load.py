"""Many clients at once: latency, throughput, errors and the gateway's memory under a mixed load.

A real gateway (local backend, default slots) on a loopback port; N client processes (default 32), each looping
for ``--seconds`` (default 60) a realistic client's mix with no think time:

- Birdbath: beginTransaction, newCluster, newJob, declareFile + sendFile of a small input file, submit (``/bin/cat``
  of the input into ``out.txt``, ``LeaveJobInQueue`` until the client has its output), commitTransaction; then,
  while the job runs, getJobAd and getJobAds with a constraint on its cluster; once it completed, listSpool,
  getFile of ``out.txt`` (checked against the input) and closeSpool, which lets the job leave the queue;
- the submission API over JSON: submit of a ``/bin/true`` job, then getJobSummaries of it until it completed
  (found in the history once it left the queue).

A client has at most one job of each kind in the queue, as a client that waits for its jobs does, so the queue
stays as long as the clients' work, not as long as the run.  Clients speak raw HTTP (``http.client``, one kept-alive
connection each) with request bodies built once, so that on a small machine they leave the CPU to the gateway.

Before the load, one lone client runs the same mix (``--baseline-seconds``): its latencies are the baseline the
load's are compared to.  An error is any HTTP status other than 200, a fault, a status other than the one expected,
a wrong output file or a job that did not complete.  The gateway's memory (VmRSS) is read from ``/proc`` at start,
after the baseline, at its peak during the load, and after the load, once the clients' jobs have left the queue and
the gateway ran a full garbage collection (it does on SIGUSR1).  Figures are printed, never asserted.

Run: ``python bench/load.py [--clients 32] [--seconds 60] [--without getJobAds] [--workers N]``.
"""

from __future__ import annotations

import argparse
import base64
import getpass
import http.client
import json
import multiprocessing
import os
import re
import resource
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from servers import ENVELOPE, SOAP_HEADERS, STATUS, item  # noqa: E402

from gateway.testing import GatewayProcess  # noqa: E402

#: the clients stand for as many client programs, but they are all one caller here (this host, this user): the limits
#: per caller (open transactions, default 20; staging areas; queries at once, default 2) are raised so that each
#: has the share it would have as a caller of its own (--queries-per-caller sets the last one)
CONFIG = ("[gateway]\nmax_queries_per_caller = {queries}\n[birdbath]\nmax_transactions_per_caller = {limit}\n"
          "[submission]\nmax_staging_areas_per_caller = {limit}\n")

JSON_HEADERS = {"Content-Type": "application/json"}
NUMBER = {"beginTransaction": re.compile(rb"<transaction><id>(\d+)</id>"),
          "newCluster": re.compile(rb"<integer>(\d+)</integer>"), "newJob": re.compile(rb"<integer>(\d+)</integer>")}
JOB_STATUS = re.compile(rb"<name>JobStatus</name><type>INTEGER-ATTR</type><value>(\d+)</value>")
HOLD_REASON = re.compile(rb"<name>HoldReason</name><type>STRING-ATTR</type><value>([^<]*)</value>")
DATA = re.compile(rb"<data>([^<]*)</data>")
IDLE, RUNNING, COMPLETED = 1, 2, 4
INPUT_SIZE = 1024
DURATION = 60  # the transaction lease clients ask for
DRAIN_SECONDS = 600  # how long clients wait for their last jobs after the load


class Failed(Exception):
    """One operation did not answer as expected (the error the load counts)."""


#: the Birdbath job: cat the input into out.txt; stays in the queue until the client closed its spool
JOB_AD = "".join((item("Cmd", "STRING", "/bin/cat"), item("Arguments", "STRING", "in.txt"),
                  item("Out", "STRING", "out.txt"), item("Requirements", "EXPRESSION", "TRUE"),
                  item("ShouldTransferFiles", "STRING", "YES"),
                  item("LeaveJobInQueue", "EXPRESSION", "FilesRetrieved =!= true")))


@dataclass
class Record:
    """What one client measured: latencies by operation, errors, and how many jobs went through."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[tuple[str, str]] = field(default_factory=list)
    jobs_done: int = 0
    queued_at_end: int = 0  # this client's jobs still in the queue when the load ended
    #: (seconds since the load began, latency) of every operation, for the latency over time
    timeline: list[tuple[float, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Mix:
    """What the clients do: ``without`` names operations left out; a client that does not ``wait`` submits every
    round, whether or not its earlier jobs finished (they pile up in the queue as fast as the slots fall behind)."""

    iwd: str
    without: frozenset[str] = frozenset()
    wait: bool = True


class Client:
    """One client: a kept-alive connection and the mix, as a small state machine over its jobs in the queue."""

    def __init__(self, port: int, number: int, mix: Mix) -> None:
        self.number = number
        self.mix = mix
        self.record = Record()
        self.timing = True
        self.began = time.time()
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.input = os.urandom(INPUT_SIZE // 2).hex().encode()
        self.input_b64 = base64.b64encode(self.input).decode()
        self.jobs: deque[tuple[int, int]] = deque()  # Birdbath jobs whose output is still to fetch, oldest first
        self.json_jobs: deque[str] = deque()  # submission API jobs not yet seen completed

    # -- the wire ----------------------------------------------------------------------------------------
    def _post(self, op: str, path: str, body: bytes, headers: dict[str, str]) -> bytes:
        started = time.perf_counter()
        try:
            self.connection.request("POST", path, body, headers)
            response = self.connection.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.connection.close()
            raise Failed(f"{op}: {type(exc).__name__}: {exc}") from None
        if self.timing:
            latency = time.perf_counter() - started
            self.record.latencies.setdefault(op, []).append(latency)
            self.record.timeline.append((time.time() - self.began - latency, latency))
        if response.status != 200:
            raise Failed(f"{op}: HTTP {response.status}: {data[:300]!r}")
        return data

    def soap(self, op: str, inner: str, expect: bytes = b"SUCCESS") -> bytes:
        data = self._post(op, "/", ENVELOPE.format(op=op, inner=inner).encode(), SOAP_HEADERS)
        status = STATUS.search(data)
        if status is None or status.group(1) != expect:
            raise Failed(f"{op}: status {status.group(1) if status else data[:300]!r}, expected {expect.decode()}")
        return data

    def json(self, op: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = json.loads(self._post(f"json {op}", f"/submission/json/{op}", json.dumps(params).encode(),
                                       JSON_HEADERS))
        if answer.get("status", {}).get("code") != "OK":
            raise Failed(f"json {op}: status {answer.get('status')}, expected OK")
        return answer

    # -- the mix -----------------------------------------------------------------------------------------
    def step(self) -> None:
        """One round: submit a job (when none is queued, for a client that waits), then look at the oldest one
        (and fetch its output once complete); the same for the submission API."""
        if not self.mix.wait or not self.jobs:
            self.jobs.append(self.submit())
        self.poll()
        if not self.mix.wait or not self.json_jobs:
            self.json_jobs.append(self.submit_json())
        self.poll_json()

    def submit(self) -> tuple[int, int]:
        begun = self.soap("beginTransaction", f"<duration>{DURATION}</duration>")
        txn_id = int(NUMBER["beginTransaction"].search(begun).group(1))
        txn = f"<transaction><id>{txn_id}</id><duration>{DURATION}</duration></transaction>"
        cluster = int(NUMBER["newCluster"].search(self.soap("newCluster", txn)).group(1))
        proc = int(NUMBER["newJob"].search(self.soap("newJob", f"{txn}<clusterId>{cluster}</clusterId>")).group(1))
        job = f"{txn}<clusterId>{cluster}</clusterId><jobId>{proc}</jobId>"
        self.soap("declareFile", f"{job}<name>in.txt</name><size>{len(self.input)}</size><hashType>NOHASH</hashType>")
        self.soap("sendFile", f"{job}<name>in.txt</name><offset>0</offset><data>{self.input_b64}</data>")
        self.soap("submit", f"{job}<jobAd>{JOB_AD}</jobAd>")
        self.soap("commitTransaction", txn)
        return cluster, proc

    def poll(self) -> None:
        """Look at the oldest Birdbath job; once it completed, fetch and check its output and close its spool."""
        cluster, proc = self.jobs[0]
        key = f"<clusterId>{cluster}</clusterId><jobId>{proc}</jobId>"
        ad = self.soap("getJobAd", key)
        if "getJobAds" not in self.mix.without:
            self.soap("getJobAds", f"<constraint>ClusterId == {cluster} &amp;&amp; JobStatus =!= 5</constraint>")
        status = int(JOB_STATUS.search(ad).group(1))
        if status in (IDLE, RUNNING):
            return
        self.jobs.popleft()
        if status != COMPLETED:
            reason = HOLD_REASON.search(ad)
            self.soap("removeJob", f"{key}<reason>bench</reason><force-removal>false</force-removal>")
            raise Failed(f"job {cluster}.{proc} ended in status {status}: {reason.group(1) if reason else ''!r}")
        self.soap("listSpool", key)
        data = DATA.search(self.soap("getFile", f"{key}<name>out.txt</name><offset>0</offset>"
                                                f"<length>{len(self.input)}</length>"))
        if data is None or base64.b64decode(data.group(1)) != self.input:
            raise Failed(f"getFile: out.txt of job {cluster}.{proc} is not its input")
        self.soap("closeSpool", key)
        self.record.jobs_done += 1

    def submit_json(self) -> str:
        ad = {"Cmd": "/bin/true", "Requirements": {"TYPE": 0, "VALUE": "TRUE"}, "Iwd": self.mix.iwd,
              "Client": self.number}
        return self.json("submit", {"ad": ad})["id"].rsplit("#", 1)[1]

    def poll_json(self) -> None:
        """Look at the oldest submission API job (in the history once it completed and left the queue)."""
        (job,) = self.json("getJobSummaries", {"ids": [self.json_jobs[0]]})["jobs"]
        status = int(job["ad"]["JobStatus"]["VALUE"])
        if status in (IDLE, RUNNING):
            return
        self.json_jobs.popleft()
        if status != COMPLETED:
            raise Failed(f"submission API job {job['id']} ended in status {status}")
        self.record.jobs_done += 1

    # -- a whole run -------------------------------------------------------------------------------------
    def run(self, start: float, until: float) -> Record:
        """Loop the mix from ``start`` to ``until`` (wall-clock), then, untimed, wait for this client's jobs and
        fetch their output, as a client that ends does."""
        time.sleep(max(0.0, start - time.time()))
        self.began = start
        while time.time() < until:
            self.attempt(self.step)
        self.timing = False
        self.record.queued_at_end = len(self.jobs) + len(self.json_jobs)
        deadline = time.time() + DRAIN_SECONDS
        while (self.jobs or self.json_jobs) and time.time() < deadline:
            if self.jobs:
                self.attempt(self.poll)
            if self.json_jobs:
                self.attempt(self.poll_json)
            time.sleep(0.05)
        if self.jobs or self.json_jobs:
            self.record.errors.append(("drain", f"client {self.number}: {len(self.jobs) + len(self.json_jobs)} "
                                                f"jobs still queued {DRAIN_SECONDS} s after the load"))
        self.connection.close()
        return self.record

    def attempt(self, action: Any) -> None:
        try:
            action()
        except Failed as exc:
            self.record.errors.append((str(exc).split(":", 1)[0], str(exc)))
        except Exception as exc:  # an answer of an unexpected shape
            self.record.errors.append(("answer", f"{type(exc).__name__}: {exc}"))


def client_process(port: int, number: int, mix: Mix, start: float, until: float, results: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    results.put(Client(port, number, mix).run(start, until))


# -- the gateway's memory ------------------------------------------------------------------------------------
def gateway_pids(pid: int) -> list[int]:
    """The gateway's processes: its core (or single process) and its worker processes (``--workers``), not the jobs'
    launchers."""
    workers = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            if b"gateway.workers.worker" in Path(f"/proc/{child}/cmdline").read_bytes():
                workers.append(int(child))
        except FileNotFoundError:
            continue  # (a child that ended meanwhile)
    return [pid, *workers]


def rss_mib(pid: int) -> float:
    """The process's resident set (VmRSS), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def gateway_rss_mib(pid: int) -> float:
    """The resident set of the gateway's processes together (its core and its workers), in MiB."""
    return sum(rss_mib(process) for process in gateway_pids(pid))


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User + system CPU time the gateway's processes have used so far, and that of the core's children that ended
    (jobs)."""
    tick = os.sysconf("SC_CLK_TCK")
    own = ended = 0
    for process in gateway_pids(pid):
        fields = [int(n) for n in Path(f"/proc/{process}/stat").read_text().rsplit(")", 1)[1].split()[11:15]]
        own += fields[0] + fields[1]
        if process == pid:
            ended = fields[2] + fields[3]
    return own / tick, ended / tick


def children_cpu() -> float:
    """User + system CPU time of this process's children that ended (the clients, once joined)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class RssSampler(threading.Thread):
    """Reads the gateway's RSS every ``interval`` seconds; ``peak`` is the largest seen."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.peak = pid, interval, 0.0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.peak = max(self.peak, gateway_rss_mib(self.pid))


@dataclass(frozen=True)
class Memory:
    """The gateway's memory after a full garbage collection: its resident set, and the C heap's MiB in use and MiB
    free but kept by the allocator (None where the gateway cannot tell)."""

    rss: float
    heap_in_use: float | None
    heap_free: float | None

    def heap(self) -> str:
        if self.heap_in_use is None:
            return ""
        return f" (C heap {self.heap_in_use:.1f} MiB in use, {self.heap_free:.1f} MiB free)"


HEAP = re.compile(r"C heap ([\d.]+) MiB in use, ([\d.]+) MiB free")


def collected(gateway: GatewayProcess, timeout: float = 30, every: bool = False) -> Memory:
    """Ask the gateway for a full garbage collection (SIGUSR1); its memory once its log says it is done: its core's
    (or single process's), or with ``every`` its workers' too (each collects on SIGUSR1 as the core does; the C heap
    figures are then their sums)."""
    assert gateway.process is not None
    pids = gateway_pids(gateway.process.pid) if every else [gateway.process.pid]
    before = gateway.log().count("full garbage collection")
    for pid in pids:
        os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while len(lines := [line for line in gateway.log().splitlines() if "full garbage collection" in line]) \
            < before + len(pids):
        if time.monotonic() > deadline:
            raise RuntimeError("the gateway did not log a full garbage collection after SIGUSR1")
        time.sleep(0.05)
    heaps = [HEAP.search(line) for line in lines[before:]]
    rss = sum(rss_mib(pid) for pid in pids)
    if not all(heaps):
        return Memory(rss, None, None)
    return Memory(rss, *(sum(float(heap.group(n)) for heap in heaps) for n in (1, 2)))  # type: ignore[union-attr]


def queue_length(port: int) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    connection.request("POST", "/", ENVELOPE.format(op="getJobAds", inner="<constraint>true</constraint>").encode(),
                       SOAP_HEADERS)
    data = connection.getresponse().read()
    connection.close()
    return data.count(b"<name>MyType</name>")


def wait_for_empty_queue(port: int, timeout: float = 120) -> int:
    """Wait until no job is queued (the executor may still be finishing the last ones); the length left."""
    deadline = time.monotonic() + timeout
    while (length := queue_length(port)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return length


# -- running the clients and reporting -----------------------------------------------------------------------
@dataclass
class Usage:
    """CPU time of the gateway and of the whole machine, read at one moment."""

    gateway: float
    jobs: float  # the gateway's children that ended: job launchers and the jobs
    clients: float  # this process's children that ended: the clients, once joined
    machine_busy: float
    machine_total: float

    @classmethod
    def now(cls, pid: int) -> "Usage":
        ticks = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = ticks[3] + ticks[4]  # idle + iowait
        tick = os.sysconf("SC_CLK_TCK")
        return cls(*cpu_seconds(pid), children_cpu(), (sum(ticks) - idle) / tick, sum(ticks) / tick)

    def __sub__(self, other: "Usage") -> "Usage":
        return Usage(*(a - b for a, b in zip(astuple(self), astuple(other))))


def run_clients(port: int, clients: int, seconds: float, mix: Mix,
                usage: Callable[[], Usage]) -> tuple[list[Record], Usage, Usage]:
    """Run the clients; their records, and the CPU usage when the load began and when it ended (before the
    clients' untimed wait for their last jobs)."""
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    start = time.time() + 0.5 + clients * 0.02  # every client connected and waiting when the load begins
    processes = [context.Process(target=client_process, args=(port, n, mix, start, start + seconds, results))
                 for n in range(clients)]
    for process in processes:
        process.start()
    time.sleep(max(0.0, start - time.time()))
    began = usage()
    time.sleep(max(0.0, start + seconds - time.time()))
    ended = usage()
    records = [results.get(timeout=DRAIN_SECONDS + 60) for _ in processes]
    for process in processes:
        process.join()
    return records, began, ended


def percentile(sorted_values: list[float], fraction: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]


def merged(records: list[Record]) -> dict[str, list[float]]:
    latencies: dict[str, list[float]] = {}
    for record in records:
        for op, values in record.latencies.items():
            latencies.setdefault(op, []).extend(values)
    latencies = {op: sorted(values) for op, values in sorted(latencies.items())}
    latencies["(all)"] = sorted(value for values in latencies.values() for value in values)
    return latencies


def print_table(latencies: dict[str, list[float]], baseline: dict[str, list[float]] | None) -> None:
    print(f"  {'operation':<18}{'count':>7}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}"
          + (f"{'lone p50':>10}{'p50 x':>8}{'p99 x':>8}" if baseline else ""))
    for op, values in latencies.items():
        p50, p95, p99 = (percentile(values, f) * 1000 for f in (0.5, 0.95, 0.99))
        line = f"  {op:<18}{len(values):>7}{p50:>9.1f}{p95:>9.1f}{p99:>9.1f}{values[-1] * 1000:>9.1f}"
        if baseline and baseline.get(op):
            lone = statistics.median(baseline[op]) * 1000
            line += f"{lone:>10.1f}{p50 / lone:>8.1f}{p99 / lone:>8.1f}"
        print(line)


def print_timeline(records: list[Record], seconds: float, slices: int = 6) -> None:
    """p50 and p99 of every operation, by slices of the run (does the gateway slow down as the run goes on?)."""
    width = seconds / slices
    by_slice: list[list[float]] = [[] for _ in range(slices)]
    for record in records:
        for at, latency in record.timeline:
            by_slice[min(slices - 1, max(0, int(at / width)))].append(latency)
    cells = [f"{percentile(sorted(values), 0.5) * 1000:.0f}/{percentile(sorted(values), 0.99) * 1000:.0f}"
             for values in by_slice if values]
    print(f"  p50/p99 ms by {width:.3g} s of the run: {'  '.join(cells)}")


def print_errors(records: list[Record]) -> None:
    errors = [error for record in records for error in record.errors]
    print(f"  errors: {len(errors)}")
    by_kind: dict[str, list[str]] = {}
    for op, text in errors:
        by_kind.setdefault(op, []).append(text)
    for op, texts in sorted(by_kind.items()):
        print(f"    {op}: {len(texts)}, e.g. {texts[0][:200]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60, help="length of the load (default 60)")
    parser.add_argument("--baseline-seconds", type=float, default=5, help="the lone client's run before the load")
    parser.add_argument("--without", default="", help="operations to leave out of the mix, e.g. getJobAds")
    parser.add_argument("--no-wait", action="store_true",
                        help="clients submit every round without waiting for their jobs (the queue grows)")
    parser.add_argument("--queries-per-caller", type=int,
                        help="the gateway's max_queries_per_caller (default: as many as clients; the gateway's own "
                             "default is 2)")
    parser.add_argument("--again", action="store_true",
                        help="run the load a second time and say the RSS after it (warm-up or leak?)")
    parser.add_argument("--keep", type=Path, help="keep the gateway's state and log in this directory")
    parser.add_argument("--workers", type=int, default=0,
                        help="the gateway's worker processes (default 0: one process); CPU and memory are then the "
                             "core's and its workers' together")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        os.chmod(tmp, 0o755)  # jobs run as their owner; when that is not root, they must reach the state dir
        iwd = tmp / "iwd"
        iwd.mkdir(exist_ok=True)
        mix = Mix(str(iwd), frozenset(filter(None, args.without.split(","))), not args.no_wait)
        config = CONFIG.format(limit=max(20, 2 * args.clients), queries=args.queries_per_caller or args.clients)
        layout = ("--workers", str(args.workers)) + (("--lone-connection-in-core", "yes") if args.workers else ())
        gateway = GatewayProcess(tmp / "state", config, tmp=tmp, extra_args=layout).start()
        try:
            measure(gateway, args, mix)
        finally:
            gateway.stop()


def measure(gateway: GatewayProcess, args: argparse.Namespace, mix: Mix) -> None:
    assert gateway.process is not None and gateway.port is not None
    pid, port = gateway.process.pid, gateway.port
    deadline = time.monotonic() + 120
    while gateway.log().count(") serving") < args.workers and time.monotonic() < deadline:  # the workers' start
        time.sleep(0.2)
    rss_start = gateway_rss_mib(pid)
    lone, _, _ = run_clients(port, 1, args.baseline_seconds, mix, lambda: Usage.now(pid))
    wait_for_empty_queue(port)
    warm = collected(gateway, every=True)
    log_before = gateway.log_path.stat().st_size
    sampler = RssSampler(pid)
    sampler.start()
    records, began, ended = run_clients(port, args.clients, args.seconds, mix, lambda: Usage.now(pid))
    log_bytes = gateway.log_path.stat().st_size - log_before
    left = wait_for_empty_queue(port)
    drained = Usage.now(pid) - began
    sampler.stopped.set()
    sampler.join()
    after = collected(gateway, every=True)

    baseline, load = merged(lone), merged(records)
    total = len(load["(all)"])
    mix_text = (", without " + ", ".join(sorted(mix.without)) if mix.without else "") + \
        (", clients not waiting for their jobs" if not mix.wait else "") + \
        (f", max_queries_per_caller = {args.queries_per_caller}" if args.queries_per_caller else "")
    print(f"mixed load on the local backend ({os.cpu_count()} CPUs, as {getpass.getuser()}), "
          f"{time.strftime('%Y-%m-%d %H:%M')}{mix_text}")
    print(f"lone client, {args.baseline_seconds:g} s: {len(baseline['(all)'])} operations, "
          f"p50 {statistics.median(baseline['(all)']) * 1000:.1f} ms, {len(lone[0].errors)} errors")
    print(f"{args.clients} clients, {args.seconds:g} s: {total} operations, {total / args.seconds:.0f} operations/s, "
          f"{sum(r.jobs_done for r in records)} jobs through (submit to output), "
          f"{sum(r.queued_at_end for r in records)} queued at the end, log {log_bytes / 1024:.0f} KiB")
    load_usage = ended - began
    cpus = load_usage.machine_total / args.seconds
    print(f"CPU during the load: machine {load_usage.machine_busy / load_usage.machine_total * 100:.0f} % busy "
          f"({cpus:.1f} cores), gateway {load_usage.gateway / args.seconds:.2f} cores "
          f"({load_usage.gateway / total * 1000:.2f} ms per operation); from the start to the drained "
          f"queue ({drained.machine_total / cpus:.0f} s): gateway {drained.gateway:.0f} s, jobs and launchers "
          f"{drained.jobs:.0f} s, clients {drained.clients:.0f} s, anything else (other processes) "
          f"{drained.machine_busy - drained.gateway - drained.jobs - drained.clients:.0f} s")
    print_table(load, baseline)
    print_timeline(records, args.seconds)
    print_errors(records)
    print(f"gateway RSS: {rss_start:.1f} MiB at start, {warm.rss:.1f} MiB after the lone client + full GC"
          f"{warm.heap()}, peak {sampler.peak:.1f} MiB, {after.rss:.1f} MiB after the load + full GC{after.heap()}: "
          f"{(after.rss / warm.rss - 1) * 100:+.1f} % of the warm start (queue {left} jobs)")
    if args.again:  # growth that stops after the first load is warm-up (threads, caches), growth that goes on a leak
        run_clients(port, args.clients, args.seconds, mix, lambda: Usage.now(pid))
        wait_for_empty_queue(port)
        again = collected(gateway, every=True)
        print(f"  after the same load again + full GC: {again.rss:.1f} MiB{again.heap()}: "
              f"{(again.rss / after.rss - 1) * 100:+.1f} % of after the first")


if __name__ == "__main__":
    main()
