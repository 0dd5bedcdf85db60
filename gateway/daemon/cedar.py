"""The little of CEDAR, HTCondor's stream protocol, that a daemon of the pool must speak.

On a stream (ReliSock) every message travels in packets: one byte that says whether the packet ends the message
(1) or not (0), the payload's length as 4 bytes in network order, then the payload (``reli_sock.cpp``,
``NORMAL_HEADER_SIZE``; sockets with a message digest or encryption add more, but the sockets these messages use
have neither).  In the payload every integer is 8 bytes in network order, whatever its C type, and a string is its
bytes and a NUL (``stream.cpp``, ``INT_SIZE``).  A datagram (SafeSock) of one short message has no header at all:
it is the payload alone (``SafeMsg.cpp``: no ``MaGic`` prefix, no fragments).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

#: the command numbers used here (``condor_includes/condor_commands.h``)
SHARED_PORT_CONNECT = 75
SHARED_PORT_PASS_SOCK = 76
DC_CHILDALIVE = 60008

INT = struct.Struct("!q")
HEADER = struct.Struct("!BI")
#: the end-of-message flag of a message's last packet
END = 1
#: what HTCondor accepts in one packet (``rcv_packet``'s ``max_packet_size``)
MAX_PACKET = 1024 * 1024


class CedarError(ValueError):
    """Bytes that are not the CEDAR message expected."""


def integers(*values: int) -> bytes:
    """CEDAR's encoding of integers: each 8 bytes, big-endian, signed."""
    return b"".join(INT.pack(value) for value in values)


def string(text: str) -> bytes:
    """CEDAR's encoding of a string on an unencrypted stream: its bytes and a NUL."""
    return text.encode() + b"\0"


def connect_request(shared_port_id: str, client_name: str, deadline: int) -> bytes:
    """SHARED_PORT_CONNECT as a client sends it to condor_shared_port (``SharedPortClient::sendSharedPortID``):
    the command, the daemon's id, who we are (for its log), the seconds we will wait (-1: no deadline) and the
    count of further arguments (0), in one message."""
    return packet(integers(SHARED_PORT_CONNECT) + string(shared_port_id) + string(client_name)
                  + integers(deadline, 0))


def packet(payload: bytes) -> bytes:
    """One whole message as the single packet a ReliSock sends for it."""
    return HEADER.pack(END, len(payload)) + payload


@dataclass(frozen=True)
class Packet:
    """One packet read from a stream: whether it ends its message, and its payload."""

    last: bool
    payload: bytes


def read_packet(buffer: bytes) -> tuple[Packet, bytes] | None:
    """The first packet of ``buffer`` and the bytes after it; None while it is incomplete (raises CedarError for
    a header HTCondor itself would refuse: an unknown end flag, an empty or oversized packet)."""
    if len(buffer) < HEADER.size:
        return None
    end, length = HEADER.unpack_from(buffer)
    if end > 10 or length <= 0 or length > MAX_PACKET:
        raise CedarError(f"not a CEDAR packet header: {buffer[:HEADER.size].hex()}")
    if len(buffer) < HEADER.size + length:
        return None
    body_end = HEADER.size + length
    return Packet(end == END, buffer[HEADER.size:body_end]), buffer[body_end:]


def read_integer(payload: bytes, offset: int = 0) -> tuple[int, int]:
    """The integer at ``offset`` and the offset after it (raises CedarError when the payload is too short)."""
    if len(payload) < offset + INT.size:
        raise CedarError("message too short for an integer")
    return INT.unpack_from(payload, offset)[0], offset + INT.size
