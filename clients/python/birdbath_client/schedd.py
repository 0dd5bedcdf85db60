"""The client object: a Birdbath condorSchedd service reached through zeep."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from .ads import from_struct, to_struct
from .errors import GatewayError, GatewayUnavailable

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)
CHUNK = 1024 * 1024  # base64 makes it ~1.4 MB on the wire, well under the gateway's default request cap

JOB_STATES = {1: "Idle", 2: "Running", 3: "Removed", 4: "Completed", 5: "Held", 6: "Transferring Output",
              7: "Suspended"}


class JobId(NamedTuple):
    cluster: int
    proc: int

    def __str__(self) -> str:
        return f"{self.cluster}.{self.proc}"

    @classmethod
    def parse(cls, text: str) -> "JobId":
        cluster, _, proc = text.partition(".")
        return cls(int(cluster), int(proc or 0))


class Schedd:
    """``Schedd("http://host:1984/")``; ``wsdl`` names another copy of condorSchedd.wsdl (a file or URL) for
    servers that do not publish one, such as an HTCondor schedd without ENABLE_WEB_SERVER."""

    def __init__(self, url: str, wsdl: str | None = None, timeout: float = 60) -> None:
        import zeep
        from zeep.transports import Transport

        self.url = url if url.endswith("/") else url + "/"
        try:
            client = zeep.Client(wsdl or self.url + "condorSchedd.wsdl", transport=Transport(timeout=timeout))
        except Exception as exc:  # requests' connection errors, or a 404 from something else
            raise GatewayUnavailable(f"cannot read the WSDL of the gateway at {self.url}: {exc}") from None
        self._service = client.create_service("{urn:condor}condorSchedd", self.url)

    # -- plumbing -----------------------------------------------------------------------------------
    def call(self, operation: str, *args: Any) -> Any:
        """Call an operation; a non-SUCCESS status raises GatewayError, an unreachable gateway GatewayUnavailable."""
        import requests
        import zeep.exceptions

        try:
            answer = getattr(self._service, operation)(*args)
        except requests.exceptions.ConnectionError as exc:
            raise GatewayUnavailable(f"cannot reach the gateway at {self.url}: {exc}") from None
        except zeep.exceptions.Fault as exc:
            raise GatewayError(operation, "FAULT", exc.message) from None
        status = answer if hasattr(answer, "code") else answer.status
        if status.code != "SUCCESS":
            raise GatewayError(operation, status.code, status.message)
        return answer

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
            cluster = txn.new_cluster()
            jobs = []
            for ad in ads:
                job = JobId(cluster, txn.new_job(cluster))
                for name, data in (files or {}).items():
                    txn.upload(job, name, data, progress=progress)
                txn.submit(job, ad)
                jobs.append(job)
        return jobs

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
        array = self.call("getJobAds", None, constraint).classAdArray
        return [from_struct(ad) for ad in (array.item if array is not None else [])]

    def job(self, job: JobId) -> dict[str, Any] | None:
        try:
            return from_struct(self.call("getJobAd", None, job.cluster, job.proc).classAd)
        except GatewayError as exc:
            if exc.code == "UNKNOWNJOB":
                return None
            raise

    def hold(self, job: JobId, reason: str | None = None) -> None:
        self.call("holdJob", None, job.cluster, job.proc, reason, False, False, False)

    def release(self, job: JobId, reason: str | None = None) -> None:
        self.call("releaseJob", None, job.cluster, job.proc, reason, False, False)

    def remove(self, job: JobId, reason: str | None = None) -> None:
        self.call("removeJob", None, job.cluster, job.proc, reason, False)

    def wait(self, job: JobId, timeout: float | None = None, poll: float = 0.5,
             progress: Callable[[dict[str, Any] | None], None] | None = None) -> dict[str, Any] | None:
        """Poll until the job completes, is removed or leaves the queue; returns its last ad (``None`` if it was
        never seen).  A held job is not an end: it may be released."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last = None
        while True:
            current = self.job(job)
            if progress is not None:
                progress(current)
            if current is None:
                return last
            last = current
            if current.get("JobStatus") in (3, 4):
                return current
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {job} did not finish within {timeout} s "
                                   f"(it is {JOB_STATES.get(current.get('JobStatus'), '?')})")
            time.sleep(poll)

    # -- output ---------------------------------------------------------------------------------------
    def files(self, job: JobId) -> dict[str, int]:
        info = self.call("listSpool", None, job.cluster, job.proc).info
        return {item.name: item.size for item in (info.item if info is not None else [])}

    def download(self, job: JobId, destination: Path, names: Sequence[str] | None = None,
                 chunk_size: int = CHUNK, progress: Progress | None = None) -> list[Path]:
        """Fetch spool files (all when ``names`` is None) into ``destination``."""
        sizes = self.files(job)
        wanted = list(sizes) if names is None else list(names)
        total, done = sum(sizes.get(name, 0) for name in wanted), 0
        destination.mkdir(parents=True, exist_ok=True)
        written = []
        for name in wanted:
            if name not in sizes:
                raise GatewayError("listSpool", "UNKNOWNFILE", f"job {job} has no file {name!r} in its spool")
            target = destination / name
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

    def extend(self, duration: int) -> None:
        self.wire = self._call("extendTransaction", duration).transaction

    def commit(self) -> None:
        self.open = False
        self._call("commitTransaction")

    def abort(self) -> None:
        self.open = False
        self._call("abortTransaction")
