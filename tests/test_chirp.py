"""The chirp server of a running job, spoken to with the ``htchirp`` package (the engine of the shipped
condor_chirp): each command against a real gateway, its effects seen through the Birdbath API, the user log and the
job's sandbox; a wrong cookie, commands the job did not ask for, and names that try to leave the sandbox refused."""

from __future__ import annotations

import os
from pathlib import Path

import htchirp
import pytest

from tests.birdbath import expr
from tests.conftest import module_gateway, zeep_client
from tests.test_execution import clear_queue, job, status_is, submit, wait_for, wait_until

runner = module_gateway("[backends.local]\nslots = 2\nkill_grace = 1.0\nperiodic_interval = 0.5\n")


@pytest.fixture(scope="module")
def schedd(runner):
    return zeep_client(runner.url + "condorSchedd.wsdl", runner.url)


@pytest.fixture(scope="module")
def running(runner, schedd, tmp_path_factory):
    """A job that asked for chirp (WantIOProxy), running for as long as the module needs: its key, its sandbox,
    its user log, and the (host, port, cookie) of its .chirp.config."""
    log = tmp_path_factory.mktemp("chirp") / "job.log"
    (key,) = submit(schedd, Cmd="/bin/sleep", Arguments="120", ShouldTransferFiles="YES", WantIOProxy=True,
                    UserLog=str(log), Iwd=str(log.parent))
    wait_for(schedd, key, status_is(2))
    sandbox = runner.state_dir / "execute" / f"dir_{key[0]}.{key[1]}" / "sandbox"
    config = sandbox / ".chirp.config"
    wait_until(config.exists)
    host, port, cookie = config.read_text().split()
    yield key, sandbox, log, (host, int(port), cookie)
    clear_queue(schedd)


@pytest.fixture
def chirp(running):
    host, port, cookie = running[3]
    client = htchirp.HTChirp(host, port, cookie=cookie)
    with client:
        yield client


def test_the_config_file_is_the_starters_and_the_owners_alone(running):
    _, sandbox, _, (host, port, cookie) = running
    assert host == "127.0.0.1" and port > 0 and len(cookie) == 31 and cookie.isalpha()
    assert (sandbox / ".chirp.config").stat().st_mode & 0o777 == 0o600


def test_set_job_attr_reaches_the_queue_at_once(chirp, schedd, running):
    key = running[0]
    chirp.set_job_attr("JobServerAddress", '"This is my address"')
    assert job(schedd, key)["JobServerAddress"] == "This is my address"
    assert chirp.get_job_attr("JobServerAddress") == '"This is my address"'
    chirp.set_job_attr("Progress", "40 + 2")
    assert chirp.get_job_attr("Progress") == "40 + 2"
    assert chirp.get_job_attr("NoSuchAttribute") == "UNDEFINED"
    assert chirp.get_job_attr("Cmd") == '"/bin/sleep"'


def test_a_job_cannot_set_what_the_schedd_keeps_or_what_is_no_expression(chirp, schedd, running):
    for name in ("JobStatus", "Owner", "ClusterId", "ProcId"):
        with pytest.raises(htchirp.HTChirp.NotAuthorized):
            chirp.set_job_attr(name, "1")
    with pytest.raises(htchirp.HTChirp.InvalidRequest):
        chirp.set_job_attr("Broken", "1 +* (")
    assert job(schedd, running[0])["JobStatus"] == "2"


def test_delayed_updates_are_kept_by_the_server_and_only_for_chirp_names(chirp):
    chirp.set_job_attr_delayed("ChirpProgress", "7")
    assert chirp.get_job_attr_delayed("ChirpProgress") == "7"
    with pytest.raises(htchirp.HTChirp.NotAuthorized):
        chirp.set_job_attr_delayed("Progress", "7")
    with pytest.raises(htchirp.HTChirp.DoesntExist):
        chirp.get_job_attr_delayed("ChirpNeverSet")


def test_ulog_writes_a_generic_event_to_the_user_log(chirp, running):
    chirp.ulog("I have reached stage 3")
    key, _, log, _ = running
    assert f"008 ({key[0]:03d}.{key[1]:03d}.000)" in log.read_text()
    assert "I have reached stage 3\n" in log.read_text()


def test_file_commands_in_the_sandbox(chirp, running, tmp_path):
    sandbox = running[1]
    local = tmp_path / "local.txt"
    local.write_bytes(b"hello chirp\n" * 1000)
    assert chirp.put(str(local), "copy.txt") == local.stat().st_size
    assert (sandbox / "copy.txt").read_bytes() == local.read_bytes()
    assert chirp.fetch("copy.txt", str(tmp_path / "back.txt")) == local.stat().st_size
    assert (tmp_path / "back.txt").read_bytes() == local.read_bytes()
    assert chirp.write(b"abc", "small.txt", "wc") == 3
    assert chirp.read("small.txt", 100) == b"abc"
    assert chirp.read("copy.txt", 5, offset=6) == b"chirp"
    chirp.mkdir("sub")
    chirp.rename("small.txt", "sub/moved.txt")
    assert set(chirp.getdir(".")) >= {"copy.txt", "sub", ".chirp.config"}
    assert chirp.stat("sub/moved.txt")["size"] == 3
    chirp.remove("sub/moved.txt")
    chirp.rmdir("sub")
    assert not (sandbox / "sub").exists()
    with pytest.raises(htchirp.HTChirp.DoesntExist):
        chirp.read("gone.txt", 10)


@pytest.mark.parametrize("name", ["../run.jsonl", "/etc/passwd", "sub/../../run.jsonl", "..",
                                  "escape/passwd", "escape", "/"])
def test_names_outside_the_sandbox_are_refused(chirp, running, name):
    sandbox = running[1]
    if not os.path.lexists(sandbox / "escape"):
        os.symlink("/etc", sandbox / "escape")  # a link the job made to a place outside
    with pytest.raises((htchirp.HTChirp.NotAuthorized, htchirp.HTChirp.InvalidRequest)):
        chirp.read(name, 10)
    with pytest.raises((htchirp.HTChirp.NotAuthorized, htchirp.HTChirp.InvalidRequest)):
        chirp.write(b"x", name, "wc")
    if name != "escape":  # (the link itself is the job's to remove: that never touches what it points to)
        with pytest.raises((htchirp.HTChirp.NotAuthorized, htchirp.HTChirp.InvalidRequest)):
            chirp.remove(name)
    assert Path("/etc/passwd").exists()


def test_links_and_ownership_changes_are_refused(chirp):
    with pytest.raises(htchirp.HTChirp.NotAuthorized):
        chirp.symlink("/etc/passwd", "link")
    with pytest.raises(htchirp.HTChirp.NotAuthorized):
        chirp.chown("copy.txt", 0, 0)


def test_a_wrong_cookie_is_refused(running):
    host, port, cookie = running[3]
    with pytest.raises(htchirp.HTChirp.NotAuthenticated):
        htchirp.HTChirp(host, port, cookie=cookie[::-1])


def test_commands_before_the_cookie_are_refused(running):
    import socket

    host, port, _ = running[3]
    with socket.create_connection((host, port), timeout=10) as connection:
        connection.sendall(b"get_job_attr Owner\n")
        assert connection.makefile("rb").readline() == b"-1\n"


def test_a_request_line_longer_than_chirp_allows_ends_the_connection(chirp):
    chirp.socket.sendall(b"get_job_attr " + b"x" * 6000 + b"\n")
    assert chirp._simple_response.__self__.socket.recv(16).startswith(b"-5\n")


def test_a_job_without_want_io_proxy_has_no_chirp(runner, schedd):
    (key,) = submit(schedd, Cmd="/bin/sleep", Arguments="30", ShouldTransferFiles="YES")
    wait_for(schedd, key, status_is(2))
    sandbox = runner.state_dir / "execute" / f"dir_{key[0]}.{key[1]}" / "sandbox"
    wait_until(sandbox.exists)
    assert not (sandbox / ".chirp.config").exists()
    schedd.removeJob(None, *key, "done", False)


def test_set_attributes_survive_a_restart(start_gateway):
    gateway = start_gateway("[backends.local]\nslots = 1\nkill_grace = 1.0\n")
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    (key,) = submit(schedd, Cmd="/bin/sleep", Arguments="60", ShouldTransferFiles="YES", WantIOProxy=True,
                    LeaveJobInQueue=expr("true"))
    wait_for(schedd, key, status_is(2))
    config = gateway.state_dir / "execute" / f"dir_{key[0]}.{key[1]}" / "sandbox" / ".chirp.config"
    wait_until(config.exists)
    host, port, cookie = config.read_text().split()
    with htchirp.HTChirp(host, int(port), cookie=cookie) as chirp:
        chirp.set_job_attr("Rendezvous", '"here"')
    gateway.kill()
    gateway.start()
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    assert job(schedd, key)["Rendezvous"] == "here"
