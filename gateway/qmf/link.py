"""The agent's connection to the broker: qpid-proton's container (AMQP 1.0) in a thread of its own, so that the
reactor never waits on the broker.  Messages that arrive are handed to ``deliver`` in proton's thread (the agent
answers a locate there, and passes the rest to the reactor with ``callFromThread``); :meth:`BrokerLink.send` may be
called from any thread: from another, it hands the message to proton's thread through an event injector.

Through qpidd, an AMQP 1.0 receiver on an exchange gets a subscription queue of its own, bound by the
``legacy-amqp-direct-binding`` / ``legacy-amqp-topic-binding`` filters; a message sent on a link to an exchange is
routed by its subject.  The container reconnects by itself (proton's backoff, at most ``RECONNECT_MAX`` seconds
apart); links are attached again on the new connection.
"""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from proton import Described, Message, symbol
from proton.handlers import MessagingHandler
from proton.reactor import ApplicationEvent, Backoff, Container, EventInjector, Filter
from twisted.logger import Logger

log = Logger()

DIRECT = "qmf.default.direct"
TOPIC = "qmf.default.topic"
RECONNECT_MAX = 5.0


@dataclass(frozen=True)
class BrokerAddress:
    host: str
    port: int
    mechanism: str  # SASL mechanism: ANONYMOUS or PLAIN
    username: str | None
    password: str | None

    @property
    def url(self) -> str:
        return f"amqp://{self.host}:{self.port}"


def binding(kind: str, key: str) -> Filter:
    """qpidd's filter that binds a receiver's queue to a direct or topic exchange with ``key``."""
    name = f"legacy-amqp-{kind}-binding"
    return Filter({symbol(name): Described(symbol(f"apache.org:{name}:string"), key)})


class _Reattach:
    """A timer's handler: the link's receivers made again."""

    def __init__(self, link: BrokerLink) -> None:
        self._link = link

    def on_timer_task(self, event: Any) -> None:
        self._link.reattach()


def split_address(address: str) -> tuple[str, str]:
    """A reply address as qpidd gives a 0-10 reply-to to AMQP 1.0 (``exchange/routing-key``) as (exchange, key)."""
    exchange, _, key = address.partition("/")
    return exchange, key


class BrokerLink(MessagingHandler):  # type: ignore[misc]
    def __init__(self, address: BrokerAddress, agent_name: str, deliver: Callable[[Message], None],
                 on_change: Callable[[bool], None]) -> None:
        super().__init__()
        self._address = address
        self._agent_name = agent_name
        self._deliver = deliver
        self._on_change = on_change
        self._outgoing: queue.SimpleQueue[tuple[str, Message] | None] = queue.SimpleQueue()
        self._injector = EventInjector()
        self._senders: dict[str, Any] = {}
        self._receivers: list[Any] = []
        self._connection: Any = None
        self._container: Any = None
        self._thread: threading.Thread | None = None
        self.connected = False
        #: connections made (more than one: reconnects)
        self.connections = 0

    # -- any thread ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="qmf-broker", daemon=True)
        self._thread.start()

    def send(self, exchange: str, message: Message) -> None:
        """Send now from proton's thread (an answer made there: a wake-up through the injector's pipe, which only
        this thread empties, could block it for good when the pipe is full); else through the injector."""
        if threading.current_thread() is self._thread:
            self._send(exchange, message)
            return
        self._outgoing.put((exchange, message))
        self._injector.trigger(ApplicationEvent("qmf_send"))

    def stop(self, timeout: float = 5.0) -> None:
        self._outgoing.put(None)
        self._injector.trigger(ApplicationEvent("qmf_send"))
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            Container(self).run()
        except Exception:  # noqa: BLE001 - the thread's end is logged, not raised into nowhere
            log.failure("the QMF broker connection's thread ended")
        self._changed(False)

    # -- proton's thread -----------------------------------------------------------------------------------------
    def on_start(self, event: Any) -> None:
        container = self._container = event.container
        container.selectable(self._injector)
        address = self._address
        options: dict[str, Any] = {"reconnect": Backoff(max_delay=RECONNECT_MAX), "heartbeat": 10,
                                   "allowed_mechs": address.mechanism}
        if address.mechanism != "ANONYMOUS":
            options.update(user=address.username, password=address.password, allow_insecure_mechs=True)
        self._connection = container.connect(address.url, **options)

    def _attach(self) -> None:
        """The agent's two receivers (its name on the direct exchange, consoles' requests on the topic one), made
        afresh on each connection: links proton attaches again after a reconnect may name a broker's subscription
        queue that died with the old connection."""
        self._detach()
        container = self._container
        # each link a name of its own: the broker may still hold a refused one's name while it is made again
        self._receivers = [
            container.create_receiver(self._connection, DIRECT, name=f"{DIRECT}-{uuid.uuid4()}",
                                      options=binding("direct", self._agent_name)),
            container.create_receiver(self._connection, TOPIC, name=f"{TOPIC}-{uuid.uuid4()}",
                                      options=binding("topic", "console.#"))]

    def reattach(self) -> None:
        """The receivers made again, while the connection is open (proton's thread)."""
        connection = self._connection
        if connection is not None and connection.state & connection.LOCAL_ACTIVE:
            self._attach()

    def _detach(self) -> None:
        for link in (*self._receivers, *self._senders.values()):
            link.close()
        self._receivers, self._senders = [], {}

    def on_connection_opened(self, event: Any) -> None:
        self.connections += 1
        self._attach()

    def on_link_opened(self, event: Any) -> None:
        """Connected, for the agent, once both receivers are attached: requests can arrive."""
        if self._receivers and all(link.state & link.REMOTE_ACTIVE for link in self._receivers):
            self._changed(True)

    def on_link_error(self, event: Any) -> None:
        """A link the broker refused or closed: the receivers are made again a second later (a broker that is
        still starting may not have its exchanges yet); a sender is made again by the next message sent."""
        link = event.link
        link.close()
        ours = link in self._receivers or link in self._senders.values()
        if not ours:
            return  # one of a lost connection's, which proton attached again and the broker refused
        condition = link.remote_condition
        log.warn("QMF broker {url}: link {name} closed: {error}", url=self._address.url, name=link.name,
                 error=f"{condition.name}: {condition.description}" if condition else "no reason given")
        if link in self._receivers:
            self._changed(False)
            self._container.schedule(1.0, _Reattach(self))
        else:
            self._senders = {exchange: sender for exchange, sender in self._senders.items() if sender is not link}

    def on_disconnected(self, event: Any) -> None:
        self._detach()
        self._changed(False)

    def on_transport_error(self, event: Any) -> None:
        condition = event.transport.condition
        log.warn("QMF broker {url}: {error}", url=self._address.url,
                 error=f"{condition.name}: {condition.description}" if condition else "connection lost")
        self._changed(False)

    def on_message(self, event: Any) -> None:
        self._deliver(event.message)

    def on_qmf_send(self, event: Any) -> None:
        while True:
            try:
                item = self._outgoing.get_nowait()
            except queue.Empty:
                return
            if item is None:
                self._injector.close()
                if self._connection is not None:
                    self._connection.close()
                return
            self._send(*item)

    def _send(self, exchange: str, message: Message) -> None:
        try:
            sender = self._senders.get(exchange)
            if sender is None:
                sender = self._senders[exchange] = self._container.create_sender(
                    self._connection, exchange, name=f"{exchange}-{uuid.uuid4()}")
            sender.send(message)
        except Exception:  # noqa: BLE001 - one message lost (its console times out), never the thread
            log.failure("QMF agent: sending to {exchange}", exchange=exchange)

    def _changed(self, connected: bool) -> None:
        if connected != self.connected:
            self.connected = connected
            self._on_change(connected)
