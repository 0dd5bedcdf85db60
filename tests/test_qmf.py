"""The QMF front end end to end: a real qpidd (``BIRDBATH_QPIDD``), a real gateway with ``[qmf]`` on, and the
console programs MRG's users ran, unchanged, on Python 2.7 with PyPI's ``qpid-qmf`` (``BIRDBATH_PYTHON2``): the
2009 blog's ``mrg.grid`` program and ``com.redhat.grid`` scripts.  Skipped, saying why, without a broker or a
Python 2.7."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from gateway.testing import GatewayProcess
from gateway.testing_qpidd import QpidBroker, console_packages, missing_broker, python2, qpidd

DATA = Path(__file__).parent / "data" / "qmf"
SEED_URL = "amqp://localhost:5672"


def qmf_config(broker: QpidBroker, extra: str = "") -> str:
    return (f'[birdbath]\ndefault_owner = "nobody"\n[qmf]\nenable_qmf = true\nqmf_broker_host = "127.0.0.1"\n'
            f"qmf_broker_port = {broker.port}\nqmf_update_interval = 2\n{extra}[backends.local]\nslots = 0\n")


@pytest.fixture(scope="session")
def console_python() -> tuple[str, Path]:
    """A Python 2.7 and the directory of PyPI's QMF console packages for it."""
    python = python2()
    if python is None:
        pytest.skip("no Python 2.7 for the QMF consoles: set BIRDBATH_PYTHON2 or put python2.7 on PATH")
    return python, console_packages(python)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    if qpidd() is None:
        pytest.skip(missing_broker())
    started = QpidBroker(tmp_path_factory.mktemp("qpidd")).start()
    yield started
    started.stop()


def wait_ready(gateway: GatewayProcess, timeout: float = 60) -> None:
    """Until /readyz says the gateway (its QMF broker connection included) is ready."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(gateway.url + "readyz", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError as exc:
            problem = getattr(exc, "read", lambda: b"")()
        if time.monotonic() > deadline:
            raise AssertionError(f"gateway not ready: {problem!r}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def gateway(broker, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("qmf-gateway")
    process = GatewayProcess(tmp / "state", qmf_config(broker), tmp=tmp).start()
    wait_ready(process)
    yield process
    process.stop()


def console(console_python, script: Path | str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    python, packages = console_python
    return subprocess.run([python, str(script), *args], check=False, capture_output=True, text=True, timeout=timeout,
                          env={"PYTHONPATH": str(packages), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})


def call(console_python, broker, package: str, klass: str, method: str, arguments, selectors=None) -> dict:
    """One method call through qmf.console: {status, text, out}."""
    args = [broker.url(), package, klass, method, repr(arguments)] + ([repr(selectors)] if selectors else [])
    done = console(console_python, DATA / "call.py", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_seeds_qmf_program_runs_unchanged(console_python, broker, gateway, tmp_path):
    program = (DATA / "seed_submit.py").read_text()
    assert program.count(SEED_URL) == 1
    copy = tmp_path / "seed_submit.py"
    copy.write_text(program.replace(SEED_URL, broker.url()))
    done = console(console_python, copy)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Submitted job: ") and "#" in lines[0]
    job_id = lines[0].split(": ", 1)[1]
    assert lines[1] == "Job status: Idle"
    properties = dict(line.strip().split(" = ", 1) for line in lines[3:])
    assert properties["CustomId"] == job_id
    assert properties["Cmd"] == "/bin/sleep" and properties["Args"] == "120" and properties["Owner"] == "nobody"
    assert properties["JobStatus"] == "1"
    cluster = int(job_id.rsplit("#", 1)[1].split(".")[0])
    assert properties["ClusterId"] == str(cluster) and properties["ProcId"] == "0"
