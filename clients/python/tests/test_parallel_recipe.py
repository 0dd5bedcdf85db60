"""HTCondor's parallel-universe rendezvous recipe, run as written: its submit file and its two ``run.sh`` scripts
(``tests/data/parallel``), submitted with ``birdbath submit``.  The nodes find each other through
``condor_chirp set_job_attr`` / ``get_job_attr`` (the gateway's chirp servers, ``condor_config_val LIBEXEC`` on their
PATH); the second script also copies a file from node 1 to node 0 with ``nc`` (found with ``netstat``).

Node 0 sleeps 60 s in both scripts, so both jobs run side by side (4 slots) and the module takes a minute."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.testing import module_gateway

DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "parallel"
RUNNER = "[backends.local]\nslots = 4\nkill_grace = 1.0\nperiodic_interval = 0.5\n"

gateway = module_gateway(RUNNER)


def birdbath(gateway, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "birdbath_client.cli", "--url", gateway.url, *args],
                          capture_output=True, text=True, timeout=180)


def submit(gateway, directory: Path, script: str) -> int:
    directory.mkdir()
    shutil.copy(DATA / "job.sub", directory / "job.sub")
    shutil.copy(DATA / script, directory / "run.sh")
    submitted = birdbath(gateway, "submit", str(directory / "job.sub"))
    assert submitted.returncode == 0, submitted.stderr
    return int(submitted.stdout.split("cluster ")[1].rstrip(".\n"))


def events(log: Path) -> list[tuple[int, str]]:
    """(event number, job id) of each event of a user log."""
    return [(int(line[:3]), line.split()[1]) for line in log.read_text().splitlines() if line[:3].isdigit()]


@pytest.fixture(scope="module")
def recipes(gateway, tmp_path_factory):
    """Both examples, submitted together and waited for."""
    missing = [tool for tool in ("nc", "netstat") if shutil.which(tool) is None]
    root = tmp_path_factory.mktemp("recipe")
    jobs = {"rendezvous": (root / "rendezvous", submit(gateway, root / "rendezvous", "rendezvous.sh"))}
    if not missing:
        jobs["netcat"] = (root / "netcat", submit(gateway, root / "netcat", "netcat.sh"))
    for _, cluster in jobs.values():
        waited = birdbath(gateway, "wait", f"{cluster}.0", "--timeout", "150")
        assert waited.returncode == 0, (waited.stdout, waited.stderr)
    return jobs, missing


def test_the_rendezvous_example(recipes):
    jobs, _ = recipes
    directory, cluster = jobs["rendezvous"]
    assert (directory / "out.1").read_text() == 'JobServerAddress is "This is my address"\n'
    assert (directory / "out.0").read_text() == "" and (directory / "err.1").read_text() == ""
    found = events(directory / "log")
    ids = [f"({cluster:03d}.000.{node:03d})" for node in (0, 1)]
    assert found[0] == (0, ids[0])
    assert set(found[1:3]) == {(14, ids[0]), (14, ids[1])} and found[3] == (1, ids[0])
    assert set(found[4:6]) == {(15, ids[0]), (15, ids[1])} and found[6] == (5, ids[0])


def test_the_netcat_example(recipes):
    jobs, missing = recipes
    if missing:
        pytest.skip(f"the netcat example needs {' and '.join(missing)} (./dev installs netcat-openbsd, net-tools)")
    directory, cluster = jobs["netcat"]
    server = (directory / "out.0").read_text()
    assert "I'm the server" in server and "Listening on" in server
    assert server.split("Here's the output:\n", 1)[1] == Path("/etc/hosts").read_text()
    assert (directory / "output_file").read_text() == Path("/etc/hosts").read_text()  # node 0's file, back in Iwd
    # node 1's nc (OpenBSD's) waits for the server to close, so node 1 runs until node 0's end kills it: a killed
    # node has no terminated event and its output does not come back
    assert (15, f"({cluster:03d}.000.001)") not in events(directory / "log")
