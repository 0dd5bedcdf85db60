"""The embedded backend: a durable SQLite job queue and spool directories on this machine.

``LocalBackend`` is imported when first asked for, so the job launcher (``launcher.py``), which imports only the
few modules it runs with, does not load the whole backend for every job."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import LocalBackend

__all__ = ["LocalBackend"]


def __getattr__(name: str) -> Any:
    if name == "LocalBackend":
        from .backend import LocalBackend

        return LocalBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
