"""``birdbath-gateway``: run the gateway in the foreground until interrupted.

A start that cannot succeed (bad configuration, unusable state directory or log file, port taken, backend that
refuses to start) ends the process at once with one line on stderr and a non-zero status: 1 when the port cannot be
bound or something unexpected fails, 2 for everything else.  The checks run in an order that creates nothing
before the last one that can fail early: the configuration and the paths are checked, then the port is bound, and
only then does the backend create its state.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway import __version__
from gateway.logging import LEVELS

if TYPE_CHECKING:  # pragma: no cover
    from gateway.app import Gateway
    from gateway.config import GatewayConfig

#: exit statuses of a refused start
EXIT_CONFIG = 2
EXIT_START = 1

#: the flags that override the configuration file's settings: flag's name -> setting's name
OVERRIDES = {"listen": "listen", "port": "port", "state_dir": "state_dir", "backend": "backend",
             "log_file": "log_file", "log_level": "log_level", "ssl_port": "soap_ssl_port",
             "ssl_keyfile": "soap_ssl_server_keyfile", "ssl_ca_file": "soap_ssl_ca_file",
             "master_keepalive": "master_keepalive", "workers": "workers",
             "lone_connection_in_core": "lone_connection_in_core"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="birdbath-gateway",
        description="Serve HTCondor's Birdbath SOAP API (condorSchedd) in front of a schedd backend.")
    parser.add_argument("--config", type=Path, help="TOML configuration file (flags override it)")
    parser.add_argument("--listen", metavar="ADDR", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, metavar="N",
                        help="plain HTTP port (default 1984; 0 switches it off, auto picks a free one)")
    parser.add_argument("--state-dir", type=Path, metavar="DIR",
                        help="where the backend keeps its queue and spool (default ~/.local/state/birdbath-gateway)")
    parser.add_argument("--backend", metavar="NAME", help="schedd backend (default local)")
    parser.add_argument("--port-file", type=Path, metavar="FILE",
                        help="write the plain port actually listened on to FILE once ready (useful with --port auto)")
    parser.add_argument("--ssl-port", type=int, metavar="N",
                        help="serve HTTPS on this port too (enable_soap_ssl; soap_ssl_port, 0 picks a free one)")
    parser.add_argument("--ssl-keyfile", type=Path, metavar="PEM",
                        help="the server's certificate, chain and private key (soap_ssl_server_keyfile)")
    parser.add_argument("--ssl-ca-file", type=Path, metavar="PEM",
                        help="the authorities client certificates must chain to (soap_ssl_ca_file)")
    parser.add_argument("--ssl-port-file", type=Path, metavar="FILE",
                        help="write the SSL port actually listened on to FILE once ready")
    parser.add_argument("--log-file", type=Path, metavar="PATH", help="append the log to PATH (default stderr)")
    parser.add_argument("--log-level", choices=list(LEVELS), help="least severe level logged (default info)")
    parser.add_argument("--master-keepalive", metavar="HOST:PORT",
                        help="send condor_master's DC_CHILDALIVE datagram to HOST:PORT every not_responding_timeout/3 "
                             "seconds (master_keepalive; under a master's CONDOR_INHERIT it is sent without this)")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="worker processes serving the front ends around the core process (workers; 0: one "
                             "process does everything)")
    parser.add_argument("--lone-connection-in-core", type=_yes_no, metavar="yes|no",
                        help="with workers: serve a connection that arrives while no other is open in the core "
                             "process itself (lone_connection_in_core; default yes)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser.parse_args(argv)


def _yes_no(text: str) -> bool:
    if text not in ("yes", "no"):
        raise argparse.ArgumentTypeError(f"yes or no, not {text!r}")
    return text == "yes"


def _port(text: str) -> int | str:
    from gateway.config import parse_port

    try:
        return parse_port(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number, 0 or auto: {text!r}") from None


def configure(args: argparse.Namespace) -> "GatewayConfig":
    """The configuration file with the flags applied, checked (raises ConfigError; creates nothing)."""
    return checked(settings(args), args)


def settings(args: argparse.Namespace) -> "GatewayConfig":
    """The configuration file with the flags applied, not checked yet (raises ConfigError for a file that cannot be
    read as TOML settings)."""
    from gateway.config import load

    config = load(args.config)
    for flag, setting in OVERRIDES.items():
        if getattr(args, flag) is not None:
            setattr(config, setting, getattr(args, flag))
    if args.ssl_port is not None:
        config.enable_soap_ssl = True
    # the backend runs jobs from directories of their own: a relative state directory would name another place
    config.state_dir = config.state_dir.absolute()
    return config


def checked(config: "GatewayConfig", args: argparse.Namespace) -> "GatewayConfig":
    """``config``, once checked (raises ConfigError; creates nothing): the files it names are read here."""
    from gateway.config import ConfigError, validate

    validate(config)
    if args.port_file and config.plain_port is None:
        raise ConfigError("--port-file names the plain port's file, but port = 0 switches the plain port off")
    if args.ssl_port_file and not config.enable_soap_ssl:
        raise ConfigError("--ssl-port-file names the SSL port's file, but enable_soap_ssl is false")
    return config


def refuse(reason: object, status: int) -> int:
    """Say on one line why the gateway does not start; the exit status to end with."""
    print(f"birdbath-gateway: {' '.join(str(reason).split())}", file=sys.stderr)
    return status


def refuse_start(exc: Exception) -> int:
    """A backend that refuses to start (its settings, its state, a pool it cannot reach) or a file that cannot be
    written is a matter of configuration, said as it is; anything else is a failure to start."""
    from backends.interface import BackendError

    if isinstance(exc, (BackendError, OSError)):
        return refuse(exc, EXIT_CONFIG)
    return refuse(f"cannot start: {exc}", EXIT_START)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("CONDOR_CONFIG", "/dev/null")  # the HTCondor libraries need no pool configuration
    args = parse_args(argv)

    from twisted.internet import reactor

    from gateway import logging, memory
    from gateway.app import Gateway
    from gateway.config import ConfigError
    from gateway.connections import log_descriptor_limit, raise_descriptor_limit
    from gateway.daemon.service import FastShutdown, KeepAliveService, keepalive_for
    from gateway.frontend import NoFrontEnd
    from gateway.lifecycle import InOrder
    from gateway.stack import ensure_main_stack, log_stack_warning

    try:
        config = configure(args)
    except ConfigError as exc:
        return refuse(exc, EXIT_CONFIG)
    stack_warning = ensure_main_stack(config.expression_limits().stack_bytes())
    descriptors = raise_descriptor_limit(config.max_file_descriptors)
    try:
        gateway = Gateway(config, reactor, command_line=sys.argv[1:] if argv is None else argv)
    except (ConfigError, NoFrontEnd) as exc:  # a file of the SSL port changed since it was checked; an install
        return refuse(exc, EXIT_CONFIG)  # whose front ends cannot be found
    daemon = InOrder()  # the gateway, then the keepalive: started in order, stopped in reverse at shutdown
    gateway.setServiceParent(daemon)
    try:
        daemon.privilegedStartService()  # the ports
    except Exception as exc:  # CannotListenError: the port is taken, or the address is not ours
        return refuse(exc, EXIT_START)
    try:
        logging.begin(logging.open_log(config.log_file), config.log_level, "core" if config.workers else None)
    except OSError as exc:
        return refuse(f"cannot open the log file: {exc}", EXIT_CONFIG)
    if stack_warning:
        log_stack_warning(stack_warning)
    log_descriptor_limit(descriptors)
    memory.install(reactor)
    try:
        daemon.startService()
    except Exception as exc:
        gateway.release()  # the backend's threads would keep the process alive
        return refuse_start(exc)
    outcome = [0]  # (the exit status, once the reactor stops)
    reactor.callWhenRunning(write_port_files_once_serving, args, gateway, reactor, outcome)
    shutdown = FastShutdown(reactor)
    shutdown.install()
    gateway.fast_shutdown = lambda: shutdown.fast
    keepalive = keepalive_for(reactor, config.master_keepalive, config.not_responding_timeout)
    if keepalive is not None:
        KeepAliveService(keepalive).setServiceParent(daemon)  # (the daemon runs: it starts now)
    reactor.addSystemEventTrigger("before", "shutdown", daemon.stopService)
    reactor.run()
    return outcome[0]


def write_port_files_once_serving(args: argparse.Namespace, gateway: Gateway, reactor: Any,
                                  outcome: list[int]) -> None:
    """:func:`write_port_files` once the gateway serves (``Gateway.serving``; called once the reactor runs, which a
    refusal stops)."""
    from twisted.logger import Logger

    serving = gateway.serving().addCallback(lambda _: write_port_files(args, gateway, reactor, outcome))
    serving.addErrback(lambda failure: Logger().failure("writing the port files failed", failure))


def write_port_files(args: argparse.Namespace, gateway: Gateway, reactor: Any, outcome: list[int]) -> None:
    """Write the ports listened on to the files named (``--port-file``, ``--ssl-port-file``) once the gateway serves
    (none once it is stopping: its ports are closed); one that cannot be written stops the gateway, as a
    configuration it cannot follow (``outcome``: the exit status)."""
    if not gateway.running:
        return
    try:
        for port_file, port in ((args.port_file, gateway.port), (args.ssl_port_file, gateway.ssl_port)):
            if port_file and port is not None:
                port_file.write_text(f"{port.getHost().port}\n")
    except OSError as exc:
        outcome[0] = refuse_start(exc)
        reactor.stop()


if __name__ == "__main__":
    sys.exit(main())
