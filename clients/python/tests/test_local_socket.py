"""The client on the gateway's machine: its local Unix socket by default (the kernel names the caller), explicit
addresses as given."""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from birdbath_client import Schedd, localsocket
from gateway.testing_daemons import short_directory


@pytest.fixture
def own_state() -> Path:
    """A short XDG_STATE_HOME (a Unix socket's path holds 107 bytes; pytest's paths are long)."""
    directory = short_directory()
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def birdbath(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key != "BIRDBATH_URL"}
    return subprocess.run([sys.executable, "-m", "birdbath_client.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env={**environment, **env}, check=False)


def test_the_cli_and_schedd_use_ones_own_gateways_local_socket_by_default(start_gateway, own_state, tmp_path,
                                                                         monkeypatch):
    gateway = start_gateway(state_dir=own_state / "birdbath-gateway")
    (tmp_path / "job.sub").write_text("executable = /bin/sleep\narguments = 600\nqueue\n")
    submitted = birdbath("submit", "job.sub", cwd=tmp_path, XDG_STATE_HOME=str(own_state))
    assert submitted.returncode == 0, submitted.stderr
    assert "submitted to cluster 1" in submitted.stdout
    owners = birdbath("q", "-af", "Owner", cwd=tmp_path, XDG_STATE_HOME=str(own_state))
    assert owners.stdout.split() == [getpass.getuser()], owners.stderr
    assert "from localhost: SUCCESS" in gateway.log() and f"({getpass.getuser()} by socket)" in gateway.log()
    assert "from 127.0.0.1" not in gateway.log()
    monkeypatch.setenv("XDG_STATE_HOME", str(own_state))
    schedd = Schedd()
    assert schedd.local_socket == own_state / "birdbath-gateway" / "birdbath.sock"
    assert schedd.version() and schedd.submission_api.call("getSubmissions")["status"]["code"] == "OK"


def test_an_explicit_url_wins_over_the_local_socket(start_gateway, own_state, tmp_path):
    gateway = start_gateway(state_dir=own_state / "birdbath-gateway")
    listed = birdbath("q", cwd=tmp_path, XDG_STATE_HOME=str(own_state), BIRDBATH_URL=gateway.url)
    assert listed.returncode == 0, listed.stderr
    by_path = birdbath("--url", f"unix:{gateway.state_dir / 'birdbath.sock'}", "q", cwd=tmp_path)
    assert by_path.returncode == 0, by_path.stderr
    log = gateway.log()
    assert "from 127.0.0.1" in log and "from localhost" in log


def test_without_a_local_socket_the_default_is_the_plain_port(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setattr(localsocket, "SYSTEM_SOCKET", tmp_path / "none" / "birdbath.sock")
    assert localsocket.default_address() == "http://127.0.0.1:1984/"
    (tmp_path / "birdbath-gateway").mkdir()
    (tmp_path / "birdbath-gateway" / "birdbath.sock").write_text("not a socket")
    assert localsocket.default_address() == "http://127.0.0.1:1984/"


@pytest.mark.parametrize("address, path", [
    ("unix:/var/lib/birdbath-gateway/birdbath.sock", "/var/lib/birdbath-gateway/birdbath.sock"),
    ("unix:///run/b.sock", "/run/b.sock"),
    ("unix:relative.sock", "relative.sock"),
    ("http://127.0.0.1:1984/", None),
])
def test_local_socket_addresses(address, path):
    assert localsocket.socket_of(address) == (Path(path) if path else None)


def test_a_local_socket_address_needs_a_path():
    with pytest.raises(ValueError):
        localsocket.socket_of("unix:")
