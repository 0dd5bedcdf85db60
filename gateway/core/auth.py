"""Who may talk to the gateway and whose jobs they may submit (docs/birdbath.md §9).

Three host lists mirror HTCondor's knobs: ``allow_soap`` is checked when a request arrives (the SOAP level;
by default loopback only), ``allow_read`` and ``allow_write`` per operation (a refusal is the original's
``FAIL "Permission denied"``).  Without client certificates every caller is anonymous; an anonymous
submission runs as ``default_owner`` and may not name another ``Owner`` unless ``queue_all_users_trusted``.
"""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass, field
from typing import Iterable

from .status import BirdbathError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

LOOPBACK = ("127.0.0.0/8", "::1")


class Permission(enum.Enum):
    READ = "READ"
    WRITE = "WRITE"


class Authentication(enum.Enum):
    """How the gateway knows who a caller is; the owner rules treat every way but NONE alike."""

    NONE = "anonymous"  # a remote peer over plain HTTP: it gets default_owner
    SOCKET = "socket"  # a loopback peer: the kernel says which local user owns its socket
    CERTIFICATE = "certificate"  # a client certificate, its subject mapped by the certificate map file
    PASSWORD = "password"  # HTTP Basic over TLS, checked against the password file


@dataclass(frozen=True)
class Caller:
    """The peer of one request: its address and, when known, its user name (``None`` = anonymous).

    ``user`` may be ``user@domain`` (a certificate map file's answer); the owner is the part before ``@``."""

    host: str
    user: str | None = None
    authentication: Authentication = Authentication.NONE


class HostList:
    """An allow-list of ``*``, single addresses, CIDR networks and ``localhost``."""

    def __init__(self, entries: Iterable[str]) -> None:
        self.entries = tuple(entries)
        self._any = False
        self._networks: list[Network] = []
        for entry in self.entries:
            self._add(entry.strip())

    def _add(self, entry: str) -> None:
        if entry in ("*", "*/*"):
            self._any = True
        elif entry == "localhost":
            self._networks.extend(ipaddress.ip_network(n) for n in LOOPBACK)
        else:
            try:
                self._networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                raise ValueError(f"not a host, network or '*': {entry!r}") from None

    def allows(self, host: str) -> bool:
        if self._any:
            return True
        try:
            address = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in self._networks)

    def __repr__(self) -> str:
        return f"HostList({list(self.entries)!r})"


@dataclass
class AccessPolicy:
    allow_soap: HostList = field(default_factory=lambda: HostList(LOOPBACK))
    allow_read: HostList = field(default_factory=lambda: HostList(["*"]))
    allow_write: HostList = field(default_factory=lambda: HostList(["*"]))
    queue_all_users_trusted: bool = False
    queue_super_users: frozenset[str] = frozenset({"root", "condor"})
    default_owner: str = "nobody"

    def connection_allowed(self, host: str) -> bool:
        return self.allow_soap.allows(host)

    def check(self, caller: Caller, permission: Permission) -> None:
        hosts = self.allow_read if permission is Permission.READ else self.allow_write
        # WRITE implies READ, as in HTCondor's authorisation levels.
        if hosts.allows(caller.host) or (permission is Permission.READ and self.allow_write.allows(caller.host)):
            return
        raise BirdbathError.fail("Permission denied")

    def submitter(self, caller: Caller) -> str:
        """The owner a caller's jobs get when they do not say otherwise."""
        return _owner_name(caller.user) if caller.user else self.default_owner

    def check_owner(self, caller: Caller, owner: str) -> None:
        """Refuse an ``Owner`` the caller may not submit as (qmgmt's OwnerCheck), with the reason."""
        if self.queue_all_users_trusted or owner == self.submitter(caller):
            return
        if caller.user is not None and _owner_name(caller.user) in self.queue_super_users:
            return
        who = f"user {caller.user!r}" if caller.user else "an anonymous client"
        raise PermissionError(
            f"{who} may not submit jobs owned by {owner!r} (QUEUE_ALL_USERS_TRUSTED is false)")


def _owner_name(user: str) -> str:
    """``user@domain`` maps to the owner ``user``, as qmgmt did."""
    return user.split("@", 1)[0]
