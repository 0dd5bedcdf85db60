"""Birdbath status codes and the exception that carries one from the core to a front end.

Application errors in Birdbath are never SOAP faults: they travel as a ``Status`` in an HTTP 200 answer.
The core raises :class:`BirdbathError`; the SOAP layer turns it into the ``Status`` element.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class StatusCode(str, enum.Enum):
    """The wire values of ``condor:StatusCode`` (the C enum values are their positions)."""

    SUCCESS = "SUCCESS"
    FAIL = "FAIL"
    INVALIDTRANSACTION = "INVALIDTRANSACTION"
    UNKNOWNCLUSTER = "UNKNOWNCLUSTER"
    UNKNOWNJOB = "UNKNOWNJOB"
    UNKNOWNFILE = "UNKNOWNFILE"
    INCOMPLETE = "INCOMPLETE"
    INVALIDOFFSET = "INVALIDOFFSET"
    ALREADYEXISTS = "ALREADYEXISTS"


SUCCESS_MESSAGE = "Success"


@dataclass(frozen=True)
class Status:
    """A Birdbath ``Status``: a code and an optional message (``next`` is never filled, as in the original)."""

    code: StatusCode = StatusCode.SUCCESS
    message: str | None = SUCCESS_MESSAGE

    @property
    def ok(self) -> bool:
        return self.code is StatusCode.SUCCESS


OK = Status()


class BirdbathError(Exception):
    """An application-level failure with the status code and text the original schedd used for it."""

    def __init__(self, code: StatusCode, message: str) -> None:
        super().__init__(message)
        self.status = Status(code, message)

    @classmethod
    def fail(cls, message: str) -> "BirdbathError":
        return cls(StatusCode.FAIL, message)


def invalid_transaction() -> BirdbathError:
    return BirdbathError(StatusCode.INVALIDTRANSACTION, "Invalid transaction")
