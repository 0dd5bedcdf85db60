"""The backend for a real HTCondor pool, through the official Python bindings."""

from .backend import HTCondorBackend

__all__ = ["HTCondorBackend"]
