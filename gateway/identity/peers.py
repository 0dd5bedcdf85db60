"""Which local user a loopback client is: the owner of its end of the TCP connection, as the kernel says.

A client on this machine connects from a socket the kernel accounts to the user who made it.  Linux lists every
TCP socket in ``/proc/net/tcp`` (IPv4) and ``/proc/net/tcp6`` (IPv6) with its local and remote address and its
uid; the client's socket is the one whose local address is our peer's and whose remote address is ours.  Nothing
the client sends can change that answer, which is why a loopback caller can be trusted to be that user.

The addresses in those tables are the kernel's bytes printed as 32-bit words in the machine's own byte order
(``0100007F`` is 127.0.0.1 on a little-endian machine), the ports as plain hexadecimal numbers.
"""

from __future__ import annotations

import ipaddress
import pwd
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from gateway.core.auth import Address, peer_address, unmapped

#: the kernel's tables of TCP sockets, IPv4 then IPv6
TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))

#: table states whose lines are no socket of a process (TIME_WAIT, NEW_SYN_RECV): the kernel shows uid 0 for them,
#: which must never be taken for root
NOT_A_SOCKET = frozenset({0x06, 0x0C})


@dataclass(frozen=True)
class Endpoint:
    address: Address
    port: int


@dataclass(frozen=True)
class SocketEntry:
    """One line of a ``/proc/net/tcp*`` table."""

    local: Endpoint
    remote: Endpoint
    state: int
    uid: int


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and ::ffff:127.x: peers on this machine."""
    address = peer_address(host)
    return address is not None and address.is_loopback


def decode_endpoint(text: str) -> Endpoint:
    """``0100007F:0CC8`` -> 127.0.0.1:3272 (the address in native-order 32-bit words, the port in hexadecimal)."""
    hex_address, _, hex_port = text.partition(":")
    if len(hex_address) not in (8, 32) or not hex_port:
        raise ValueError(f"not a /proc/net/tcp address: {text!r}")
    words = [int(hex_address[i:i + 8], 16) for i in range(0, len(hex_address), 8)]
    packed = b"".join(struct.pack("=I", word) for word in words)
    # an IPv4 client of a dual-stack listener is listed in the IPv6 table with its mapped address
    return Endpoint(unmapped(ipaddress.ip_address(packed)), int(hex_port, 16))


def parse_table(text: str) -> Iterator[SocketEntry]:
    """The sockets of one table; the header line and lines that do not parse are skipped."""
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 8 or not fields[0].endswith(":"):
            continue
        try:
            yield SocketEntry(decode_endpoint(fields[1]), decode_endpoint(fields[2]), int(fields[3], 16),
                              int(fields[7]))
        except ValueError:
            continue


def lines_with_ports(text: str, first: int, second: int) -> str:
    """Only the lines of a table that show both ports (as ``:PPPP`` after an address): decoding every line cost
    ~20 us each, tens of milliseconds per new connection on a busy machine, and the line asked for always shows both.
    """
    wanted = (f":{first:04X} ", f":{second:04X} ")
    return "\n".join(line for line in text.splitlines() if wanted[0] in line and wanted[1] in line)


def socket_owner(client: Endpoint, server: Endpoint, tables: Iterable[Path] = TABLES) -> int | None:
    """The uid owning the client's end of the connection from ``client`` to ``server``, or None when no table
    lists it (another network namespace, a table we may not read, a client already gone)."""
    for table in tables:
        try:
            text = table.read_text()
        except OSError:
            continue
        for entry in parse_table(lines_with_ports(text, client.port, server.port)):
            if entry.local == client and entry.remote == server and entry.state not in NOT_A_SOCKET:
                return entry.uid
    return None


def user_name(uid: int) -> str | None:
    """The login name of ``uid``, or None when the password database does not know it."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def endpoint(host: str, port: int) -> Endpoint | None:
    address = peer_address(host)
    return Endpoint(address, port) if address is not None else None
