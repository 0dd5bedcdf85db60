"""What a token's scope lets its bearer do: HTCondor's ``condor:/LEVEL`` scopes as the core's permissions.

A token may bound its bearer's authorization levels with scopes ``condor:/READ``, ``condor:/WRITE``,
``condor:/ADMINISTRATOR``...; each level brings the ones HTCondor's permission hierarchy says it implies
(``DCpermissionHierarchy``: WRITE implies READ, ADMINISTRATOR and DAEMON imply WRITE, NEGOTIATOR, CONFIG and the
ADVERTISE levels imply READ).  Other scopes (``storage.read:/``...) bound nothing of HTCondor's and are ignored.

An IDTOKEN without any ``condor:/`` scope is not bounded (``None``: what the caller's identity may do, it may do);
a SciToken always is, as HTCondor treats it (no ``condor:/`` scope: no permission at all).
The core checks the permission each operation needs against the bound (:meth:`AccessPolicy.check
<gateway.core.auth.AccessPolicy.check>`), so the operations are classified once, for every front end.
"""

from __future__ import annotations

from collections.abc import Iterable

from gateway.core.auth import Permission

PREFIX = "condor:/"

#: each level and the one it implies directly (HTCondor's ``aImpliedNext``)
IMPLIED = {"WRITE": "READ", "NEGOTIATOR": "READ", "ADMINISTRATOR": "WRITE", "CONFIG": "READ", "DAEMON": "WRITE",
           "ADVERTISE_STARTD": "READ", "ADVERTISE_SCHEDD": "READ", "ADVERTISE_MASTER": "READ"}


def authorizations(scopes: Iterable[str]) -> list[str]:
    """The levels named by the ``condor:/`` scopes among ``scopes`` (``condor:/WRITE`` -> ``WRITE``)."""
    return [scope[len(PREFIX):] for scope in scopes if scope.startswith(PREFIX) and len(scope) > len(PREFIX)]


def implied(levels: Iterable[str]) -> set[str]:
    """The levels and every level they imply."""
    found = set()
    for level in levels:
        while level and level not in found:
            found.add(level)
            level = IMPLIED.get(level, "")
    return found


def permissions(scopes: Iterable[str], *, bounded: bool) -> frozenset[Permission] | None:
    """The core permissions ``scopes`` grant; None when they do not bound the bearer (no ``condor:/`` scope, and
    ``bounded`` is false)."""
    levels = authorizations(scopes)
    if not levels and not bounded:
        return None
    granted = implied(levels)
    return frozenset(permission for permission in Permission if permission.value in granted)
