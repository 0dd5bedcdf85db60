"""The gateway's connection to the AMQP broker, on the reactor (pika's Twisted adapter), kept up for as long as the
gateway runs: reconnects with backoff after any loss, declares the queues again, and consumes only while the service
says it has room.  Two channels: one consumes (manual ack, ``basic.qos``), one publishes replies in confirm mode, so
a reply counts as sent only once the broker has it."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any

import pika
from pika.adapters.twisted_connection import ClosableDeferredQueue, TwistedChannel, TwistedProtocolConnection
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.protocol import ClientCreator
from twisted.logger import Logger

from .settings import CarodSettings

log = Logger()

#: seconds the connection must stay up before the backoff starts again from 1 s
STEADY = 30.0


class NotConnected(Exception):
    """There is no connection to the broker now; the reply waits for the next one."""


Delivery = Callable[[Any, Any, bytes, "Link"], Awaitable[None]]


class Link:
    """One connection's channels; a delivery's ack must go back on the link it came from."""

    def __init__(self, connection: TwistedProtocolConnection, consume: TwistedChannel, publish: TwistedChannel) -> None:
        self.connection = connection
        self.consume = consume
        self.publish = publish
        self.consumer_tag: str | None = None
        self.open = True
        #: exchanges found to exist on this connection (publishing to a missing one would close the channel)
        self.exchanges: set[str] = {"", "amq.direct", "amq.topic", "amq.fanout", "amq.headers", "amq.match"}

    def ack(self, delivery_tag: int) -> None:
        if self.open:
            self.consume.basic_ack(delivery_tag)

    def requeue(self, delivery_tag: int) -> None:
        if self.open:
            self.consume.basic_nack(delivery_tag, requeue=True)


class Broker:
    """Connects, declares, consumes and publishes; ``on_delivery(method, properties, body, link)`` handles each
    message, ``on_up()`` runs after every (re)connection."""

    def __init__(self, reactor: Any, settings: CarodSettings, on_delivery: Delivery,
                 on_up: Callable[[], None]) -> None:
        self._reactor = reactor
        self.settings = settings
        self._on_delivery = on_delivery
        self._on_up = on_up
        self.link: Link | None = None
        self._want_consuming = False
        self._stopping = False
        self._delay = 1.0
        self._up_since = 0.0
        self._retry: Any = None
        self.connections = 0  # how many times a connection was made (for tests and the log)

    # -- connecting ------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._connect_soon(0)

    def _connect_soon(self, delay: float) -> None:
        if not self._stopping:
            self._retry = self._reactor.callLater(delay, lambda: ensureDeferred(self._connect()))

    async def _connect(self) -> None:
        self._retry = None
        settings = self.settings
        parameters = pika.ConnectionParameters(
            virtual_host=settings.carod_broker_vhost, heartbeat=settings.carod_broker_heartbeat,
            credentials=pika.PlainCredentials(settings.carod_broker_user, settings.carod_broker_password))
        connection = None
        try:
            connection = await ClientCreator(self._reactor, TwistedProtocolConnection, parameters).connectTCP(
                settings.carod_broker_ip, settings.carod_broker_port, timeout=10)
            await connection.ready
            await self._declare(connection)
            consume = await connection.channel()
            await consume.basic_qos(prefetch_count=settings.carod_prefetch)
            publish = await connection.channel()
            await publish.confirm_delivery()
        except Exception as exc:  # noqa: BLE001 - any failure to connect is retried
            log.warn("AMQP broker {host}:{port} not usable ({error}); retrying in {delay:.1f}s",
                     host=settings.carod_broker_ip, port=settings.carod_broker_port, error=_describe(exc),
                     delay=self._delay)
            if connection is not None and connection.is_open:
                connection.close()
            self._backoff()
            return
        if self._stopping:
            connection.close()
            return
        link = Link(connection, consume, publish)
        self.link = link
        self.connections += 1
        self._up_since = self._reactor.seconds()
        connection.closed.addBoth(lambda reason: self._lost(link, reason))
        for channel in (consume, publish):
            channel._channel.add_on_close_callback(lambda _channel, reason: self._channel_closed(link, reason))
        log.info("connected to the AMQP broker {host}:{port}; work queue {queue}", host=settings.carod_broker_ip,
                 port=settings.carod_broker_port, queue=settings.carod_broker_queue)
        self._on_up()

    async def _declare(self, connection: TwistedProtocolConnection) -> None:
        """The work queue as the operator made it (any kind, any arguments), else a durable classic one; the
        rejected queue, durable.  Nothing is bound: clients bind the work queue, as in carod's day."""
        queue = self.settings.carod_broker_queue
        probe = await connection.channel()
        try:
            found = await probe.queue_declare(queue=queue, passive=True)
            probe.close()
            arguments = getattr(found.method, "arguments", None)
            log.info("using the existing work queue {queue}{args}", queue=queue, args=f" ({arguments})" if arguments
                     else "")
        except pika.exceptions.ChannelClosedByBroker as exc:
            if exc.reply_code != 404:
                raise
            channel = await connection.channel()
            await channel.queue_declare(queue=queue, durable=True)
            channel.close()
        channel = await connection.channel()
        await channel.queue_declare(queue=self.settings.rejected_queue, durable=True)
        channel.close()

    def _backoff(self) -> None:
        delay = min(self._delay, float(self.settings.carod_reconnect_max))
        self._delay = min(self._delay * 2, float(self.settings.carod_reconnect_max))
        self._connect_soon(delay * random.uniform(0.8, 1.2))

    def _channel_closed(self, link: Link, reason: Any) -> None:
        """A channel the broker closed (a refused ack, say) takes the connection with it: one way back, the
        reconnection, which redelivers whatever was not acked."""
        if link.open and not self._stopping:
            log.warn("AMQP channel closed ({reason}); reconnecting", reason=_describe(reason))
            if link.connection.is_open:
                link.connection.close()

    def _lost(self, link: Link, reason: Any) -> None:
        if not link.open:
            return
        link.open = False
        if self.link is link:
            self.link = None
        if self._stopping:
            return
        if self._reactor.seconds() - self._up_since >= STEADY:
            self._delay = 1.0
        log.warn("lost the AMQP broker ({reason}); reconnecting in about {delay:.1f}s", reason=_describe(reason),
                 delay=self._delay)
        self._backoff()
        return

    # -- consuming -------------------------------------------------------------------------------------------
    def consume(self, wanted: bool) -> None:
        """Consume while ``wanted`` (the service has a free slot); cancel the consumer otherwise."""
        self._want_consuming = wanted
        link = self.link
        if link is None or not link.open:
            return
        if wanted and link.consumer_tag is None:
            link.consumer_tag = ""  # asked for: not asked twice
            ensureDeferred(self._start_consumer(link))
        elif not wanted and link.consumer_tag:
            tag, link.consumer_tag = link.consumer_tag, None
            link.consume.basic_cancel(tag).addErrback(lambda failure: None)

    async def _start_consumer(self, link: Link) -> None:
        try:
            queue, tag = await link.consume.basic_consume(queue=self.settings.carod_broker_queue, auto_ack=False)
        except Exception as exc:  # noqa: BLE001
            log.warn("cannot consume from {queue}: {error}", queue=self.settings.carod_broker_queue,
                     error=_describe(exc))
            link.consumer_tag = None
            self._channel_closed(link, exc)
            return
        link.consumer_tag = tag
        if not self._want_consuming:
            self.consume(False)
        await self._pump(link, queue, tag)

    async def _pump(self, link: Link, queue: ClosableDeferredQueue, tag: str) -> None:
        """Hand each delivery of one consumer to the service, until it is cancelled or the channel closes."""
        while link.open:
            try:
                message = await queue.get()
            except Exception:  # noqa: BLE001 - the consumer was cancelled or its channel closed
                return
            ensureDeferred(self._deliver(message, link))

    async def _deliver(self, message: Any, link: Link) -> None:
        try:
            await self._on_delivery(message.method, message.properties, message.body, link)
        except Exception:  # noqa: BLE001 - the service handles its errors; this is the last guard
            log.failure("handling AMQP delivery {tag}; reconnecting, so that the broker delivers it again (the "
                        "poison guard counts it)", tag=message.method.delivery_tag)
            self._channel_closed(link, "a delivery could not be handled")

    # -- publishing --------------------------------------------------------------------------------------------
    async def exchange_exists(self, exchange: str) -> bool:
        """Whether a reply can go to ``exchange``: publishing to one that does not exist closes the channel (and
        with it every other reply in flight), so a name not seen yet is declared passively on a channel of its own
        first."""
        link = self.link
        if link is None or not link.open:
            raise NotConnected("not connected to the AMQP broker")
        if exchange in link.exchanges:
            return True
        probe = await link.connection.channel()
        try:
            await probe.exchange_declare(exchange=exchange, passive=True)
        except pika.exceptions.ChannelClosedByBroker as exc:
            if exc.reply_code == 404:
                return False
            raise
        probe.close()
        link.exchanges.add(exchange)
        return True

    def publish(self, exchange: str, routing_key: str, body: bytes, properties: pika.BasicProperties) -> Deferred:
        """Publish ``mandatory`` on the confirm channel: fires once the broker confirms; fails with pika's
        UnroutableError when nothing took it, or :class:`NotConnected` / a channel error when it may not have
        arrived."""
        link = self.link
        if link is None or not link.open:
            raise NotConnected("not connected to the AMQP broker")
        return link.publish.basic_publish(exchange, routing_key, body, properties, mandatory=True)

    async def stop(self) -> None:
        self._stopping = True
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        link = self.link
        if link is not None and link.open and link.connection.is_open:
            closed = link.connection.closed
            link.connection.close()
            if closed is not None:
                await closed


def _describe(reason: Any) -> str:
    value = getattr(reason, "value", reason)
    return f"{type(value).__name__}: {value}" if str(value) else type(value).__name__
