"""``birdbath-gateway``: run the gateway in the foreground until interrupted."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gateway import __version__


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="birdbath-gateway",
        description="Serve HTCondor's Birdbath SOAP API (condorSchedd) in front of a schedd backend.")
    parser.add_argument("--config", type=Path, help="TOML configuration file (flags override it)")
    parser.add_argument("--listen", metavar="ADDR", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, metavar="N", help="TCP port (default 1984; 0 picks a free one)")
    parser.add_argument("--state-dir", type=Path, metavar="DIR",
                        help="where the backend keeps its queue and spool (default ~/.local/state/birdbath-gateway)")
    parser.add_argument("--backend", metavar="NAME", help="schedd backend (default local)")
    parser.add_argument("--port-file", type=Path, metavar="FILE",
                        help="write the port actually listened on to FILE once ready (useful with --port 0)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("CONDOR_CONFIG", "/dev/null")  # the HTCondor libraries need no pool configuration
    args = parse_args(argv)

    from twisted.internet import reactor
    from twisted.internet.defer import Deferred
    from twisted.logger import globalLogBeginner, textFileLogObserver

    from backends.interface import BackendError
    from backends.registry import UnknownBackend
    from gateway.app import Gateway
    from gateway.config import ConfigError, load

    try:
        config = load(args.config)
        for name in ("listen", "port", "state_dir", "backend"):
            if getattr(args, name) is not None:
                setattr(config, name, getattr(args, name))
        globalLogBeginner.beginLoggingTo([textFileLogObserver(sys.stderr)], redirectStandardIO=False)
        gateway = Gateway(config, reactor)
        port = gateway.listen()
    except (ConfigError, UnknownBackend, BackendError, OSError) as exc:
        print(f"birdbath-gateway: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # e.g. the port is taken (CannotListenError)
        print(f"birdbath-gateway: cannot start: {exc}", file=sys.stderr)
        return 1
    if args.port_file:
        args.port_file.write_text(f"{port.getHost().port}\n")
    reactor.addSystemEventTrigger("before", "shutdown", lambda: Deferred.fromCoroutine(gateway.stop()))
    reactor.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
