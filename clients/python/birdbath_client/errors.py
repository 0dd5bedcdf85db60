"""Errors a caller can act on: the gateway cannot be reached, or it answered with a non-SUCCESS status."""

from __future__ import annotations


class GatewayUnavailable(ConnectionError):
    """Nothing answered at the gateway's address (down, wrong port, or not a Birdbath service)."""


class GatewayError(RuntimeError):
    """An operation answered with a Birdbath status other than SUCCESS."""

    def __init__(self, operation: str, code: str, message: str | None) -> None:
        super().__init__(f"{operation} failed: {code}" + (f" ({message})" if message else ""))
        self.operation = operation
        self.code = code
        self.message = message
