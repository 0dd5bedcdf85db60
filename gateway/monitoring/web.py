"""``/metrics``, ``/healthz`` and ``/readyz`` on the gateway's port, beside the operations.

``/metrics`` is Prometheus' text format; ``/healthz`` answers while the reactor does (liveness); ``/readyz`` says
whether the gateway can do its work now: its state directory takes a write, the backend answers a call, and what
the front ends run says nothing is wrong (:meth:`gateway.frontend.FrontEndService.problems`: a broker connected).
Each has a short JSON body (``/readyz``: what is wrong) and is readable by the hosts in ``allow_read``, as the queue is.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, ProcessCollector, generate_latest
from twisted.internet.defer import ensureDeferred
from twisted.internet.threads import deferToThread
from twisted.logger import Logger, globalLogPublisher
from twisted.python.failure import Failure
from twisted.web import resource, server

from gateway.http import write_whole

from .events import EventMetrics, RequestTally
from .figures import ScrapedFigures, snapshot
from .processes import WorkerFigures, WorkerProcesses

log = Logger()
#: refusals are logged as the operations' are (and counted with them)
requests_log = Logger(namespace="birdbath.request")

JSON = b"application/json"
#: what /readyz writes (and removes) in the state directory to see that it takes a write
PROBE = ".readyz-probe"
PROBE_BYTES = 4096


class Monitor:
    """The metrics of one gateway (a registry of its own) and its three pages.  ``gateway`` is the
    :class:`gateway.app.Gateway` being watched: its backend, calls, schedd and what its front ends run are read
    when a page is asked for."""

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway
        self.state_dir: Path = gateway.config.state_dir
        self.policy = gateway.config.policy()
        self.registry = CollectorRegistry(auto_describe=True)
        #: the worker processes' figures as the last scrape gathered them (``workers = N``; none in one process)
        self.workers_seen: list[WorkerFigures] = []
        self.events = EventMetrics(self.registry, self._workers_requests)
        if gateway.workers is not None:
            self.registry.register(WorkerProcesses(lambda: self.workers_seen, lambda: len(gateway.workers.refused)))
        self.figures = ScrapedFigures(self.state_dir, lambda: len(gateway.schedd.transactions),
                                      lambda: gateway.submissions.staging_areas,
                                      lambda: [figure for service in gateway.front_services
                                               for figure in service.figures()])
        self.registry.register(self.figures)
        ProcessCollector(registry=self.registry)
        globalLogPublisher.addObserver(self.events)

    def stop(self) -> None:
        globalLogPublisher.removeObserver(self.events)

    async def scrape(self) -> bytes:
        """The metrics in Prometheus' text format, the queue's figures read now."""
        gateway = self.gateway
        # on the query pool, as clients' queries: a scrape never waits behind the backend's writes, nor they behind it
        self.figures.last = await gateway.queries.read(snapshot, gateway.backend, gateway._contact())
        if gateway.workers is not None:  # each worker counts its own requests: asked for them now
            self.workers_seen = await gateway.workers.figures()
        return generate_latest(self.registry)

    def _workers_requests(self) -> list[RequestTally]:
        """The requests the worker processes counted (those that ended too), to add to the core's."""
        if self.gateway.workers is None:
            return []
        return [self.gateway.workers.retired, *(figures.requests for figures in self.workers_seen)]

    async def problems(self) -> list[str]:
        """What keeps the gateway from being ready; empty when it is."""
        found = []
        try:
            await deferToThread(_write_probe, self.state_dir)
        except OSError as exc:
            found.append(f"state directory {self.state_dir} does not take a write: {exc.strerror or exc}")
        try:
            await self.gateway.calls(self.gateway.backend.get_job, 0, 0)
        except Exception as exc:  # noqa: BLE001 - whatever the backend raises, it does not answer
            found.append(f"backend does not answer: {exc}")
        for service in self.gateway.front_services:
            found.extend(service.problems())
        return found


def _write_probe(state_dir: Path) -> None:
    """Write, sync and remove a small file in the state directory (a full or read-only disk raises OSError)."""
    path = state_dir / PROBE
    try:
        with open(path, "wb") as probe:
            probe.write(b"\0" * PROBE_BYTES)
            probe.flush()
            os.fsync(probe.fileno())
    finally:
        path.unlink(missing_ok=True)


class Watched(Protocol):
    """What the pages read: the core's Monitor in its own process, or a worker's stand-in that asks the core."""

    policy: Any

    def scrape(self) -> Awaitable[bytes]: ...

    def problems(self) -> Awaitable[list[str]]: ...


def monitoring_pages(monitor: Watched) -> dict[str, resource.Resource]:
    """The three pages by path, for the site's tree (:mod:`gateway.routes`)."""
    return {"/metrics": MetricsPage(monitor), "/healthz": HealthPage(monitor), "/readyz": ReadyPage(monitor)}


def pages_root(monitor: Watched) -> resource.Resource:
    """The root of a site of the pages alone (``metrics_port``): any other path is not found."""
    root = resource.Resource()
    for path, page in monitoring_pages(monitor).items():
        root.putChild(path.strip("/").encode(), page)
    return root


class Page(resource.Resource):
    """A page only the hosts in ``allow_read`` read, and only callers the site identified."""

    isLeaf = True

    def __init__(self, monitor: Watched) -> None:
        super().__init__()
        self.monitor = monitor

    def render_GET(self, request: Any) -> Any:
        refusal = getattr(request, "refusal", None)
        if refusal is not None:
            return self._refuse(request, refusal.code, refusal.message)
        if not self.monitor.policy.allow_read.allows(request.client_host):
            return self._refuse(request, 403, f"host {request.client_host} is not in allow_read")
        answer = ensureDeferred(self.answer(request))
        answer.addErrback(self._failed, request)
        return server.NOT_DONE_YET

    async def answer(self, request: server.Request) -> None:
        raise NotImplementedError

    def _refuse(self, request: Any, code: int, message: str) -> bytes:
        """Refuse, logged (and so counted) as the operations' refusals are."""
        requests_log.warn("{method} {path} from {client} refused ({code}): {message}",
                          method=request.method.decode("latin-1"), path=request.path.decode("latin-1"),
                          client=request.client_host, code=code, message=message)
        if code == 401:
            request.setHeader(b"www-authenticate", b'Basic realm="birdbath", charset="UTF-8"')
        return _json(request, code, {"error": message})

    def _failed(self, failure: Failure, request: server.Request) -> None:
        log.failure("answering {path}", failure, path=request.path.decode("latin-1"))
        if not request.finished and not request._disconnected:
            _finish(request, 500, JSON, json.dumps({"error": str(failure.value)}).encode() + b"\n")


class MetricsPage(Page):
    async def answer(self, request: server.Request) -> None:
        body = await self.monitor.scrape()
        _finish(request, 200, CONTENT_TYPE_LATEST.encode(), body)


class HealthPage(Page):
    async def answer(self, request: server.Request) -> None:
        _finish(request, 200, JSON, b'{"status": "ok"}\n')


class ReadyPage(Page):
    async def answer(self, request: server.Request) -> None:
        problems = await self.monitor.problems()
        body = {"ready": not problems, "problems": problems}
        _finish(request, 503 if problems else 200, JSON, json.dumps(body).encode() + b"\n")


def _json(request: server.Request, code: int, body: dict[str, Any]) -> bytes:
    request.setResponseCode(code)
    request.setHeader(b"content-type", JSON)
    return json.dumps(body).encode() + b"\n"


def _finish(request: server.Request, code: int, content_type: bytes, body: bytes) -> None:
    if request.finished or request._disconnected:
        return
    request.setResponseCode(code)
    request.setHeader(b"content-type", content_type)
    write_whole(request, body)
