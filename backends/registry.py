"""Finding backends: every installed distribution may add one under the ``birdbath.backends`` entry point group.

An entry point names a factory ``(state_dir: Path, **options) -> ScheddBackend``; what it makes is checked against
the interface (required methods, declared capabilities) before the gateway uses it.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from .interface import ENTRY_POINT_GROUP, ScheddBackend, check


class UnknownBackend(LookupError):
    pass


def available() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def create(name: str, state_dir: Path, options: dict[str, Any] | None = None) -> ScheddBackend:
    found = available()
    if name not in found:
        installed = ", ".join(sorted(found)) or "none"
        raise UnknownBackend(f"no backend named {name!r}; installed backends: {installed}")
    factory = found[name].load()
    return check(factory(state_dir, **(options or {})), name)
