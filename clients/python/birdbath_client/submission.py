"""The gateway's simplified submission API, in its JSON form (``POST <url>submission/json/<operation>``).

Birdbath has no history call: once a job leaves the queue its getJobAd answers UNKNOWNJOB, as the original
schedd's did.  The same gateway's submission API answers from the history too, so the client asks it for what
Birdbath cannot tell: a finished job's last ad (its ExitCode) and the jobs that left the queue (getHistory).
JSON over the standard library keeps this to one request per call, with no second WSDL to load.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .ads import from_typed_map
from .credentials import Credentials
from .errors import GatewayError, GatewayUnavailable
from .jobs import JobId
from .localsocket import LocalSocketHandler
from .sharedport import SharedPortHandler

OK = "OK"
NO_MATCH = "NO_MATCH"


class SubmissionApi:
    """``SubmissionApi("http://host:1984/")``: the submission API of the gateway at that Birdbath URL (reached
    through condor_shared_port when ``shared_port_id`` is given, through its ``local_socket`` when that is)."""

    def __init__(self, url: str, timeout: float = 60, credentials: Credentials = Credentials(),
                 shared_port_id: str | None = None, local_socket: Path | None = None) -> None:
        self.url = (url if url.endswith("/") else url + "/") + "submission/json/"
        self.timeout = timeout
        self.credentials = credentials
        self._context = credentials.ssl_context() if self.url.startswith("https:") else None
        handlers: list[urllib.request.BaseHandler] = []
        if shared_port_id is not None:
            handlers.append(SharedPortHandler(shared_port_id))
        if local_socket is not None:
            handlers.append(LocalSocketHandler(local_socket))
        self._opener = urllib.request.build_opener(*handlers, urllib.request.HTTPSHandler(context=self._context))

    def call(self, operation: str, **params: Any) -> dict[str, Any]:
        """The answer to one operation; a status other than OK raises GatewayError (NO_MATCH included)."""
        answer = self._post(operation, params)
        status = answer.get("status") or {}
        if status.get("code") != OK:
            raise GatewayError(operation, str(status.get("code")), status.get("text"))
        return answer

    def _post(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(self.url + operation, data=json.dumps(params).encode(),
                                         headers={"Content-Type": "application/json", **self.credentials.headers(self.url)})
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            if exc.code == 400:  # the gateway refused the request itself (malformed JSON)
                raise GatewayError(operation, "BAD_REQUEST", exc.read().decode(errors="replace")) from None
            raise GatewayUnavailable(f"the gateway at {self.url} does not serve the submission API "
                                     f"({operation}: HTTP {exc.code})") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise GatewayUnavailable(f"cannot reach the submission API at {self.url}: {exc}") from None

    def job_ad(self, job: JobId) -> dict[str, Any] | None:
        """The job's ad from the queue or the history; None if the gateway knows no such job."""
        try:
            return from_typed_map(self.call("getJobAd", id=str(job)).get("ad") or {})
        except GatewayError as exc:
            if exc.code == NO_MATCH:
                return None
            raise

    def set_attribute(self, job: JobId, name: str, value: str) -> None:
        """Set one attribute of a queued job to ClassAd expression text (condor_qedit's VALUE), as QMF's
        SetJobAttribute: no type, so the text is parsed as ClassAd."""
        self.call("setAttribute", id=str(job), name=name, value=value)

    def history(self, constraint: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Whole ads of the jobs that left the queue and match the ClassAd ``constraint``, newest first (by the
        time they entered their final state, then by id), at most ``limit`` of them: one getHistory call."""
        params: dict[str, Any] = {}
        if constraint:
            params["constraint"] = constraint
        if limit is not None:
            params["limit"] = limit
        return _summaries(self.call("getHistory", **params))

    def live_summaries(self) -> list[dict[str, Any]]:
        """Summaries (ClusterId, ProcId, JobStatus, Owner, EnteredCurrentStatus, ...) of every queued job."""
        return _summaries(self.call("getJobSummaries", ids=[]))

    def submissions(self) -> list[dict[str, Any]]:
        """Every submission (group of jobs), live or finished, with its per-state counts."""
        return list(self.call("getSubmissions").get("submissions") or [])

    def submission_jobs(self, name: str) -> list[dict[str, Any]]:
        """Summaries of a submission's jobs, queued and in the history."""
        return _summaries(self.call("getSubmissionJobs", name=name))


def _summaries(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return [from_typed_map(job.get("ad") or {}) for job in answer.get("jobs") or []]
