"""RFC 9457 problem documents (``application/problem+json``) for the REST face's refusals.

The reasons are the core's, as the other APIs give them: a Birdbath status (``UNKNOWNJOB``, ``FAIL`` with its
text) or a submission-API status (``NO_MATCH``...), carried in ``reason`` and ``detail``; the HTTP status says what
kind of refusal it is.  The members ``error``, ``message`` and ``code`` repeat title, detail and status in the form
other HTCondor HTTP API servers answer errors with, so that their clients read ours.
"""

from __future__ import annotations

import json
from http import HTTPStatus

from gateway.core.status import BirdbathError, StatusCode
from gateway.core.submissions import ApiError, ApiStatus

CONTENT_TYPE = b"application/problem+json"

#: the texts of FAILs that refuse a caller for who it is, not for what it asked
_FORBIDDEN = ("Permission denied", "Not job owner", "Not cluster owner", "Owner refused")
_BIRDBATH_STATUS = {StatusCode.UNKNOWNJOB: 404, StatusCode.UNKNOWNCLUSTER: 404, StatusCode.UNKNOWNFILE: 404,
                    StatusCode.INVALIDTRANSACTION: 404, StatusCode.ALREADYEXISTS: 409, StatusCode.INCOMPLETE: 409,
                    StatusCode.INVALIDOFFSET: 400}
_API_STATUS = {ApiStatus.NO_MATCH: 404, ApiStatus.INVALID_OFFSET: 400, ApiStatus.UNIMPLEMENTED: 501,
               ApiStatus.UNAVAILABLE: 503}


class Problem(Exception):
    """A refusal to answer as a problem document: the HTTP status, the core's reason code and its text."""

    def __init__(self, status: int, detail: str, reason: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.reason = reason or HTTPStatus(status).name

    def document(self, instance: str) -> bytes:
        title = HTTPStatus(self.status).phrase
        return json.dumps({"type": "about:blank", "title": title, "status": self.status, "detail": self.detail,
                           "instance": instance, "reason": self.reason,
                           "error": title, "message": self.detail, "code": self.status}).encode()


def _fail_status(text: str) -> int:
    return 403 if text.startswith(_FORBIDDEN) or "'s Owner attribute" in text else 400


def from_core(exc: Exception) -> Problem | None:
    """The problem a core refusal is (None: not a refusal, a bug)."""
    if isinstance(exc, Problem):
        return exc
    if isinstance(exc, BirdbathError):
        code, text = exc.status.code, exc.status.message or ""
        return Problem(_BIRDBATH_STATUS.get(code) or _fail_status(text), text, code.value)
    if isinstance(exc, ApiError):
        return Problem(_API_STATUS.get(exc.code) or _fail_status(exc.text), exc.text, exc.code.value)
    return None
