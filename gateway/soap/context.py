"""What the transport hands each SOAP operation besides its parameters."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core.auth import Caller
from gateway.core.schedd import BirdbathSchedd
from gateway.core.status import Status

from .adwriter import AdAnswers


@dataclass
class RequestContext:
    caller: Caller
    schedd: BirdbathSchedd
    #: writers for the job-ad answers, which bypass spyne's slow serialiser
    answers: AdAnswers
    #: the Birdbath status the operation answered with, for the request log
    status: Status | None = None
