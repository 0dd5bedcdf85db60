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
from gateway.http import GatewayResource, GatewaySite
from gateway.soap.application import schedd_application
from gateway.soap.context import RequestContext
from gateway.soap.dispatch import SoapDispatcher
from gateway.soap.wsdl import PublishedWsdl, wsdl_path

log = Logger()


class Gateway:
    """One gateway: a backend behind the Birdbath core, published as a twisted.web site."""

    def __init__(self, config: GatewayConfig, reactor: Any, backend: ScheddBackend | None = None) -> None:
        self.config = config
        self.reactor = reactor
        self.backend = backend or registry.create(config.backend, config.state_dir,
                                                  config.backend_options.get(config.backend))
        self.calls = BlockingCaller(reactor, getattr(self.backend, "threads", 1), config.backend)
        start = getattr(self.backend, "start", None)
        if start is not None:  # backends that run services in the gateway (the local executor) start here
            start(reactor, self.calls)
        policy = config.policy()
        self.schedd = BirdbathSchedd(self.backend, self.calls, policy, reactor, config.schedd_settings())
        dispatcher = SoapDispatcher(schedd_application())
        self._answers = dispatcher.ad_answers()
        root = GatewayResource(dispatcher, PublishedWsdl(wsdl_path("condorSchedd.wsdl")), "condorSchedd.wsdl",
                               self._request_context)
        self.site = GatewaySite(root, max_body=config.max_request_bytes, policy=policy)
        self.port: IListeningPort | None = None

    def _request_context(self, caller: Caller) -> RequestContext:
        return RequestContext(caller=caller, schedd=self.schedd, answers=self._answers)

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
