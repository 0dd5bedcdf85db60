"""The client object: a Birdbath condorSchedd service reached through zeep."""

from __future__ import annotations

import functools
import getpass
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .ads import from_struct, parse_constraint, to_struct
from .credentials import Credentials
from .errors import GatewayError, GatewayUnavailable, Refused, UnknownJob, refusal_reason
from .jobs import FINAL_STATES, JOB_STATES, JobId, JobStatus
from .submission import GatewayHttp, SubmissionApi

__all__ = ["CHUNK", "JOB_STATES", "JobId", "JobStatus", "Progress", "Schedd", "Transaction"]

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)
CHUNK = 1024 * 1024  # base64 makes it ~1.4 MB on the wire, well under the gateway's default request cap


def connect(url: str, service: str, wsdl: str | None, timeout: float, credentials: Credentials,
            shared_port_id: str | None = None, local_socket: Path | None = None) -> Any:
    """The zeep service ``service`` of the server at ``url`` (ending in "/"), from ``wsdl`` or the WSDL it serves
    (``<service>.wsdl``); through condor_shared_port to the daemon ``shared_port_id`` when one is given, through
    the gateway's ``local_socket`` when one is given."""
    import zeep
    from zeep.transports import Transport

    from .localsocket import LocalSocketAdapter
    from .sharedport import SharedPortAdapter

    session = credentials.session()
    if shared_port_id is not None:
        session.mount(url, SharedPortAdapter(shared_port_id))
    if local_socket is not None:
        session.mount(url, LocalSocketAdapter(local_socket))
    try:
        client = zeep.Client(wsdl or f"{url}{service}.wsdl", transport=Transport(timeout=timeout, session=session))
    except Exception as exc:  # requests' connection errors, a refusal, or a 404 from something else
        refused = system_error(exc)
        if refused is not None:
            raise unreachable(url, refused) from None
        said = refusal(f"{service}.wsdl", exc)
        if said is not None:
            raise said from None
        raise GatewayUnavailable(f"cannot read the WSDL of the gateway at {url} ({service}.wsdl): {exc}") from None
    return client.create_service(f"{{urn:condor}}{service}", url)


def system_error(exc: BaseException) -> OSError | None:
    """The operating system's error at the root of a connection failure (requests wraps urllib3's, which wraps the
    socket's), None when there is none."""
    pending: list[object] = [exc]
    seen: set[int] = set()
    found = None
    while pending:
        current = pending.pop()
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno is not None and current.strerror:
            found = current
        pending += [current.__cause__, current.__context__, getattr(current, "reason", None),
                    getattr(current, "exception", None), *current.args]  # (pika keeps it in .exception)
    return found


def refusal(operation: str, exc: BaseException) -> Refused | None:
    """The gateway's refusal of the caller (HTTP 401, 403 or 429) with the reason its body gives, from requests'
    HTTPError or zeep's TransportError; None for any other failure."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None) or getattr(exc, "status_code", None)
    if status not in (401, 403, 429):
        return None
    body = getattr(response, "content", None) or getattr(exc, "content", None) or b""
    content_type = response.headers.get("Content-Type") if response is not None else "text/xml"
    return Refused(operation, status, refusal_reason(body, content_type) or f"refused (HTTP {status})")


def unreachable(url: str, error: OSError) -> GatewayUnavailable:
    """What a person reads when nothing answers: "cannot connect to the gateway at URL: connection refused"."""
    return GatewayUnavailable(f"cannot connect to the gateway at {url}: {error.strerror[:1].lower()}"
                              f"{error.strerror[1:]}")


def invoke(service: Any, url: str, operation: str, *args: Any) -> Any:
    """One operation of a zeep service: a SOAP fault raises GatewayError, an unreachable server GatewayUnavailable."""
    import requests
    import zeep.exceptions

    try:
        return getattr(service, operation)(*args)
    except requests.exceptions.ConnectionError as exc:
        refused = system_error(exc)
        if refused is not None:
            raise unreachable(url, refused) from None
        raise GatewayUnavailable(f"cannot reach the gateway at {url}: {exc}") from None
    except zeep.exceptions.Fault as exc:
        raise GatewayError(operation, "FAULT", exc.message) from None
    except zeep.exceptions.TransportError as exc:
        raise refusal(operation, exc) or GatewayUnavailable(f"the gateway at {url} answered {operation} with HTTP "
                                                            f"{exc.status_code}") from None
    except zeep.exceptions.Error as exc:  # an answer that is no SOAP (a proxy's page, a cut connection)
        raise GatewayUnavailable(f"the answer of {url} to {operation} is no Birdbath answer: {exc}") from None


class Schedd:
    """``Schedd("http://host:1984/")``, or ``Schedd()`` for the gateway on this machine (its local socket, where the
    kernel tells it who we are; :mod:`.localsocket`), or ``Schedd("unix:/path/to/birdbath.sock")``; ``wsdl`` names another copy of condorSchedd.wsdl (a file or URL) for
    servers that do not publish one, such as an HTCondor schedd without ENABLE_WEB_SERVER; ``credentials`` are for a
    gateway served over HTTPS (a client certificate, or a user name and password).  A gateway behind
    condor_shared_port is ``<host:9618?sock=ID>`` or ``http://host:9618/?sock=ID`` (:mod:`.sharedport`)."""

    def __init__(self, url: str | None = None, wsdl: str | None = None, timeout: float = 60,
                 credentials: Credentials = Credentials()) -> None:
        from .localsocket import resolve

        self.address = url
        self.url, self.shared_port_id, self.local_socket = resolve(url)
        self.timeout = timeout
        self.credentials = credentials
        self._service = connect(self.url, "condorSchedd", wsdl, timeout, credentials, self.shared_port_id,
                                self.local_socket)

    # -- plumbing -----------------------------------------------------------------------------------
    def call(self, operation: str, *args: Any) -> Any:
        """Call an operation; a non-SUCCESS status raises GatewayError, an unreachable gateway GatewayUnavailable."""
        where = f"unix:{self.local_socket}" if self.local_socket is not None else self.url
        answer = invoke(self._service, where, operation, *args)
        status = answer if hasattr(answer, "code") else answer.status
        if status.code != "SUCCESS":
            raise GatewayError(operation, status.code, status.message)
        return answer

    @functools.cached_property
    def http(self) -> GatewayHttp:
        """The same gateway's JSON paths: its submission API and its REST face."""
        return GatewayHttp(self.url, self.timeout, self.credentials, self.shared_port_id, self.local_socket)

    @functools.cached_property
    def submission_api(self) -> SubmissionApi:
        """The same gateway's submission API, which answers for jobs that left the queue (Birdbath cannot)."""
        return SubmissionApi(self.http)

    def owner(self) -> str:
        """The owner the gateway takes us for (whose jobs are "mine", as condor_q lists them by default): the user
        its certificate map, password file or token says we are, or the local user on its socket; the client cannot
        know it itself over TLS or with a token.  A gateway without the REST face (an HTCondor schedd) cannot say:
        then the password login's user name, else the local login name."""
        try:
            return str(self.http.who_am_i()["owner"])
        except GatewayUnavailable:
            return self.credentials.username or getpass.getuser()

    # -- information ----------------------------------------------------------------------------------
    def version(self) -> str:
        return self.call("getVersionString").message

    def platform(self) -> str:
        return self.call("getPlatformString").message

    # -- submitting -----------------------------------------------------------------------------------
    def transaction(self, duration: int = 60) -> "Transaction":
        """``with schedd.transaction() as txn:`` commits on success and aborts on an exception."""
        return Transaction(self, self.call("beginTransaction", duration).transaction)

    def submit(self, ad: Mapping[str, Any], count: int = 1, files: Mapping[str, bytes | Path] | None = None,
               progress: Progress | None = None) -> list[JobId]:
        """Submit ``count`` jobs of one ad in a new cluster, spooling ``files`` for each."""
        return self.submit_many([ad] * count, files, progress)

    def submit_many(self, ads: Sequence[Mapping[str, Any]], files: Mapping[str, bytes | Path] | None = None,
                    progress: Progress | None = None) -> list[JobId]:
        with self.transaction() as txn:
            return txn.submit_cluster(txn.new_cluster(), [(ad, files or {}) for ad in ads], progress)

    def submit_dag(self, dag: Path, owner: str | None = None, keep: bool = True, **extra: Any) -> JobId:
        """Submit a DAG (on a file system the gateway shares) as condor_submit_dag would."""
        from .dag import dagman_ad

        with self.transaction() as txn:
            cluster = txn.new_cluster()
            job = JobId(cluster, txn.new_job(cluster))
            txn.submit(job, dagman_ad(dag, cluster, owner=owner, keep=keep, **extra))
        self.call("requestReschedule")
        return job

    # -- queue ----------------------------------------------------------------------------------------
    def query(self, constraint: str | None = None) -> list[dict[str, Any]]:
        """Ads of the queued jobs that match ``constraint``; a constraint that does not parse is a ValueError naming
        it (the gateway would answer no jobs)."""
        if constraint:
            parse_constraint(constraint)
        array = self.call("getJobAds", None, constraint).classAdArray
        return [from_struct(ad) for ad in (array.item if array is not None else [])]

    def job(self, job: JobId, history: bool = False) -> dict[str, Any] | None:
        """The job's ad from the queue, None if it is not there.  Birdbath's getJobAd answers UNKNOWNJOB once a
        job has left the queue; with ``history`` its last ad then comes from the history, through the submission
        API (a gateway without one raises GatewayUnavailable)."""
        try:
            return from_struct(self.call("getJobAd", None, job.cluster, job.proc).classAd)
        except GatewayError as exc:
            if exc.code != "UNKNOWNJOB":
                raise
        return self.submission_api.job_ad(job) if history else None

    def history(self, constraint: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Full ads of the jobs that left the queue and match ``constraint``, newest first (by the time they
        entered their final state, then by id), at most ``limit`` of them.

        Birdbath has no history call, so this is one getHistory request to the same gateway's submission API,
        which selects, orders and limits on the server.  The constraint is parsed here first, so a syntax error
        is a ValueError naming it (and costs no request)."""
        if constraint:
            parse_constraint(constraint)
        return self.submission_api.history(constraint, limit)

    def hold(self, job: JobId, reason: str | None = None) -> None:
        self.call("holdJob", None, job.cluster, job.proc, reason, False, False, False)

    def release(self, job: JobId, reason: str | None = None) -> None:
        self.call("releaseJob", None, job.cluster, job.proc, reason, False, False)

    def remove(self, job: JobId, reason: str | None = None) -> None:
        self.call("removeJob", None, job.cluster, job.proc, reason, False)

    def set_attribute(self, job: JobId, name: str, value: str) -> None:
        """Set an attribute of a queued job to ClassAd expression text (Birdbath has no call for it: the same
        gateway's submission API's setAttribute)."""
        self.submission_api.set_attribute(job, name, value)

    def remove_cluster(self, cluster: int, reason: str | None = None) -> None:
        """Remove every job of the cluster that is not removed or completed yet (one call, as condor_rm 27)."""
        self.call("removeCluster", None, cluster, reason)

    def wait(self, job: JobId, timeout: float | None = None, poll: float = 0.5,
             progress: Callable[[dict[str, Any] | None], None] | None = None) -> dict[str, Any] | None:
        """Poll until the job has completed or was removed and return its final ad, with ExitCode, also when it
        has already left the queue (then from the history); ``None`` if the gateway knows no such job.  A held
        job is not an end: it may be released."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            current = self.job(job, history=True)
            if progress is not None:
                progress(current)
            if current is None or JobStatus.of(current) in FINAL_STATES:
                return current
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {job} did not finish within {timeout:g} s "
                                   f"(it is {JOB_STATES.get(current.get('JobStatus'), '?')})")
            time.sleep(poll)

    # -- output ---------------------------------------------------------------------------------------
    def files(self, job: JobId) -> dict[str, int]:
        info = self.call("listSpool", None, job.cluster, job.proc).info
        return {item.name: item.size for item in (info.item if info is not None else [])}

    def download(self, job: JobId, destination: Path, names: Sequence[str] | None = None,
                 chunk_size: int = CHUNK, progress: Progress | None = None) -> list[Path]:
        """Fetch spool files (all when ``names`` is None) into ``destination``, which is created only once the job
        is known to be in the queue (UnknownJob otherwise: listSpool lists nothing for an unknown job).  The
        output and error of a job submitted with ``-spool`` go back to the sub-directories the submit file named
        (:func:`.spooling.places`)."""
        from .spooling import places

        ad = self.job(job)
        if ad is None:
            raise self._not_queued(job, "listSpool")
        homes = places(ad)
        sizes = self.files(job)
        wanted = list(sizes) if names is None else list(names)
        total, done = sum(sizes.get(name, 0) for name in wanted), 0
        destination.mkdir(parents=True, exist_ok=True)
        written = []
        for name in wanted:
            if name not in sizes:
                raise GatewayError("listSpool", "UNKNOWNFILE", f"job {job} has no file {name!r} in its spool")
            target = destination / homes.get(name, Path(name))
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as stream:
                for offset in range(0, sizes[name], chunk_size):
                    length = min(chunk_size, sizes[name] - offset)
                    data = self.call("getFile", None, job.cluster, job.proc, name, offset, length).data or b""
                    stream.write(data)
                    done += len(data)
                    if progress is not None:
                        progress(done, total)
            written.append(target)
        return written

    def close_spool(self, job: JobId) -> None:
        self.call("closeSpool", None, job.cluster, job.proc)

    def _not_queued(self, job: JobId, operation: str) -> UnknownJob:
        """The error for a job that is not in the queue, saying why: it left (its spool went with it), or the
        gateway never had it."""
        try:
            final = self.submission_api.job_ad(job)
        except GatewayUnavailable:  # no submission API: only the queue could be asked
            return UnknownJob(operation, f"job {job} is not in the queue")
        if final is None:
            return UnknownJob.nowhere(operation, job)
        return UnknownJob(operation, f"job {job} has left the queue "
                                     f"({JOB_STATES.get(final.get('JobStatus'), '?').lower()}); its spool went with it")


class Transaction:
    """An open Birdbath transaction (a lease the server renews on every call that carries it)."""

    def __init__(self, schedd: Schedd, wire: Any) -> None:
        self._schedd = schedd
        self.wire = wire
        self.open = True

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if not self.open:
            return
        if exc_type is None:
            self.commit()
        else:
            try:
                self.abort()
            except (GatewayError, GatewayUnavailable):
                pass  # the original error matters more; the lease expires anyway

    def _call(self, operation: str, *args: Any) -> Any:
        return self._schedd.call(operation, self.wire, *args)

    def new_cluster(self) -> int:
        return self._call("newCluster").integer

    def new_job(self, cluster: int) -> int:
        return self._call("newJob", cluster).integer

    def upload(self, job: JobId, name: str, data: bytes | Path, chunk_size: int = CHUNK,
               progress: Progress | None = None) -> None:
        """declareFile + sendFile in chunks; ``data`` is the bytes or a local file to read."""
        import hashlib

        content = Path(data).read_bytes() if isinstance(data, (str, Path)) else bytes(data)
        self._call("declareFile", job.cluster, job.proc, name, len(content), "MD5HASH",
                   hashlib.md5(content).hexdigest())
        for offset in range(0, max(len(content), 1), chunk_size):
            self._call("sendFile", job.cluster, job.proc, name, offset, content[offset:offset + chunk_size])
            if progress is not None:
                progress(min(offset + chunk_size, len(content)), len(content))

    def submit(self, job: JobId, ad: Mapping[str, Any]) -> None:
        self._call("submit", job.cluster, job.proc, to_struct(ad))

    def submit_cluster(self, cluster: int, jobs: Sequence[tuple[Mapping[str, Any], Mapping[str, bytes | Path]]],
                       progress: Progress | None = None) -> list[JobId]:
        """A job in ``cluster`` (from :meth:`new_cluster`) for each (ad, files to put in its spool)."""
        submitted = []
        for ad, files in jobs:
            job = JobId(cluster, self.new_job(cluster))
            for name, data in files.items():
                self.upload(job, name, data, progress=progress)
            self.submit(job, ad)
            submitted.append(job)
        return submitted

    def extend(self, duration: int) -> None:
        self.wire = self._call("extendTransaction", duration).transaction

    def commit(self) -> None:
        self.open = False
        self._call("commitTransaction")

    def abort(self) -> None:
        self.open = False
        self._call("abortTransaction")
