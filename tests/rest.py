"""Helpers for the REST face's tests: plain HTTP calls on loopback, each answer checked against the response schema
the contract (``gateway/rest/openapi.json``) gives for its operation and status."""

from __future__ import annotations

import http.client
import io
import json
import re
import tarfile
import time
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from gateway.rest.contract import Contract

CONTRACT = Contract.load()


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def call(port: int, method: str, path: str, body: bytes | str | dict | None = None,
         content_type: str = "application/json", headers: dict[str, str] | None = None) -> Answer:
    """One request, its answer checked against the contract."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    sent = {"Content-Type": content_type, **(headers or {})} if data is not None else dict(headers or {})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request(method, path, data, sent)
        response = connection.getresponse()
        answer = Answer(response.status, {key.lower(): value for key, value in response.getheaders()},
                        response.read())
    finally:
        connection.close()
    check(method, path, answer)
    return answer


def check(method: str, path: str, answer: Answer) -> None:
    """The answer is what the contract says this operation answers with this status: its media type, and a body
    valid against its schema (a problem document for every refusal)."""
    if answer.status == 413 and answer.headers["content-type"].startswith("text/xml"):
        return  # the site refuses a body over max_request_bytes before any resource sees it, as a SOAP fault
    found = CONTRACT.match(method.encode(), path.split("?")[0].rstrip("/"))
    if not isinstance(found, tuple):
        assert answer.headers["content-type"] == "application/problem+json", answer
        validate(CONTRACT.document["components"]["schemas"]["Problem"], answer.json)
        return
    operation = next(op for methods in CONTRACT.document["paths"].values() for op in methods.values()
                     if op["operationId"] == found[0])
    documented = operation["responses"].get(str(answer.status))
    if documented is None:
        assert answer.status in (405, 413, 500) and answer.status != 500, (answer.status, answer.body[:500])
        return
    media, = documented["content"]
    assert answer.headers["content-type"] == media, answer
    if media.endswith("json"):
        validate(documented["content"][media]["schema"], answer.json)


def validate(schema: dict[str, Any], value: Any) -> None:
    """``value`` against a schema of the contract (its ``$ref``s resolved in the document)."""
    rooted = {**schema, "components": CONTRACT.document["components"]}
    Draft202012Validator(rooted).validate(value)


def tar_of(files: dict[str, bytes | str]) -> bytes:
    """A tar archive of regular files."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def tar_members(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        return {info.name: archive.extractfile(info).read() for info in archive if info.isfile()}  # type: ignore


def wait_for(port: int, job: str, done: str = r"^(4|5)$", timeout: float = 60) -> dict[str, Any]:
    """The job's ad once its JobStatus matches ``done`` (4 completed, 5 held by default)."""
    deadline = time.monotonic() + timeout
    while True:
        ad = call(port, "GET", f"/api/v1/jobs/{job}").json
        if re.match(done, str(ad["JobStatus"])) or time.monotonic() > deadline:
            return ad
        time.sleep(0.2)
