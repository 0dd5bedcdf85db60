"""A start that cannot succeed ends at once, says why on one line, and leaves nothing behind.

Each test runs ``birdbath-gateway`` as a real process; ``subprocess.run``'s timeout is the deadline for "at once"
(a gateway that hangs instead of exiting fails it).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gateway import config as gateway_config
from gateway.testing import START_SECONDS

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, CONDOR_CONFIG="/dev/null", PYTHONPATH=str(ROOT))

#: seconds a refused start may take: what a start may (Python and Twisted start-up included, on a loaded CI machine)
PROMPTLY = START_SECONDS


def gateway_command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "gateway.cli", *map(str, args)]


def refused_start(*args: str | Path, config: str | None = None, tmp: Path) -> subprocess.CompletedProcess[str]:
    """Run the gateway with these arguments (and this configuration file), expecting it to exit by itself."""
    if config is not None:
        (tmp / "gateway.toml").write_text(config)
        args = (*args, "--config", tmp / "gateway.toml")
    return subprocess.run(gateway_command("--port", "auto", *args), cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=PROMPTLY)


def assert_refused(result: subprocess.CompletedProcess[str], *words: str) -> None:
    """A non-zero exit with one line on stderr that names the problem."""
    assert result.returncode != 0, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("birdbath-gateway: "), result.stderr
    for word in words:
        assert word in lines[0], result.stderr


def test_a_port_in_use_ends_the_start_at_once_without_creating_the_state_directory(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = refused_start("--port", port, "--state-dir", tmp_path / "state", tmp=tmp_path)
    assert_refused(result, str(port), "in use")
    assert result.returncode == 1
    assert not (tmp_path / "state").exists()


def test_a_state_directory_that_cannot_be_created_is_refused(tmp_path):
    """Below a regular file no directory can ever be made, even by root (whom os.access never refuses)."""
    (tmp_path / "file").write_text("not a directory\n")
    result = refused_start("--state-dir", tmp_path / "file" / "state", tmp=tmp_path)
    assert_refused(result, "state directory", "not a directory")
    assert result.returncode == 2
    assert (tmp_path / "file").read_text() == "not a directory\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write in a read-only directory")
def test_a_state_directory_in_a_read_only_directory_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        result = refused_start("--state-dir", locked / "state", tmp=tmp_path)
    finally:
        locked.chmod(0o755)
    assert_refused(result, "state directory", "not writable")
    assert not (locked / "state").exists()


BAD_CONFIGS = {
    "bad TOML": ("[gateway\nport = 1\n", "gateway.toml"),
    "unknown key": ("[gateway]\nprot = 1984\n", "prot"),
    "unknown section": ("[gateways]\nport = 1984\n", "gateways"),
    "bad value type": ('[gateway]\nport = "1984"\n', "port"),
    "number out of range": ("[gateway]\nmax_request_bytes = 0\n", "max_request_bytes"),
    "no query workers": ("[gateway]\nquery_workers = 0\n", "query_workers"),
    "expression depth out of range": ("[gateway]\nmax_expression_depth = 1000000\n", "max_expression_depth"),
    "query budget not a number": ('[gateway]\nmax_query_seconds = "soon"\n', "max_query_seconds"),
    "bad host list": ('[birdbath]\nallow_soap = ["not a host/99"]\n', "not a host"),
    "unknown backend": ('[gateway]\nbackend = "nonesuch"\n', "nonesuch"),
    "unknown backend setting": ("[backends.local]\nslot = 1\n", "slot"),
    "bad backend value": ('[backends.local]\nslots = "four"\n', "slots"),
    "bad log level": ('[gateway]\nlog_level = "chatty"\n', "log_level"),
    "log file in a missing directory": ('[gateway]\nlog_file = "/nonexistent/dir/gateway.log"\n', "log file"),
    "port neither a number nor auto": ('[gateway]\nport = "any"\n', '"auto"'),
    "bad ssl switch": ('[birdbath]\nenable_soap_ssl = "yes"\n', "enable_soap_ssl"),
    "bad lone connection switch": ('[gateway]\nlone_connection_in_core = "yes"\n', "lone_connection_in_core"),
    "ssl port out of range": ("[birdbath]\nsoap_ssl_port = 65536\n", "soap_ssl_port"),
    "ssl without a way to identify callers": ("[birdbath]\nenable_soap_ssl = true\n", "certificate_mapfile"),
    "ssl without a key": ('[birdbath]\nenable_soap_ssl = true\npassword_file = "/dev/null"\n',
                          "soap_ssl_server_keyfile"),
    "certificates without an authority": (
        '[birdbath]\nenable_soap_ssl = true\ncertificate_mapfile = "/dev/null"\nsoap_ssl_server_keyfile = "/x"\n',
        "soap_ssl_ca_file"),
}


@pytest.mark.parametrize("config, named", BAD_CONFIGS.values(), ids=BAD_CONFIGS.keys())
def test_a_bad_configuration_is_refused_before_anything_is_created(tmp_path, config, named):
    result = refused_start("--state-dir", tmp_path / "state", config=config, tmp=tmp_path)
    assert_refused(result, named)
    assert result.returncode == 2
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("flags, named", [
    (("--backend", "nonesuch"), "installed backends"),
    (("--port", "70000"), "port"),
    (("--ssl-port-file", "ssl-port"), "enable_soap_ssl is false"),
    (("--port", "2000", "--ssl-port", "2000", "--config", "/dev/null"), "soap_ssl_port are both 2000"),
], ids=["backend", "port", "ssl port file without ssl", "one port for both"])
def test_flags_are_checked_like_the_file(tmp_path, flags, named):
    result = refused_start("--state-dir", tmp_path / "state", *flags, tmp=tmp_path)
    assert_refused(result, named)
    assert result.returncode == 2
    assert not (tmp_path / "state").exists()


def test_a_gateway_with_nothing_to_listen_on_is_refused(tmp_path):
    """No plain port (the flag), no local socket (the file), no SSL port, no shared port."""
    result = refused_start("--state-dir", tmp_path / "state", "--port", "0", config='[gateway]\nlocal_socket = ""\n',
                           tmp=tmp_path)
    assert_refused(result, "nothing would listen")
    assert result.returncode == 2
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_start_that_fails_after_the_backend_started_still_ends_the_process(tmp_path, workers):
    """The port file cannot be written once the backend runs (its thread pool started, its recovery queued; with
    workers, once they serve): the process must release them and exit instead of hanging on their threads."""
    result = refused_start("--state-dir", tmp_path / "state", "--port-file", tmp_path / "missing" / "port",
                           "--log-file", tmp_path / "gateway.log", "--workers", workers, tmp=tmp_path)
    assert_refused(result, "No such file or directory", str(tmp_path / "missing" / "port"))
    assert "listening on" in (tmp_path / "gateway.log").read_text()  # it got that far


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal is for a gateway running as root")
def test_a_root_gateway_refuses_root_as_the_owner_of_anonymous_remote_callers(tmp_path):
    result = refused_start("--listen", "0.0.0.0", "--state-dir", tmp_path / "state",
                           config='[birdbath]\nallow_soap = ["*"]\n', tmp=tmp_path)
    assert_refused(result, "default_owner is 'root'", "set [birdbath] default_owner")
    assert result.returncode == 2
    assert not (tmp_path / "state").exists()


ANONYMOUS_REMOTE = {"listen": "0.0.0.0", "allow_soap": ["*"], "default_owner": "root"}


@pytest.mark.parametrize("changes, refused", [
    ({}, True),
    ({"listen": "::"}, True),
    ({"allow_soap": ["10.0.0.0/8"]}, True),
    ({"allow_soap": ["127.0.0.0/8", "::1", "localhost", "127.0.0.5"]}, False),  # loopback only: callers are known
    ({"listen": "127.0.0.1"}, False),
    ({"listen": "::1"}, False),
    ({"port": 0, "enable_soap_ssl": True}, False),  # no plain port: no anonymous callers
    ({"default_owner": "nobody"}, False),
], ids=["refused", "ipv6 any", "a network", "loopback list", "loopback listen", "ipv6 loopback", "no plain port",
        "unprivileged owner"])
def test_the_root_owner_refusal_needs_root_remote_anonymous_callers_and_a_root_owner(changes, refused):
    from gateway.config import ConfigError, GatewayConfig, check_anonymous_owner

    config = GatewayConfig(**{**ANONYMOUS_REMOTE, **changes})
    if refused:
        with pytest.raises(ConfigError, match="default_owner"):
            check_anonymous_owner(config, 0)
    else:
        check_anonymous_owner(config, 0)
    check_anonymous_owner(config, 1000)  # a gateway that is not root runs every job as itself: nothing to refuse


def test_root_keeps_its_state_where_the_owners_of_its_jobs_can_reach_it(monkeypatch):
    from gateway.config import SYSTEM_STATE_DIR, default_state_dir

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert default_state_dir() == SYSTEM_STATE_DIR == Path("/var/lib/birdbath-gateway")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_STATE_HOME", "/home/alice/.state")
    assert default_state_dir() == Path("/home/alice/.state/birdbath-gateway")


@pytest.mark.parametrize("cpus, workers", [(1, 0), (2, 2), (16, 16), (1000, 256)])
def test_workers_default_to_one_per_cpu_the_gateway_may_run_on(monkeypatch, tmp_path, cpus, workers):
    """None on one CPU (the workers would only add their crossings); at most MAX_WORKERS."""
    monkeypatch.setattr(gateway_config.os, "sched_getaffinity", lambda pid: set(range(cpus)))
    monkeypatch.setattr(gateway_config, "quota_cpus", lambda: None)
    assert gateway_config.GatewayConfig().workers == workers
    file = tmp_path / "gateway.toml"
    file.write_text("[gateway]\nport = 1984\n")
    assert gateway_config.load(file).workers == workers
    file.write_text("[gateway]\nworkers = 0\n")
    assert gateway_config.load(file).workers == 0


@pytest.mark.parametrize("membership, files, cpus", [
    ("0::/system.slice/gw.service\n", {"system.slice/gw.service/cpu.max": "150000 100000\n"}, 2),
    ("0::/\n", {"cpu.max": "max 100000\n"}, None),
    ("4:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n", {"cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "400000\n",
                                                       "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n"}, 4),
    ("4:cpu,cpuacct:/\n", {"cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, None),
    ("4:cpu,cpuacct:/docker/abc\n", {"cpu,cpuacct/cpu.cfs_quota_us": "300000\n",
                                     "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, 3),
    ("0::/kubepods/pod1/c1\n", {"kubepods/pod1/c1/cpu.max": "max 100000\n", "kubepods/pod1/cpu.max": "200000 100000\n",
                                "kubepods/cpu.max": "800000 100000\n"}, 2),
    ("0::/gone\n", {}, None),
], ids=["v2 quota", "v2 none", "v1 quota", "v1 none", "v1 in a container (the host's path)",
        "v2 quota of a parent", "no cgroup to read"])
def test_a_cgroups_cpu_quota_bounds_the_workers(tmp_path, monkeypatch, membership, files, cpus):
    """docker --cpus sets a quota, not an affinity: the workers follow the smaller."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "self-cgroup").write_text(membership)
    assert gateway_config.quota_cpus(tmp_path, tmp_path / "self-cgroup") == cpus
    monkeypatch.setattr(gateway_config, "quota_cpus", lambda: cpus)
    monkeypatch.setattr(gateway_config.os, "sched_getaffinity", lambda pid: set(range(8)))
    assert gateway_config.default_workers() == (8 if cpus is None else cpus)
