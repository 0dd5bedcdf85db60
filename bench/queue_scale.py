"""The local backend's scheduler core as its queue grows: the Birdbath submit flow at 0, 10,000 and 100,000 queued
jobs, 8 clients against 1, the gateway's memory per queued job, restart time, a selective getJobAds against the
ClassAd library's own evaluation time, and trivial jobs run per second.

Every figure is the median (min, max) of ``--runs`` runs (default 3), interleaved with its baseline where it has one:

- submit flow: clients (processes speaking raw HTTP, one kept-alive connection each) loop beginTransaction,
  newCluster, newJob, submit (30 attributes), commitTransaction for ``--seconds``; jobs/s.  The queued jobs are idle
  (the gateway has no slots: ``slots = 0``, as a pool whose machines are all busy).  The large queues are written
  straight into the queue's SQLite file through ``JobStore`` (copies of a job submitted through SOAP, ten per
  cluster), which takes seconds instead of the minutes SOAP would;
- 8 clients against 1 client, both at the empty queue's gateway;
- memory: the gateway's resident set per queued job (VmRSS after a full garbage collection, less the empty gateway's)
  after ``--soap-fill`` jobs were submitted through SOAP (8 clients), and after a restart loads the same queue; and
  after a restart with the largest queue;
- restart: from starting the gateway's process with the largest queue to its first answer to getJobAd of a job;
- getJobAds with a constraint matching 1 % of the largest queue (``ClusterId % 100 == 0``), end to end, against the
  same constraint evaluated by classad2 over the same ads in this process (the floor);
- trivial jobs: ``--trivial`` ``/bin/true`` jobs submitted in one transaction to a gateway with 2 slots, from the
  commit to the last one leaving the queue; against this process starting ``/bin/true`` two at a time.

Run: ``python bench/queue_scale.py [--quick] [--queued 10000,100000] [--keep DIR]``.  Prints figures; asserts
nothing.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import classad2  # noqa: E402
from figures import Figure, interleaved, print_figures  # noqa: E402
from load import NUMBER, collected  # noqa: E402
from servers import ENVELOPE, SOAP_HEADERS, STATUS, item  # noqa: E402

from backends.local.store import JobStore  # noqa: E402
from gateway.testing import GatewayProcess  # noqa: E402
from jobmodel.classads import copy_ad, matches  # noqa: E402

#: a gateway whose jobs stay idle (no slots), with the per-caller limits raised for the 8 clients
QUEUE_ONLY = ("[backends.local]\nslots = 0\n[gateway]\nmax_queries_per_caller = 16\n"
              "[birdbath]\nmax_transactions_per_caller = 64\n")
RUNNER = "[backends.local]\nslots = 2\n[birdbath]\nmax_transactions_per_caller = 64\n"
DURATION = 60
#: a constraint matching 1 % of the queue (every hundredth cluster), simple enough to be evaluated in-thread
ONE_PERCENT = "ClusterId % 100 == 0"
#: jobs per cluster in the queues written straight into the store
PROCS_PER_CLUSTER = 10
JOB_STATUS = re.compile(rb"<name>JobStatus</name>")


def job_ad(command: str = "/bin/sleep", arguments: str = "3600") -> str:
    """The 30 attributes a typical client's submit sends."""
    strings = {"Cmd": command, "Arguments": arguments, "Out": "out.txt", "Err": "err.txt", "In": "/dev/null",
               "Environment": "PATH=/usr/bin:/bin HOME=/tmp", "ShouldTransferFiles": "NO",
               "WhenToTransferOutput": "ON_EXIT", "KillSig": "SIGTERM", "AccountingGroup": "group_bench.user",
               "JobBatchName": "queue-scale", "NotifyUser": "nobody@example.com"}
    integers = {"JobUniverse": 5, "RequestCpus": 1, "RequestMemory": 128, "RequestDisk": 1024, "JobPrio": 0,
                "ImageSize": 100, "DiskUsage": 100, "MaxHosts": 1, "MinHosts": 1, "CoreSize": 0,
                "JobNotification": 0}
    expressions = {"Requirements": '(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && '
                                   "(TARGET.Memory >= RequestMemory) && (TARGET.Disk >= RequestDisk)",
                   "OnExitRemove": "true", "OnExitHold": "false", "PeriodicHold": "false",
                   "PeriodicRemove": "false", "PeriodicRelease": "false", "LeaveJobInQueue": "false"}
    assert len(strings) + len(integers) + len(expressions) == 30
    return "".join([*(item(name, "STRING", value) for name, value in strings.items()),
                    *(item(name, "INTEGER", str(value)) for name, value in integers.items()),
                    *(item(name, "EXPRESSION", value.replace("&", "&amp;").replace(">", "&gt;"))
                      for name, value in expressions.items())])


class Client:
    """One client on a kept-alive connection."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def soap(self, op: str, inner: str) -> bytes:
        self.connection.request("POST", "/", ENVELOPE.format(op=op, inner=inner).encode(), SOAP_HEADERS)
        data = self.connection.getresponse().read()
        status = STATUS.search(data)
        if status is None or status.group(1) != b"SUCCESS":
            raise RuntimeError(f"{op}: {data[:400]!r}")
        return data

    def begin(self) -> str:
        txn = int(NUMBER["beginTransaction"].search(self.soap("beginTransaction", f"<duration>{DURATION}</duration>"))
                  .group(1))
        return f"<transaction><id>{txn}</id><duration>{DURATION}</duration></transaction>"

    def submit_jobs(self, ad: str, count: int = 1) -> int:
        """The submit flow: one transaction, one cluster of ``count`` jobs; the cluster's id."""
        txn = self.begin()
        cluster = int(NUMBER["newCluster"].search(self.soap("newCluster", txn)).group(1))
        for _ in range(count):
            proc = int(NUMBER["newJob"].search(self.soap("newJob", f"{txn}<clusterId>{cluster}</clusterId>"))
                       .group(1))
            self.soap("submit", f"{txn}<clusterId>{cluster}</clusterId><jobId>{proc}</jobId><jobAd>{ad}</jobAd>")
        self.soap("commitTransaction", txn)
        return cluster

    def exists(self, cluster: int, proc: int) -> bool:
        """Whether the job is still queued (getJobAd answers it), without raising for one that is not."""
        body = f"<clusterId>{cluster}</clusterId><jobId>{proc}</jobId>"
        self.connection.request("POST", "/", ENVELOPE.format(op="getJobAd", inner=body).encode(), SOAP_HEADERS)
        status = STATUS.search(self.connection.getresponse().read())
        return status is not None and status.group(1) == b"SUCCESS"

    def count(self, constraint: str) -> int:
        return len(JOB_STATUS.findall(self.soap("getJobAds", f"<constraint>{constraint}</constraint>")))

    def close(self) -> None:
        self.connection.close()


def _loop_process(port: int, start: float, until: float, limit: int, step: Callable[[Client], object],
                  results: multiprocessing.Queue) -> None:
    client, done = Client(port), 0
    time.sleep(max(0.0, start - time.time()))
    while time.time() < until and done < limit:
        step(client)
        done += 1
    results.put((done, time.time() - start))
    client.close()


def submit_flow(port: int, clients: int, seconds: float, limit: int = 10 ** 9) -> float:
    """Jobs/s of ``clients`` processes looping the submit flow for ``seconds`` (or ``limit`` jobs each)."""
    ad = job_ad()
    return looped(port, clients, seconds, lambda client: client.submit_jobs(ad), limit)


def looped(port: int, clients: int, seconds: float, step: Callable[[Client], object], limit: int = 10 ** 9) -> float:
    """Steps/s of ``clients`` processes (forked), each on its own connection, looping ``step`` for ``seconds`` (or
    ``limit`` steps each)."""
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    start = time.time() + 0.3 + 0.02 * clients
    processes = [context.Process(target=_loop_process, args=(port, start, start + seconds, limit, step, results))
                 for _ in range(clients)]
    for process in processes:
        process.start()
    answers = [results.get(timeout=seconds + 900) for _ in processes]
    for process in processes:
        process.join()
    return sum(done for done, _ in answers) / max(elapsed for _, elapsed in answers)


# -- queues written straight into the store --------------------------------------------------------------------
def template_ad(tmp: Path) -> classad2.ClassAd:
    """A job as the gateway stores it after a SOAP submit (the ad the large queues are made of)."""
    gateway = GatewayProcess(tmp / "template", QUEUE_ONLY, tmp=tmp).start()
    try:
        assert gateway.port is not None
        client = Client(gateway.port)
        cluster = client.submit_jobs(job_ad())
        client.close()
    finally:
        gateway.stop()
    store = JobStore(tmp / "template" / "queue.sqlite3")
    ad = store.get((cluster, 0))
    store.close()
    assert ad is not None
    return ad


def fill(state_dir: Path, template: classad2.ClassAd, jobs: int, batch: int = 5000) -> None:
    """Write ``jobs`` copies of the template (ten per cluster) into a new queue, through the store's own API."""
    state_dir.mkdir(parents=True)
    store = JobStore(state_dir / "queue.sqlite3")
    now, schedd = int(time.time()), str(template.get("GlobalJobId", "bench#")).split("#")[0]
    ads: dict[tuple[int, int], classad2.ClassAd] = {}
    cluster = 0
    for number in range(jobs):
        proc = number % PROCS_PER_CLUSTER
        if proc == 0:
            cluster = store.next_cluster_id()
        ad = copy_ad(template)
        ad["ClusterId"], ad["ProcId"], ad["QDate"] = cluster, proc, now
        ad["GlobalJobId"] = f"{schedd}#{cluster}.{proc}#{now}"
        ads[(cluster, proc)] = ad
        if len(ads) >= batch:
            store.apply(ads)
            ads = {}
    store.apply(ads)
    store.close()


def first_answer(state_dir: Path, tmp: Path, key: tuple[int, int]) -> tuple[GatewayProcess, float, float]:
    """Start a gateway on this state; it, the seconds from its start to its first getJobAd answer, and to when every
    queued ad is parsed (the gateway does that in the background)."""
    gateway = GatewayProcess(state_dir, QUEUE_ONLY, tmp=tmp)
    before = gateway.log().count(PARSED)
    started = time.monotonic()
    gateway.start()
    assert gateway.port is not None
    client = Client(gateway.port)
    while True:
        try:
            client.soap("getJobAd", f"<clusterId>{key[0]}</clusterId><jobId>{key[1]}</jobId>")
            break
        except (OSError, http.client.HTTPException):
            client.close()
            client = Client(gateway.port)
            time.sleep(0.01)
    client.close()
    answered = time.monotonic() - started
    return gateway, answered, all_parsed(gateway, started, before)


PARSED = "queued job ads parsed"


def all_parsed(gateway: GatewayProcess, started: float, before: int, timeout: float = 300) -> float:
    """Wait until the gateway's log says (for the ``before + 1``-th time: a log file may be appended to) it parsed
    every queued ad in the background; seconds since ``started``."""
    deadline = time.monotonic() + timeout
    while gateway.log().count(PARSED) <= before:
        if time.monotonic() > deadline:
            raise RuntimeError("the gateway did not say it parsed the queue")
        time.sleep(0.05)
    return time.monotonic() - started


def stored_ads(state_dir: Path) -> list[classad2.ClassAd]:
    store = JobStore(state_dir / "queue.sqlite3")
    ads = [ad for _, ad in store.ads()]
    store.close()
    return ads


# -- trivial jobs ----------------------------------------------------------------------------------------------
def trivial_jobs(port: int, jobs: int, iwd: Path, window: Callable[[], Callable[[], None]] | None = None) -> float:
    """Jobs/s from the commit of ``jobs`` /bin/true jobs to the last one's leaving the queue (``window``, if given,
    is called at the commit, and what it returns once the last job left)."""
    client = Client(port)
    ad = job_ad("/bin/true", "") + item("Iwd", "STRING", str(iwd))
    txn = client.begin()
    cluster = int(NUMBER["newCluster"].search(client.soap("newCluster", txn)).group(1))
    for _ in range(jobs):
        proc = int(NUMBER["newJob"].search(client.soap("newJob", f"{txn}<clusterId>{cluster}</clusterId>")).group(1))
        client.soap("submit", f"{txn}<clusterId>{cluster}</clusterId><jobId>{proc}</jobId><jobAd>{ad}</jobAd>")
    ended = window() if window is not None else None
    started = time.monotonic()
    client.soap("commitTransaction", txn)
    while client.exists(cluster, jobs - 1):  # (the last to start; polling every job's ad would load the gateway)
        time.sleep(0.02)
    while client.count(f"ClusterId == {cluster}"):
        time.sleep(0.02)
    elapsed = time.monotonic() - started
    if ended is not None:
        ended()
    client.close()
    return jobs / elapsed


def spawn_two_at_a_time(jobs: int) -> float:
    """/bin/true run by this process, two at a time: what starting processes costs here."""
    started = time.monotonic()
    for _ in range(jobs // 2):
        first, second = subprocess.Popen(["/bin/true"]), subprocess.Popen(["/bin/true"])
        first.wait()
        second.wait()
    return (jobs // 2 * 2) / (time.monotonic() - started)


# -- the whole run ---------------------------------------------------------------------------------------------
@dataclass
class Settings:
    queued: list[int]
    seconds: float
    runs: int
    soap_fill: int
    trivial: int


def timed(function: Callable[[], object]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def measure(tmp: Path, settings: Settings) -> None:
    template = template_ad(tmp)
    largest = max(settings.queued)
    for jobs in settings.queued:
        fill(tmp / f"queued-{jobs}", template, jobs)
    empty = GatewayProcess(tmp / "empty", QUEUE_ONLY, tmp=tmp).start()
    gateways: dict[int, GatewayProcess] = {0: empty}
    restart = Figure(f"restart with {largest:,} queued, to the first answer", "s", higher_is_better=False)
    loaded = Figure(f"restart with {largest:,} queued, until every ad is parsed", "s", higher_is_better=False)
    rss_largest = Figure(f"RSS per queued job, {largest:,} queued, after a restart", "KB", higher_is_better=False)
    try:
        empty_rss = collected(empty).rss
        for jobs in settings.queued:  # the restarts: the largest queue's three times, the others once
            for run in range(settings.runs if jobs == largest else 1):
                gateway, seconds, parsed = first_answer(tmp / f"queued-{jobs}", tmp, (1, 0))
                if jobs == largest:
                    restart.add(seconds)
                    loaded.add(parsed)
                    rss_largest.add((collected(gateway).rss - empty_rss) * 1024 / jobs)
                if run < settings.runs - 1 and jobs == largest:
                    gateway.stop()
                else:
                    gateways[jobs] = gateway
        flows = {jobs: Figure(f"submit flow, 1 client, {jobs:,} queued", "jobs/s") for jobs in gateways}
        eight = Figure("submit flow, 8 clients, empty queue", "jobs/s")
        selective = Figure(f"getJobAds matching 1 % of {largest:,}", "s", higher_is_better=False)
        floor = Figure("classad2 evaluation of the constraint alone", "s", higher_is_better=False)
        ads = stored_ads(tmp / f"queued-{largest}")
        constraint = classad2.ExprTree(ONE_PERCENT)
        big = Client(gateways[largest].port)  # type: ignore[arg-type]
        interleaved([*((flows[jobs], lambda port=gateway.port: submit_flow(port, 1, settings.seconds))
                       for jobs, gateway in gateways.items()),
                     (eight, lambda: submit_flow(empty.port, 8, settings.seconds)),  # type: ignore[arg-type]
                     (selective, lambda: timed(lambda: big.count(ONE_PERCENT))),
                     (floor, lambda: timed(lambda: [ad for ad in ads if matches(constraint, ad)]))],
                    settings.runs)
        big.close()
        ads.clear()
        print_figures("submit flow (Birdbath: begin, newCluster, newJob, submit 30 attributes, commit)",
                      [(flows[jobs], flows[0] if jobs else None) for jobs in flows] + [(eight, flows[0])])
        print_figures("restart and queries", [(restart, None), (loaded, None), (selective, floor)])
    finally:
        for gateway in gateways.values():
            gateway.stop()
    memory(tmp, settings, rss_largest)
    execution(tmp, settings)


def memory(tmp: Path, settings: Settings, rss_largest: Figure) -> None:
    """RSS per job after a SOAP fill and after the restart that loads the same queue."""
    soap = Figure(f"RSS per queued job, {settings.soap_fill:,} submitted through SOAP", "KB", higher_is_better=False)
    restarted = Figure(f"RSS per queued job, the same {settings.soap_fill:,} after a restart", "KB",
                       higher_is_better=False)
    gateway = GatewayProcess(tmp / "soap-fill", QUEUE_ONLY, tmp=tmp).start()
    try:
        assert gateway.port is not None
        base = collected(gateway).rss
        submit_flow(gateway.port, 8, 10 ** 6, settings.soap_fill // 8)
        soap.add((collected(gateway).rss - base) * 1024 / (settings.soap_fill // 8 * 8))
        gateway.stop()
        before, started = gateway.log().count(PARSED), time.monotonic()
        gateway.start()
        all_parsed(gateway, started, before)
        restarted.add((collected(gateway).rss - base) * 1024 / (settings.soap_fill // 8 * 8))
    finally:
        gateway.stop()
    print_figures("memory (VmRSS after a full garbage collection, less the empty gateway's)",
                  [(soap, None), (restarted, soap), (rss_largest, None)])


def execution(tmp: Path, settings: Settings) -> None:
    iwd = tmp / "iwd"
    iwd.mkdir()
    os.chmod(tmp, 0o755)
    gateway = GatewayProcess(tmp / "runner", RUNNER, tmp=tmp).start()
    jobs = Figure(f"trivial /bin/true jobs, 2 slots ({settings.trivial} in one transaction)", "jobs/s")
    spawned = Figure("Python spawning /bin/true 2 at a time", "jobs/s")
    try:
        interleaved([(jobs, lambda: trivial_jobs(gateway.port, settings.trivial, iwd)),  # type: ignore[arg-type]
                     (spawned, lambda: spawn_two_at_a_time(settings.trivial))], settings.runs)
    finally:
        gateway.stop()
    print_figures("execution", [(jobs, spawned)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs, a smaller SOAP fill and fewer jobs")
    parser.add_argument("--queued", default="10000,100000", help="queue lengths besides the empty queue")
    parser.add_argument("--seconds", type=float, help="length of each submit-flow run (default 5, quick 2)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--soap-fill", type=int, help="jobs submitted through SOAP for the memory figure "
                                                      "(default 20000, quick 4000)")
    parser.add_argument("--trivial", type=int, help="trivial jobs per run (default 1000, quick 300)")
    parser.add_argument("--keep", type=Path, help="keep the gateways' state and logs in this directory")
    args = parser.parse_args()
    settings = Settings(queued=[int(n) for n in args.queued.split(",") if n],
                        seconds=args.seconds or (2.0 if args.quick else 5.0), runs=args.runs,
                        soap_fill=args.soap_fill or (4000 if args.quick else 20000),
                        trivial=args.trivial or (300 if args.quick else 1000))
    print(f"queue scale on the local backend ({os.cpu_count()} CPUs), {time.strftime('%Y-%m-%d %H:%M')}")
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        measure(tmp, settings)


if __name__ == "__main__":
    main()
