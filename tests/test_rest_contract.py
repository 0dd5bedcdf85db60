"""The REST face against its OpenAPI document, by tools that know only the document: schemathesis generates requests
for every operation (a bounded number each) against a running gateway and checks each answer (no server error,
documented status and media type, a body valid against its schema, bad input refused); a client generated from
``/openapi.json`` by openapi-python-client submits a job, waits for it and fetches its output."""

from __future__ import annotations

import importlib
import io
import json
import subprocess
import sys
import tarfile
import time
import urllib.request
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from gateway.testing import module_gateway
from tests.rest import tar_members, tar_of

runner = module_gateway("[backends.local]\nslots = 1\n")

#: requests per operation (schemathesis' examples), bounded so the suite stays quick
EXAMPLES = 25


@st.composite
def _archives(draw: st.DrawFn) -> bytes:
    """Upload bodies: small tars of generated names, or bytes that are no tar."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=2048))
    names = draw(st.lists(st.text(min_size=1, max_size=20), max_size=3))
    return tar_of({name: draw(st.binary(max_size=64)) for name in names})


schemathesis.openapi.media_type("application/x-tar", _archives())


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          negative_data_rejection, unsupported_method]


def test_every_operation_answers_as_documented(gateway):
    """Each operation of the served document, with generated valid and invalid requests (schemathesis' pytest
    plugin is not used: it does not run on this pytest)."""
    served = json.loads(urllib.request.urlopen(gateway.url + "openapi.json", timeout=30).read())
    operations = [result.ok() for result in schemathesis.openapi.from_dict(served).get_all_operations()]
    assert len(operations) == sum(len(methods) for methods in served["paths"].values())
    for operation in operations:
        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        def answers_as_documented(case: schemathesis.Case) -> None:
            case.call_and_validate(base_url=gateway.url.rstrip("/"), checks=CHECKS)

        answers_as_documented()


def test_a_client_generated_from_the_contract_submits_waits_and_fetches_output(runner, tmp_path):
    """openapi-python-client makes a package from the served document; it drives a job from submit to output."""
    contract = tmp_path / "openapi.json"
    contract.write_bytes(urllib.request.urlopen(runner.url + "openapi.json", timeout=30).read())
    generator = Path(sys.executable).with_name("openapi-python-client")
    done = subprocess.run([str(generator), "generate", "--path", str(contract), "--output-path",
                           str(tmp_path / "generated"), "--meta", "none"], check=False, capture_output=True,
                          text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        package = "generated"
        client_module = importlib.import_module(f"{package}.client")
        submit = importlib.import_module(f"{package}.api.jobs.submit_jobs")
        get_job = importlib.import_module(f"{package}.api.jobs.get_job")
        put_input = importlib.import_module(f"{package}.api.files.put_job_input")
        get_output = importlib.import_module(f"{package}.api.files.get_job_output")
        types = importlib.import_module(f"{package}.types")
        client = client_module.Client(base_url=runner.url.rstrip("/"))

        description = ("executable = run.sh\ntransfer_input_files = in.txt\noutput = out.txt\n"
                       "should_transfer_files = YES\nqueue\n")
        made = submit.sync(client=client, body={"submit_file": description})
        job = made.job_ids[0]
        assert made.awaiting_input == [job]
        archive = tar_of({"run.sh": "#!/bin/sh\ncat in.txt\n", "in.txt": "generated client\n"})
        uploaded = put_input.sync(client=client, job=job, body=types.File(payload=io.BytesIO(archive)))
        assert uploaded.queued == [job]
        deadline = time.monotonic() + 60
        while True:
            ad = get_job.sync(client=client, job=job)
            status = ad.additional_properties["JobStatus"]
            if status == 4 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert status == 4
        output = get_output.sync_detailed(client=client, job=job)
        assert output.status_code == 200
        assert tar_members(output.content)["out.txt"] == b"generated client\n"
        assert tarfile.is_tarfile(io.BytesIO(output.content))
    finally:
        sys.path.remove(str(tmp_path))
        for name in [name for name in sys.modules if name == "generated" or name.startswith("generated.")]:
            del sys.modules[name]
