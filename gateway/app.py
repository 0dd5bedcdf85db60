"""Assembling a running gateway from its configuration: its ports, the backend and the core, the installed front
ends (:mod:`gateway.frontend`) mounted on the HTTP sites, and the lifecycle of all of it as one ordered
``twisted.application`` service (:mod:`gateway.lifecycle`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import Factory
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.web import resource

from backends import registry
from backends.interface import Capability, ScheddBackend
from gateway import localsocket
from gateway.config import GatewayConfig
from gateway.connections import ConnectionGate, ConnectionGuard, RefusalLog, descriptor_limit
from gateway.core.collector import BirdbathCollector, contact_address
from gateway.core.described import DescribedSubmissions
from gateway.core.queries import QueryRunner
from gateway.core.schedd import BirdbathSchedd
from gateway.core.services import CollectorContract, DescribedContract, ScheddContract, SubmissionsContract
from gateway.core.submissions import SubmissionService, SubmissionSettings
from gateway.core.threads import BlockingCaller
from gateway.daemon import sharedport
from gateway.frontend import Core, Sites, installed
from gateway.http import GatewaySite, HandshakeLogging
from gateway.lifecycle import InOrder, Listening, Step
from gateway.monitoring.web import Monitor, Watched, pages_root
from gateway.routes import Routes
from gateway.workers.inputs import inputs_digest
from gateway.workers.parent import Front, WorkerPool

log = Logger()
T = TypeVar("T")


class Gateway(InOrder):
    """One gateway: a backend behind the core, its front ends published on twisted.web sites; a service whose
    children start in this order and stop in reverse: the backend and the core (:meth:`_start_core`), the front
    ends' own services (brokers, agents), the monitor, the workers, the ports.

    It starts in two steps so that a start that is refused leaves nothing behind: ``privilegedStartService`` binds
    the ports (a taken port fails here, before any state exists), then ``startService`` creates the backend, which
    may create its state directory.  Until the reactor runs, the bound ports serve nothing, so nobody sees the gap.

    Both ports serve one site: the same operations, the same rules; only the way callers are identified differs
    (:mod:`gateway.identity.callers`).  The SSL port's files (key, authorities, map file, password file) are read
    here, once; changing them takes a restart."""

    def __init__(self, config: GatewayConfig, reactor: Any, backend: ScheddBackend | None = None,
                 command_line: list[str] | None = None) -> None:
        super().__init__()
        self.config = config
        self.reactor = reactor
        self.backend = backend
        self.calls: BlockingCaller | None = None
        self.queries: QueryRunner | None = None
        self.schedd: BirdbathSchedd | None = None
        self.submissions: SubmissionService | None = None
        #: the installed front ends this configuration switches on (:func:`gateway.frontend.installed`)
        self.front_ends = [front_end for front_end in installed() if front_end.enabled(config)]
        #: what the front ends run in this process, once started (the core's only: a worker runs none)
        self.front_services = FrontEndServices(self)
        #: whether the shutdown under way is SIGQUIT's fast one (set by the command line's handler)
        self.fast_shutdown: Callable[[], bool] = lambda: False
        identification = config.identification(self.offload, reactor)
        #: how callers are identified (a worker replaces its login throttle with the core's: one count per gateway)
        self.identification = identification
        self.tls = config.server_tls() if config.enable_soap_ssl else None
        #: with ``workers = N``: what the front ends read, as :func:`~gateway.workers.inputs.inputs_digest` says it
        #: (taken now that they have read it): the core gives it to each worker, which checks its own against it
        #: before its front ends read them
        self.inputs = inputs_digest(config) if config.workers else None
        #: who may hold how many connections, on every port (the limits follow the open files limit)
        self.gate = ConnectionGate(config.connection_limits(descriptor_limit()), config.policy(),
                                   RefusalLog(reactor))
        # the operations' resource replaces this placeholder in start(), before the reactor serves anything
        self.site = GatewaySite(resource.Resource(), max_body=config.max_request_bytes,
                                identification=identification, deadlines=config.request_deadlines())
        # the condorCollector service's own port (collector_port), beside the one it shares with the schedd
        self.collector_site = GatewaySite(resource.Resource(), max_body=config.max_request_bytes,
                                          identification=identification, deadlines=config.request_deadlines())
        # /metrics, /healthz and /readyz on a port of their own (metrics_port), beside the gateway's
        self.metrics_site = GatewaySite(resource.Resource(), max_body=config.max_request_bytes,
                                        identification=identification, deadlines=config.request_deadlines())
        self._contact_text: str | None = None  # see _contact
        self.monitor: Monitor | None = None  # /metrics, /healthz, /readyz: made in start()
        #: the site's resource tree (gateway/routes.py), made in start(): ``routes.mount(path, resource)`` adds to it
        self.routes: Routes | None = None
        #: with ``workers = N``: the ports' factories whose connections go to the workers (see :meth:`_alone`)
        self._fronts: list[ConnectionGuard] = []
        #: with ``workers = N``: the worker processes this (the core) process passes its connections to, started
        #: with the gateway's ``command_line``
        self.workers = (WorkerPool(reactor, config.workers, command_line or [], self._core_services,
                                   alone=self._alone if config.lone_connection_in_core else lambda: False)
                        if config.workers else None)
        #: the ports, bound at the privileged start (the local socket at the start, once the state directory exists)
        self.ports = {name: Listening(name, listen, late=name == "local_socket") for name, listen in (
            ("local_socket", self._listen_local), ("port", self._listen_plain), ("ssl_port", self._listen_tls),
            ("named_socket", self._listen_shared), ("collector_port", self._listen_collector),
            ("metrics_port", self._listen_metrics))}
        for child in (Step("core", self._start_core, self._stop_core), self.front_services,
                      Step("monitor", stop=lambda: self.monitor.stop() if self.monitor is not None else None),
                      Step("workers", self._start_workers, self._stop_workers), *self.ports.values(),
                      Step("announce", self._announce)):
            child.setServiceParent(self)

    # the ports, as bound (each None when the configuration has it off)
    port = property(lambda self: self.ports["port"].port)
    ssl_port = property(lambda self: self.ports["ssl_port"].port)
    collector_port = property(lambda self: self.ports["collector_port"].port)
    metrics_port = property(lambda self: self.ports["metrics_port"].port)

    def _listen_plain(self) -> IListeningPort | None:
        config = self.config
        if config.plain_port is None:
            return None
        return self.reactor.listenTCP(config.plain_port, self._front(Front.SITE), interface=config.listen)

    def _listen_tls(self) -> IListeningPort | None:
        if self.tls is None:  # the gate before TLS: a refused connection costs no handshake
            return None
        return self.reactor.listenTCP(self.config.soap_ssl_port, self._front(Front.TLS), interface=self.config.listen)

    def _listen_shared(self) -> IListeningPort | None:
        """The named socket condor_shared_port passes connections to (``use_shared_port``)."""
        if not self.config.use_shared_port:
            return None
        return sharedport.listen(self.reactor, self.config.named_socket(), self._front(Front.SITE))

    def _listen_collector(self) -> IListeningPort | None:
        if not self.config.collector_port:
            return None
        return self.reactor.listenTCP(self.config.collector_port, self._front(Front.COLLECTOR),
                                      interface=self.config.listen)

    def _listen_metrics(self) -> IListeningPort | None:
        if not self.config.metrics_port:
            return None
        return self.reactor.listenTCP(self.config.metrics_port, ConnectionGuard(self.metrics_site, self.gate),
                                      interface=self.config.listen)

    def _listen_local(self) -> IListeningPort | None:
        """The local socket (Unix-domain, its callers named by the kernel), made once the state directory exists."""
        path = self.config.local_socket_path()
        return None if path is None else localsocket.listen(self.reactor, path, self._front(Front.SITE))

    def protocol_factory(self, front: Front) -> Factory:
        """What serves a connection of a front: the site, TLS around it, or the collector's site."""
        if front is Front.TLS:
            return TLSMemoryBIOFactory(self.tls, False, HandshakeLogging(self.site))
        return self.collector_site if front is Front.COLLECTOR else self.site

    def _front(self, front: Front) -> ConnectionGuard:
        """A port's factory: the gate, then this process's own protocols, or with ``workers`` the hand-off of
        the connection to a worker (which serves it with :meth:`protocol_factory`), but for the lone one
        (``lone_connection_in_core``) and any while no worker serves, served here."""
        if self.workers is not None:
            guard = ConnectionGuard(self.workers.factory(front, self.protocol_factory(front)), self.gate)
            self._fronts.append(guard)
            return guard
        return ConnectionGuard(self.protocol_factory(front), self.gate)

    def _keep_in_core(self) -> bool:
        """With workers, whether a connection the core serves stays open after its request: while it is the only one
        on the workers' ports (``lone_connection_in_core``), or no worker is ready to take it (one starting may yet
        fail: the core's connections wait for one that serves).  Else it ends and its client connects again, to a
        worker: the core serves a lone client, not the first connection of a busy gateway for good (a proxy's first
        upstream connection may carry many clients), nor, once the workers are back, those it took meanwhile."""
        assert self.workers is not None
        alone = self.config.lone_connection_in_core and self._open_on_fronts() <= 1  # (itself one of them)
        return alone or not self.workers.ready()

    def _alone(self) -> bool:
        """Whether no connection is open on the ports the workers serve."""
        return self._open_on_fronts() == 0

    def _open_on_fronts(self) -> int:
        """The connections open on the ports the workers serve (``metrics_port``'s do not count)."""
        return sum(guard.open for guard in self._fronts)

    def _core_services(self) -> dict[str, Any]:
        """The core's services a worker calls (:class:`gateway.workers.link.CoreCalls`)."""
        return {"schedd": self.schedd, "collector": self.collector, "submissions": self.submissions,
                "described": self.described, "monitor": self.monitor, "throttle": self.identification.throttle}

    def _start_core(self) -> None:
        """The backend, its threads and services, the core's services, the sites' trees."""
        config = self.config
        if self.backend is None:
            self.backend = registry.create(config.backend, config.state_dir,
                                           config.backend_options.get(config.backend))
        limits = config.expression_limits()
        self.calls = BlockingCaller(self.reactor, self.backend.threads, config.backend, self.backend.call_timeout,
                                    stack=limits.stack_bytes())
        self.queries = QueryRunner.pool(self.reactor, config.query_settings())
        if Capability.SERVICES in self.backend.capabilities:  # services in the gateway (the local executor)
            self.backend.start(self.reactor, self.calls)
        policy = config.policy()
        self.schedd = BirdbathSchedd(self.backend, self.calls, policy, self.reactor, config.schedd_settings(),
                                     queries=self.queries)
        self.collector = BirdbathCollector(self.backend, self.calls, policy, self.reactor, self.queries,
                                           self._contact, limits)
        self.submissions = SubmissionService(self.backend, self.calls, policy, self.reactor, SubmissionSettings(
            schedd_name=self.backend.info().schedd_name, staging_root=config.state_dir / "staging",
            staging_lifetime=config.staging_lifetime, output_retention=config.output_retention,
            max_staging_areas_per_caller=config.max_staging_areas_per_caller, limits=limits,
            pool_name=self.backend.info().pool, max_read_bytes=config.max_request_bytes), queries=self.queries,
            clusters=self.schedd.clusters, writer=self.schedd.writer)
        self.serve(self.schedd, self.collector, self.submissions,
                   DescribedSubmissions(self.schedd, config.staging_lifetime), Monitor(self))

    async def _stop_core(self) -> None:
        """Roll back open transactions, then release the backend (SIGQUIT's fast shutdown tells the backend's
        services not to wait for running jobs to stop by themselves); its threads are joined whatever fails."""
        try:
            if self.schedd is not None:
                await self.schedd.abort_all()
            if self.backend is not None and Capability.SERVICES in self.backend.capabilities:
                await (self.backend.stop(fast=True) if self.fast_shutdown() else self.backend.stop())
        finally:
            self.release()

    def _start_workers(self) -> None:
        if self.workers is None:
            return
        changes = self.workers.start(self.inputs)
        self.site.keep_open = self.collector_site.keep_open = self._keep_in_core
        if self.config.lone_connection_in_core:
            log.info("a connection that arrives while no other is open is served by the core process itself "
                     "(lone_connection_in_core)")
        if self.schedd.job_views:  # the workers read whether their views are current from it
            self.backend.watch_changes(changes.publish)

    def serving(self) -> Deferred[None]:
        """Fired once the started gateway serves on every layer it has: at once in one process; with workers, once
        each worker serves (or has ended: the core serves in their stead).  Its port files are written then
        (``--port-file``): a caller that waits for them never waits for a worker's start."""
        return self.workers.settled() if self.workers is not None else succeed(None)

    async def _stop_workers(self) -> None:
        if self.workers is not None:
            await self.workers.stop()

    def _announce(self) -> None:
        """Say what the gateway serves, where, and within which limits."""
        config = self.config
        limits = self.gate.limits
        log.info("serving at most {total} connections, {per_caller} per caller, the last {reserved} for root and "
                 "queue_super_users on this machine (max_connections, max_connections_per_caller, "
                 "reserved_connections)", total=limits.max_connections, per_caller=limits.per_caller,
                 reserved=limits.reserved)
        if limits.max_connections >= descriptor_limit():
            log.warn("max_connections ({total}) is not below the open files limit ({limit}): "
                     "connections alone can exhaust the gateway's descriptors", total=limits.max_connections,
                     limit=descriptor_limit())
        for port, scheme in ((self.port, "http"), (self.ssl_port, "https")):
            if port is not None:
                address = port.getHost()
                log.info("birdbath gateway listening on {scheme}://{host}:{port}/ with the {backend} backend "
                         "(state in {state}){callers}", scheme=scheme, host=address.host, port=address.port,
                         backend=config.backend, state=config.state_dir, callers=self._callers(scheme))
        if self.ports["local_socket"].port is not None:
            log.info("birdbath gateway serving local clients on the Unix socket {path} (local_socket), as on the "
                     "plain port; callers identified by the socket's peer credentials",
                     path=config.local_socket_path())
        if self.ports["named_socket"].port is not None:
            log.info("birdbath gateway serving connections condor_shared_port passes to {path} (shared port id "
                     "{id}: clients use <host:port?sock={id}>), as on the plain port", path=config.named_socket(),
                     id=config.shared_port_id)
        if self.collector_port is not None:
            address = self.collector_port.getHost()
            log.info("condorCollector service listening on http://{host}:{port}/ (collector_port)", host=address.host,
                     port=address.port)
        if self.metrics_port is not None:
            address = self.metrics_port.getHost()
            log.info("/metrics, /healthz and /readyz also on http://{host}:{port}/ (metrics_port)", host=address.host,
                     port=address.port)

    def serve(self, schedd: ScheddContract, collector: CollectorContract, submissions: SubmissionsContract,
              described: DescribedContract, monitor: Watched) -> None:
        """Mount the front ends on the sites' trees over the core's services (here, or in a worker their
        :class:`gateway.workers.link.RemoteObject` stand-ins)."""
        self.schedd, self.collector, self.submissions, self.monitor = schedd, collector, submissions, monitor
        self.described = described
        #: what the front ends were given (:class:`gateway.frontend.Core`)
        self.core = Core(self.config, self.reactor, schedd, collector, submissions, described, monitor, self.offload)
        self.routes, collector_routes = Routes(), Routes()
        for front_end in self.front_ends:
            front_end.mount(Sites(self.routes, collector_routes), self.core)
        self.site.resource = self.routes.root
        self.collector_site.resource = collector_routes.root
        self.metrics_site.resource = pages_root(monitor)

    def offload(self, function: Callable[..., T], *args: Any) -> Deferred[T]:
        """``function(*args)`` on the reactor's thread pool: the front ends' blocking work (a password check, an
        uploaded archive's reading), which the reactor must not wait for."""
        return deferToThreadPool(self.reactor, self.reactor.getThreadPool(), function, *args)

    def _callers(self, scheme: str) -> str:
        """How the callers of one port are identified, for the start-up line."""
        if scheme == "http":
            return "; callers on this machine identified by their socket's owner, others anonymous"
        assert self.tls is not None
        ways = []
        if self.config.certificate_mapfile is not None:
            ways.append(f"client certificates ({self.tls.settings.client_certificates.value}) mapped by "
                        f"{self.config.certificate_mapfile}")
        if self.config.password_file is not None:
            ways.append(f"HTTP Basic checked against {self.config.password_file}")
        if self.config.token_settings().enabled():
            ways.append(self.config.token_settings().described())
        return "; callers identified by " + " or ".join(ways)

    def _contact(self) -> str:
        """The gateway's address as its daemons' ads publish it (``<host:port>``, the plain port's if it has one);
        worked out at the first query, once the ports are bound (a wildcard address costs a host-name lookup)."""
        if self._contact_text is None:
            port = self.port or self.ssl_port
            self._contact_text = contact_address(port.getHost() if port is not None else None)
        return self._contact_text

    def release(self) -> None:
        """Join the backend's threads and close it: all a start that failed half-way has to undo (the port closes
        with the process)."""
        if self.queries is not None:
            self.queries.stop()
            self.queries = None
        if self.calls is not None:
            self.calls.stop()
            self.calls = None
        if self.backend is not None:
            self.backend.close()


class FrontEndServices(InOrder):
    """What the front ends run (:meth:`gateway.frontend.FrontEnd.service`), made when the gateway starts, once the
    core they are given exists, and started in the front ends' order."""

    def __init__(self, gateway: Gateway) -> None:
        super().__init__()
        self.setName("front ends")
        self.gateway = gateway

    def startService(self) -> None:
        for front_end in self.gateway.front_ends:
            service = front_end.service(self.gateway.core)
            if service is not None:
                service.setName(front_end.name)
                service.setServiceParent(self)  # (not running yet: started below, in order)
        super().startService()
