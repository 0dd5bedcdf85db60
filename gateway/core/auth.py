"""Who may talk to the gateway, and whose jobs they may submit and act on (as HTCondor's schedd decided it for SOAP).

Three host lists mirror HTCondor's knobs: ``allow_soap`` is checked when a request arrives (the SOAP level;
by default loopback only), ``allow_read`` and ``allow_write`` per operation (a refusal is the original's
``FAIL "Permission denied"``).

The owner rules are one check (:meth:`AccessPolicy.owner_refusal`) that every operation of both APIs uses: a caller
may submit as, and act on the jobs of, its *effective user* (its own name when the gateway knows it, else
``default_owner``); identified queue super users may use any owner, and so may anonymous callers when
``queue_all_users_trusted`` is set (the original's rule for callers without SSL).  Owner ``root`` is special: only a
caller identified as root makes root's jobs, and only root and identified super users act on them, so no local user
or anonymous client ever borrows root.  The attributes the schedd itself assigns (:data:`REPLACED_AT_SUBMIT`,
:data:`SCHEDD_OWNED`) are never taken from clients.
"""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass, field
from typing import Iterable

import classad2

from jobmodel.jobs import PRIVATE_ATTRIBUTES

from .status import BirdbathError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

LOOPBACK = ("127.0.0.0/8", "::1")
#: the host a caller on the gateway's local (Unix-domain) socket is known by: this machine, which the host lists
#: treat as its loopback address
LOCAL_SOCKET_HOST = "localhost"
_LOCAL_SOCKET_ADDRESS = ipaddress.ip_address("127.0.0.1")
#: the loopback network of each IP version
_LOOPBACK_NETWORKS = {4: ipaddress.ip_network(LOOPBACK[0]), 6: ipaddress.ip_network(LOOPBACK[1])}


def unmapped(address: Address) -> Address:
    """An IPv4-mapped IPv6 address as the IPv4 one: the same peer, whichever socket family the listener has."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def peer_address(host: str) -> Address | None:
    """The address of a peer as Twisted names it (a zone suffix dropped, unmapped); None for what is no address."""
    try:
        return unmapped(ipaddress.ip_address(host.split("%", 1)[0]))
    except ValueError:
        return None


class Permission(enum.Enum):
    READ = "READ"
    WRITE = "WRITE"


class Authentication(enum.Enum):
    """How the gateway knows who a caller is; the owner rules treat every way but NONE alike."""

    NONE = "anonymous"  # a remote peer over plain HTTP: it gets default_owner
    SOCKET = "socket"  # a loopback peer: the kernel says which local user owns its socket
    CERTIFICATE = "certificate"  # a client certificate, its subject mapped by the certificate map file
    PASSWORD = "password"  # HTTP Basic over TLS, checked against the password file
    BROKER = "broker"  # an AMQP message's user_id, which the broker checked against the publisher's login
    IDTOKEN = "idtoken"  # an HTCondor IDTOKEN (a bearer token over TLS) signed with one of the gateway's keys
    SCITOKEN = "scitoken"  # a SciToken (a bearer token over TLS) from a trusted issuer, mapped by the map file


@dataclass(frozen=True)
class Caller:
    """The peer of one request: its address and, when known, its user name (``None`` = anonymous).

    ``user`` may be ``user@domain`` (a certificate map file's answer); the owner is the part before ``@``.
    ``permissions``: what a token's scope bounds the caller to (None: not bounded, what its identity may do); not
    part of who the caller is, so that its transactions, staging areas and limits are the same whatever it holds."""

    host: str
    user: str | None = None
    authentication: Authentication = Authentication.NONE
    permissions: frozenset[Permission] | None = field(default=None, compare=False)


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
        address = _LOCAL_SOCKET_ADDRESS if host == LOCAL_SOCKET_HOST else peer_address(host)
        return address is not None and any(address in network for network in self._networks)

    def beyond_loopback(self) -> bool:
        """Whether the list admits any host that is not this machine's loopback."""
        return self._any or any(not network.subnet_of(_LOOPBACK_NETWORKS[network.version])  # type: ignore[arg-type]
                                for network in self._networks)

    def __repr__(self) -> str:
        return f"HostList({list(self.entries)!r})"


ROOT = "root"

#: attributes the schedd assigns when a job enters the queue: a client's values (legacy clients send
#: createJobTemplate's whole ad back) are dropped at submit and replaced by the schedd's own
REPLACED_AT_SUBMIT = frozenset(
    {"User", "ClusterId", "ProcId", "GlobalJobId", "QDate", "EnteredCurrentStatus", "MyType", "TargetType",
     "ServerTime"}) | PRIVATE_ATTRIBUTES

#: the job's state and the bookkeeping its life cycle keeps; only the schedd's own transitions change them
STATE_BOOKKEEPING = frozenset(
    {"JobStatus", "LastJobStatus", "HoldReasonCode", "HoldReasonSubCode", "LastHoldReasonCode", "NumSystemHolds",
     "NumJobStarts", "NumJobCompletions", "NumRestarts", "JobStartDate", "JobCurrentStartDate", "CompletionDate",
     "ExitCode", "ExitStatus", "ExitBySignal", "ExitSignal", "RemoteHost"})

#: attributes no client may change on a queued job: Owner (chosen at submit, under the owner check), what the
#: schedd assigns, and the state bookkeeping
SCHEDD_OWNED = frozenset({"Owner"}) | REPLACED_AT_SUBMIT | STATE_BOOKKEEPING

_REPLACED_AT_SUBMIT = frozenset(name.lower() for name in REPLACED_AT_SUBMIT)
_SCHEDD_OWNED = frozenset(name.lower() for name in SCHEDD_OWNED)


def replaced_at_submit(name: str) -> bool:
    """Whether the schedd assigns attribute ``name`` itself at submit (ClassAd names ignore case)."""
    return name.lower() in _REPLACED_AT_SUBMIT


def schedd_owned(name: str) -> bool:
    """Whether attribute ``name`` is the schedd's, so clients may not change it (ClassAd names ignore case)."""
    return name.lower() in _SCHEDD_OWNED


class OwnerUse(enum.Enum):
    """What a caller wants to do with an owner's jobs (the words go into the refusal)."""

    SUBMIT = "submit jobs owned by"
    ACT = "act on jobs owned by"  # hold, release, remove, suspend, continue, change, read the files of


class NotOwner(PermissionError):
    """An owner rule refused the caller; the message says who, which owner, and why."""


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
        if caller.permissions is not None and permission not in caller.permissions:
            raise BirdbathError.fail(f"Permission denied: the token's scope does not grant {permission.value} "
                                     f"(condor:/{permission.value})")
        hosts = self.allow_read if permission is Permission.READ else self.allow_write
        # WRITE implies READ, as in HTCondor's authorisation levels.
        if hosts.allows(caller.host) or (permission is Permission.READ and self.allow_write.allows(caller.host)):
            return
        raise BirdbathError.fail("Permission denied")

    # -- owners -------------------------------------------------------------------------------------
    @staticmethod
    def identified(caller: Caller) -> bool:
        """Whether the gateway knows who the caller is (socket, certificate or password), not just its address."""
        return caller.authentication is not Authentication.NONE and caller.user is not None

    def effective_user(self, caller: Caller) -> str:
        """The owner the caller's jobs get when they do not say otherwise, and whose jobs it may act on."""
        return _owner_name(caller.user) if caller.user else self.default_owner

    def is_super_user(self, caller: Caller) -> bool:
        """An identified caller named in ``queue_super_users`` (an anonymous caller never is one)."""
        return self.identified(caller) and self.effective_user(caller) in self.queue_super_users

    def owner_refusal(self, caller: Caller, owner: object, use: OwnerUse) -> str | None:
        """Why ``caller`` may not submit as or act on ``owner`` (a job's Owner value), or None when it may.

        The one owner check of both APIs: the caller's effective user; identified queue super users; anonymous
        callers when ``queue_all_users_trusted``.  Owner root needs a caller identified as root (to act on root's
        jobs, an identified super user will do)."""
        user = self.effective_user(caller)
        identified = self.identified(caller)
        who = f"user {caller.user!r}" if identified else "an anonymous client"
        if owner == ROOT:
            if (identified and user == ROOT) or (use is OwnerUse.ACT and self.is_super_user(caller)):
                return None
            only = "a caller identified as root" if use is OwnerUse.SUBMIT else "root and the queue super users"
            return f"{who} may not {use.value} 'root': only {only} may"
        if owner == user:
            return None
        if self.is_super_user(caller):
            return None
        if not identified and self.queue_all_users_trusted:
            return None
        shown = repr(owner) if isinstance(owner, str) else "nobody (the job has no Owner)"
        if identified:
            return f"{who} may not {use.value} {shown}: only its own ({user!r}), as it is not in queue_super_users"
        return (f"{who} may not {use.value} {shown}: anonymous clients use default_owner {user!r} "
                f"(queue_all_users_trusted is false)")

    def check_owner(self, caller: Caller, owner: object, use: OwnerUse) -> None:
        """Raise :class:`NotOwner` with the reason when :meth:`owner_refusal` refuses."""
        refusal = self.owner_refusal(caller, owner, use)
        if refusal is not None:
            raise NotOwner(refusal)

    def may_act(self, caller: Caller, owner: object) -> bool:
        """Whether the caller may act on (hold, remove, change, read the files of) a job with this Owner."""
        return self.owner_refusal(caller, owner, OwnerUse.ACT) is None

    def submit_owner(self, caller: Caller, requested: object) -> str:
        """The Owner of a job the caller submits: the one its ad names (a string, which the owner check must
        allow), or its effective user when the ad names none or UNDEFINED (which must pass the check too: an
        anonymous default_owner of root does not)."""
        if requested is None or isinstance(requested, classad2.Value):
            owner = self.effective_user(caller)
        elif isinstance(requested, str):
            owner = requested
        else:
            raise NotOwner("Owner must be a string")
        self.check_owner(caller, owner, OwnerUse.SUBMIT)
        return owner


def _owner_name(user: str) -> str:
    """``user@domain`` maps to the owner ``user``, as qmgmt did."""
    return user.split("@", 1)[0]
