"""Low-latency jobs over AMQP (issue #28) against the same jobs through SOAP and the JSON submission API, on a
private RabbitMQ broker started here.

- latency: ``--sequential`` ``/bin/true`` jobs one after the other; publish -> the JobStatus 2 reply and publish -> the
  final reply (p50 / p99), against the SOAP submit flow (beginTransaction, newCluster, newJob, submit,
  commitTransaction) and the JSON submit, each polled with getJobAd every 5 ms until JobStatus 2 and 4;
- throughput: ``--burst`` ``/bin/true`` published at once -> every final reply, jobs/s; against the SOAP submit flow
  of as many jobs (one transaction each) until the last completed, and this process spawning ``/bin/true`` two at a
  time (the ceiling);
- scale-out: ``--spread`` ``sleep 0.2`` jobs on two gateways with one slot each against one such gateway; each
  gateway's share.

The gateway has 2 slots (``carod_max_jobs = 0``: as many).  Run: ``python bench/lowlatency.py [--quick]``.  Prints
figures and ratios measured in the same run; asserts nothing.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pika  # noqa: E402
from queue_scale import Client, item, spawn_two_at_a_time  # noqa: E402
from servers import ENVELOPE, SOAP_HEADERS  # noqa: E402

from gateway.testing import GatewayProcess  # noqa: E402
from gateway.testing_broker import RabbitBroker  # noqa: E402

QUEUE = "grid"
POLL = 0.005


def gateway_config(broker: RabbitBroker, slots: int, name: str) -> str:
    return (f"[carod]\nenable_carod = true\ncarod_broker_port = {broker.port}\ncarod_broker_queue = \"{QUEUE}\"\n"
            f"[backends.local]\nslots = {slots}\nschedd_name = \"{name}\"\n"
            "[birdbath]\nmax_transactions_per_caller = 64\n")


class Publisher:
    """Publishes jobs on the work queue and reads replies from a queue of its own."""

    def __init__(self, broker: RabbitBroker) -> None:
        self.connection = pika.BlockingConnection(pika.URLParameters(broker.url()))
        self.channel = self.connection.channel()
        self.channel.queue_declare(queue=QUEUE, durable=True)
        self.channel.queue_bind(queue=QUEUE, exchange="amq.direct", routing_key="grid_key")
        self.replies = self.channel.queue_declare(queue="", exclusive=True).method.queue
        self.channel.queue_bind(queue=self.replies, exchange="amq.direct", routing_key=self.replies)
        self.received: list[tuple[float, str, dict]] = []
        self.channel.basic_consume(self.replies, self._reply, auto_ack=True)

    def _reply(self, channel, method, properties, body) -> None:
        self.received.append((time.perf_counter(), properties.correlation_id, dict(properties.headers or {})))

    def publish(self, cmd: str, arguments: str = "") -> str:
        message_id = str(uuid.uuid4())
        self.channel.basic_publish("amq.direct", "grid_key", b"", pika.BasicProperties(
            message_id=message_id, reply_to=f"amq.direct/{self.replies}", delivery_mode=2,
            headers={"Cmd": f'"{cmd}"', "Arguments": f'"{arguments}"'}))
        return message_id

    def finals(self) -> dict[str, dict]:
        return {mid: headers for _, mid, headers in self.received if headers.get("JobStatus") not in (2, None)}

    def wait_finals(self, count: int, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while len(self.finals()) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.finals())} of {count} finals")
            self.connection.process_data_events(time_limit=0.01)

    def close(self) -> None:
        self.connection.close()


def ll_latency(publisher: Publisher) -> tuple[float, float]:
    publisher.received.clear()
    started = time.perf_counter()
    message_id = publisher.publish("/bin/true")
    publisher.wait_finals(1)
    running = next(t for t, mid, h in publisher.received if mid == message_id and h.get("JobStatus") == 2)
    final = next(t for t, mid, h in publisher.received if mid == message_id and h.get("JobStatus") == 4)
    return running - started, final - started


TRUE_AD = (item("Cmd", "STRING", "/bin/true") + item("Iwd", "STRING", "/tmp") + item("JobUniverse", "INTEGER", "5")
           + item("Requirements", "EXPRESSION", "TRUE")
           + item("LeaveJobInQueue", "EXPRESSION", "JobStatus == 4 &amp;&amp; FilesRetrieved =!= true"))


def job_status(client: Client, cluster: int, proc: int = 0) -> int:
    body = f"<clusterId>{cluster}</clusterId><jobId>{proc}</jobId>"
    client.connection.request("POST", "/", ENVELOPE.format(op="getJobAd", inner=body).encode(), SOAP_HEADERS)
    data = client.connection.getresponse().read()
    at = data.find(b"<name>JobStatus</name>")
    if at < 0:
        return 4  # gone: completed and left
    start = data.index(b"<value>", at) + 7
    return int(data[start:data.index(b"</value>", start)])


def polled(client: Client, cluster: int, started: float) -> tuple[float, float]:
    running = None
    while True:
        status = job_status(client, cluster)
        now = time.perf_counter()
        if status >= 2 and running is None:
            running = now
        if status == 4:
            return running - started, now - started
        time.sleep(POLL)


def soap_latency(client: Client) -> tuple[float, float]:
    started = time.perf_counter()
    cluster = client.submit_jobs(TRUE_AD)
    result = polled(client, cluster, started)
    client.soap("closeSpool", f"<clusterId>{cluster}</clusterId><jobId>0</jobId>")
    return result


def json_latency(port: int, client: Client) -> tuple[float, float]:
    body = json.dumps({"ad": {"Cmd": {"TYPE": 3, "VALUE": "/bin/true"}, "Iwd": {"TYPE": 3, "VALUE": "/tmp"},
                              "Requirements": {"TYPE": 0, "VALUE": "TRUE"}, "JobUniverse": {"TYPE": 1, "VALUE": "5"},
                              "LeaveJobInQueue": {"TYPE": 0, "VALUE": "JobStatus == 4 && FilesRetrieved =!= true"}}})
    connection = http.client.HTTPConnection("127.0.0.1", port)
    started = time.perf_counter()
    connection.request("POST", "/submission/json/submit", body.encode(), {"Content-Type": "application/json"})
    answer = json.loads(connection.getresponse().read())
    connection.close()
    cluster = int(answer["id"].split("#")[-1].split(".")[0])
    result = polled(client, cluster, started)
    client.soap("closeSpool", f"<clusterId>{cluster}</clusterId><jobId>0</jobId>")
    return result


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered) * 1000:7.1f} ms  p99 {p99 * 1000:7.1f} ms"


def burst_ll(publisher: Publisher, jobs: int) -> float:
    publisher.received.clear()
    started = time.perf_counter()
    for _ in range(jobs):
        publisher.publish("/bin/true")
    publisher.wait_finals(jobs)
    return jobs / (time.perf_counter() - started)


def burst_soap(client: Client, jobs: int) -> float:
    started = time.perf_counter()
    clusters = [client.submit_jobs(TRUE_AD.replace("JobStatus == 4 &amp;&amp; FilesRetrieved =!= true", "false"))
                for _ in range(jobs)]
    for cluster in clusters:
        while client.exists(cluster, 0):
            time.sleep(0.01)
    return jobs / (time.perf_counter() - started)


def spread(broker: RabbitBroker, base: Path, gateways: int, jobs: int) -> tuple[float, dict[str, int]]:
    started_gateways = [GatewayProcess(base / f"spread{gateways}-{n}" / "state", gateway_config(broker, 1, f"g{n}"),
                                       tmp=_dir(base / f"spread{gateways}-{n}")).start() for n in range(gateways)]
    publisher = Publisher(broker)
    try:
        time.sleep(2)  # connected and consuming
        started = time.perf_counter()
        for _ in range(jobs):
            publisher.publish("/bin/sleep", "0.2")
        publisher.wait_finals(jobs)
        rate = jobs / (time.perf_counter() - started)
        shares: dict[str, int] = {}
        for headers in publisher.finals().values():
            name = str(headers["GlobalJobId"]).strip('"').split("#")[0]
            shares[name] = shares.get(name, 0) + 1
        return rate, shares
    finally:
        publisher.close()
        for gateway in started_gateways:
            gateway.stop()


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequential", type=int, default=200, help="0: no latency figures")
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--spread", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="20 / 100 / 40 jobs: checks the harness")
    args = parser.parse_args()
    if args.quick:
        args.sequential, args.burst, args.spread = 20, 100, 40
    base = Path(tempfile.mkdtemp(prefix="bench-lowlatency-", dir="/tmp"))
    base.chmod(0o755)
    broker = RabbitBroker(base / "broker").start()
    try:
        gateway = GatewayProcess(base / "gw" / "state", gateway_config(broker, 2, "gw"), tmp=_dir(base / "gw")).start()
        publisher = Publisher(broker)
        client = Client(gateway.port)
        try:
            time.sleep(2)
            ll, soap, js = [], [], []
            for _ in range(args.sequential):  # interleaved, so that drift hits all three alike
                ll.append(ll_latency(publisher))
                soap.append(soap_latency(client))
                js.append(json_latency(gateway.port, client))
            if args.sequential:
                print(f"latency, {args.sequential} sequential /bin/true (SOAP/JSON polled every {POLL * 1000:.0f} ms):")
                for name, values in (("AMQP", ll), ("SOAP 5-call", soap), ("JSON submit", js)):
                    print(f"  {name:12} -> running {percentiles([v[0] for v in values])}   "
                          f"-> final {percentiles([v[1] for v in values])}", flush=True)
                ratio = statistics.median(v[0] for v in ll) / statistics.median(v[0] for v in soap)
                print(f"  AMQP publish->running p50 / SOAP submit->running p50 = {ratio:.2f} (target <= 0.5)")
            spawn = spawn_two_at_a_time(args.burst)
            ll_rate = burst_ll(publisher, args.burst)
            client.close()
            client = Client(gateway.port)  # a fresh connection: the kept-alive one may have timed out meanwhile
            soap_rate = burst_soap(client, args.burst)
            print(f"throughput, {args.burst} /bin/true at once -> all done:")
            print(f"  AMQP {ll_rate:7.1f} jobs/s = {ll_rate / soap_rate:.2f} x SOAP flow, {ll_rate / spawn:.3f} x spawn")
            print(f"  SOAP {soap_rate:7.1f} jobs/s = {soap_rate / spawn:.3f} x spawn")
            print(f"  spawning /bin/true two at a time: {spawn:7.1f} /s (targets: AMQP >= 1 x SOAP; both >= 0.15 x "
                  f"spawn)")
        finally:
            publisher.close()
            client.close()
            gateway.stop()
        one, _ = spread(broker, base, 1, args.spread)
        two, two_shares = spread(broker, base, 2, args.spread)
        print(f"scale-out, {args.spread} sleep 0.2 on gateways with one slot each:")
        print(f"  one gateway {one:6.2f} jobs/s; two {two:6.2f} jobs/s = {two / one:.2f} x (target >= 1.8); shares "
              + ", ".join(f"{name} {count / args.spread:.0%}" for name, count in sorted(two_shares.items())))
    finally:
        broker.close()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
