"""QMFv1's binary messages, as far as a QMFv2 agent needs them: ``qmf.console`` (the Python console every MRG tool
used) asks a QMFv2 agent for a class's schema with the QMFv1 request ``AM2S`` and reads the answer ``AM2s`` in QMFv1's
binary schema encoding, whose property, statistic, method and argument descriptions are AMQP 0-10 maps.  Only those
two messages are made or read here; everything else the agent says is a QMFv2 map message.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any

#: QMFv1's message header: "AM2", an opcode letter, a sequence number
MAGIC = b"AM2"
SCHEMA_REQUEST = b"S"
SCHEMA_RESPONSE = b"s"
#: QMFv1's kinds of class
CLASS_KIND_TABLE = 1

#: AMQP 0-10 type codes of the map values written here
_T_UINT8, _T_BOOLEAN, _T_UINT32, _T_INT64, _T_STR16 = 0x02, 0x08, 0x22, 0x31, 0x95


class BadMessage(ValueError):
    """A QMFv1 message that is not what it claims (short, wrong header, names that are not UTF-8)."""


@dataclass(frozen=True)
class ClassKey:
    package: str
    name: str
    hash: uuid.UUID


def header(opcode: bytes, sequence: int) -> bytes:
    return MAGIC + opcode + struct.pack("!I", sequence & 0xFFFFFFFF)


class Reader:
    """Reads a QMFv1 message, raising :class:`BadMessage` at its end rather than IndexError or struct.error."""

    def __init__(self, data: bytes) -> None:
        self._data = bytes(data)
        self._at = 0

    def take(self, count: int) -> bytes:
        if self._at + count > len(self._data):
            raise BadMessage(f"message ends after {len(self._data)} bytes, {self._at + count} needed")
        part = self._data[self._at:self._at + count]
        self._at += count
        return part

    def str8(self) -> str:
        try:
            return self.take(self.take(1)[0]).decode("utf-8")
        except UnicodeDecodeError:
            raise BadMessage("a name is not UTF-8") from None


def schema_request(data: bytes) -> tuple[int, ClassKey]:
    """The sequence number and class key of an ``AM2S`` message (raises :class:`BadMessage`)."""
    reader = Reader(data)
    if reader.take(3) != MAGIC or reader.take(1) != SCHEMA_REQUEST:
        raise BadMessage("not a QMFv1 schema request")
    (sequence,) = struct.unpack("!I", reader.take(4))
    package, name = reader.str8(), reader.str8()
    return sequence, ClassKey(package, name, uuid.UUID(bytes=reader.take(16)))


def str8(text: str) -> bytes:
    data = text.encode("utf-8")
    if len(data) > 255:
        raise ValueError(f"{text[:40]!r}... is longer than a str8 holds")
    return bytes([len(data)]) + data


def map010(values: dict[str, Any]) -> bytes:
    """An AMQP 0-10 map (vbin32 of: count, then key str8, type code, value) of ints, bools and strings."""
    body = bytearray(struct.pack("!I", len(values)))
    for key, value in values.items():
        body += str8(key)
        if isinstance(value, bool):
            body += bytes([_T_BOOLEAN, int(value)])
        elif isinstance(value, int):
            body += bytes([_T_INT64]) + struct.pack("!q", value)
        elif isinstance(value, str):
            data = value.encode("utf-8")
            body += bytes([_T_STR16]) + struct.pack("!H", len(data)) + data
        else:
            raise TypeError(f"no 0-10 encoding here for {type(value).__name__} ({key})")
    return struct.pack("!I", len(body)) + bytes(body)


def schema_response(sequence: int, key: ClassKey, properties: list[dict[str, Any]],
                    statistics: list[dict[str, Any]], methods: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> bytes:
    """``AM2s``: a table class's key, then its property, statistic and method descriptions (each method's map is
    followed by its arguments' maps)."""
    out = bytearray(header(SCHEMA_RESPONSE, sequence))
    out += bytes([CLASS_KIND_TABLE]) + str8(key.package) + str8(key.name) + key.hash.bytes
    out += struct.pack("!HHH", len(properties), len(statistics), len(methods))
    for description in (*properties, *statistics):
        out += map010(description)
    for method, arguments in methods:
        out += map010(method)
        for argument in arguments:
            out += map010(argument)
    return bytes(out)
