"""``workers = N``: worker processes doing the protocol work around one core process.

Real processes throughout: a gateway started with ``--workers 2``, its workers found among its children, killed with
SIGKILL in the middle of a transaction, of an upload and of a query; the core killed too.  What a client committed is
never lost, what it had not committed is never half applied, and the connections a dead worker served fail.
"""

from __future__ import annotations

import base64
import http.client
import os
import signal
import socket
import ssl
import threading
import time
from pathlib import Path

import pytest
from lxml import etree

from gateway.testing import QUEUE_ONLY, GatewayProcess
from gateway.testing_ports import HeldPort
from tests.test_logging import wait_for_line, wait_until
from tests.test_metrics import get
from tests.wire import body_element

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = pytest.mark.gateway

#: the lone connection too goes to a worker: these tests are of what crosses between the processes
WORKERS = ("--workers", "2", "--lone-connection-in-core", "no")
ENVELOPE = ('<?xml version="1.0" encoding="UTF-8"?><SOAP-ENV:Envelope '
            'xmlns:SOAP-ENV="http://schemas.xmlsoap.org/soap/envelope/" xmlns:c="urn:condor"><SOAP-ENV:Body>'
            '{}</SOAP-ENV:Body></SOAP-ENV:Envelope>')


def request_body(operation: str, **parameters: object) -> bytes:
    inner = "".join(f"<{name}>{value}</{name}>" for name, value in parameters.items())
    return ENVELOPE.format(f"<c:{operation}>{inner}</c:{operation}>").encode()


def txn(transaction_id: int) -> str:
    return f"<id>{transaction_id}</id><duration>60</duration>"


class Client:
    """One keep-alive connection, speaking raw condorSchedd SOAP."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.connection.connect()

    @property
    def local_port(self) -> int:
        return self.connection.sock.getsockname()[1]

    def call(self, operation: str, **parameters: object) -> etree._Element:
        self.connection.request("POST", "/", request_body(operation, **parameters),
                                {"Content-Type": "text/xml; charset=utf-8"})
        answer = self.connection.getresponse()
        data = answer.read()
        assert answer.status == 200, data
        return body_element(data)

    def close(self) -> None:
        self.connection.close()


def code(answer: etree._Element) -> str:
    return answer.findtext(".//code")


def begin(client: Client) -> int:
    answer = client.call("beginTransaction", duration=60)
    assert code(answer) == "SUCCESS"
    return int(answer.findtext(".//transaction/id"))


def submit_job(client: Client, transaction_id: int) -> tuple[int, int]:
    """newCluster, newJob and submit in the transaction: the job (cluster, proc)."""
    cluster = int(client.call("newCluster", transaction=txn(transaction_id)).findtext(".//integer"))
    proc = int(client.call("newJob", transaction=txn(transaction_id), clusterId=cluster).findtext(".//integer"))
    ad = "".join(f"<item><name>{n}</name><type>{t}</type><value>{v}</value></item>" for n, t, v in (
        ("Cmd", "STRING-ATTR", "/bin/sleep"), ("Arguments", "STRING-ATTR", "600"),  # stays in the queue
        ("JobUniverse", "INTEGER-ATTR", "5"), ("Iwd", "STRING-ATTR", "/tmp"),
        ("Owner", "STRING-ATTR", os.environ.get("USER", "root"))))
    answer = client.call("submit", transaction=txn(transaction_id), clusterId=cluster, jobId=proc, jobAd=ad)
    assert code(answer) == "SUCCESS", etree.tostring(answer)
    return cluster, proc


def job_ids(port: int) -> set[tuple[int, int]]:
    client = Client(port)
    try:
        answer = client.call("getJobAds", constraint="true")
    finally:
        client.close()
    found = set()
    for ad in answer.find(".//classAdArray").findall("item"):
        values = ad_values(ad)
        found.add((int(values["ClusterId"]), int(values["ProcId"])))
    return found


def ad_values(ad: etree._Element) -> dict[str, str]:
    """A ClassAdStruct answered: attribute name -> value text."""
    return {item.findtext("name"): item.findtext("value") for item in ad.findall("item")}


# -- finding the processes -------------------------------------------------------------------------------------
def workers_of(gateway) -> list[int]:
    """The pids of a gateway's worker processes (its children running gateway.workers.worker)."""
    pid = gateway.process.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    found = []
    for child in children:
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        if b"gateway.workers.worker" in command:
            found.append(int(child))
    return sorted(found)


def wait_for_workers(gateway, count: int = 2, without: tuple[int, ...] = ()) -> list[int]:
    """The pids of ``count`` workers serving (none of ``without``), once they are."""
    def serving() -> bool:
        pids = [pid for pid in workers_of(gateway) if pid not in without]
        log = gateway.log()
        return len(pids) == count and all(f"(pid {pid}) serving" in log for pid in pids)

    wait_until(serving, f"{count} workers serving\n{gateway.log()}", 90)  # a worker starts in seconds, more under load
    return workers_of(gateway)


def _socket_inode(local_port: int, peer_port: int) -> int:
    """The inode of the server's side of a loopback TCP connection from ``peer_port`` to ``local_port``."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if int(local.split(":")[1], 16) == local_port and int(remote.split(":")[1], 16) == peer_port:
            return int(fields[9])
    raise AssertionError(f"no connection from port {peer_port} to {local_port}")


def serving_worker(gateway, client: Client) -> int:
    """The pid of the worker serving a client's connection on the plain port."""
    return worker_holding(gateway, gateway.port, client.local_port)


def worker_holding(gateway, server_port: int, client_port: int) -> int:
    """The pid of the worker holding the server's socket of the connection from ``client_port``.  The socket's
    inode is read each time: until the core has accepted the connection it waits in the listen queue with inode 0,
    owned by no process."""

    def holder() -> int | None:
        return _holding_worker(gateway, _socket_inode(server_port, client_port))

    wait_until(lambda: holder() is not None, "a worker holding the connection", 60)  # the hand-off waits under load
    return holder()  # type: ignore[return-value]


def _holding_worker(gateway, number: int) -> int | None:
    """The worker holding the socket of that inode (none for 0, a socket not accepted yet)."""
    if number == 0:
        return None
    inode = f"socket:[{number}]"
    for pid in workers_of(gateway):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd) == inode:
                    return pid
            except FileNotFoundError:
                continue
    return None


def on_each_worker(gateway) -> tuple[Client, Client]:
    """Two clients whose connections two workers serve (the core passes a new one to the worker serving fewest)."""
    first, second = Client(gateway.port), Client(gateway.port)
    first.call("getVersionString")
    second.call("getVersionString")
    assert serving_worker(gateway, first) != serving_worker(gateway, second)
    return first, second


def served_by_no_worker(gateway, client: Client) -> bool:
    """Whether no worker holds the server's socket of a client's connection (a connection that has been answered:
    one passed to a worker is held by it from then on)."""
    return _holding_worker(gateway, _socket_inode(gateway.port, client.local_port)) is None


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def connection_fails(client: Client, operation: str = "getVersionString") -> bool:
    try:
        client.call(operation)
    except (TimeoutError, http.client.HTTPException, ConnectionError):
        return True
    return False


@pytest.fixture
def gateway(start_gateway):
    process = start_gateway(extra_args=WORKERS)
    wait_for_workers(process)
    return process


@pytest.fixture
def start_gateway(tmp_path):
    from gateway.testing import GatewayProcess

    started = []

    def start(config: str | None = None, extra_args: tuple[str, ...] = WORKERS, state_dir: Path | None = None,
              ssl: bool = False):
        process = GatewayProcess(state_dir or tmp_path / f"state{len(started)}", config, tmp_path,
                                 extra_args=extra_args, ssl=ssl).start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


# -- the tests -------------------------------------------------------------------------------------------------
def test_a_transaction_whose_calls_arrive_on_different_workers_commits_whole(gateway):
    first, second = on_each_worker(gateway)
    transaction_id = begin(first)
    job = submit_job(second, transaction_id)
    assert job not in job_ids(gateway.port)  # not committed: nobody sees it
    assert code(first.call("commitTransaction", transaction=txn(transaction_id))) == "SUCCESS"
    assert job in job_ids(gateway.port)


def test_a_job_ad_read_again_and_again_through_the_workers_shows_each_change(gateway):
    """A job's ad crosses to a worker whole once, then by reference while the job keeps its revision: a change (a new
    revision) must reach the next answer of every worker, never the ad a worker held before."""
    clients = Client(gateway.port), Client(gateway.port)
    for client in clients:
        client.call("getVersionString")
    assert serving_worker(gateway, clients[0]) != serving_worker(gateway, clients[1])
    transaction_id = begin(clients[0])
    cluster, proc = submit_job(clients[0], transaction_id)
    assert code(clients[0].call("commitTransaction", transaction=txn(transaction_id))) == "SUCCESS"

    def read(client: Client) -> list[dict[str, str]]:
        """The job's ad as getJobAd and as getJobAds answer it."""
        one = client.call("getJobAd", clusterId=cluster, jobId=proc)
        assert code(one) == "SUCCESS"
        many = client.call("getJobAds", constraint=f"ClusterId == {cluster} &amp;&amp; ProcId == {proc}")
        [found] = many.find(".//classAdArray").findall("item")
        return [ad_values(one.find(".//classAd")), ad_values(found)]

    for _ in range(3):
        for client in clients:
            assert all(values["JobStatus"] in ("1", "2") and "HoldReason" not in values for values in read(client))
    hold = clients[1].call("holdJob", clusterId=cluster, jobId=proc, reason="held between two reads")
    assert code(hold) == "SUCCESS", etree.tostring(hold)
    for _ in range(3):
        for client in clients:
            assert all(values["JobStatus"] == "5" and values["HoldReason"] == "held between two reads"
                       for values in read(client))
    assert code(clients[0].call("releaseJob", clusterId=cluster, jobId=proc, reason="done")) == "SUCCESS"
    for client in clients:
        assert all(values["JobStatus"] in ("1", "2") and "HoldReason" not in values for values in read(client))


def test_a_worker_killed_mid_transaction_loses_its_connections_not_the_transaction(gateway):
    client = Client(gateway.port)
    transaction_id = begin(client)
    job = submit_job(client, transaction_id)
    victim = serving_worker(gateway, client)
    kill(victim)
    assert connection_fails(client)
    assert job not in job_ids(gateway.port)  # nothing half applied
    wait_for_workers(gateway, 2, without=(victim,))
    wait_for_line(gateway.log, "worker", f"(pid {victim})", "starting another")
    # the transaction lives in the core: the client carries on over a new connection, which another worker serves
    again = Client(gateway.port)
    assert code(again.call("commitTransaction", transaction=txn(transaction_id))) == "SUCCESS"
    assert job in job_ids(gateway.port)


def test_a_worker_killed_mid_upload_applies_nothing_of_it(gateway):
    client = Client(gateway.port)
    transaction_id = begin(client)
    cluster, proc = submit_job(client, transaction_id)
    data = os.urandom(64 * 1024)
    declared = client.call("declareFile", transaction=txn(transaction_id), clusterId=cluster, jobId=proc,
                           name="input", size=len(data), hashType="NOHASH", hash="")
    assert code(declared) == "SUCCESS"
    body = request_body("sendFile", transaction=txn(transaction_id), clusterId=cluster, jobId=proc, name="input",
                        offset=0, data=base64.b64encode(data).decode())
    raw = socket.create_connection(("127.0.0.1", gateway.port), timeout=30)
    raw.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nContent-Length: %d\r\n\r\n" % len(body)
                + body[:len(body) // 2])
    fake = Client.__new__(Client)
    fake.connection = type("C", (), {"sock": raw})()
    victim = serving_worker(gateway, fake)
    kill(victim)
    try:
        raw.sendall(body[len(body) // 2:])
    except OSError:
        pass
    assert raw.recv(65536) == b""  # closed without an answer
    raw.close()
    # nothing of the half-sent chunk was written: the spool holds the declared file, none of its bytes received
    again = Client(gateway.port)
    answer = again.call("commitTransaction", transaction=txn(transaction_id))
    assert code(answer) == "FAIL"
    assert f"{len(data)} of its {len(data)} declared bytes have not been received" in answer.findtext(".//message")
    assert (cluster, proc) not in job_ids(gateway.port)


def test_an_input_upload_cut_short_by_a_killed_worker_can_be_sent_again(start_gateway):
    """The files it declared before its worker died stay declared in the core's transaction: the upload sent again
    starts clean instead of finding them declared (409) at every try."""
    import threading

    from tests.rest import call, tar_of
    from tests.test_rest import NEEDS_INPUT, SCRIPT, submit

    gateway = start_gateway("[gateway]\nmax_request_bytes = 67108864\n[backends.local]\nslots = 0\n")
    wait_for_workers(gateway)
    job = submit(gateway.port, NEEDS_INPUT)["job_ids"][0]
    members = {"run.sh": SCRIPT, **{f"f{n:02d}": os.urandom(1 << 20) for n in range(40)}, "in.txt": "ok"}
    cut: list[object] = []
    upload = threading.Thread(target=lambda: cut.append(_answer_or_error(
        lambda: call(gateway.port, "PUT", f"/api/v1/jobs/{job}/input", tar_of(members), "application/x-tar"))))
    upload.start()
    spool = gateway.state_dir / "spool"
    wait_until(lambda: any(spool.rglob("f01")), "the upload under way", 60)
    for pid in workers_of(gateway):
        kill(pid)
    upload.join(60)
    if not isinstance(cut[0], Exception):
        pytest.skip(f"the upload ended before its worker was killed ({cut[0].status}): nothing was cut short")
    wait_for_workers(gateway, 2)
    again = call(gateway.port, "PUT", f"/api/v1/jobs/{job}/input", tar_of({"run.sh": SCRIPT, "in.txt": "ok"}),
                 "application/x-tar")
    assert again.status == 200 and again.json["queued"] == [job], again.body


def _answer_or_error(request):
    try:
        return request()
    except (OSError, http.client.HTTPException) as exc:
        return exc


def test_a_worker_killed_mid_query_fails_its_connection_and_the_gateway_carries_on(start_gateway):
    """The query waits in the core while its worker dies; then every worker, the new one with a new view of the
    jobs, answers as before (the job stays idle: with slots it could start between two answers, which then
    differ, as a test run under load once saw)."""
    gateway = start_gateway(QUEUE_ONLY)
    wait_for_workers(gateway)
    client = Client(gateway.port)
    transaction_id = begin(client)
    job = submit_job(client, transaction_id)
    assert code(client.call("commitTransaction", transaction=txn(transaction_id))) == "SUCCESS"
    before = answered(client, f"ClusterId == {job[0]}")
    victim = serving_worker(gateway, client)
    core = gateway.process.pid
    os.kill(core, signal.SIGSTOP)  # the query waits in the core while its worker dies
    try:  # (a constraint the worker's view cannot evaluate: the core answers it)
        client.connection.request("POST", "/", request_body("getJobAds",
                                                            constraint=f'ClusterId == {job[0]} || regexp("^$", Cmd)'),
                                  {"Content-Type": "text/xml"})
        time.sleep(0.5)
        kill(victim)
    finally:
        os.kill(core, signal.SIGCONT)
    with pytest.raises((http.client.HTTPException, ConnectionError, socket.timeout)):
        client.connection.getresponse().read()
    wait_for_workers(gateway, 2, without=(victim,))
    assert job in job_ids(gateway.port)
    for _ in range(4):  # connections to both workers, the new one included
        again = Client(gateway.port)
        assert answered(again, f"ClusterId == {job[0]}") == before
        again.close()


def test_connections_are_counted_by_one_gate_across_workers(start_gateway):
    # root is an operator, held to max_connections alone (not to max_connections_per_caller)
    gateway = start_gateway("[gateway]\nmax_connections = 3\nreserved_connections = 1\n")
    wait_for_workers(gateway)
    held = [Client(gateway.port) for _ in range(3)]
    for client in held:
        client.call("getVersionString")
    assert len({serving_worker(gateway, client) for client in held}) == 2  # spread over both workers
    refused = Client(gateway.port)
    assert connection_fails(refused)
    wait_for_line(gateway.log, "closing connections from", "the gateway holds max_connections")
    held[0].close()
    wait_until(lambda: not connection_fails(Client(gateway.port)), "a connection once one was closed", 10)


def test_transactions_per_caller_are_counted_across_workers(start_gateway):
    gateway = start_gateway("[birdbath]\nmax_transactions_per_caller = 2\n")
    wait_for_workers(gateway)
    first, second = on_each_worker(gateway)
    begin(first)
    begin(second)
    assert code(first.call("beginTransaction", duration=60)) == "FAIL"
    assert code(second.call("beginTransaction", duration=60)) == "FAIL"


def test_a_caller_beginning_more_than_its_limit_through_both_workers_gets_exactly_its_limit(start_gateway):
    """Each worker begins transactions from allowances the core grants (gateway/core/grants.py): hostile, the caller
    begins through both workers in turn far past its limit."""
    gateway = start_gateway("[birdbath]\nmax_transactions_per_caller = 3\n")
    wait_for_workers(gateway)
    first, second = on_each_worker(gateway)
    answers = [client.call("beginTransaction", duration=60) for _ in range(4) for client in (first, second)]
    opened = [int(answer.findtext(".//transaction/id")) for answer in answers if code(answer) == "SUCCESS"]
    assert len(opened) == 3
    assert all("Maximum number of transactions reached" in answer.findtext(".//message")
               for answer in answers if code(answer) != "SUCCESS")
    assert code(second.call("abortTransaction", transaction=txn(opened[0]))) == "SUCCESS"  # (maybe the other's)
    assert code(first.call("beginTransaction", duration=60)) == "SUCCESS"  # its room, taken back from the other
    assert code(second.call("beginTransaction", duration=60)) == "FAIL"


def test_a_worker_killed_right_after_a_begin_leaves_the_transaction_to_the_core(gateway):
    """The begin is answered by the worker, which told the core before it answered: the transaction lives on."""
    client = Client(gateway.port)
    transaction_id = begin(client)
    victim = serving_worker(gateway, client)
    kill(victim)
    wait_for_workers(gateway, 2, without=(victim,))
    again = Client(gateway.port)
    job = submit_job(again, transaction_id)
    assert code(again.call("commitTransaction", transaction=txn(transaction_id))) == "SUCCESS"
    assert job in job_ids(gateway.port)


def test_ids_never_begun_are_refused_through_every_worker(gateway):
    first, second = on_each_worker(gateway)
    mine = begin(first)
    for client in (first, second):
        for forged in (mine + 1, mine - 1, 12345, 2**31 - 1):
            answer = client.call("newCluster", transaction=txn(forged))
            assert code(answer) == "INVALIDTRANSACTION", forged
    assert code(second.call("abortTransaction", transaction=txn(mine))) == "SUCCESS"
    for client in (first, second):  # ended: refused everywhere
        assert code(client.call("newCluster", transaction=txn(mine))) == "INVALIDTRANSACTION"


def test_failed_logins_are_counted_by_the_core_across_workers(start_gateway, tmp_path):
    from gateway.testing import TestPki

    pki = TestPki(tmp_path / "pki")
    pki.passwords({"carol": "right"})
    gateway = start_gateway(f'[birdbath]\nenable_soap_ssl = true\nsoap_ssl_server_keyfile = "{pki.server_keyfile}"\n'
                            f'password_file = "{pki.password_file}"\npassword_failure_delay = 1\n', ssl=True)
    wait_for_workers(gateway)
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    wrong = "Basic " + base64.b64encode(b"carol:wrong").decode()
    connections = []
    for attempt in (1, 2):  # the first stays open, so that the second is passed to the other worker
        connection = http.client.HTTPSConnection("127.0.0.1", gateway.ssl_port, timeout=60, context=context)
        connection.request("POST", "/", request_body("getVersionString"),
                           {"Content-Type": "text/xml; charset=utf-8", "Authorization": wrong})
        assert connection.getresponse().status == 401
        connections.append(connection)
        wait_for_line(gateway.log, "HTTP Basic login of 'carol'", f"({attempt} in a row from there, {attempt} for")
    first, second = (worker_holding(gateway, gateway.ssl_port, c.sock.getsockname()[1]) for c in connections)
    assert first != second


def test_the_core_killed_stops_the_gateway_and_a_restart_recovers(gateway):
    client = Client(gateway.port)
    transaction_id = begin(client)
    job = submit_job(client, transaction_id)
    assert code(client.call("commitTransaction", transaction=txn(transaction_id))) == "SUCCESS"
    open_transaction = begin(client)
    submit_job(client, open_transaction)
    workers = workers_of(gateway)
    gateway.kill()
    wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in workers), "the workers to end", 15)
    gateway.start()
    wait_for_workers(gateway)
    assert job_ids(gateway.port) == {job}  # the committed job, not the uncommitted one


def test_a_worker_loads_htcondors_configuration_and_collects_on_sigusr1(gateway):
    """A worker frees ClassAds all day (each answer's, each constraint's, its view's): until HTCondor's configuration
    is loaded the library's debug log keeps a line per freed ClassAd for ever (gateway/memory.py), ~114 MiB per
    200,000.  A worker loads it as the core does (memory.install), and so answers SIGUSR1 with a full garbage
    collection, as the core does, instead of dying of it."""
    worker = workers_of(gateway)[0]
    before = gateway.log().count("full garbage collection")
    os.kill(worker, signal.SIGUSR1)
    wait_until(lambda: gateway.log().count("full garbage collection") > before, "the worker's collection", 15)
    assert worker in workers_of(gateway)


def test_sigterm_ends_the_core_and_its_workers(gateway):
    workers = workers_of(gateway)
    gateway.stop()
    assert gateway.process.returncode == 0
    wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in workers), "the workers to end", 15)


def test_metrics_add_every_workers_requests_and_show_each_worker(start_gateway):
    """Each worker counts the requests it serves and tells the core when /metrics is scraped: the sums cover both
    workers, each worker's memory and CPU time are shown, and a worker killed takes none of what it had told."""
    from tests.test_metrics import READERS, scrape

    gateway = start_gateway(READERS)
    wait_for_workers(gateway)
    first, second = Client(gateway.port), Client(gateway.port)
    for client in (first, second, first, second, first, second):
        client.call("getVersionString")
    victim = serving_worker(gateway, first)
    assert victim != serving_worker(gateway, second)

    def versions(samples: dict) -> float:
        return sum(value for (name, labels), value in samples.items()
                   if name == "birdbath_requests_total" and ("operation", "getVersionString") in labels)

    seen = scrape(gateway.port)
    assert versions(seen) == 6
    for index in ("0", "1"):
        labels = frozenset({("worker", index)})
        assert seen[("birdbath_worker_resident_memory_bytes", labels)] > 10 * 2 ** 20
        assert seen[("birdbath_worker_cpu_seconds_total", labels)] > 0
    kill(victim)
    wait_for_workers(gateway, 2, without=(victim,))
    Client(gateway.port).call("getVersionString")
    assert versions(scrape(gateway.port)) == 7


def test_version_and_platform_are_answered_without_crossing_to_the_core(gateway):
    """getVersionString and getPlatformString are answered from what the core sent the worker when it started: they
    are answered while the core is stopped."""
    client = Client(gateway.port)
    version = client.call("getVersionString").findtext(".//message")
    assert version.startswith("$CondorVersion")
    core = gateway.process.pid
    os.kill(core, signal.SIGSTOP)
    try:
        assert client.call("getVersionString").findtext(".//message") == version
        assert code(client.call("getPlatformString")) == "SUCCESS"
    finally:
        os.kill(core, signal.SIGCONT)


# -- getJobAds through the workers' views of the jobs (gateway/workers/jobview.py) ---------------------------------
#: simple constraints (evaluated over a worker's view, then by the core over the candidates and the changed jobs)
#: and others (answered by the core alone); {cluster} is the first cluster submitted
VIEW_CONSTRAINTS = ("true", "ClusterId == {cluster}", "JobStatus == 5", "ProcId == 0 &amp;&amp; JobStatus =!= 5",
                    "ClusterId % 2 == 0 || JobStatus == 5", 'Owner =!= "nobody"', "GlobalJobId is undefined",
                    "ClusterId > {cluster} &amp;&amp; QDate > 0", "regexp(\"sleep\", Cmd)", "HoldReason =!= undefined",
                    "JobUniverse == 5 &amp;&amp; ClusterId != {cluster}", "", " ")


def answered(client: Client, constraint: str) -> tuple[str, list[dict[str, str]]]:
    """getJobAds' status code and ads (without ServerTime, the time of the answer)."""
    answer = client.call("getJobAds", constraint=constraint)
    array = answer.find(".//classAdArray")
    ads = [] if array is None else [ad_values(ad) for ad in array.findall("item")]
    for ad in ads:
        ad.pop("ServerTime", None)
    return code(answer), ads


def test_polling_through_the_workers_answers_what_the_single_process_answers(start_gateway, tmp_path):
    single = start_gateway(QUEUE_ONLY, extra_args=(), state_dir=tmp_path / "queue")
    client = Client(single.port)
    jobs = []
    for _ in range(4):
        transaction_id = begin(client)
        jobs.append(submit_job(client, transaction_id))
        assert code(client.call("commitTransaction", transaction=txn(transaction_id))) == "SUCCESS"
    cluster = jobs[0][0]
    assert code(client.call("holdJob", clusterId=jobs[1][0], jobId=jobs[1][1], reason="held")) == "SUCCESS"
    constraints = [text.format(cluster=cluster) for text in VIEW_CONSTRAINTS]
    expected = {text: answered(client, text) for text in constraints}
    client.close()
    single.stop()
    assert [len(expected[text][1]) for text in constraints[:3]] == [4, 1, 1]

    workers = start_gateway(QUEUE_ONLY, extra_args=WORKERS, state_dir=tmp_path / "queue")
    wait_for_workers(workers)
    clients = Client(workers.port), Client(workers.port)
    for client in clients:
        client.call("getVersionString")
    assert serving_worker(workers, clients[0]) != serving_worker(workers, clients[1])
    for _ in range(3):  # a view's first answer (from the whole queue), then answers over the views
        for client in clients:
            for text in constraints:
                assert answered(client, text) == expected[text], text


def test_a_change_made_through_one_worker_shows_in_the_next_answer_of_the_other(start_gateway):
    gateway = start_gateway(QUEUE_ONLY)
    wait_for_workers(gateway)
    writer, reader = Client(gateway.port), Client(gateway.port)
    for client in (writer, reader):
        client.call("getVersionString")
    assert serving_worker(gateway, writer) != serving_worker(gateway, reader)
    transaction_id = begin(writer)
    cluster, proc = submit_job(writer, transaction_id)
    assert code(writer.call("commitTransaction", transaction=txn(transaction_id))) == "SUCCESS"
    for client in (writer, reader):  # both views hold the job, idle
        assert [ad["ClusterId"] for ad in answered(client, f"ClusterId == {cluster}")[1]] == [str(cluster)]
        assert answered(client, "JobStatus == 5")[1] == []
    for round_ in range(5):
        assert code(writer.call("holdJob", clusterId=cluster, jobId=proc, reason=f"round {round_}")) == "SUCCESS"
        [held] = answered(reader, "JobStatus == 5")[1]
        assert held["HoldReason"] == f"round {round_}"
        assert code(writer.call("releaseJob", clusterId=cluster, jobId=proc, reason="go")) == "SUCCESS"
        assert answered(reader, "JobStatus == 5")[1] == []
        transaction_id = begin(writer)
        new_cluster, _ = submit_job(writer, transaction_id)
        assert code(writer.call("commitTransaction", transaction=txn(transaction_id))) == "SUCCESS"
        assert [ad["ClusterId"] for ad in answered(reader, f"ClusterId == {new_cluster}")[1]] == [str(new_cluster)]
        assert code(reader.call("removeCluster", clusterId=new_cluster, reason="gone")) == "SUCCESS"
        assert all(ad["JobStatus"] in ("3", "4") for ad in answered(writer, f"ClusterId == {new_cluster}")[1])



def test_a_quiet_queue_is_read_without_crossing_to_the_core(start_gateway):
    """Once a worker's view is at the change number the core publishes, getJobAds and getJobAd are answered from the
    view and the ads the worker holds: they are answered while the core is stopped.  A change (made before the stop)
    sends the next reads to the core again."""
    gateway = start_gateway(QUEUE_ONLY)
    wait_for_workers(gateway)
    client = Client(gateway.port)
    transaction_id = begin(client)
    cluster, proc = submit_job(client, transaction_id)
    assert code(client.call("commitTransaction", transaction=txn(transaction_id))) == "SUCCESS"
    constraint = f"ClusterId == {cluster}"
    before = answered(client, constraint)
    assert [ad["ClusterId"] for ad in before[1]] == [str(cluster)]
    core = gateway.process.pid
    os.kill(core, signal.SIGSTOP)
    try:
        assert answered(client, constraint) == before
        job = client.call("getJobAd", clusterId=cluster, jobId=proc)
        assert code(job) == "SUCCESS" and ad_values(job.find(".//classAd"))["ClusterId"] == str(cluster)
    finally:
        os.kill(core, signal.SIGCONT)
    assert code(client.call("holdJob", clusterId=cluster, jobId=proc, reason="stopped no more")) == "SUCCESS"
    [held] = answered(client, constraint)[1]
    assert held["HoldReason"] == "stopped no more"
    job = client.call("getJobAd", clusterId=cluster, jobId=proc)
    assert ad_values(job.find(".//classAd"))["HoldReason"] == "stopped no more"


def test_the_lone_connection_is_the_cores_while_it_is_alone(start_gateway):
    """lone_connection_in_core: a connection that arrives while none is open is the core's (its calls cross to no
    other process), one that arrives while another is open goes to a worker, and the core's, no longer alone,
    ends after its next request: its client connects again, to a worker, its transaction carried on.  Once none is
    open, the next is the core's again.  A connection held to metrics_port (Prometheus's) does not count."""
    with HeldPort() as held:  # bound by the gateway (SO_REUSEADDR), and by no other socket before it
        metrics_port = held.port
        gateway = start_gateway(f"[gateway]\nmetrics_port = {metrics_port}\n",
                                extra_args=("--workers", "2"))  # (lone_connection_in_core's default)
    workers = wait_for_workers(gateway)
    scraper = http.client.HTTPConnection("127.0.0.1", metrics_port, timeout=30)  # kept alive, as Prometheus's
    scraper.request("GET", "/metrics")
    assert scraper.getresponse().read()
    lone = Client(gateway.port)
    transaction_id = begin(lone)
    assert served_by_no_worker(gateway, lone)
    kept = lone.connection.sock
    lone.call("getVersionString")  # (alone: kept open)
    assert lone.connection.sock is kept
    other = Client(gateway.port)
    other.call("getVersionString")
    assert serving_worker(gateway, other) in workers
    lone.connection.request("POST", "/", request_body("getVersionString"), {"Content-Type": "text/xml"})
    answer = lone.connection.getresponse()
    answer.read()
    assert answer.getheader("Connection") == "close"  # no longer alone: it ends
    job = submit_job(lone, transaction_id)  # (http.client connects again)
    assert serving_worker(gateway, lone) in workers
    assert code(lone.call("commitTransaction", transaction=txn(transaction_id))) == "SUCCESS"
    assert job in job_ids(gateway.port)
    lone.close()
    other.close()

    def the_next_is_the_cores() -> bool:  # (the core hears of closed connections a moment after their clients)
        client = Client(gateway.port)
        try:
            client.call("getVersionString")
            return served_by_no_worker(gateway, client)
        finally:
            client.close()

    wait_until(the_next_is_the_cores, "the next lone connection served by the core", 30)
    scraper.close()


def test_a_call_that_arrives_while_the_workers_start_is_answered_by_the_core_and_the_port_file_waits(tmp_path):
    """The port is open before the workers serve: a call then is answered at once by the core, not kept waiting
    for a worker's start (seconds on a loaded machine), and handed back once they serve (``Connection: close``).
    The port file is written once the workers serve (``--port-file``: once ready).  The workers are held at their
    start (a ``sitecustomize`` they import first) until the test lets them go."""
    held_workers, go = tmp_path / "hold", tmp_path / "go"
    held_workers.mkdir()
    (held_workers / "sitecustomize.py").write_text(
        f"import os, sys, time\nif '--link-fd' in sys.argv:\n    while not os.path.exists({str(go)!r}):\n"
        "        time.sleep(0.02)\n")
    with HeldPort() as held:
        gateway = GatewayProcess(tmp_path / "state", QUEUE_ONLY, tmp=tmp_path, python_path=(held_workers,),
                                 extra_args=("--workers", "2", "--lone-connection-in-core", "no"))
        gateway.port = held.port
        failed: list[BaseException] = []
        starting = threading.Thread(target=lambda: _started(gateway, failed))
        starting.start()
    try:
        wait_until(lambda: "listening on" in gateway.log(), "the port open", 90)
        early = Client(gateway.port)
        early.call("getVersionString")
        assert served_by_no_worker(gateway, early) and workers_of(gateway)  # (the workers are there, starting)
        assert starting.is_alive()  # no port file yet
        go.touch()
        starting.join(90)
        assert not starting.is_alive() and not failed, failed
        assert gateway.log().count(") serving") == 2  # (both workers: what the port file waited for)
        early.connection.request("POST", "/", request_body("getVersionString"), {"Content-Type": "text/xml"})
        answer = early.connection.getresponse()
        answer.read()
        assert answer.getheader("Connection") == "close"  # the workers serve: the core hands it back
        early.call("getVersionString")  # (http.client connects again)
        assert serving_worker(gateway, early) in workers_of(gateway)
        early.close()
    finally:
        go.touch()
        starting.join(90)
        gateway.stop()


def _started(gateway: GatewayProcess, failed: list[BaseException]) -> None:
    """Start the gateway (in a thread of the test's), keeping what failed for the test to see."""
    try:
        gateway.start()
    except BaseException as exc:  # noqa: BLE001 - handed to the test
        failed.append(exc)


def test_with_lone_connection_in_core_off_every_connection_goes_to_a_worker(gateway):
    """(The tests' gateways with workers have it off, as this one: what they test is what crosses.)"""
    lone = Client(gateway.port)
    lone.call("getVersionString")
    assert serving_worker(gateway, lone) in workers_of(gateway)


def test_a_worker_started_after_an_edit_of_the_configuration_refuses_to_serve_and_the_gateway_serves_on(
        start_gateway):
    """One process applies an edit of its configuration at its next restart; a worker started again after its death
    would apply it alone.  It refuses to start instead, for good (an edit that made the file invalid too: it is
    checked before it is parsed), the metrics count it, and with no worker left the core serves every connection
    itself."""
    gateway = start_gateway(QUEUE_ONLY)
    first, second = wait_for_workers(gateway)
    gateway.config_path.write_text(gateway.config_path.read_text() + "[gateway\n")  # not TOML any more
    kill(first)
    wait_for_line(gateway.log, "refused to start", timeout=60)
    assert get(gateway.port, "/readyz")[0] == 200  # the gateway still serves: ready
    assert b"\nbirdbath_workers_refused 1.0\n" in get(gateway.port, "/metrics")[2]
    client = Client(gateway.port)
    client.call("getVersionString")
    assert serving_worker(gateway, client) == second  # the other serves on
    client.close()
    kill(second)
    wait_until(lambda: gateway.log().count("refused to start") == 2, "the second worker refused", 60)
    assert workers_of(gateway) == []
    lone = Client(gateway.port)
    transaction_id = begin(lone)  # none alive: the core serves it
    submit_job(lone, transaction_id)
    assert code(lone.call("commitTransaction", transaction=txn(transaction_id))) == "SUCCESS"
    other = Client(gateway.port)
    assert other.call("getVersionString") is not None
    lone.close()
    other.close()
    # (the refused slots stay empty: what the core took meanwhile stays the core's, as nothing could take it)


def test_an_invalid_edit_of_a_file_the_configuration_names_is_refused_too(start_gateway, tmp_path):
    """With TLS on, the password file is read once by each worker's front ends: one edited into something that
    does not parse is an edit (refused for good), not a fault to retry; the gateway serves on over TLS."""
    from gateway.testing import TestPki

    pki = TestPki(tmp_path / "pki")
    pki.password_file.write_text("")
    gateway = start_gateway(QUEUE_ONLY + pki.config(passwords=True), ssl=True)
    first, _ = wait_for_workers(gateway)
    pki.password_file.write_text("not a password line\n")
    kill(first)
    wait_for_line(gateway.log, "refused to start", timeout=60)
    assert "cannot start: a file the configuration names" in gateway.log()  # (the worker's reason, on stderr)
    assert b"\nbirdbath_workers_refused 1.0\n" in get(gateway.port, "/metrics")[2]


def test_a_worker_that_cannot_start_for_another_reason_is_started_again(start_gateway, tmp_path):
    """Only an edit is refused for good: a log directory gone is a fault of the moment, tried again."""
    logs = tmp_path / "logs"
    logs.mkdir()
    gateway = start_gateway(f'{QUEUE_ONLY}[gateway]\nlog_file = "{logs / "gateway.log"}"\n')

    def serving(directory: Path, count: int) -> bool:
        text = (directory / "gateway.log").read_text()
        return len(workers_of(gateway)) == 2 and text.count(") serving") >= count

    wait_until(lambda: serving(logs, 2), "2 workers serving", 90)
    first = workers_of(gateway)[0]
    moved = tmp_path / "moved"
    logs.rename(moved)
    kill(first)
    wait_until(lambda: (moved / "gateway.log").read_text().count("its connections were closed") >= 2,
               f"the replacement's failure\n{(moved / 'gateway.log').read_text()[-3000:]}", 60)
    # (the killed worker's end, then its replacement's)
    moved.rename(logs)
    wait_until(lambda: serving(logs, 3), "a replacement serving", 90)
    assert "refused" not in (logs / "gateway.log").read_text()
