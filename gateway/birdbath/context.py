"""What the transport hands each SOAP operation besides its parameters."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core.auth import Caller
from gateway.core.services import ScheddContract
from gateway.core.status import Status

from .adwriter import AdAnswers


@dataclass
class RequestContext:
    caller: Caller
    schedd: ScheddContract
    #: the writers of the job-ad answers (getJobAds, getJobAd), around envelopes cut from the codec's own
    answers: AdAnswers
    #: the Birdbath status the operation answered with, for the request log
    status: Status | None = None
