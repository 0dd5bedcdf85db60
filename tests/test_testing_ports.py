"""HeldPort: a port named to a server before it starts, that no other socket can take meanwhile (issue 44: the test
broker's ports were looked for below the kernel's ephemeral range, and found none where that range is 1024-65535)."""

from __future__ import annotations

import contextlib
import errno
import socket

import pytest

from gateway.testing_ports import HeldPort


def listener(family: int, address: str, port: int) -> socket.socket:
    """A server's listening socket, bound as Twisted and Erlang bind theirs (SO_REUSEADDR)."""
    server = socket.socket(family, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        server.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    server.bind((address, port))
    server.listen()
    return server


def test_the_kernel_hands_a_held_port_to_no_port_zero_socket():
    """Without holding, 3,000 port-0 binds would land on some of 300 ports (about 14 times over 64,000 ports)."""
    with contextlib.ExitStack() as stack:
        held = {stack.enter_context(HeldPort()).port for _ in range(300)}
        assert len(held) == 300
        handed = set()
        for reuse in (0, 1) * 1500:
            with socket.socket() as other:
                other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, reuse)
                other.bind(("0.0.0.0", 0))
                handed.add(other.getsockname()[1])
        assert not handed & held


def test_a_held_port_refuses_a_plain_bind_and_takes_a_server_that_reuses_the_address():
    with HeldPort() as held:
        with socket.socket() as plain, pytest.raises(OSError) as refused:
            plain.bind(("127.0.0.1", held.port))
        assert refused.value.errno == errno.EADDRINUSE
        servers = [listener(socket.AF_INET, "0.0.0.0", held.port)]
        if socket.has_ipv6:
            servers.append(listener(socket.AF_INET6, "::", held.port))
        try:
            with socket.create_connection(("127.0.0.1", held.port), timeout=10):
                accepted, _ = servers[0].accept()
            accepted.close()  # (after the client: the wait after a close is the client's, not on this port)
        finally:
            for server in servers:
                server.close()
        with socket.socket() as plain, pytest.raises(OSError):  # (held still, once the server is gone)
            plain.bind(("127.0.0.1", held.port))
    with socket.socket() as plain:  # let go
        plain.bind(("127.0.0.1", held.port))
