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


class Refused(GatewayError, PermissionError):
    """The gateway refused the request over HTTP (401 wrong password or token, 403 not allowed, 429 a login
    penalty): what a person reads is the gateway's own reason, not the HTTP library's "401 Client Error"."""

    def __init__(self, operation: str, status: int, message: str) -> None:
        super().__init__(operation, f"HTTP {status}", message)
        self.status = status

    def __str__(self) -> str:
        return f"{self.message} (HTTP {self.status})"


class BrokerUnavailable(ConnectionError):
    """The AMQP broker cannot be reached, or it refused the login."""


def refusal_reason(body: bytes, content_type: str | None) -> str | None:
    """The reason in the body of a gateway's refusal, in whichever front end's form it came: a SOAP fault's
    faultstring, the JSON API's status text, a REST problem's detail, or plain text (None: none to read)."""
    import html
    import json
    import re

    text = body.decode("utf-8", "replace").strip()
    kind = (content_type or "").lower()
    if "json" in kind:
        try:
            document = json.loads(text)
        except ValueError:
            return text or None
        if isinstance(document, dict):
            status = document.get("status")
            found = document.get("detail") or (status.get("text") if isinstance(status, dict) else None)
            return str(found) if found else None
        return None
    if "xml" in kind:
        fault = re.search(r"<(?:\w+:)?faultstring[^>]*>(.*?)</(?:\w+:)?faultstring>", text, re.DOTALL)
        return html.unescape(fault.group(1).strip()) if fault else None
    return text.splitlines()[0] if text else None
