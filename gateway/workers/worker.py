"""A worker process (``workers = N``): serves the connections the core passes it — HTTP, TLS, SOAP and JSON,
identification and access checks, the request log and the requests' metrics — and calls the core's services over its link for everything
else (:mod:`gateway.workers.link`).

It reads the gateway's configuration from the same command line as the core (``--`` then the gateway's flags) and
ends when its link ends: the core is gone, and with it the gateway.  Started by :mod:`gateway.workers.parent`:
``python -m gateway.workers.worker --link-fd 3 --changes-fd 4 --index N -- <the gateway's flags>``, descriptor 4
the page where the core publishes the backend's change number (:mod:`gateway.workers.changenumber`).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from dataclasses import replace
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionLost
from twisted.internet.interfaces import IFileDescriptorReceiver
from twisted.internet.protocol import Factory
from twisted.logger import Logger, globalLogPublisher
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory
from twisted.python.failure import Failure
from zope.interface import implementer

from gateway.core.auth import Caller
from gateway.core.grants import Begins
from gateway.core.services import CONTRACTS
from gateway.identity.peers import PeerOwner
from gateway.monitoring.events import RequestCounter
from gateway.monitoring.processes import own_figures
from gateway.workers.changenumber import PublishedNumber
from gateway.workers.inputs import EXIT_REFUSED, InputsChanged, check_configuration_file, check_inputs, inputs_digest
from gateway.workers.jobview import ViewedSchedd
from gateway.workers.link import CallingLink, Message, RemoteObject
from gateway.workers.parent import Front

log = Logger(namespace="birdbath.workers")

#: the core's services a worker's front ends call: those declared (:mod:`gateway.core.services`)
SERVICES = tuple(CONTRACTS)


class _Tracked(ProtocolWrapper):
    @property
    def peer_owner(self) -> PeerOwner | None:
        """What the kernel said of the client as the core admitted it (:func:`gateway.connections.admitted_owner`)."""
        return self.factory.owner

    def connectionLost(self, reason: Failure) -> None:  # type: ignore[override]
        super().connectionLost(reason)
        self.factory.closed()


class Tracked(WrappingFactory):
    """One passed connection's factory: tells the core when the connection is closed."""

    protocol = _Tracked
    noisy = False

    def __init__(self, wrapped: Factory, link: WorkerLink, connection_id: int, owner: PeerOwner | None) -> None:
        super().__init__(wrapped)
        self.link = link
        self.connection_id = connection_id
        self.owner = owner

    def closed(self) -> None:
        if self.link.alive:
            self.link.send(Message.CLOSED, self.connection_id)


@implementer(IFileDescriptorReceiver)
class WorkerLink(CallingLink):
    """The worker's end of its link: calls into the core, and the connections the core passes."""

    def __init__(self, reactor: Any, factories: dict[Front, Factory], index: int = 0) -> None:
        super().__init__()
        self.reactor = reactor
        self.factories = factories
        self.index = index
        #: this worker's requests, counted here (a log observer) and told the core when /metrics is scraped
        self.requests = RequestCounter()
        self._descriptors: list[int] = []
        self.services = {name: RemoteObject(self, name) for name in SERVICES}
        #: this worker's beginTransaction, from the ids and allowances the core grants it (set by :func:`serve`)
        self.begins: Begins | None = None

    def handle_constants(self, values: dict[str, dict[str, Any]]) -> None:
        for service, constants in values.items():
            self.services[service].set_constants(constants)

    # -- transactions begun here (gateway.core.grants.Channel, for this worker's Begins) --------------------------
    def ids(self) -> Deferred[list[int]]:
        return self.request(Message.IDS)

    def allowance(self, caller: Caller) -> Deferred[int]:
        return self.request(Message.ALLOW, caller)

    def begun(self, txn_id: int, caller: Caller, duration: int) -> None:
        if not self.alive:  # (the client is not answered an id the core never heard of)
            raise ConnectionLost("the gateway's core is gone")
        self.send(Message.BEGUN, txn_id, caller, duration)  # (the core opens it when it reads this)

    def handle_sync(self, sync_id: int) -> None:
        self.send(Message.SYNCED, sync_id)

    def handle_reclaim(self, reclaim_id: int, caller: Caller) -> None:
        self.send(Message.RECLAIMED, reclaim_id, self.begins.give_back(caller))

    def handle_scrape(self, scrape_id: int) -> None:
        self.send(Message.FIGURES, scrape_id, own_figures(self.index, self.requests))

    def fileDescriptorReceived(self, descriptor: int) -> None:
        self._descriptors.append(descriptor)

    def handle_connection(self, connection_id: int, front: str, family: int, owner: PeerOwner | None) -> None:
        descriptor = self._descriptors.pop(0)
        try:
            self.reactor.adoptStreamConnection(descriptor, family,
                                               Tracked(self.factories[Front(front)], self, connection_id, owner))
        except OSError as exc:  # the client went away while its socket was passed
            log.info("a connection passed by the core could not be served: {reason}", reason=exc)
            self.send(Message.CLOSED, connection_id)
        finally:
            os.close(descriptor)

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        super().connectionLost(reason)
        for descriptor in self._descriptors:
            os.close(descriptor)
        if self.reactor.running:
            log.info("the gateway's core is gone: this worker stops")
            self.reactor.stop()


class RemoteMonitor:
    """The monitoring pages in a worker: /metrics and /readyz are answered by the core's Monitor."""

    def __init__(self, core: RemoteObject, policy: Any) -> None:
        self.core = core
        self.policy = policy

    def scrape(self) -> Any:
        return self.core.scrape()

    def problems(self) -> Any:
        return self.core.problems()

    def stop(self) -> None:
        """Nothing of its own to stop."""


def serve(reactor: Any, link_fd: int, index: int, argv: list[str], published: PublishedNumber | None = None,
          digest: str | None = None) -> None:
    """Serve what the core passes; raises :class:`~gateway.workers.inputs.InputsChanged` when what it reads is not
    what the core read (``digest``), and whatever else stops its start."""
    from gateway import logging, memory
    from gateway.app import Gateway
    from gateway.cli import checked, parse_args, settings

    args = parse_args(argv)
    if digest is not None:  # (before parsing it: an edit that made it invalid is an edit, not a fault to retry)
        check_configuration_file(args.config, digest)
    config = settings(args)
    if digest is not None:  # (before the files it names are read, by its checks and its front ends: one edited
        check_inputs(inputs_digest(config), digest)  # invalid would raise there, as a fault to retry)
    checked(config, args)
    logging.begin(logging.open_log(config.log_file), config.log_level, f"worker {index}")
    memory.install(reactor)  # as the core: HTCondor's configuration loaded (or every freed ClassAd leaks), SIGUSR1
    gateway = Gateway(replace(config, workers=0), reactor)  # (this process's own gateway starts no workers and
    # gives none a digest: the pool and what the workers check are the core's)
    link = WorkerLink(reactor, {}, index)
    link.begins = Begins(link, config.policy(), config.schedd_settings().max_transaction_duration)
    services = link.services
    services["schedd"] = ViewedSchedd(link, "schedd", reactor, config.query_settings(), config.policy(),
                                      published, begins=link.begins)  # (before the constants)
    if gateway.identification.throttle is not None:  # failed logins are counted by the core, across workers
        gateway.identification.throttle = services["throttle"]
    gateway.serve(services["schedd"], services["collector"], services["submissions"], services["described"],
                  RemoteMonitor(services["monitor"], config.policy()))
    link.factories.update({front: gateway.protocol_factory(front) for front in Front
                           if front is not Front.TLS or gateway.tls is not None})
    for factory in link.factories.values():  # as a port starts its factory (the sites' access log is opened there)
        factory.doStart()
    reactor.adoptStreamConnection(link_fd, socket.AF_UNIX, Factory.forProtocol(lambda: link))
    os.close(link_fd)
    globalLogPublisher.addObserver(link.requests)
    link.send(Message.READY)
    log.info("worker {index} (pid {pid}) ready", index=index, pid=os.getpid())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gateway.workers.worker")
    parser.add_argument("--link-fd", type=int, required=True)
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--changes-fd", type=int)
    parser.add_argument("--inputs-digest", help="what the core read (gateway.workers.inputs): refuse to serve else")
    parser.add_argument("gateway_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    os.environ.setdefault("CONDOR_CONFIG", "/dev/null")
    from twisted.internet import reactor

    gateway_args = args.gateway_args[1:] if args.gateway_args[:1] == ["--"] else args.gateway_args
    failed: list[BaseException] = []

    def start() -> None:
        try:
            published = None if args.changes_fd is None else PublishedNumber.attach(args.changes_fd)
            serve(reactor, args.link_fd, args.index, gateway_args, published, args.inputs_digest)
        except BaseException as exc:  # noqa: BLE001 - said on stderr; the core starts another
            failed.append(exc)
            reactor.stop()

    reactor.callWhenRunning(start)
    reactor.run()
    if failed:
        print(f"birdbath-gateway worker {args.index}: cannot start: {failed[0]}", file=sys.stderr)
        return EXIT_REFUSED if isinstance(failed[0], InputsChanged) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
