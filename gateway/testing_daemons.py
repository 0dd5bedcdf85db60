"""Stand-ins for the HTCondor daemons the gateway works with as a daemon of a pool, written from HTCondor's source
since none can run here; both test suites use them (the client library's too), like :mod:`gateway.testing`.

:class:`SharedPortStandIn`, for condor_shared_port.  What it does, and where HTCondor does it:
  - accepts TCP connections on a loopback port (condor_shared_port's 9618);
  - reads one CEDAR message off each, without reading a byte further (``DaemonCommandProtocol`` reads the command,
    ``SharedPortServer::HandleConnectRequest`` the rest): a packet header (end flag, 4-byte length), then the
    command SHARED_PORT_CONNECT (75) as an 8-byte integer, the target's shared port id and the client's name as
    NUL-terminated strings (at most 1023 bytes each: it reads into 1024-byte buffers), the deadline and the count
    of further arguments (0..100, each a string it ignores) as 8-byte integers;
  - refuses an id with anything but letters, digits, '.', '-' and '_' (``SharedPortIdIsValid``);
  - connects to the Unix socket named that id in its daemon socket directory, sends SHARED_PORT_PASS_SOCK (76) as
    a CEDAR message, then one byte (0) carrying the client's socket as SCM_RIGHTS, expects no answer and closes
    both its end of the named socket and its copy of the client's socket (``SharedPortState::HandleHeader``,
    ``HandleFD``, ``HandleResp``);
  - with ``http_forward_id``, passes connections that start like HTTP (``LooksLikeHttpRequest``: "GET ", "POST "
    ...) to that id without reading anything off them (``SHARED_PORT_HTTP_FORWARDING_ID``; it peeks at 13 bytes);
  - on any failure closes the client's connection, which is all condor_shared_port does.

Not modelled: its security layer for commands other than SHARED_PORT_CONNECT, the abstract-namespace socket it tries
first on Linux (``CONDOR_PRIVATE_SHARED_PORT_COOKIE``, falling back to the directory on ENOENT/ECONNREFUSED),
SHARED_PORT_DEFAULT_ID, its statistics and its address file.
"""

from __future__ import annotations

import re
import socket
import struct
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from gateway.testing import START_SECONDS, GatewayProcess

SHARED_PORT_CONNECT = 75
SHARED_PORT_PASS_SOCK = 76
HTTP_METHODS = (b"GET ", b"POST ", b"HEAD ", b"PUT ", b"DELETE ", b"OPTIONS ", b"TRACE ", b"CONNECT ", b"PATCH ")
VALID_ID = re.compile(rb"[A-Za-z0-9._-]+")


class Refused(Exception):
    pass


@dataclass(frozen=True)
class ConnectRequest:
    shared_port_id: str
    client_name: str
    deadline: int
    more_args: int


def _exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise Refused("connection closed mid-message")
        data += chunk
    return data


def read_connect_request(sock: socket.socket) -> ConnectRequest:
    end, length = struct.unpack("!BI", _exactly(sock, 5))
    if end != 1 or not 0 < length <= 1024 * 1024:
        raise Refused(f"bad packet header end={end} length={length}")
    payload = _exactly(sock, length)
    (command,) = struct.unpack_from("!q", payload)
    if command != SHARED_PORT_CONNECT:
        raise Refused(f"command {command}")
    fields = payload[8:]
    shared_port_id, fields = _string(fields)
    client_name, fields = _string(fields)
    if len(fields) < 16:
        raise Refused("no deadline and argument count")
    deadline, more_args = struct.unpack_from("!qq", fields)
    if not 0 <= more_args <= 100:
        raise Refused(f"more_args={more_args}")
    fields = fields[16:]
    for _ in range(more_args):
        _, fields = _string(fields)
    if fields:
        raise Refused("bytes after the request in its message")
    return ConnectRequest(shared_port_id.decode(), client_name.decode(), deadline, more_args)


def _string(data: bytes) -> tuple[bytes, bytes]:
    text, nul, rest = data.partition(b"\0")
    if not nul or len(text) > 1023:
        raise Refused("unterminated or oversized string")
    return text, rest


def pass_socket(client: socket.socket, directory: Path, shared_port_id: str) -> None:
    if not VALID_ID.fullmatch(shared_port_id.encode()):
        raise Refused(f"illegal id {shared_port_id!r}")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as named:
        try:
            named.connect(str(directory / shared_port_id))
        except OSError as exc:
            raise Refused(f"cannot connect to {shared_port_id}: {exc}") from None
        named.sendall(struct.pack("!BI", 1, 8) + struct.pack("!q", SHARED_PORT_PASS_SOCK))
        named.sendmsg([b"\0"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", client.fileno()))])


@dataclass
class SharedPortStandIn:
    """``with SharedPortStandIn(directory) as shared_port:`` listens on ``shared_port.port``."""

    directory: Path
    http_forward_id: str | None = None
    requests: list[ConnectRequest] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)

    def __enter__(self) -> "SharedPortStandIn":
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()
        self._thread.join(timeout=5)

    @property
    def sinful(self) -> str:
        return f"<127.0.0.1:{self.port}>"

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        with client:
            client.settimeout(10)
            try:
                first = client.recv(13, socket.MSG_PEEK)
                if self.http_forward_id and first.startswith(HTTP_METHODS):
                    pass_socket(client, self.directory, self.http_forward_id)
                    return
                request = read_connect_request(client)
                self.requests.append(request)
                pass_socket(client, self.directory, request.shared_port_id)
            except (Refused, OSError) as exc:
                self.refusals.append(str(exc))


def shared_port_config(directory: Path, shared_port_id: str, extra: str = "") -> str:
    """A gateway with no TCP port of its own, serving only what condor_shared_port passes (``extra``: more TOML)."""
    return (f'[gateway]\nport = 0\n[daemon]\nuse_shared_port = true\ndaemon_socket_dir = "{directory}"\n'
            f'shared_port_id = "{shared_port_id}"\n{extra}')


def start_behind_shared_port(tmp: Path, directory: Path, shared_port_id: str, extra: str = "") -> GatewayProcess:
    """Start a gateway serving the named socket ``directory/shared_port_id`` only, and wait until it does."""
    process = GatewayProcess(tmp / "state", shared_port_config(directory, shared_port_id, extra), tmp=tmp,
                             plain=False).start()
    deadline = time.monotonic() + START_SECONDS
    while "condor_shared_port passes" not in process.log():
        if process.process is not None and process.process.poll() is not None:
            raise RuntimeError(f"gateway exited with {process.process.returncode}:\n{process.log()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"gateway did not start:\n{process.log()}")
        time.sleep(0.05)
    return process


def short_directory() -> Path:
    """A new directory under /tmp: a Unix socket's path holds at most 107 bytes, and pytest's paths are long."""
    return Path(tempfile.mkdtemp(prefix="bbsp", dir="/tmp"))


#: the commands the master stand-in knows (``condor_commands.h``)
DC_CHILDALIVE = 60008
DC_AUTHENTICATE = 60010


@dataclass(frozen=True)
class ChildAlive:
    """One DC_CHILDALIVE the master received: how, from which pid, with which timeout, and when (monotonic)."""

    transport: str
    pid: int
    timeout: int
    received: float


@dataclass
class MasterStandIn:
    """A stand-in for condor_master's command port (UDP and TCP on one loopback port), for DC_CHILDALIVE only.

    It reads what ``DaemonKeepAlive::HandleChildAliveCommand`` reads: the command, then the pid and the timeout
    as 8-byte integers (an optional log-lock delay may follow); a datagram is the message alone, a TCP message
    comes in a CEDAR packet.  A TCP connection that starts a security negotiation (DC_AUTHENTICATE, as
    ``htcondor2.send_alive`` does) is closed unanswered: this stand-in has no security layer, so such a client
    fails at once, as it would against a master whose policy it cannot satisfy.  Not modelled: the master's
    authorization (a real one refuses unauthenticated DAEMON-level commands unless its policy allows them), its
    kill of a child whose timeout passed."""

    messages: list[ChildAlive] = field(default_factory=list)
    negotiations: int = 0

    def __enter__(self) -> "MasterStandIn":
        self._tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self._tcp.getsockname()[1]
        self._udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._udp.bind(("127.0.0.1", self.port))
        self._threads = [threading.Thread(target=self._serve_udp, daemon=True),
                         threading.Thread(target=self._serve_tcp, daemon=True)]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._tcp.close()
        self._udp.close()

    @property
    def sinful(self) -> str:
        return f"<127.0.0.1:{self.port}>"

    def _record(self, transport: str, payload: bytes) -> None:
        command, pid, timeout = struct.unpack_from("!qqq", payload)
        if command == DC_CHILDALIVE:
            self.messages.append(ChildAlive(transport, pid, timeout, time.monotonic()))

    def _serve_udp(self) -> None:
        while True:
            try:
                data, _ = self._udp.recvfrom(65536)
            except OSError:
                return
            if len(data) >= 24:
                self._record("udp", data)

    def _serve_tcp(self) -> None:
        while True:
            try:
                client, _ = self._tcp.accept()
            except OSError:
                return
            with client:
                client.settimeout(10)
                try:
                    end, length = struct.unpack("!BI", _exactly(client, 5))
                    payload = _exactly(client, min(length, 1 << 20))
                except (Refused, OSError):
                    continue
                (command,) = struct.unpack_from("!q", payload)
                if command == DC_AUTHENTICATE:
                    self.negotiations += 1
                elif len(payload) >= 24:
                    self._record("tcp", payload)
