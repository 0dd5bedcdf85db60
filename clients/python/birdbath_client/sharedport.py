"""Reaching a gateway through HTCondor's condor_shared_port, where a host opens only port 9618.

The gateway listens on a named socket that condor_shared_port passes connections to (``use_shared_port``).  A
client connects to port 9618 and, before its first HTTP request, sends SHARED_PORT_CONNECT naming the gateway's
shared port id; from then on the connection is the gateway's, and HTTP goes over it as usual.  The request is one
CEDAR message (HTCondor's ``SharedPortClient::sendSharedPortID``): a packet header (1 = last packet, the payload's
length as 4 bytes), then the command 75 as an 8-byte big-endian integer, the id and our name as NUL-terminated
strings, the seconds we will wait (-1: no deadline) and the number of further arguments (0), both 8-byte integers.

Addresses name the id HTCondor's way, ``<host:9618?sock=birdbath>``, or as a URL, ``http://host:9618/?sock=birdbath``.
:func:`split` turns either into the plain URL and the id; :class:`SharedPortAdapter` is the ``requests`` transport
adapter (and so zeep's) that sends the request on each new connection::

    import requests, zeep
    from zeep.transports import Transport
    from birdbath_client.sharedport import SharedPortAdapter

    session = requests.Session()
    session.mount("http://submit.example.org:9618/", SharedPortAdapter("birdbath"))
    client = zeep.Client("http://submit.example.org:9618/condorSchedd.wsdl", transport=Transport(session=session))

Only plain HTTP goes through the shared port (the gateway's SSL port is a port of its own).
"""

from __future__ import annotations

import functools
import http.client
import re
import struct
import urllib.parse
import urllib.request
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection
from urllib3.connectionpool import HTTPConnectionPool

SHARED_PORT_CONNECT = 75
#: who we say we are, for condor_shared_port's log
CLIENT_NAME = "BIRDBATH_CLIENT"
#: HTCondor's rule for shared port ids (``SharedPortIdIsValid``)
VALID_ID = re.compile(r"[A-Za-z0-9._-]+")
SINFUL = re.compile(r"<(?P<address>[^?>]+)(?:\?(?P<params>[^>]*))?>")


def connect_request(shared_port_id: str, deadline: float | None = None, client_name: str = CLIENT_NAME) -> bytes:
    """The SHARED_PORT_CONNECT message for ``shared_port_id`` (``deadline``: seconds we will wait, None for none)."""
    check_id(shared_port_id)
    payload = (struct.pack("!q", SHARED_PORT_CONNECT) + shared_port_id.encode() + b"\0" + client_name.encode()
               + b"\0" + struct.pack("!qq", -1 if deadline is None else max(0, int(deadline)), 0))
    return struct.pack("!BI", 1, len(payload)) + payload


def check_id(shared_port_id: str) -> None:
    if not VALID_ID.fullmatch(shared_port_id):
        raise ValueError(f"not a shared port id (letters, digits, '.', '-', '_'): {shared_port_id!r}")


def split(address: str) -> tuple[str, str | None]:
    """``(plain URL, shared port id or None)`` of a gateway address: a URL, with ``?sock=ID`` when it is reached
    through condor_shared_port, or an HTCondor sinful string ``<host:port?sock=ID>`` (raises ValueError)."""
    sinful = SINFUL.fullmatch(address.strip())
    if sinful:
        params = dict(urllib.parse.parse_qsl(sinful["params"] or ""))
        url = f"http://{sinful['address']}/"
        _host_and_port(url, address)
        shared_port_id = params.get("sock")
    else:
        parts = urllib.parse.urlsplit(address)
        query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        ids = [value for key, value in query if key == "sock"]
        if not ids:
            return address, None
        if parts.scheme != "http":
            raise ValueError(f"only plain http:// goes through condor_shared_port, not {parts.scheme}:// ({address})")
        rest = urllib.parse.urlencode([(key, value) for key, value in query if key != "sock"])
        url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path or "/", rest, ""))
        shared_port_id = ids[-1]
    if shared_port_id is not None:
        check_id(shared_port_id)
    return url, shared_port_id


def _host_and_port(url: str, address: str) -> None:
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None:
        raise ValueError(f"a sinful string needs a host and a port: {address}")


class SharedPortConnection(HTTPConnection):
    """urllib3's HTTP connection, with the connect request sent as soon as the socket is connected."""

    shared_port_id = ""

    def _new_conn(self) -> Any:
        sock = super()._new_conn()
        sock.sendall(connect_request(self.shared_port_id, self.timeout if isinstance(self.timeout, (int, float))
                                     else None))
        return sock


class SharedPortAdapter(HTTPAdapter):
    """A ``requests`` transport adapter for the gateway behind condor_shared_port with this id: mount it on the
    gateway's URL (``session.mount("http://host:9618/", SharedPortAdapter("birdbath"))``)."""

    __attrs__ = [*HTTPAdapter.__attrs__, "shared_port_id"]

    def __init__(self, shared_port_id: str, **kwargs: Any) -> None:
        check_id(shared_port_id)
        self.shared_port_id = shared_port_id
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        connection = type("SharedPortConnection", (SharedPortConnection,), {"shared_port_id": self.shared_port_id})
        pool = type("SharedPortPool", (HTTPConnectionPool,), {"ConnectionCls": connection})
        self.poolmanager.pool_classes_by_scheme = {"http": pool}



class _SharedPortHTTPConnection(http.client.HTTPConnection):
    """The standard library's HTTP connection, with the connect request sent once connected."""

    def __init__(self, *args: Any, shared_port_id: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shared_port_id = shared_port_id

    def connect(self) -> None:
        super().connect()
        timeout = self.timeout if isinstance(self.timeout, (int, float)) else None
        self.sock.sendall(connect_request(self.shared_port_id, timeout))


class SharedPortHandler(urllib.request.HTTPHandler):
    """A ``urllib`` handler for the gateway behind condor_shared_port with this id
    (``urllib.request.build_opener(SharedPortHandler("birdbath"))``)."""

    def __init__(self, shared_port_id: str) -> None:
        check_id(shared_port_id)
        super().__init__()
        self.shared_port_id = shared_port_id

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_SharedPortHTTPConnection, shared_port_id=self.shared_port_id), req)
