"""The embedded backend: a durable SQLite job queue and spool directories on this machine."""

from .backend import LocalBackend

__all__ = ["LocalBackend"]
