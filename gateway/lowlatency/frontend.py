"""Low-latency jobs over AMQP as a front end (``[carod]``): no path on the sites; a consumer of the broker's queue
that runs in the core (:class:`Consumer`), connecting in the background, broker or not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger

from gateway.config import GatewayConfig
from gateway.frontend import Core, FrontEnd, FrontEndService

from .settings import CarodSettings, carod_settings

log = Logger()


class Consumer(FrontEndService):
    """The :class:`~gateway.lowlatency.service.LowLatencyService` of a running gateway, its figures and readiness."""

    def __init__(self, core: Core, settings: CarodSettings) -> None:
        self.core = core
        self.settings = settings
        self.consumer: Any = None  # made at start: pika takes 0.6 s of CPU to import, paid only when it is on

    def startService(self) -> None:
        super().startService()
        from gateway.lowlatency.service import LowLatencyService

        core = self.core
        self.consumer = LowLatencyService(core.reactor, self.settings, core.submissions, core.schedd,
                                          core.collector, core.config.state_dir / "carod")
        ensureDeferred(self.consumer.start()).addErrback(
            lambda failure: log.failure("starting the low-latency (AMQP) front end", failure))

    def stopService(self) -> Deferred[None] | None:
        super().stopService()
        return None if self.consumer is None else ensureDeferred(self.consumer.stop())

    def connected(self) -> bool:
        """Whether the broker connection is up now."""
        link = self.consumer.broker.link
        return link is not None and link.open and link.connection.is_open

    def figures(self) -> Iterator[Metric]:
        if self.consumer is None:
            return
        yield GaugeMetricFamily("birdbath_amqp_connected", "1 while the AMQP broker is connected",
                                value=1 if self.connected() else 0)
        yield CounterMetricFamily("birdbath_amqp_connections", "Connections made to the broker (more than one: "
                                  "reconnects)", value=self.consumer.broker.connections)
        stats = self.consumer.stats()
        for name, help in (("taken", "Messages taken as jobs"), ("rejected", "Messages rejected"),
                           ("errors", "Messages answered with an error"), ("finals", "Final replies sent"),
                           ("requeued", "Messages given back to the broker")):
            yield CounterMetricFamily(f"birdbath_amqp_messages_{name}", help, value=stats[name])
        yield GaugeMetricFamily("birdbath_amqp_jobs_tracked", "Low-latency jobs being followed to their end",
                                value=stats["tracked"])

    def problems(self) -> list[str]:
        return [] if self.consumer is None or self.connected() else ["AMQP broker not connected"]


class LowLatency(FrontEnd):
    name = section = "carod"
    read_section = staticmethod(carod_settings)

    def enabled(self, config: GatewayConfig) -> bool:
        return self.settings(config).enable_carod

    def service(self, core: Core) -> Consumer:
        return Consumer(core, self.settings(core.config))


FRONT_END = LowLatency()
