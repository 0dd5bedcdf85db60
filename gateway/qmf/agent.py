"""The QMFv2 conversation of the gateway's agent, on the reactor: agent locate and heartbeats, queries (objects and
schema ids), method calls, and the QMFv1 schema request ``qmf.console`` sends.

Messages arrive in the broker link's thread.  An agent locate is answered there at once: ``qmf.console`` asks for the
agents as it connects and builds its list of them one broker round trip later, on the first query, so a locate that
waited for a busy reactor would leave the agent out of a script's first ``getObjects`` (HTCondor's own scripts query
straight after ``addBroker``).  Every other request is handed to the reactor (``callFromThread``) and answered when
the core has answered, so a slow call holds up no other.  Every request gets one answer: a method's
refusal is a ``_exception`` with QMF's status and text, and a failure of the agent itself is EXCEPTION (7), logged.

The caller is the console's ``user_id`` when the broker authenticates its clients (``qmf_broker_auth_mech`` not
ANONYMOUS: qpidd then refuses a message whose user_id is not its sender's login), else anonymous, and its host is
the broker's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from proton import Message
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from gateway.core.auth import Authentication, Caller
from gateway.core.collector import BirdbathCollector
from gateway.core.schedd import BirdbathSchedd
from gateway.core.status import BirdbathError
from gateway.core.submissions import ApiError, SubmissionService

from . import wire
from .link import DIRECT, TOPIC, BrokerAddress, BrokerLink, split_address
from .methods import Call, Methods, QmfError, Status, checked_arguments
from .objects import Objects, Published, parse_name
from .schema import POOL_CLASSES, QmfClass, class_by_key, find_class
from .settings import QmfSettings
from .updates import WATCHED, ChangedObjects, indication_subject

log = Logger()

VENDOR, PRODUCT = "com.redhat.grid", "scheduler"
#: objects per query answer message (the last one of an answer carries no ``partial``)
OBJECTS_PER_MESSAGE = 100


class QmfAgent:
    def __init__(self, reactor: Any, settings: QmfSettings, schedd: BirdbathSchedd, submissions: SubmissionService,
                 collector: BirdbathCollector) -> None:
        self._reactor = reactor
        self.settings = settings
        self.name = f"{VENDOR}:{PRODUCT}:{submissions.settings.schedd_name}"
        self._epoch = int(time.time()) & 0x7FFF  # tells consoles the agent restarted
        self._objects = Objects(submissions, collector, self.name, time.time(), settings.qmf_publish_submissions)
        self._methods = Methods(schedd, submissions)
        address = BrokerAddress(settings.qmf_broker_host, settings.qmf_broker_port, settings.qmf_broker_auth_mech,
                                settings.qmf_broker_username or None, settings.password())
        self.link = BrokerLink(address, self.name, self._arrived, self._connection_changed)
        self._heartbeat = LoopingCall(self._beat)
        self._heartbeat.clock = reactor
        self.answered = 0  # requests answered (the operators' figure)
        self._told = ChangedObjects()
        self._publishing = False  # a publication of changes under way (the next beat does not start another)

    @property
    def connected(self) -> bool:
        return self.link.connected

    def start(self) -> None:
        log.info("QMF agent {name} on broker {host}:{port}", name=self.name, host=self.settings.qmf_broker_host,
                 port=self.settings.qmf_broker_port)
        self.link.start()
        self._heartbeat.start(self.settings.qmf_update_interval, now=False)

    def stop(self) -> None:
        if self._heartbeat.running:
            self._heartbeat.stop()
        self.link.stop()

    # -- the link's thread -------------------------------------------------------------------------------------
    def _arrived(self, message: Message) -> None:
        if (message.properties or {}).get("qmf.opcode") != "_agent_locate_request":
            self._reactor.callFromThread(self._handle, message)
            return
        try:
            self._reply(message, "_agent_locate_response", self._agent_values())
        except Exception:  # noqa: BLE001 - one answer lost, never the link's thread
            log.failure("QMF agent: answering an agent locate")
        self._reactor.callFromThread(self._count)

    def _connection_changed(self, connected: bool) -> None:
        self._reactor.callFromThread(self._changed, connected)

    # -- the reactor ---------------------------------------------------------------------------------------------
    def _changed(self, connected: bool) -> None:
        log.info("QMF broker {state}", state="connected" if connected else "not connected")
        if connected:
            self._told.forget()  # what was told before may not have reached the consoles up now
            self._beat()  # consoles that are up learn of the agent at once

    def _handle(self, message: Message) -> None:
        ensureDeferred(self._answer(message)).addErrback(
            lambda failure: log.failure("QMF agent: answering a request", failure))

    async def _answer(self, message: Message) -> None:
        properties = message.properties or {}
        opcode = properties.get("qmf.opcode")
        if opcode is None and isinstance(message.body, (bytes, memoryview)):
            self._schema(message)
        elif opcode == "_query_request":
            await self._query(message)
        elif opcode == "_method_request":
            await self._call(message)
        self._count()

    def _count(self) -> None:
        self.answered += 1

    def _caller(self, message: Message) -> Caller:
        user = message.user_id
        if isinstance(user, (bytes, memoryview)):
            user = bytes(user).decode("utf-8", "replace")
        if not self.settings.authenticated or not user or user.split("@")[0] == "anonymous":
            return Caller(self.settings.qmf_broker_host)
        return Caller(self.settings.qmf_broker_host, user, Authentication.BROKER)

    # -- answers -------------------------------------------------------------------------------------------------
    def _agent_values(self) -> dict[str, Any]:
        return {"_values": {"_timestamp": time.time_ns(), "_heartbeat_interval": self.settings.qmf_update_interval,
                            "_epoch": self._epoch, "_vendor": VENDOR, "_product": PRODUCT,
                            "_instance": self._objects.schedd, "_name": self.name}}

    def _beat(self) -> None:
        """Every qmf_update_interval: the heartbeat, then the objects that changed."""
        if not self.link.connected:
            return
        key = f"agent.ind.heartbeat.{VENDOR.replace('.', '_')}.{PRODUCT}"
        self.link.send(TOPIC, self._message(key, "_agent_heartbeat_indication", self._agent_values(),
                                            method="indication"))
        if not self._publishing:
            self._publishing = True
            ensureDeferred(self._publish_changes()).addErrback(
                lambda failure: log.failure("QMF agent: publishing the objects that changed", failure)
            ).addBoth(lambda _: setattr(self, "_publishing", False))

    async def _publish_changes(self) -> None:
        """A ``_data_indication`` per class of the watched objects that changed (updates.py), read as an
        anonymous console would read them; the gone ones with their ``_delete_ts``."""
        watched = [klass for klass in WATCHED if klass in self._objects.classes()]
        try:
            found = await self._objects.of(Caller(self.settings.qmf_broker_host), watched)
        except (ApiError, BirdbathError) as exc:  # (a policy that lets no anonymous caller read)
            log.info("QMF agent: the objects' updates are not published: {error}", error=exc)
            return
        changed, gone = self._told.changes(found)
        now = time.time_ns()
        maps = [(item.klass, self._object_map(item)) for item in changed]
        maps += [(item.klass, {**self._object_map(item), "_delete_ts": now}) for item in gone]
        for klass in watched:
            body = [mapped for of_class, mapped in maps if of_class is klass]
            if body:
                self.link.send(TOPIC, self._message(indication_subject(klass), "_data_indication", body,
                                                    method="indication", **{"qmf.content": "_data"}))

    def _message(self, key: str, opcode: str, body: Any, correlation: Any = None, method: str = "response",
                 **extra: Any) -> Message:
        # no content_type: qpidd then gives 0-10 consoles amqp/map or amqp/list, which is what they read
        return Message(subject=key, correlation_id=correlation, body=body,
                       properties={"qmf.opcode": opcode, "qmf.agent": self.name, "method": method, **extra})

    def _reply(self, request: Message, opcode: str, body: Any, **extra: Any) -> None:
        if not request.reply_to:
            return
        exchange, key = split_address(request.reply_to)
        self.link.send(exchange or DIRECT, self._message(key, opcode, body, request.correlation_id, **extra))

    def _exception(self, request: Message, code: int, text: str) -> None:
        self._reply(request, "_exception", {"_values": {"error_code": int(code), "error_text": text}})

    def _schema(self, request: Message) -> None:
        """QMFv1's ``AM2S``: the class's schema in QMFv1's binary encoding, to the request's reply-to."""
        try:
            sequence, key = wire.schema_request(bytes(request.body))
        except wire.BadMessage as exc:
            log.info("QMF agent: a binary message that is not a schema request ({error})", error=exc)
            return
        klass = class_by_key(key)
        if klass is None or not request.reply_to:
            return  # a class of another agent, or one that changed: the console asks again by the new hash
        exchange, routing = split_address(request.reply_to)
        body = wire.schema_response(sequence, key, *klass.v1_descriptions())
        self.link.send(exchange, Message(subject=routing, body=body, inferred=True,
                                         properties={"qmf.agent": self.name}))

    async def _query(self, request: Message) -> None:
        query = request.body if isinstance(request.body, Mapping) else {}
        what = query.get("_what")
        if what in ("SCHEMA_ID", "SCHEMA"):
            classes = self._classes(query)
            if what == "SCHEMA_ID":
                self._reply(request, "_query_response", [klass.schema_id() for klass in classes],
                            **{"qmf.content": "_schema_id"})
            else:
                self._reply(request, "_query_response", [klass.v2_schema() for klass in classes],
                            **{"qmf.content": "_schema"})
            return
        if what != "OBJECT":
            self._exception(request, Status.NOT_IMPLEMENTED, f"queries for {what!r:.40} are not answered")
            return
        try:
            found = await self._found(self._caller(request), query)
        except QmfError as exc:
            self._exception(request, exc.code, exc.text)
            return
        except (ApiError, BirdbathError) as exc:  # refused by the core (permission, a pool that is down)
            self._exception(request, Status.EXCEPTION, getattr(exc, "text", None) or str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - the console gets an answer, the log the details
            log.failure("QMF agent: query")
            self._exception(request, Status.EXCEPTION, f"the gateway failed: {type(exc).__name__}")
            return
        maps = [self._object_map(item) for item in found]
        for start in range(0, max(len(maps), 1), OBJECTS_PER_MESSAGE):
            partial = {"partial": None} if start + OBJECTS_PER_MESSAGE < len(maps) else {}
            self._reply(request, "_query_response", maps[start:start + OBJECTS_PER_MESSAGE],
                        **{"qmf.content": "_data"}, **partial)

    async def _found(self, caller: Caller, query: Mapping[str, Any]) -> list[Published]:
        object_id = query.get("_object_id")
        if isinstance(object_id, Mapping):
            named = parse_name(str(object_id.get("_object_name", "")))
            if named is None:
                return []
            return await self._objects.named(caller, *named)
        return await self._objects.of(caller, self._classes(query))

    def _classes(self, query: Mapping[str, Any]) -> list[QmfClass]:
        """The published classes a query's ``_schema_id`` names (by class name, and package when it says one;
        its ``_hash`` is not compared, as consoles send the one they hold); every one without a class name."""
        schema_id = query.get("_schema_id")
        published = list(self._objects.classes())
        if not isinstance(schema_id, Mapping) or not isinstance(schema_id.get("_class_name"), str):
            return published
        package = schema_id.get("_package_name")
        found = find_class(package if isinstance(package, str) else None, schema_id["_class_name"])
        return [klass for klass in found if klass in published]

    def _object_map(self, item: Published) -> dict[str, Any]:
        now = time.time_ns()
        return {"_schema_id": item.klass.schema_id(), "_object_id": self._objects.ref(item.klass, item.key),
                "_values": item.values, "_update_ts": now, "_create_ts": now, "_delete_ts": 0}

    async def _call(self, request: Message) -> None:
        try:
            out = await self._method(request)
        except QmfError as exc:
            self._exception(request, exc.code, exc.text)
        except Exception as exc:  # noqa: BLE001 - the console gets an answer, the log the details
            log.failure("QMF agent: method call")
            self._exception(request, Status.EXCEPTION, f"the gateway failed: {type(exc).__name__}")
        else:
            self._reply(request, "_method_response", {"_arguments": out})

    async def _method(self, request: Message) -> dict[str, Any]:
        body = request.body if isinstance(request.body, Mapping) else {}
        object_id = body.get("_object_id")
        named = parse_name(str(object_id.get("_object_name", ""))) if isinstance(object_id, Mapping) else None
        if named is None or not self._objects.exists(*named):
            raise QmfError(Status.UNKNOWN_OBJECT, "no such object")
        klass, key = named
        method = klass.method(str(body.get("_method_name", "")))
        if method is None:
            raise QmfError(Status.UNKNOWN_METHOD, f"{klass.name} has no method {body.get('_method_name')!r:.60}")
        call = Call(self._caller(request), klass, key, method, checked_arguments(method, body.get("_arguments", {})))
        if klass in POOL_CLASSES and not await self._objects.named(call.caller, klass, key):
            raise QmfError(Status.UNKNOWN_OBJECT, f"the pool has no {klass.name} {key!r:.60}")
        return await self._methods.run(call)


