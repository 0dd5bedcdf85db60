"""Callers on this machine, end to end as real unprivileged accounts (made by the tests) against a root gateway:
identified by their socket when the connection is accepted, on loopback, on the host's own network address and on
the local Unix socket; a client whose socket cannot be proven (it closed it at once) is refused, never root and
never anonymous; the local socket is never made through a planted link."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from gateway.identity import peers
from gateway.testing import SOURCE_ROOT, GatewayProcess
from gateway.testing_daemons import short_directory
from tests.accounts import Accounts, UserAccount, run_as
from tests.test_logging import wait_for_line
from tests.test_tls import JSON_JOB

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = [pytest.mark.gateway,
              pytest.mark.skipif(os.geteuid() != 0, reason="making accounts and switching to them needs root")]


# -- what the clients send (run in a child as the account: everything they use is imported above) -------------
def request_bytes(operation: str, params: dict) -> bytes:
    """An HTTP/1.0 request to the submission API's JSON form (no chunked answer; the gateway closes after it)."""
    body = json.dumps(params).encode()
    return (f"POST /submission/json/{operation} HTTP/1.0\r\nHost: gateway\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def exchange(sock: socket.socket, operation: str, params: dict) -> bytes:
    """Send the request and read the whole answer: its status line, then its body after a blank line."""
    with sock:
        sock.sendall(request_bytes(operation, params))
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0] + b"\n" + body


def over_tcp(host: str, port: int, operation: str, params: dict) -> bytes:
    return exchange(socket.create_connection((host, port), timeout=30), operation, params)


def over_unix(path: Path, operation: str, params: dict) -> bytes:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(str(path))
    return exchange(sock, operation, params)


def send_and_close(host: str, port: int, operation: str, params: dict) -> bytes:
    """Send a request and close the socket at once, without waiting for the answer: the client's port."""
    sock = socket.create_connection((host, port), timeout=30)
    client_port = sock.getsockname()[1]
    sock.sendall(request_bytes(operation, params))
    sock.close()
    return str(client_port).encode()


def answer_of(raw: bytes) -> tuple[str, dict]:
    status, _, body = raw.partition(b"\n")
    return status.decode(), json.loads(body)


# -- the gateway and the accounts --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def account() -> Iterator[UserAccount]:
    with Accounts() as made:
        yield made.user()


@pytest.fixture(scope="module")
def bystander() -> Iterator[UserAccount]:
    """Another user: the default_owner of anonymous callers, whose jobs a local user must never get."""
    with Accounts() as made:
        yield made.user()


@pytest.fixture
def open_directory() -> Iterator[Path]:
    """A short directory every user can traverse (pytest's are private to root), for the state and the socket."""
    directory = short_directory()
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


#: a job that stays in the queue once it has run, so that counting the queue counts every job submitted
STAYING_JOB = JSON_JOB | {"LeaveJobInQueue": {"TYPE": 0, "VALUE": "TRUE"}}


def start(directory: Path, tmp_path: Path, config: str | None = None) -> GatewayProcess:
    return GatewayProcess(directory / "state", config, tmp=tmp_path).start()


def call(gateway: GatewayProcess, operation: str, **params) -> dict:
    """A call made by the test itself (root)."""
    return answer_of(over_tcp("127.0.0.1", gateway.port, operation, params))[1]


def live_jobs(gateway: GatewayProcess) -> list[dict]:
    answer = call(gateway, "getJobSummaries", ids=[])
    assert answer["status"]["code"] == "OK", answer
    return answer.get("jobs") or answer.get("summaries") or []


def owner_of(gateway: GatewayProcess, answer: dict) -> str:
    assert answer["status"]["code"] == "OK", answer
    job = answer["id"].rsplit("#", 1)[1]
    return call(gateway, "getJobAd", id=job)["ad"]["Owner"]["VALUE"]


def wait_until_orphaned(client: peers.Endpoint, server: peers.Endpoint) -> None:
    """Until the client's end is the orphan a closed socket leaves (FIN_WAIT2, no inode, listed as uid 0)."""
    deadline = time.monotonic() + 10
    while (found := peers.tcp_socket(client, server)) is None or found.state != peers.TcpState.FIN_WAIT2:
        assert time.monotonic() < deadline, f"the client's socket is {found}"
        time.sleep(0.01)
    assert found.inode == 0 and found.uid == 0


def closed_at_once(gateway: GatewayProcess, account: UserAccount, host: str, operation: str, params: dict) -> None:
    """The race of issue 25: a request sent and its socket closed at once, while the gateway does nothing (stopped,
    as a busy reactor would be), so that everything it does about the connection happens after the close."""
    os.kill(gateway.process.pid, signal.SIGSTOP)
    try:
        client_port = int(run_as(account, lambda: send_and_close(host, gateway.port, operation, params)))
        wait_until_orphaned(peers.endpoint(host, client_port), peers.endpoint(host, gateway.port))
    finally:
        os.kill(gateway.process.pid, signal.SIGCONT)


# -- the closed-socket race ----------------------------------------------------------------------------------------
def test_a_loopback_client_that_closes_at_once_is_refused_never_root(account, open_directory, tmp_path):
    gateway = start(open_directory, tmp_path)
    try:
        for _ in range(3):
            closed_at_once(gateway, account, "127.0.0.1", "submit", {"ad": STAYING_JOB})
        wait_for_line(gateway.log, "refused (403): The local user of this loopback connection could not be identified")
        assert live_jobs(gateway) == [], "a request whose socket was closed made a job"
        assert not [line for line in gateway.log().splitlines() if "submit from" in line and "(root by" in line]
        # the same account, staying connected, is itself
        status, answer = answer_of(run_as(account, lambda: over_tcp("127.0.0.1", gateway.port, "submit",
                                                                     {"ad": JSON_JOB})))
        assert owner_of(gateway, answer) == account.name, status
    finally:
        gateway.stop()


# -- the host's own network address ------------------------------------------------------------------------------
@pytest.fixture
def own_address() -> Iterator[str]:
    """A non-loopback address of this host: on one end of a veth pair made for the test (both ends here, up)."""
    name = f"bbv{secrets.token_hex(3)}"
    address = f"198.51.100.{secrets.randbelow(250) + 2}"

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True)

    try:
        ip("link", "add", name, "type", "veth", "peer", "name", name + "p")
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot make a veth pair: {exc}")
    try:
        ip("addr", "add", f"{address}/32", "dev", name)
        ip("link", "set", name + "p", "up")
        ip("link", "set", name, "up")
        yield address
    finally:
        subprocess.run(["ip", "link", "del", name], check=False, capture_output=True)


def test_a_local_user_on_the_hosts_own_address_is_itself_not_default_owner(account, bystander, own_address,
                                                                          open_directory, tmp_path):
    """With the README's network settings a local user reaching the LAN address is known by its socket, as on
    loopback; one that closes at once is refused, never made anonymous (and so default_owner)."""
    config = f'[gateway]\nlisten = "0.0.0.0"\n[birdbath]\nallow_soap = ["*"]\ndefault_owner = "{bystander.name}"\n'
    gateway = start(open_directory, tmp_path, config)
    try:
        assert peers.is_this_host(peers.endpoint(own_address, 0).address)
        status, answer = answer_of(run_as(account, lambda: over_tcp(own_address, gateway.port, "submit",
                                                                     {"ad": STAYING_JOB})))
        assert owner_of(gateway, answer) == account.name, status
        wait_for_line(gateway.log, f"submit from {own_address}: OK", f"({account.name} by socket)")
        closed_at_once(gateway, account, own_address, "submit", {"ad": STAYING_JOB})
        wait_for_line(gateway.log, f"from {own_address} refused (403): The local user of this local connection")
        assert len(live_jobs(gateway)) == 1
        assert "(anonymous)" not in gateway.log()
    finally:
        gateway.stop()


# -- the local socket ----------------------------------------------------------------------------------------------
def test_a_local_socket_caller_is_the_user_the_kernel_names(account, open_directory, tmp_path):
    gateway = start(open_directory, tmp_path)
    path = gateway.state_dir / "birdbath.sock"
    try:
        assert stat.S_ISSOCK(path.lstat().st_mode) and stat.S_IMODE(path.lstat().st_mode) == 0o666
        status, answer = answer_of(run_as(account, lambda: over_unix(path, "submit", {"ad": JSON_JOB})))
        assert owner_of(gateway, answer) == account.name, status
        wait_for_line(gateway.log, "submit from localhost: OK", f"({account.name} by socket)")
        # another user's job is not theirs to hold, whichever way they connect
        mine = call(gateway, "submit", ad=JSON_JOB)["id"].rsplit("#", 1)[1]
        status, held = answer_of(run_as(account, lambda: over_unix(path, "hold", {"id": mine, "reason": "x"})))
        assert held["status"]["code"] != "OK", held
    finally:
        gateway.stop()
    assert not path.exists()  # removed when the gateway stops


def test_a_socket_left_by_a_killed_gateway_is_replaced(open_directory, tmp_path):
    gateway = start(open_directory, tmp_path)
    try:
        gateway.kill()
        assert (gateway.state_dir / "birdbath.sock").is_socket()
        gateway.start()
        status, answer = answer_of(over_unix(gateway.state_dir / "birdbath.sock", "getSubmissions", {}))
        assert answer["status"]["code"] == "OK", status
    finally:
        gateway.stop()


def refused_start(state_dir: Path, config: str | None, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "gateway.cli", "--port", "auto", "--state-dir", str(state_dir)]
    if config is not None:
        (tmp_path / "gateway.toml").write_text(config)
        args += ["--config", str(tmp_path / "gateway.toml")]
    return subprocess.run(args, cwd=SOURCE_ROOT, capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ, CONDOR_CONFIG="/dev/null", PYTHONPATH=str(SOURCE_ROOT)))


def test_a_link_planted_at_the_socket_path_stops_the_start_and_is_not_followed(open_directory, tmp_path):
    state = open_directory / "state"
    state.mkdir()
    target = open_directory / "target"
    target.write_text("someone's file\n")
    target.chmod(0o600)
    (state / "birdbath.sock").symlink_to(target)
    result = refused_start(state, None, tmp_path)
    assert result.returncode == 2, result
    assert "symbolic link" in result.stderr and str(state / "birdbath.sock") in result.stderr, result.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and target.read_text() == "someone's file\n"
    assert (state / "birdbath.sock").is_symlink()


def test_a_socket_in_a_directory_others_can_write_in_is_refused(open_directory, tmp_path):
    shared = open_directory / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    result = refused_start(open_directory / "state", f'[gateway]\nlocal_socket = "{shared}/birdbath.sock"\n', tmp_path)
    assert result.returncode == 2, result
    assert "other users can write in it" in result.stderr, result.stderr
    assert not (open_directory / "state").exists()
