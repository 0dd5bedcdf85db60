"""Low-latency jobs over AMQP (the gateway's ``[carod]`` front end): publish a job as a message, as MRG Grid's
clients did, and collect its replies.  Needs pika."""

from __future__ import annotations

import io
import re
import uuid
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .ads import Expr
from .errors import BrokerUnavailable

#: where the seed's client bound the work queue
EXCHANGE = "amq.direct"


@dataclass
class Reply:
    message_id: str
    correlation_id: str | None
    headers: dict[str, Any]
    body: bytes
    content_type: str | None = None

    @property
    def status(self) -> int | None:
        value = self.headers.get("JobStatus")
        return value if isinstance(value, int) else None

    @property
    def error(self) -> str | None:
        """An error reply's reason (its ``Error`` header, a ClassAd string)."""
        value = self.headers.get("Error")
        if isinstance(value, bytes):
            value = value.decode()
        return _unquote(value) if isinstance(value, str) else None

    @property
    def final(self) -> bool:
        return self.error is not None or self.status not in (None, 1, 2)


@dataclass
class Job:
    headers: dict[str, Any]
    body: bytes = b""
    message_id: str = field(default_factory=lambda: str(uuid.uuid4()))


def headers_of(ad: dict[str, Any]) -> dict[str, Any]:
    """A job ad (as :func:`birdbath_client.submitfile.job_ads` gives it) as message headers: ClassAd text, integers
    as AMQP integers."""
    import classad2

    headers: dict[str, Any] = {}
    for name, value in ad.items():
        if isinstance(value, bool):
            headers[name] = "TRUE" if value else "FALSE"
        elif isinstance(value, int):
            headers[name] = value
        elif isinstance(value, float):
            headers[name] = repr(value)
        elif isinstance(value, Expr):
            headers[name] = str(value)
        elif isinstance(value, str):
            headers[name] = classad2.quote(value)
    return headers


def input_zip(paths: Iterable[Path]) -> bytes:
    """The job's input files as the message body (a zip of plain names)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in paths:
            archive.write(path, path.name)
    return buffer.getvalue()


def run_jobs(url: str, jobs: list[Job], *, queue: str = "grid", key: str = "grid_key", timeout: float = 300,
             on_reply: Callable[[Job, Reply], None] | None = None) -> dict[str, list[Reply]]:
    """Publish the jobs (declaring ``queue`` durable and binding it to amq.direct with ``key``, as the seed did),
    and wait until each has its final reply (an error, or a JobStatus other than 1 and 2); the replies by job."""
    import pika

    try:
        return _run_jobs(pika.BlockingConnection(pika.URLParameters(url)), jobs, queue, key, timeout, on_reply)
    except pika.exceptions.AMQPError as exc:  # connecting, a refused login, a channel the broker closed
        raise BrokerUnavailable(f"the AMQP broker at {_without_password(url)}: {_reason(exc)}") from None


def _without_password(url: str) -> str:
    """The broker's URL as a message may show it (amqp://guest:***@host/)."""
    return re.sub(r"(//[^:/@]*:)[^@/]*@", r"\1***@", url)


def _reason(exc: BaseException) -> str:
    """What went wrong, in words: pika's connection errors often say nothing themselves (their cause does)."""
    from .schedd import system_error

    found = system_error(exc)
    if found is not None:
        return f"cannot connect: {found.strerror[:1].lower()}{found.strerror[1:]}"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text and text != "()" else f"cannot connect ({type(exc).__name__})"


def _run_jobs(connection: Any, jobs: list[Job], queue: str, key: str, timeout: float,
              on_reply: Callable[[Job, Reply], None] | None) -> dict[str, list[Reply]]:
    import pika

    try:
        channel = connection.channel()
        channel.queue_declare(queue=queue, durable=True)
        channel.queue_bind(queue=queue, exchange=EXCHANGE, routing_key=key)
        results = channel.queue_declare(queue="", exclusive=True, auto_delete=True).method.queue
        channel.queue_bind(queue=results, exchange=EXCHANGE, routing_key=results)
        replies: dict[str, list[Reply]] = {job.message_id: [] for job in jobs}
        by_id = {job.message_id: job for job in jobs}
        for job in jobs:
            channel.basic_publish(EXCHANGE, key, job.body, pika.BasicProperties(
                message_id=job.message_id, reply_to=f"{EXCHANGE}/{results}", headers=job.headers, delivery_mode=2))
        waiting = set(replies)
        for method, properties, body in channel.consume(results, auto_ack=True, inactivity_timeout=timeout):
            if method is None:
                raise TimeoutError(f"no reply for {len(waiting)} job(s) in {timeout} s")
            reply = Reply(properties.message_id, properties.correlation_id, dict(properties.headers or {}), body,
                          properties.content_type)
            if reply.correlation_id not in replies:
                continue
            replies[reply.correlation_id].append(reply)
            if on_reply is not None:
                on_reply(by_id[reply.correlation_id], reply)
            if reply.final:
                waiting.discard(reply.correlation_id)
            if not waiting:
                break
        channel.cancel()
        return replies
    finally:
        connection.close()


def _unquote(text: str) -> str:
    import classad2

    try:
        value = classad2.ExprTree(text).eval()
    except Exception:  # noqa: BLE001 - not ClassAd text: as it is
        return text
    return value if isinstance(value, str) else text
