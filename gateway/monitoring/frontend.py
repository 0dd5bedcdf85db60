"""The monitoring pages as a front end: ``/metrics``, ``/healthz`` and ``/readyz`` on the gateway's port (and, with
``metrics_port``, on a port of their own: the gateway serves that site itself)."""

from __future__ import annotations

from gateway.frontend import Core, FrontEnd, Sites

from .web import monitoring_pages


class Monitoring(FrontEnd):
    name = "monitoring"

    def mount(self, sites: Sites, core: Core) -> None:
        for path, page in monitoring_pages(core.monitor).items():
            sites.gateway.mount(path, page)


FRONT_END = Monitoring()
