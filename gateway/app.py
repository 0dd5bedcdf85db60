"""Assembling a running gateway from its configuration: backend, core, SOAP service, HTTP site."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import ensureDeferred
from twisted.internet.interfaces import IListeningPort
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.web import resource

from backends import registry
from backends.interface import Capability, ScheddBackend
from gateway.config import GatewayConfig
from gateway.core.auth import Caller
from gateway.core.collector import BirdbathCollector, contact_address
from gateway.core.queries import QueryRunner
from gateway.core.schedd import BirdbathSchedd
from gateway.core.submissions import SubmissionService, SubmissionSettings
from gateway.core.threads import BlockingCaller
from gateway.daemon import sharedport
from gateway.http import Endpoint, GatewayResource, GatewaySite, HandshakeLogging
from gateway.monitoring.web import Monitor
from gateway.soap.application import schedd_application
from gateway.soap.collector import CollectorContext, collector_application, query_answers
from gateway.soap.collector_routing import ByOperation, CollectorOnly
from gateway.soap.context import RequestContext
from gateway.soap.dispatch import SoapDispatcher
from gateway.soap.schedd_dispatch import ScheddDispatcher
from gateway.soap.submission import SubmissionContext, json_application, json_request, soap_application
from gateway.soap.wsdl import PublishedWsdl, wsdl_path

log = Logger()


class Gateway:
    """One gateway: a backend behind the Birdbath core, published as a twisted.web site.

    It starts in two steps so that a start that is refused leaves nothing behind: :meth:`listen` binds the ports
    (a taken port fails here, before any state exists), then :meth:`start` creates the backend, which may create
    its state directory.  Until the reactor runs, the bound ports serve nothing, so nobody sees the gap.

    Both ports serve one site: the same operations, the same rules; only the way callers are identified differs
    (:mod:`gateway.identity.callers`).  The SSL port's files (key, authorities, map file, password file) are read
    here, once; changing them takes a restart."""

    def __init__(self, config: GatewayConfig, reactor: Any, backend: ScheddBackend | None = None) -> None:
        self.config = config
        self.reactor = reactor
        self.backend = backend
        self.calls: BlockingCaller | None = None
        self.queries: QueryRunner | None = None
        self.schedd: BirdbathSchedd | None = None
        self.submissions: SubmissionService | None = None
        self.lowlatency: Any = None  # a gateway.lowlatency.service.LowLatencyService when [carod] is on
        identification = config.identification(
            lambda check, *args: deferToThreadPool(reactor, reactor.getThreadPool(), check, *args))
        self.tls = config.server_tls() if config.enable_soap_ssl else None
        # the operations' resource replaces this placeholder in start(), before the reactor serves anything
        self.site = GatewaySite(resource.Resource(), max_body=config.max_request_bytes, policy=config.policy(),
                                identification=identification)
        self.port: IListeningPort | None = None
        self.ssl_port: IListeningPort | None = None
        #: the named socket condor_shared_port passes connections to (use_shared_port)
        self.named_socket: IListeningPort | None = None
        # the condorCollector service's own port (collector_port), beside the one it shares with the schedd
        self.collector_site = GatewaySite(resource.Resource(), max_body=config.max_request_bytes,
                                          policy=config.policy(), identification=identification)
        self.collector_port: IListeningPort | None = None
        self._contact_text: str | None = None  # see _contact
        self.monitor: Monitor | None = None  # /metrics, /healthz, /readyz: made in start()

    def listen(self) -> None:
        """Bind the plain port and the SSL port, those that are on (raises CannotListenError when one is taken)."""
        config = self.config
        if config.plain_port is not None:
            self.port = self.reactor.listenTCP(config.plain_port, self.site, interface=config.listen)
        if self.tls is not None:
            self.ssl_port = self.reactor.listenSSL(config.soap_ssl_port, HandshakeLogging(self.site), self.tls,
                                                   interface=config.listen)
        if config.use_shared_port:
            self.named_socket = sharedport.listen(self.reactor, config.named_socket(), self.site)
        if config.collector_port:
            self.collector_port = self.reactor.listenTCP(config.collector_port, self.collector_site,
                                                         interface=config.listen)

    def start(self) -> None:
        """Create the backend, start its services in the reactor and serve the operations on the bound port."""
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
        dispatcher = ScheddDispatcher(schedd_application())
        self._answers = dispatcher.ad_answers()
        collector = SoapDispatcher(collector_application())
        self.collector = BirdbathCollector(self.backend, self.calls, policy, self.reactor, self.queries,
                                           self._contact, limits)
        self._collector_answers = query_answers(collector)
        services = ByOperation(dispatcher, collector, self._collector_context)
        collector_wsdl = PublishedWsdl(wsdl_path("condorCollector.wsdl"))
        self.collector_site.resource = GatewayResource([
            Endpoint(b"", CollectorOnly(collector), self._collector_context, collector_wsdl, b"condorCollector.wsdl")])
        self.submissions = SubmissionService(self.backend, self.calls, policy, self.reactor, SubmissionSettings(
            schedd_name=self.backend.info().schedd_name, staging_root=config.state_dir / "staging",
            staging_lifetime=config.staging_lifetime, output_retention=config.output_retention,
            max_staging_areas_per_caller=config.max_staging_areas_per_caller, limits=limits), queries=self.queries)
        if config.carod.enable_carod:  # low-latency jobs over AMQP: in the background, broker or not
            from gateway.lowlatency.service import LowLatencyService  # pika takes 0.6 s of CPU to import: only here

            self.lowlatency = LowLatencyService(self.reactor, config.carod, self.submissions, self.schedd,
                                                self.collector, config.state_dir / "carod")
            ensureDeferred(self.lowlatency.start()).addErrback(
                lambda failure: log.failure("starting the low-latency (AMQP) front end", failure))
        self.monitor = Monitor(self)
        self.site.resource = self.monitor.root(GatewayResource([
            Endpoint(b"/submission/json", SoapDispatcher(json_application()), self._submission_context,
                     content_type=b"application/json", body_for=lambda op, body: json_request(op.decode(), body)),
            Endpoint(b"/submission", SoapDispatcher(soap_application()), self._submission_context,
                     PublishedWsdl(wsdl_path("submission.wsdl")), b"submission.wsdl"),
            Endpoint(b"/condorCollector", services, self._request_context, collector_wsdl, b"condorCollector.wsdl"),
            Endpoint(b"", services, self._request_context, PublishedWsdl(wsdl_path("condorSchedd.wsdl")),
                     b"condorSchedd.wsdl"),
        ]))
        for port, scheme in ((self.port, "http"), (self.ssl_port, "https")):
            if port is not None:
                address = port.getHost()
                log.info("birdbath gateway listening on {scheme}://{host}:{port}/ with the {backend} backend "
                         "(state in {state}){callers}", scheme=scheme, host=address.host, port=address.port,
                         backend=config.backend, state=config.state_dir, callers=self._callers(scheme))
        if self.named_socket is not None:
            log.info("birdbath gateway serving connections condor_shared_port passes to {path} (shared port id "
                     "{id}: clients use <host:port?sock={id}>), as on the plain port", path=config.named_socket(),
                     id=config.shared_port_id)
        if self.collector_port is not None:
            address = self.collector_port.getHost()
            log.info("condorCollector service listening on http://{host}:{port}/ (collector_port)", host=address.host,
                     port=address.port)

    def _callers(self, scheme: str) -> str:
        """How the callers of one port are identified, for the start-up line."""
        if scheme == "http":
            return "; loopback callers identified by their socket's owner, others anonymous"
        assert self.tls is not None
        ways = []
        if self.config.certificate_mapfile is not None:
            ways.append(f"client certificates ({self.tls.settings.client_certificates.value}) mapped by "
                        f"{self.config.certificate_mapfile}")
        if self.config.password_file is not None:
            ways.append(f"HTTP Basic checked against {self.config.password_file}")
        return "; callers identified by " + " or ".join(ways)

    def _request_context(self, caller: Caller) -> RequestContext:
        return RequestContext(caller=caller, schedd=self.schedd, answers=self._answers)

    def _collector_context(self, caller: Caller) -> CollectorContext:
        return CollectorContext(caller=caller, collector=self.collector, answers=self._collector_answers)

    def _contact(self) -> str:
        """The gateway's address as its daemons' ads publish it (``<host:port>``, the plain port's if it has one);
        worked out at the first query, once the ports are bound (a wildcard address costs a host-name lookup)."""
        if self._contact_text is None:
            port = self.port or self.ssl_port
            self._contact_text = contact_address(port.getHost() if port is not None else None)
        return self._contact_text

    def _submission_context(self, caller: Caller) -> SubmissionContext:
        return SubmissionContext(caller=caller, service=self.submissions)

    async def stop(self, fast: bool = False) -> None:
        """Stop listening, roll back open transactions, then release the backend (``fast``: SIGQUIT's shutdown,
        which tells the backend's services not to wait for running jobs to stop by themselves).

        The backend's threads are stopped whatever fails before, or they would keep the process alive."""
        if self.monitor is not None:
            self.monitor.stop()
        try:
            for port in (self.port, self.ssl_port, self.named_socket, self.collector_port):
                if port is not None:
                    await port.stopListening()
            if self.lowlatency is not None:
                await self.lowlatency.stop()
            if self.schedd is not None:
                await self.schedd.abort_all()
            if self.backend is not None and Capability.SERVICES in self.backend.capabilities:
                await (self.backend.stop(fast=True) if fast else self.backend.stop())
        finally:
            self.release()

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
