"""QMF as a front end (``[qmf]``): no path on the sites; an agent on a Qpid broker that runs in the core
(:class:`Agent`), its broker connection in a thread of its own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread

from gateway.config import GatewayConfig
from gateway.frontend import Core, FrontEnd, FrontEndService

from .settings import QmfSettings, qmf_settings


class Agent(FrontEndService):
    """The :class:`~gateway.qmf.agent.QmfAgent` of a running gateway, its figures and readiness."""

    def __init__(self, core: Core, settings: QmfSettings) -> None:
        self.core = core
        self.settings = settings
        self.agent: Any = None  # made at start: proton is an optional dependency (the [qmf] extra)

    def startService(self) -> None:
        super().startService()
        from gateway.qmf.agent import QmfAgent

        core = self.core
        self.agent = QmfAgent(core.reactor, self.settings, core.schedd, core.submissions, core.collector)
        self.agent.start()

    def stopService(self) -> Deferred[None] | None:
        super().stopService()
        return None if self.agent is None else deferToThread(self.agent.stop)  # joins the broker link's thread

    def figures(self) -> Iterator[Metric]:
        agent = self.agent
        if agent is None:
            return
        yield GaugeMetricFamily("birdbath_qmf_connected", "1 while the QMF agent's broker is connected",
                                value=1 if agent.connected else 0)
        yield CounterMetricFamily("birdbath_qmf_connections", "Connections the QMF agent made to its broker (more "
                                  "than one: reconnects)", value=agent.link.connections)
        yield CounterMetricFamily("birdbath_qmf_requests", "QMF requests answered (locates, queries, schema "
                                  "requests, method calls)", value=agent.answered)

    def problems(self) -> list[str]:
        return [] if self.agent is None or self.agent.connected else ["QMF broker not connected"]


class Qmf(FrontEnd):
    name = section = "qmf"
    read_section = staticmethod(qmf_settings)

    def enabled(self, config: GatewayConfig) -> bool:
        return self.settings(config).enable_qmf

    def service(self, core: Core) -> Agent:
        return Agent(core, self.settings(core.config))


FRONT_END = Qmf()
