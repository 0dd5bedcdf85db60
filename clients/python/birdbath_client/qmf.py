"""A QMF console for Python 3: the gateway's QMF agent (``[qmf]``) through the broker, over AMQP 1.0 with
python-qpid-proton.  PyPI's ``qmf.console`` runs on Python 2 only; this speaks the same QMFv2 map messages
(agent locate, object queries, method calls) for the few things a job console does.  Needs python-qpid-proton.

    with Console("amqp://broker:5672") as console:
        scheduler = console.objects("com.redhat.grid", "scheduler")[0]
        result = scheduler.call("SubmitJob", Ad={...})
        if result.status == 0: print(result.Id)
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any, Self

from proton import Message
from proton.utils import BlockingConnection

DIRECT, TOPIC = "qmf.default.direct", "qmf.default.topic"


class QmfTimeout(TimeoutError):
    """No answer from the agent in time."""


@dataclass(frozen=True)
class MethodResult:
    """A method's answer as qmf.console gives it: ``status`` 0 and ``text`` "OK", or QMF's error; out-arguments
    as attributes (``result.Id``) or in ``out``."""

    status: int
    text: str
    out: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.out[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass(frozen=True)
class QmfObject:
    console: Console
    agent: str
    name: str  # its _object_name
    values: dict[str, Any]

    def call(self, method: str, **arguments: Any) -> MethodResult:
        return self.console.call(self.agent, self.name, method, arguments)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None


class Console:
    def __init__(self, url: str, user: str | None = None, password: str | None = None, timeout: float = 30) -> None:
        options: dict[str, Any] = {"allowed_mechs": "ANONYMOUS"}
        if user is not None:
            options = {"user": user, "password": password or "", "allowed_mechs": "PLAIN",
                       "allow_insecure_mechs": True}
        self._connection = BlockingConnection(url, timeout=timeout, **options)
        self._replies = self._connection.create_receiver(None, dynamic=True)
        self._address = self._replies.link.remote_source.address
        self._senders = {exchange: self._connection.create_sender(exchange) for exchange in (DIRECT, TOPIC)}
        self._timeout = timeout
        self._ids = itertools.count(1)
        self._prefix = uuid.uuid4().hex[:8]
        #: each request carries the login as its user_id (as qmf.console's do): an authenticating broker checks it,
        #: and the agent takes it as the caller's identity
        self._login: dict[str, bytes] = {"user_id": user.encode()} if user is not None else {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._connection.close()

    def _request(self, exchange: str, subject: str, opcode: str, body: Any) -> str:
        correlation = f"{self._prefix}-{next(self._ids)}"
        self._senders[exchange].send(Message(subject=subject, reply_to=self._address, correlation_id=correlation,
                                             properties={"qmf.opcode": opcode}, body=body, **self._login))
        return correlation

    def _answers(self, correlation: str | None) -> Any:
        """Answers to one request (all answers when None), as they come."""
        while True:
            try:
                message = self._replies.receive(timeout=self._timeout)
            except Exception as exc:  # proton's Timeout
                raise QmfTimeout(f"no answer from the QMF agent within {self._timeout} s") from exc
            self._replies.accept()
            if correlation is None or message.correlation_id == correlation:
                yield message

    def agent(self, vendor: str = "com.redhat.grid") -> str:
        """The name of the first agent of ``vendor`` that answers a locate."""
        self._request(TOPIC, "console.request.agent_locate", "_agent_locate_request", [])
        for message in self._answers(None):
            name = (message.properties or {}).get("qmf.agent", "")
            if message.properties.get("qmf.opcode") == "_agent_locate_response" and name.startswith(vendor + ":"):
                return name
        raise AssertionError("unreachable")

    def objects(self, package: str, class_name: str, agent: str | None = None) -> list[QmfObject]:
        agent = agent or self.agent()
        correlation = self._request(DIRECT, agent, "_query_request", {
            "_what": "OBJECT", "_schema_id": {"_package_name": package, "_class_name": class_name}})
        found = []
        for message in self._answers(correlation):
            if message.properties.get("qmf.opcode") == "_exception":
                raise RuntimeError(message.body.get("_values", {}).get("error_text", "query refused"))
            found += [QmfObject(self, agent, item["_object_id"]["_object_name"], item.get("_values", {}))
                      for item in message.body or []]
            if "partial" not in message.properties:
                return found
        raise AssertionError("unreachable")

    def schemas(self, package: str | None = None, class_name: str | None = None,
                agent: str | None = None) -> list[dict[str, Any]]:
        """The agent's class schemas (``_what: SCHEMA``), all of them or one class's: each a map of its
        ``_schema_id``, ``_properties`` and ``_methods`` (each method's ``_arguments`` with their ``_dir``)."""
        query: dict[str, Any] = {"_what": "SCHEMA"}
        if class_name is not None:
            query["_schema_id"] = {"_class_name": class_name, **({"_package_name": package} if package else {})}
        correlation = self._request(DIRECT, agent or self.agent(), "_query_request", query)
        message = next(iter(self._answers(correlation)))
        if message.properties.get("qmf.opcode") == "_exception":
            raise RuntimeError(message.body.get("_values", {}).get("error_text", "query refused"))
        return list(message.body or [])

    def call(self, agent: str, object_name: str, method: str, arguments: dict[str, Any]) -> MethodResult:
        correlation = self._request(DIRECT, agent, "_method_request", {
            "_object_id": {"_object_name": object_name}, "_method_name": method, "_arguments": arguments})
        message = next(iter(self._answers(correlation)))
        if message.properties.get("qmf.opcode") == "_exception":
            values = (message.body or {}).get("_values", {})
            return MethodResult(int(values.get("error_code", 7)), str(values.get("error_text", "error")))
        return MethodResult(0, "OK", dict((message.body or {}).get("_arguments", {})))
