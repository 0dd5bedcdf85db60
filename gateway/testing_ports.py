"""Ports for servers a test starts on a port it must name in advance (a broker, a gateway's second port).

Probing for a free port and closing the probe leaves a gap: until the server binds, the kernel may hand the port to
any socket of the tests running beside it (an outgoing connection, a port-0 listener), and where the kernel's
ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``) is ``1024 65535`` no port is outside that range.  A
:class:`HeldPort` has no gap: the port stays bound, never listening, for as long as it is held.  The kernel gives a
bound port to no other socket, while a server that binds with ``SO_REUSEADDR`` (Twisted's ports, Erlang's listeners
and epmd do) binds and listens on it all the same (a socket that is not listening is no conflict between two sockets
that both reuse the address).
"""

from __future__ import annotations

import socket
from types import TracebackType
from typing import Self


class HeldPort:
    """A TCP port the kernel chose, held on every address (IPv6 and IPv4 alike where the host has IPv6) until
    :meth:`close`; ``port`` is its number.  Hold it until the server that uses it is gone: a server stopped and
    started again finds it still free."""

    def __init__(self) -> None:
        self._socket = _bound_socket()
        self.port: int = self._socket.getsockname()[1]

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"HeldPort({self.port})"


def _bound_socket() -> socket.socket:
    """A socket bound to a port the kernel picks, with SO_REUSEADDR and not listening: on ``::`` taking IPv4 too,
    or on ``0.0.0.0`` where the host has no IPv6."""
    for family, address in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            bound = socket.socket(family, socket.SOCK_STREAM)
        except OSError:  # (no IPv6 on this host)
            continue
        try:
            if family == socket.AF_INET6:
                bound.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            bound.bind((address, 0))
            return bound
        except OSError:
            bound.close()
            if family == socket.AF_INET:
                raise
    raise OSError("this host makes no TCP socket")
