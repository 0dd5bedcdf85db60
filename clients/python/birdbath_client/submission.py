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
from .errors import GatewayError, GatewayUnavailable, Refused, refusal_reason
from .jobs import JobId
from .localsocket import LocalSocketHandler
from .sharedport import SharedPortHandler

OK = "OK"
NO_MATCH = "NO_MATCH"


class GatewayHttp:
    """JSON over HTTP to the paths of the gateway at a Birdbath URL (its submission API's JSON form, its REST face),
    reached as its Birdbath service is: through condor_shared_port when ``shared_port_id`` is given, through its
    ``local_socket`` when that is, with the same credentials."""

    def __init__(self, url: str, timeout: float = 60, credentials: Credentials = Credentials(),
                 shared_port_id: str | None = None, local_socket: Path | None = None) -> None:
        self.root = url if url.endswith("/") else url + "/"
        self.timeout = timeout
        self.credentials = credentials
        context = credentials.ssl_context() if self.root.startswith("https:") else None
        handlers: list[urllib.request.BaseHandler] = []
        if shared_port_id is not None:
            handlers.append(SharedPortHandler(shared_port_id))
        if local_socket is not None:
            handlers.append(LocalSocketHandler(local_socket))
        self._opener = urllib.request.build_opener(*handlers, urllib.request.HTTPSHandler(context=context))

    def request(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """The JSON answer of ``path`` (a POST of ``params``, a GET without them).  A refusal for who the caller is
        raises :class:`Refused` with the gateway's reason, a 400 GatewayError, other failures GatewayUnavailable
        (the caller says what it means that a path is not served)."""
        url = self.root + path
        data = None if params is None else json.dumps(params).encode()
        request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json",
                                                                  **self.credentials.headers(url)})
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            reason = refusal_reason(exc.read(), exc.headers.get("Content-Type"))
            if exc.code in (401, 403, 429):
                raise Refused(path, exc.code, reason or exc.reason) from None
            if exc.code == 400:  # the gateway refused the request itself (malformed JSON)
                raise GatewayError(path, "BAD_REQUEST", reason) from None
            raise GatewayUnavailable(f"the gateway at {self.root} does not serve {path} (HTTP {exc.code})") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise GatewayUnavailable(f"cannot reach the gateway at {self.root} ({path}): {exc}") from None

    def who_am_i(self) -> dict[str, Any]:
        """Who the gateway takes us for (the REST face's whoAmI): ``owner``, ``user`` (None: anonymous) and
        ``authentication``."""
        return dict(self.request("api/v1/whoami"))


class SubmissionApi:
    """``SubmissionApi(GatewayHttp("http://host:1984/"))``: the submission API of the gateway at that Birdbath
    URL."""

    def __init__(self, http: GatewayHttp) -> None:
        self.http = http

    def call(self, operation: str, **params: Any) -> dict[str, Any]:
        """The answer to one operation; a status other than OK raises GatewayError (NO_MATCH included)."""
        answer = self.http.request(f"submission/json/{operation}", params)
        status = answer.get("status") or {}
        if status.get("code") != OK:
            raise GatewayError(operation, str(status.get("code")), status.get("text"))
        return answer

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
