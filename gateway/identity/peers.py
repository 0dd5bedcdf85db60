"""Which local user a client on this machine is: the owner of its end of the connection, as the kernel says.

A client on this machine connects from a socket the kernel accounts to the user who made it, and nothing the client
sends can change that answer.  Two ways to ask, both made once, when the connection is accepted:

- a Unix-domain socket's peer credentials (``SO_PEERCRED``), fixed when the client connected;
- for TCP, the kernel's socket diagnostics (netlink ``sock_diag``, the interface ``ss`` uses): the socket with
  exactly this connection's four addresses and ports, asked for by them (``inet_diag_req_v2``), never found by
  reading a table.  Its owner counts only while it is a live socket of a process: ESTABLISHED with a non-zero inode
  (a client that closed leaves an orphan with inode 0 and uid 0, which must never be taken for root), and only
  when our own end of the same four-tuple is the socket we accepted (same inode, still ESTABLISHED), so that the
  answer is about this connection and not a later one that reused its ports.

Whether a TCP peer is on this machine at all is the kernel's routing answer for its address (``RTM_GETROUTE``:
a route of type local), so a client connecting to one of the host's own network addresses is as local as one on
loopback.  :class:`Unproven` says why a local peer could not be identified; the caller refuses it.

The kernel is asked once per connection (:func:`owner_of`), as the gate admits it; its answer, a
:class:`PeerOwner`, serves both the gate's caps and the caller of every request on the connection.
"""

from __future__ import annotations

import enum
import errno
import ipaddress
import os
import pwd
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from gateway.core.auth import Address, peer_address

NETLINK_ROUTE = 0
NETLINK_SOCK_DIAG = 4
#: nlmsghdr: length, type, flags, sequence, port id
NLMSG_HEADER = struct.Struct("=IHHII")
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST = 0x1
SOCK_DIAG_BY_FAMILY = 20
RTM_NEWROUTE, RTM_GETROUTE = 24, 26
RTA_DST = 1
RTN_LOCAL = 2
#: inet_diag_req_v2's head: family, protocol, extensions, pad, the states asked for
DIAG_REQUEST = struct.Struct("=BBBxI")
#: inet_diag_msg's head (family, state, timer, retransmits) and tail (expires, queues, uid, inode)
DIAG_HEAD = struct.Struct("=BBBB")
DIAG_TAIL = struct.Struct("=IIIII")
#: inet_diag_sockid: ports (network order), two 16-byte addresses, interface, cookie
SOCKID_PORTS = struct.Struct("!HH")
SOCKID_REST = struct.Struct("=III")
SOCKID_SIZE = 4 + 16 + 16 + SOCKID_REST.size
#: no cookie to match (INET_DIAG_NOCOOKIE)
NO_COOKIE = 0xFFFFFFFF
ALL_STATES = 0xFFFFFFFF
#: rtmsg: family, destination and source prefix lengths, tos, table, protocol, scope, type, flags
ROUTE_MESSAGE = struct.Struct("=BBBBBBBBI")
RTATTR = struct.Struct("=HH")
#: seconds to wait for the kernel's answer (it answers at once; this only bounds a kernel that would not)
ANSWER_TIMEOUT = 1.0
#: struct ucred: pid, uid, gid
UCRED = struct.Struct("=iII")


class TcpState(enum.IntEnum):
    """The kernel's TCP states (include/net/tcp_states.h)."""

    ESTABLISHED = 1
    SYN_SENT = 2
    SYN_RECV = 3
    FIN_WAIT1 = 4
    FIN_WAIT2 = 5
    TIME_WAIT = 6
    CLOSE = 7
    CLOSE_WAIT = 8
    LAST_ACK = 9
    LISTEN = 10
    CLOSING = 11
    NEW_SYN_RECV = 12


class Unproven(Exception):
    """The kernel could not prove who owns a local peer's socket; the message says why."""


@dataclass(frozen=True)
class Endpoint:
    address: Address
    port: int


@dataclass(frozen=True)
class DiagSocket:
    """What sock_diag says about one TCP socket."""

    local: Endpoint
    remote: Endpoint
    state: int
    uid: int
    inode: int

    def describe_state(self) -> str:
        try:
            return TcpState(self.state).name
        except ValueError:
            return f"state {self.state}"


def endpoint(host: str, port: int) -> Endpoint | None:
    address = peer_address(host)
    return Endpoint(address, port) if address is not None else None


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and ::ffff:127.x."""
    address = peer_address(host)
    return address is not None and address.is_loopback


def user_name(uid: int) -> str | None:
    """The login name of ``uid``, or None when the password database does not know it."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


# -- netlink ---------------------------------------------------------------------------------------------------
def _ask(protocol: int, message_type: int, payload: bytes) -> tuple[int, bytes]:
    """Send one netlink request to the kernel and return its one answer (type, payload); an error answer raises
    OSError with its errno."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, protocol) as channel:
        channel.settimeout(ANSWER_TIMEOUT)
        channel.bind((0, 0))
        channel.send(NLMSG_HEADER.pack(NLMSG_HEADER.size + len(payload), message_type, NLM_F_REQUEST, 1, 0) + payload)
        answer = channel.recv(65536)
    if len(answer) < NLMSG_HEADER.size:
        raise OSError(errno.EPROTO, "short netlink answer")
    length, kind, _, _, _ = NLMSG_HEADER.unpack_from(answer)
    body = answer[NLMSG_HEADER.size:length]
    if kind == NLMSG_ERROR:
        (code,) = struct.unpack_from("=i", body)
        raise OSError(-code, os.strerror(-code))
    return kind, body


def _family(address: Address) -> int:
    return socket.AF_INET if address.version == 4 else socket.AF_INET6


def _sockid(local: Endpoint, remote: Endpoint) -> bytes:
    return (SOCKID_PORTS.pack(local.port, remote.port) + local.address.packed.ljust(16, b"\0")
            + remote.address.packed.ljust(16, b"\0") + SOCKID_REST.pack(0, NO_COOKIE, NO_COOKIE))


def _address(family: int, raw: bytes) -> Address:
    address = ipaddress.ip_address(raw[:4] if family == socket.AF_INET else raw)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def parse_diag_message(body: bytes) -> DiagSocket:
    """An ``inet_diag_msg`` (raises ValueError when it is too short)."""
    if len(body) < DIAG_HEAD.size + SOCKID_SIZE + DIAG_TAIL.size:
        raise ValueError("short inet_diag_msg")
    family, state, _, _ = DIAG_HEAD.unpack_from(body)
    offset = DIAG_HEAD.size
    local_port, remote_port = SOCKID_PORTS.unpack_from(body, offset)
    local = _address(family, body[offset + 4:offset + 20])
    remote = _address(family, body[offset + 20:offset + 36])
    _, _, _, uid, inode = DIAG_TAIL.unpack_from(body, offset + SOCKID_SIZE)
    return DiagSocket(Endpoint(local, local_port), Endpoint(remote, remote_port), state, uid, inode)


def tcp_socket(local: Endpoint, remote: Endpoint) -> DiagSocket | None:
    """The TCP socket whose own address is ``local`` and whose peer is ``remote`` in this network namespace, asked
    for by that exact four-tuple; None when the kernel has none (raises OSError when it cannot be asked)."""
    if local.address.version != remote.address.version:
        return None
    request = DIAG_REQUEST.pack(_family(local.address), socket.IPPROTO_TCP, 0, ALL_STATES) + _sockid(local, remote)
    try:
        kind, body = _ask(NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY, request)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise
    if kind != SOCK_DIAG_BY_FAMILY:
        raise OSError(errno.EPROTO, f"unexpected netlink answer {kind} to SOCK_DIAG_BY_FAMILY")
    found = parse_diag_message(body)
    # the kernel's exact look-up may fall back to a listener or a TIME_WAIT entry: only this tuple counts
    return found if (found.local, found.remote) == (local, remote) else None


def tcp_peer_owner(client: Endpoint, server: Endpoint, accepted: socket.socket | None) -> int:
    """The uid owning the client's end of our connection ``client`` -> ``server``, whose server end is the socket
    we ``accepted``.  Raises :class:`Unproven` unless both ends are live, established sockets."""
    try:
        server_inode = os.fstat(accepted.fileno()).st_ino if accepted is not None else None
        ours = tcp_socket(server, client)
        theirs = tcp_socket(client, server) if ours is not None else None
    except OSError as exc:
        raise Unproven(f"the kernel's socket diagnostics could not be read: {exc.strerror or exc}") from None
    if ours is None or ours.inode != server_inode:
        raise Unproven("the kernel does not list our end of it")
    if ours.state != TcpState.ESTABLISHED:
        raise Unproven(f"our end of it is {ours.describe_state()}")
    if theirs is None:
        raise Unproven("its socket is not in the kernel's socket diagnostics")
    if theirs.state != TcpState.ESTABLISHED or theirs.inode == 0:
        raise Unproven(f"its socket is {theirs.describe_state()}"
                       + (", no longer a process's" if theirs.inode == 0 else ""))
    return theirs.uid


def is_this_host(address: Address) -> bool:
    """Whether ``address`` is one of this host's own (in this network namespace): the kernel routes it locally."""
    if address.is_loopback:
        return True
    bits = 32 if address.version == 4 else 128
    attribute = RTATTR.pack(RTATTR.size + len(address.packed), RTA_DST) + address.packed
    request = ROUTE_MESSAGE.pack(_family(address), bits, 0, 0, 0, 0, 0, 0, 0) + attribute
    try:
        kind, body = _ask(NETLINK_ROUTE, RTM_GETROUTE, request)
    except OSError as exc:
        if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EINVAL):
            return False
        raise
    return kind == RTM_NEWROUTE and len(body) >= ROUTE_MESSAGE.size and ROUTE_MESSAGE.unpack_from(body)[7] == RTN_LOCAL


class PeerKernel(Protocol):
    """What the kernel says about a peer on this machine (this module's functions; another kernel in unit tests)."""

    def is_this_host(self, address: Address) -> bool: ...

    def tcp_peer_owner(self, client: Endpoint, server: Endpoint, accepted: socket.socket | None) -> int: ...

    def unix_peer_owner(self, sock: socket.socket | None) -> int: ...

    def user_name(self, uid: int) -> str | None: ...


@dataclass(frozen=True)
class PeerOwner:
    """What the kernel said about a connection's client as the connection was accepted: the gate counts the
    connection by it, and the caller of a plain or local-socket connection is made from it."""

    #: the client is on this machine (the local socket, loopback, one of the host's addresses), or may be
    local: bool
    #: the user owning the client's socket, when the kernel proved it
    uid: int | None = None
    #: that user's login name
    name: str | None = None
    #: why the client cannot be identified (every request on the connection is refused with it)
    problem: str | None = None


def owner_of(peer_host: str, peer_port: int, local_host: str, local_port: int, unix: bool,
             sock: socket.socket | None, kernel: PeerKernel) -> PeerOwner:
    """Who the client of a connection is, asked of the ``kernel`` (``sock``: our end of the connection)."""
    if unix:
        return _local_owner("Unix-socket", lambda: kernel.unix_peer_owner(sock), kernel)
    client, server = endpoint(peer_host, peer_port), endpoint(local_host, local_port)
    if client is None or server is None:
        return PeerOwner(False, problem=f"The peer of this connection ({peer_host!r}) is no network address")
    try:
        local = kernel.is_this_host(client.address)
    except OSError as exc:
        return PeerOwner(True, problem=f"Whether {peer_host} is this machine could not be told "
                                       f"(the kernel's routing answer: {exc.strerror or exc})")
    if not local:
        return PeerOwner(False)
    kind = "loopback" if client.address.is_loopback else "local"
    return _local_owner(kind, lambda: kernel.tcp_peer_owner(client, server, sock), kernel)


def _local_owner(kind: str, ask: Callable[[], int], kernel: PeerKernel) -> PeerOwner:
    """The local user owning a client's socket (``kind`` of connection), or why it could not be proven."""
    try:
        uid = ask()
    except (Unproven, OSError) as exc:
        return PeerOwner(True, problem=f"The local user of this {kind} connection could not be identified ({exc})")
    name = kernel.user_name(uid)
    if not name:
        return PeerOwner(True, uid, problem=f"The local user of this {kind} connection could not be identified "
                                            f"(uid {uid} has no name)")
    return PeerOwner(True, uid, name)


def unix_peer_owner(sock: socket.socket | None) -> int:
    """The uid of the process that connected to a Unix-domain socket, as the kernel recorded it (SO_PEERCRED)."""
    if sock is None:
        raise Unproven("its socket is unknown")
    try:
        _, uid, _ = UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, UCRED.size))
    except OSError as exc:
        raise Unproven(f"its peer credentials could not be read: {exc.strerror or exc}") from None
    return uid
