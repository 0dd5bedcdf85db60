"""Reaching a gateway on this machine through its local Unix socket, where the kernel tells it who we are.

A gateway makes ``birdbath.sock`` in its state directory (its ``local_socket`` knob) and knows each client on it
by the uid the kernel records for the connection (``SO_PEERCRED``), the way HTCondor's local tools prove who they
are through the file system: no password, no certificate.  Its address here is ``unix:/path/to/birdbath.sock``.

:func:`default_address` is where the ``birdbath`` command and ``Schedd()`` go when given no address: the socket of
a gateway of one's own (``$XDG_STATE_HOME/birdbath-gateway``, else ``~/.local/state/birdbath-gateway``), else the
system gateway's (``/var/lib/birdbath-gateway``), else ``http://127.0.0.1:1984/``.  :class:`LocalSocketAdapter` is
the ``requests`` transport adapter (and so zeep's)::

    import requests, zeep
    from zeep.transports import Transport
    from birdbath_client.localsocket import LOCAL_URL, LocalSocketAdapter

    session = requests.Session()
    session.mount(LOCAL_URL, LocalSocketAdapter("/var/lib/birdbath-gateway/birdbath.sock"))
    client = zeep.Client(LOCAL_URL + "condorSchedd.wsdl", transport=Transport(session=session))
"""

from __future__ import annotations

import functools
import http.client
import os
import socket
import stat
import urllib.request
from pathlib import Path
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection
from urllib3.connectionpool import HTTPConnectionPool

#: how an address names a local socket: ``unix:/var/lib/birdbath-gateway/birdbath.sock``
SCHEME = "unix:"
#: the URL requests over a local socket are made to (the host names nothing: the socket is the way there)
LOCAL_URL = "http://localhost/"
#: the socket's name in a gateway's state directory
SOCKET_NAME = "birdbath.sock"
#: the system gateway's socket (the default state directory of a gateway run by root)
SYSTEM_SOCKET = Path("/var/lib/birdbath-gateway") / SOCKET_NAME
#: the gateway's address when no local socket is found
TCP_DEFAULT = "http://127.0.0.1:1984/"


def own_socket() -> Path:
    """The socket of a gateway the user runs (its default state directory)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "birdbath-gateway" / SOCKET_NAME


def _is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(path.stat().st_mode)
    except OSError:
        return False


def default_address() -> str:
    """The gateway on this machine: one's own gateway's socket, the system gateway's, else the plain port."""
    for path in (own_socket(), SYSTEM_SOCKET):
        if _is_socket(path):
            return SCHEME + str(path)
    return TCP_DEFAULT


def socket_of(address: str) -> Path | None:
    """The socket a ``unix:PATH`` address names (None for any other address; raises ValueError without a path)."""
    if not address.startswith(SCHEME):
        return None
    path = address[len(SCHEME):]
    path = "/" + path.lstrip("/") if path.startswith("//") else path  # unix:///path as well as unix:/path
    if not path:
        raise ValueError(f"a local socket address needs a path: {address!r}")
    return Path(path)


def resolve(address: str | None) -> tuple[str, str | None, Path | None]:
    """``(URL, shared port id, local socket)`` of a gateway address (None: :func:`default_address`): a local
    socket's requests go to :data:`LOCAL_URL`, others to the URL (raises ValueError)."""
    from .sharedport import split

    address = address or default_address()
    local = socket_of(address)
    if local is not None:
        return LOCAL_URL, None, local
    url, shared_port_id = split(address)
    return (url if url.endswith("/") else url + "/"), shared_port_id, None


def _connected(path: Path, timeout: Any) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if isinstance(timeout, (int, float)):
        sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        raise
    return sock


class LocalSocketConnection(HTTPConnection):
    """urllib3's HTTP connection over the local socket instead of TCP."""

    socket_path = Path()

    def _new_conn(self) -> socket.socket:
        return _connected(self.socket_path, self.timeout)


class LocalSocketAdapter(HTTPAdapter):
    """A ``requests`` transport adapter sending every request to the gateway's local socket at ``path``: mount it
    on :data:`LOCAL_URL`."""

    __attrs__ = [*HTTPAdapter.__attrs__, "socket_path"]

    def __init__(self, path: str | Path, **kwargs: Any) -> None:
        self.socket_path = Path(path)
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        connection = type("LocalSocketConnection", (LocalSocketConnection,), {"socket_path": self.socket_path})
        pool = type("LocalSocketPool", (HTTPConnectionPool,), {"ConnectionCls": connection})
        self.poolmanager.pool_classes_by_scheme = {"http": pool}


class _LocalSocketHTTPConnection(http.client.HTTPConnection):
    """The standard library's HTTP connection over the local socket."""

    def __init__(self, *args: Any, socket_path: Path, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.socket_path = socket_path

    def connect(self) -> None:
        self.sock = _connected(self.socket_path, self.timeout)


class LocalSocketHandler(urllib.request.HTTPHandler):
    """A ``urllib`` handler sending every plain HTTP request to the gateway's local socket at ``path``."""

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.socket_path = Path(path)

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_LocalSocketHTTPConnection, socket_path=self.socket_path), req)
