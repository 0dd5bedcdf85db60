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


class UnknownJob(GatewayError, LookupError):
    """The job is not where the operation needs it (the queue, or the queue and the history): a distinct type,
    so callers can tell "no such job" from a failed operation, and a message that names the job plainly."""

    def __init__(self, operation: str, message: str) -> None:
        super().__init__(operation, "UNKNOWNJOB", message)

    def __str__(self) -> str:
        return str(self.message)

    @classmethod
    def nowhere(cls, operation: str, job: object) -> "UnknownJob":
        """A job the gateway knows neither in its queue nor in its history."""
        return cls(operation, f"job {job} is unknown (neither in the queue nor in the history)")
