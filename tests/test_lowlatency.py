"""Low-latency jobs over AMQP end to end: a private RabbitMQ broker (``amqp_broker``), a real gateway with
``[carod]`` on, and clients publishing as MRG Grid's did (pika, through ``birdbath_client.amqp``)."""

from __future__ import annotations

import io
import shutil
import tempfile
import time
import zipfile
from pathlib import Path

import pika
import pytest

from birdbath_client.amqp import Job, run_jobs
from gateway.testing import GatewayProcess, zeep_client


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
    process = GatewayProcess(tmp / "state", carod_config(amqp_broker, carod_broker_queue=queue_name), tmp=tmp).start()
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
