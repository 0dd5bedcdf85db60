"""Low-latency jobs over AMQP end to end: a private RabbitMQ broker (``amqp_broker``), a real gateway with
``[carod]`` on, and clients publishing as MRG Grid's did (pika, through ``birdbath_client.amqp``)."""

from __future__ import annotations

import io
import shutil
import tempfile
import time
import uuid
import zipfile
from pathlib import Path

import pika
import pytest

from birdbath_client.amqp import Job, run_jobs
from gateway.testing import GatewayProcess, zeep_client

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = pytest.mark.gateway


def carod_config(broker, **knobs) -> str:
    lines = ["[carod]", "enable_carod = true", f"carod_broker_port = {broker.port}"]
    lines += [f"{key} = {value!r}".replace("'", '"') if isinstance(value, str) else
              f"{key} = {str(value).lower() if isinstance(value, bool) else value}" for key, value in knobs.items()]
    return "\n".join(lines) + "\n[backends.local]\nslots = 2\n"


def seed_job(**extra) -> Job:
    headers = {"Cmd": '"/bin/echo"', "Arguments": '"Hello Grid!"', "Out": '"job.out"', "Err": '"job.err"',
               "Requirements": "TRUE", **extra}
    return Job(headers)


@pytest.fixture(scope="module")
def queue_name(request) -> str:
    return f"grid-{request.module.__name__.rsplit('.', 1)[-1]}"


@pytest.fixture(scope="module")
def base() -> Path:
    """A world-traversable directory for the gateways' state: low-latency jobs run as nobody (pytest's own
    temporary directories are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="lowlatency-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def ll_gateway(amqp_broker, base, queue_name):
    tmp = base / "gateway"
    tmp.mkdir()
    config = carod_config(amqp_broker, carod_broker_queue=queue_name, carod_max_input_bytes=4096)
    process = GatewayProcess(tmp / "state", config, tmp=tmp).start()
    wait_for_consumer(amqp_broker, queue_name)
    yield process
    process.stop()


def wait_for_consumer(broker, queue: str, count: int = 1, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        connection = pika.BlockingConnection(pika.URLParameters(broker.url()))
        try:
            found = connection.channel().queue_declare(queue=queue, passive=True).method.consumer_count
        except pika.exceptions.ChannelClosedByBroker:
            found = 0
        finally:
            if connection.is_open:
                connection.close()
        if found >= count:
            return
        time.sleep(0.1)
    raise AssertionError(f"no consumer on {queue}")


def run(broker, queue, jobs, **kwargs):
    return run_jobs(broker.url(kwargs.pop("user", "guest")), jobs, queue=queue, key=f"{queue}_key", timeout=60,
                    **kwargs)


def test_the_seeds_job_runs_and_replies_as_carod_did(amqp_broker, ll_gateway, queue_name):
    job = seed_job()
    replies = run(amqp_broker, queue_name, [job])[job.message_id]
    assert [reply.status for reply in replies] == [2, 4]
    running, final = replies
    assert "JobState" not in running.headers and running.body == b""
    assert final.headers["JobState"] == '"Exited"' and final.headers["ExitCode"] == 0
    assert final.headers["AMQPID"] == f'"{job.message_id}"' and final.headers["Owner"] == '"nobody"'
    assert final.correlation_id == job.message_id and final.message_id not in (job.message_id, running.message_id)
    assert final.content_type == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(final.body))
    assert sorted(archive.namelist()) == ["job.err", "job.out"]
    assert archive.read("job.out") == b"Hello Grid!\n" and archive.read("job.err") == b""
    assert "AMQPResent" not in final.headers


def test_low_latency_jobs_are_in_the_queue_and_its_history(amqp_broker, ll_gateway, queue_name):
    job = seed_job()
    final = run(amqp_broker, queue_name, [job])[job.message_id][-1]
    schedd = zeep_client(ll_gateway.url + "condorSchedd.wsdl", ll_gateway.url)
    answer = schedd.getJobAds(None, f'AMQPID == "{job.message_id}"')
    ads = answer.classAdArray.item
    assert len(ads) == 1
    attrs = {attr.name: attr.value for attr in ads[0].item}
    assert attrs["ClusterId"] == str(final.headers["ClusterId"]) and attrs["JobStatus"] == "4"
    assert attrs["AMQPFinalSent"] in ("TRUE", "true")


# -- hostile messages ---------------------------------------------------------------------------------------------
class Client:
    """A raw publisher on the work queue with a reply queue of its own, and a reader of the rejected queue."""

    def __init__(self, broker, queue: str, user: str = "guest") -> None:
        self.queue = queue
        self.connection = pika.BlockingConnection(pika.URLParameters(broker.url(user)))
        self.channel = self.connection.channel()
        self.channel.queue_declare(queue=queue, durable=True)
        self.channel.queue_bind(queue=queue, exchange="amq.direct", routing_key=f"{queue}_key")
        self.replies = self.channel.queue_declare(queue="", exclusive=True).method.queue
        self.channel.queue_bind(queue=self.replies, exchange="amq.direct", routing_key=self.replies)
        self.reply_to = f"amq.direct/{self.replies}"

    def send(self, headers=None, body: bytes = b"", message_id: str | None = "auto", reply_to: str | None = "auto",
             user_id: str | None = None) -> str | None:
        message_id = str(uuid.uuid4()) if message_id == "auto" else message_id
        properties = pika.BasicProperties(message_id=message_id, headers=headers, delivery_mode=2, user_id=user_id,
                                          reply_to=self.reply_to if reply_to == "auto" else reply_to)
        self.channel.basic_publish("amq.direct", f"{self.queue}_key", body, properties)
        return message_id

    def collect(self, queue: str, count: int, timeout: float = 60) -> list[tuple]:
        found = []
        deadline = time.monotonic() + timeout
        while len(found) < count:
            assert time.monotonic() < deadline, f"{len(found)} of {count} messages on {queue}: {found}"
            method, properties, body = self.channel.basic_get(queue, auto_ack=True)
            if method is None:
                self.connection.sleep(0.05)
                continue
            found.append((properties, body))
        return found

    def close(self) -> None:
        self.connection.close()


def zip_of(*entries) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for entry in entries:
            if isinstance(entry, zipfile.ZipInfo):
                archive.writestr(entry, b"target")
            else:
                archive.writestr(*entry)
    return buffer.getvalue()


def symlink_entry() -> zipfile.ZipInfo:
    info = zipfile.ZipInfo("link")
    info.create_system = 3
    info.external_attr = (0o120777 << 16)
    return info


GOOD = {"Cmd": '"/bin/echo"', "Arguments": '"ok"', "Out": '"job.out"'}

#: a message the gateway must answer with one error reply, and words the reason must have
REFUSED = {
    "a table header": ({**GOOD, "Arguments": {"a": 1}}, b"", "AMQP dict"),
    "a void header": ({**GOOD, "Environment": None}, b"", "void"),
    "ClassAd text that does not parse": ({**GOOD, "Arguments": '"unterminated'}, b"", "Arguments"),
    "no Cmd": ({"Arguments": '"x"'}, b"", "no Cmd"),
    "Requirements false here": ({**GOOD, "Requirements": "FALSE"}, b"", "false on this machine"),
    "a body that is no zip": (GOOD, b"not a zip", "not a zip"),
    "an absolute name": (GOOD, zip_of(("/etc/evil", b"x")), "absolute"),
    "a name with ..": (GOOD, zip_of(("../evil", b"x")), "leaves the job's directory"),
    "a symbolic link": (GOOD, zip_of(symlink_entry()), "symbolic link"),
    "a directory": (GOOD, zip_of(("dir/file", b"x")), "directory"),
    "an oversized zip": (GOOD, zip_of(("big", b"\0" * 100000)), "carod_max_input_bytes"),
    "an Owner it may not use": ({**GOOD, "Owner": '"daemon"'}, b"", "Owner"),
    "Owner root": ({**GOOD, "Owner": '"root"'}, b"", "root"),
}


def test_every_malformed_message_gets_one_error_reply_and_the_next_job_runs(amqp_broker, ll_gateway, queue_name):
    client = Client(amqp_broker, queue_name)
    try:
        sent = {name: client.send(headers, body) for name, (headers, body, _) in REFUSED.items()}
        no_id = client.send(GOOD, message_id=None)
        good = client.send(GOOD)
        replies = client.collect(client.replies, len(sent) + 1 + 2)
        by_id: dict = {}
        for properties, body in replies:
            by_id.setdefault(properties.correlation_id, []).append((properties, body))
        for name, message_id in sent.items():
            assert len(by_id.get(message_id, [])) == 1, name
            properties, body = by_id[message_id][0]
            assert body.startswith(b"ERROR:") and REFUSED[name][2] in body.decode(), (name, body)
            assert properties.headers["Error"].startswith('"') and "JobStatus" not in properties.headers, name
            assert properties.headers["AMQPID"] == f'"{message_id}"'
        [(properties, body)] = by_id[no_id]
        assert body == b"ERROR:Work Request does not have a unique message_id and is unusable.  Discarding"
        assert [p.headers["JobStatus"] for p, _ in by_id[good]] == [2, 4]
        assert client.channel.queue_declare(queue=client.replies, passive=True).method.message_count == 0
    finally:
        client.close()


def test_a_message_id_already_taken_is_refused_once(amqp_broker, ll_gateway, queue_name):
    client = Client(amqp_broker, queue_name)
    try:
        first = client.send(GOOD)
        assert [p.headers["JobStatus"] for p, _ in client.collect(client.replies, 2)] == [2, 4]
        client.send(GOOD, message_id=first)
        [(properties, body)] = client.collect(client.replies, 1)
        assert properties.correlation_id == first and b"already a job" in body
    finally:
        client.close()


@pytest.mark.parametrize("reply_to, reason", [
    (None, "no reply_to"),
    ("a/b/c", "is not EXCHANGE/KEY"),
    ("no-such-exchange/key", "unroutable"),
    ("amq.direct/nobody-listens-here", "unroutable"),
])
def test_a_message_that_cannot_be_answered_goes_to_the_rejected_queue(amqp_broker, ll_gateway, queue_name, reply_to,
                                                                     reason):
    client = Client(amqp_broker, queue_name)
    try:
        headers = {**GOOD, "Cmd": '"/bin/true"'} if reply_to and reply_to.startswith("amq") else {"Arguments": '"x"'}
        message_id = client.send(headers, b"payload", reply_to=reply_to)
        [(properties, body)] = client.collect(f"{queue_name}.rejected", 1)
        assert properties.message_id == message_id and body == b"payload"
        assert reason in properties.headers["x-carod-error"]
        good = client.send(GOOD)
        assert [p.correlation_id for p, _ in client.collect(client.replies, 2)] == [good, good]
    finally:
        client.close()


# -- jobs are jobs: SOAP removes and holds them, and the AMQP client is told --------------------------------------
@pytest.mark.parametrize("action, status", [("remove", 3), ("hold", 5)])
def test_remove_or_hold_through_soap_sends_the_final_reply(amqp_broker, ll_gateway, queue_name, action, status):
    client = Client(amqp_broker, queue_name)
    schedd = zeep_client(ll_gateway.url + "condorSchedd.wsdl", ll_gateway.url)
    try:
        message_id = client.send({"Cmd": '"/bin/sleep"', "Arguments": '"60"'})
        [(running, _)] = client.collect(client.replies, 1)
        assert running.headers["JobStatus"] == 2
        key = (running.headers["ClusterId"], running.headers["ProcId"])
        if action == "remove":
            assert schedd.removeJob(None, *key, "not needed", False).code == "SUCCESS"
        else:
            assert schedd.holdJob(None, *key, "wait a bit", False, False, False).code == "SUCCESS"
        [(final, body)] = client.collect(client.replies, 1)
        assert final.correlation_id == message_id and final.headers["JobStatus"] == status and body == b""
        if action == "hold":
            assert final.headers["HoldReason"] == '"wait a bit"'
            deadline = time.monotonic() + 30
            while schedd.getJobAd(None, *key).classAd is not None and \
                    {a.name: a.value for a in schedd.getJobAd(None, *key).classAd.item}["JobStatus"] != "3":
                assert time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        client.close()


# -- identity: the broker-checked user_id -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def local_account() -> str:
    """The unprivileged account ``llalice`` (the session broker has a login of that name), made for the test."""
    import pwd
    import subprocess

    name = "llalice"
    made = False
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
        made = True
    yield name
    if made:
        subprocess.run(["userdel", name], check=False)


def test_jobs_run_as_the_broker_checked_user_id(amqp_broker, ll_gateway, queue_name, local_account):
    client = Client(amqp_broker, queue_name, user=local_account)
    try:
        client.send({"Cmd": '"/usr/bin/id"', "Arguments": '"-un"', "Out": '"id.out"'}, user_id=local_account)
        (running, _), (final, body) = client.collect(client.replies, 2)
        assert running.headers["JobStatus"] == 2
        assert final.headers["Owner"] == f'"{local_account}"' and final.headers["ExitCode"] == 0
        assert zipfile.ZipFile(io.BytesIO(body)).read("id.out") == f"{local_account}\n".encode()
        # an Owner header naming someone else is refused; naming the same user is fine
        client.send({**GOOD, "Owner": '"nobody"'}, user_id=local_account)
        [(_, body)] = client.collect(client.replies, 1)
        assert b"Owner attribute: user 'llalice' may not submit jobs owned by 'nobody'" in body
    finally:
        client.close()


# -- crashes and outages ------------------------------------------------------------------------------------------
class DurableReplies(Client):
    """A client whose reply queue is durable and named, so that it outlives a broker restart."""

    def __init__(self, broker, queue: str, replies: str) -> None:
        super().__init__(broker, queue)
        self.channel.queue_delete(queue=self.replies)
        self.channel.queue_declare(queue=replies, durable=True)
        self.channel.queue_bind(queue=replies, exchange="amq.direct", routing_key=replies)
        self.replies, self.reply_to = replies, f"amq.direct/{replies}"


def finals_by_id(replies) -> dict[str, list]:
    found: dict[str, list] = {}
    for properties, _ in replies:
        if properties.headers.get("JobStatus") not in (2, None):
            found.setdefault(properties.correlation_id, []).append(properties.headers)
    return found


def collect_finals(client, message_ids, timeout: float = 120) -> dict[str, list]:
    """Every reply until each job has a final one; then the queue is read once more for late repeats."""
    replies = []
    deadline = time.monotonic() + timeout
    while not set(message_ids) <= set(finals_by_id(replies)):
        assert time.monotonic() < deadline, f"finals missing for {set(message_ids) - set(finals_by_id(replies))}"
        method, properties, body = client.channel.basic_get(client.replies, auto_ack=True)
        if method is None:
            client.connection.sleep(0.05)
        else:
            replies.append((properties, body))
    client.connection.sleep(1.0)
    while (message := client.channel.basic_get(client.replies, auto_ack=True))[0] is not None:
        replies.append(message[1:])
    return finals_by_id(replies)


def assert_answered_at_most_once_unmarked(finals, message_ids) -> None:
    for message_id in message_ids:
        headers = finals[message_id]
        assert all(h["JobStatus"] == 4 and h["ExitCode"] == 0 for h in headers), headers
        assert sum(1 for h in headers if h.get("AMQPResent") != "TRUE") <= 1, headers


def test_kill_9_with_jobs_queued_and_running_loses_nothing(amqp_broker, base):
    queue = "grid-kill"
    tmp = base / "kill"
    tmp.mkdir()
    gateway = GatewayProcess(tmp / "state", carod_config(amqp_broker, carod_broker_queue=queue), tmp=tmp).start()
    client = DurableReplies(amqp_broker, queue, "replies-kill")
    try:
        wait_for_consumer(amqp_broker, queue)
        ids = [client.send({"Cmd": '"/bin/sleep"', "Arguments": '"0.3"'}) for _ in range(12)]
        client.connection.sleep(0.8)  # some done, two running, the rest queued on the broker
        gateway.kill()
        client.connection.sleep(0.5)
        gateway.start()
        finals = collect_finals(client, ids)
        assert_answered_at_most_once_unmarked(finals, ids)
    finally:
        client.channel.queue_delete(queue="replies-kill")
        client.close()
        gateway.stop()


def test_a_message_another_consumer_held_unacked_is_run_and_its_final_marked_as_a_possible_repeat(amqp_broker, base):
    """What a gateway sees when another one committed the job and died before its ack: the message comes back
    redelivered, and nothing here can tell whether it ran elsewhere, so the final says it may be a repeat."""
    queue = "grid-redelivered"
    tmp = base / "redelivered"
    tmp.mkdir()
    client = Client(amqp_broker, queue)
    other = pika.BlockingConnection(pika.URLParameters(amqp_broker.url()))
    try:
        first = client.send({"Cmd": '"/bin/true"'})
        taken = other.channel()
        method, properties, _ = taken.basic_get(queue, auto_ack=False)
        assert properties.message_id == first and not method.redelivered
        taken.close()  # unacked: back on the queue, redelivered
        plain = client.send({"Cmd": '"/bin/true"'})
        gateway = GatewayProcess(tmp / "state", carod_config(amqp_broker, carod_broker_queue=queue), tmp=tmp).start()
        try:
            finals = finals_by_id(client.collect(client.replies, 4))
            assert finals[first][-1]["AMQPResent"] == "TRUE" and finals[first][-1]["AMQPRedelivered"] == "TRUE"
            assert "AMQPResent" not in finals[plain][-1] and "AMQPRedelivered" not in finals[plain][-1]
        finally:
            gateway.stop()
    finally:
        other.close()
        client.channel.queue_delete(queue=queue)
        client.close()


def test_a_broker_restart_loses_no_final_reply_and_soap_is_served_meanwhile(amqp_broker, ll_gateway, queue_name):
    client = DurableReplies(amqp_broker, queue_name, "replies-restart")
    ids = [client.send({"Cmd": '"/bin/sleep"', "Arguments": '"1"'}) for _ in range(4)]
    client.connection.sleep(0.5)
    client.connection.close()
    amqp_broker.stop()
    try:
        schedd = zeep_client(ll_gateway.url + "condorSchedd.wsdl", ll_gateway.url)
        assert schedd.getJobAds(None, "AMQPID =!= undefined").status.code == "SUCCESS"  # no broker, SOAP as ever
        time.sleep(2)  # the jobs that were taken finish while the broker is away
    finally:
        amqp_broker.start()
    client = DurableReplies(amqp_broker, queue_name, "replies-restart")
    try:
        finals = collect_finals(client, ids)
        assert_answered_at_most_once_unmarked(finals, ids)
    finally:
        client.channel.queue_delete(queue="replies-restart")
        client.close()
