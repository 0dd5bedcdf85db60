"""Who started us: ``CONDOR_INHERIT``, the environment variable a DaemonCore parent (condor_master) gives every
child it starts.

Its fields are separated by spaces (``DaemonCore::Inherit``, ``extractInheritedSocks`` in ``daemon_core.cpp``):
the parent's pid, the parent's command address as a sinful string, then sockets handed down (each ``1`` or ``2``
and its serialised form) up to a ``0``, then the child's own command sockets (and ``SharedPort:...`` for a
DaemonCore child) up to a ``0``.  A program that is not a DaemonCore daemon, as the gateway is, gets
``<pid> <sinful> 0 0``: only the first two fields matter to it.

A sinful string is ``<host:port?key=value&...>``; ``sock=ID`` names a daemon behind condor_shared_port.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass, field
from typing import Mapping

VARIABLE = "CONDOR_INHERIT"


@dataclass(frozen=True)
class Sinful:
    """An HTCondor address: host, port and the parameters after ``?`` (``sock``, ``addrs``, ``alias``...)."""

    host: str
    port: int
    params: dict[str, str] = field(default_factory=dict)

    @property
    def shared_port_id(self) -> str | None:
        return self.params.get("sock")

    @classmethod
    def parse(cls, text: str) -> "Sinful":
        """``<127.0.0.1:9618?sock=master_1234_abcd>`` (IPv6 hosts in brackets); raises ValueError."""
        if not (text.startswith("<") and text.endswith(">")):
            raise ValueError(f"not a sinful string (<host:port?...>): {text!r}")
        address, _, query = text[1:-1].partition("?")
        parts = urllib.parse.urlsplit(f"//{address}")
        try:
            port = parts.port
        except ValueError:
            port = None
        if not parts.hostname or port is None:
            raise ValueError(f"a sinful string without host and port: {text!r}")
        return cls(parts.hostname, port, dict(urllib.parse.parse_qsl(query, keep_blank_values=True)))


@dataclass(frozen=True)
class Parent:
    """The DaemonCore process that started us."""

    pid: int
    address: Sinful
    #: the variable's value as given (htcondor2.send_alive reads it again from the environment)
    text: str


def parse(text: str) -> Parent:
    """The parent named by a ``CONDOR_INHERIT`` value (raises ValueError when it names none)."""
    fields = text.split()
    if len(fields) < 2:
        raise ValueError(f"{VARIABLE} names no parent (expected '<pid> <sinful> ...'): {text!r}")
    try:
        pid = int(fields[0])
    except ValueError:
        raise ValueError(f"{VARIABLE} does not start with the parent's pid: {text!r}") from None
    if pid <= 0:
        raise ValueError(f"{VARIABLE} names no parent pid: {text!r}")
    return Parent(pid, Sinful.parse(fields[1]), text)


def parent(environ: Mapping[str, str] = os.environ) -> Parent | None:
    """The parent this process was started by, or None when it was not started by a DaemonCore daemon."""
    text = environ.get(VARIABLE, "").strip()
    return parse(text) if text else None
