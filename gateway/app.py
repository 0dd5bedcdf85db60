"""Assembling a running gateway from its configuration: backend, core, SOAP service, HTTP site."""

from __future__ import annotations

from typing import Any

from twisted.internet.interfaces import IListeningPort
from twisted.logger import Logger

from backends import registry
from backends.interface import ScheddBackend
from gateway.config import GatewayConfig
from gateway.core.auth import Caller
from gateway.core.schedd import BirdbathSchedd
from gateway.core.threads import BlockingCaller
from gateway.core.submissions import SubmissionService, SubmissionSettings
from gateway.http import Endpoint, GatewayResource, GatewaySite
from gateway.soap.application import schedd_application
from gateway.soap.context import RequestContext
from gateway.soap.dispatch import SoapDispatcher
from gateway.soap.submission import SubmissionContext, json_application, json_request, soap_application
from gateway.soap.wsdl import PublishedWsdl, wsdl_path

log = Logger()


class Gateway:
    """One gateway: a backend behind the Birdbath core, published as a twisted.web site."""

    def __init__(self, config: GatewayConfig, reactor: Any, backend: ScheddBackend | None = None) -> None:
        self.config = config
        self.reactor = reactor
        self.backend = backend or registry.create(config.backend, config.state_dir,
                                                  config.backend_options.get(config.backend))
        self.calls = BlockingCaller(reactor, getattr(self.backend, "threads", 1), config.backend,
                                    getattr(self.backend, "call_timeout", None))
        start = getattr(self.backend, "start", None)
        if start is not None:  # backends that run services in the gateway (the local executor) start here
            start(reactor, self.calls)
        policy = config.policy()
        self.schedd = BirdbathSchedd(self.backend, self.calls, policy, reactor, config.schedd_settings())
        dispatcher = SoapDispatcher(schedd_application())
        self._answers = dispatcher.ad_answers()
        self.submissions = SubmissionService(self.backend, self.calls, policy, reactor, SubmissionSettings(
            schedd_name=self.backend.info().schedd_name, staging_root=config.state_dir / "staging",
            staging_lifetime=config.staging_lifetime, output_retention=config.output_retention))
        root = GatewayResource([
            Endpoint(b"/submission/json", SoapDispatcher(json_application()), self._submission_context,
                     content_type=b"application/json", body_for=lambda op, body: json_request(op.decode(), body)),
            Endpoint(b"/submission", SoapDispatcher(soap_application()), self._submission_context,
                     PublishedWsdl(wsdl_path("submission.wsdl")), b"submission.wsdl"),
            Endpoint(b"", dispatcher, self._request_context, PublishedWsdl(wsdl_path("condorSchedd.wsdl")),
                     b"condorSchedd.wsdl"),
        ])
        self.site = GatewaySite(root, max_body=config.max_request_bytes, policy=policy)
        self.port: IListeningPort | None = None

    def _request_context(self, caller: Caller) -> RequestContext:
        return RequestContext(caller=caller, schedd=self.schedd, answers=self._answers)

    def _submission_context(self, caller: Caller) -> SubmissionContext:
        return SubmissionContext(caller=caller, service=self.submissions)

    def listen(self) -> IListeningPort:
        self.port = self.reactor.listenTCP(self.config.port, self.site, interface=self.config.listen)
        address = self.port.getHost()
        log.info("birdbath gateway listening on http://{host}:{port}/ with the {backend} backend "
                 "(state in {state})", host=address.host, port=address.port, backend=self.config.backend,
                 state=self.config.state_dir)
        return self.port

    async def stop(self) -> None:
        """Stop listening, roll back open transactions, then release the backend."""
        if self.port is not None:
            await self.port.stopListening()
        await self.schedd.abort_all()
        stop = getattr(self.backend, "stop", None)
        if stop is not None:
            await stop()
        self.calls.stop()
        self.backend.close()
