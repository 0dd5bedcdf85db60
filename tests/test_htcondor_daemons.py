"""The gateway as one of a real condor_master's daemons, behind the real condor_shared_port (HTCondor 25, from the
install ``BIRDBATH_HTCONDOR`` names; skipped saying why where there is none): the master starts it, accepts its
keepalives, kills and restarts it when it hangs, and ``condor_off``/``condor_on``/``condor_restart`` act on it;
clients reach it through the shared port both ways the README gives.

The daemons run on their own clocks, so these tests wait in real time: the gateway's not-responding timeout is
six seconds here (a keepalive every two)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from gateway.testing import SOURCE_ROOT, TEST_WORKERS
from gateway.testing_htcondor import PersonalPool
from tests.live_pool import release_or_skip, traversable_directory

TIMEOUT = 6  # BIRDBATH_NOT_RESPONDING_TIMEOUT
SOCK_ID = "birdbath"


#: these tests take minutes of real time and run once, in the suite's first environment: the master starts the
#: gateway with --workers 0 in both environments
pytestmark = pytest.mark.skipif(TEST_WORKERS not in ("0", "default"),
                                reason="run once, in the environment without worker processes")

class MasterPool:
    """A master with a collector, condor_shared_port and the gateway (``BIRDBATH`` in ``DAEMON_LIST``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.state = directory / "gateway-state"
        self.log = directory / "BirdbathLog"
        with socket.socket() as probe:  # the shared port listens on the collector's port, which must be known
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.port = port
        program = directory / "birdbath-gateway"
        program.write_text(f"#!/bin/sh\ncd {SOURCE_ROOT} && PYTHONPATH={SOURCE_ROOT} exec {sys.executable} "
                           '-m gateway.cli "$@"\n')
        program.chmod(0o755)
        config = directory / "gateway.toml"
        self.pool = PersonalPool(release_or_skip(), directory, daemons=("MASTER", "COLLECTOR", "BIRDBATH"),
                                 extra_config=f"""
USE_SHARED_PORT = True
COLLECTOR_PORT = {port}
COLLECTOR_HOST = $(CONDOR_HOST):$(COLLECTOR_PORT)
SHARED_PORT_HTTP_FORWARDING_ID = {SOCK_ID}
BIRDBATH = {program}
BIRDBATH_ARGS = --state-dir {self.state} --config {config} --log-file {self.log} --workers 0
BIRDBATH_NOT_RESPONDING_TIMEOUT = {TIMEOUT}
MASTER_BACKOFF_CONSTANT = 1
""")
        # DAEMON_SOCKET_DIR is "auto" in HTCondor 25: the abstract namespace first, then $(LOCK)/daemon_sock, where
        # the gateway listens
        socket_dir = self.pool.tool("condor_config_val", "DAEMON_SOCKET_DIR").strip()
        if socket_dir == "auto":
            socket_dir = self.pool.tool("condor_config_val", "LOCK").strip() + "/daemon_sock"
        config.write_text(f'[gateway]\nport = 0\n[backends.local]\nslots = 0\n[daemon]\nuse_shared_port = true\n'
                          f'daemon_socket_dir = "{socket_dir}"\nshared_port_id = "{SOCK_ID}"\n')

    @property
    def address(self) -> str:
        return f"<127.0.0.1:{self.port}?sock={SOCK_ID}>"

    def gateway_pids(self) -> list[int]:
        """The gateway processes the master started (found by their state directory on the command line)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    command = (entry / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if b"gateway.cli" in command and str(self.state).encode() in command:
                    pids.append(int(entry.name))
        return pids

    def answering_pid(self, timeout: float = 60, other_than: int | None = None) -> int:
        """The pid of the one gateway that answers through the shared port (a new one, given ``other_than``)."""
        from birdbath_client import Schedd

        deadline = time.monotonic() + timeout
        failure: Exception | None = None
        while True:
            pids = self.gateway_pids()
            if len(pids) == 1 and pids[0] != other_than:
                try:
                    Schedd(self.address, timeout=5).version()
                    return pids[0]
                except Exception as exc:  # noqa: BLE001 - still starting: try again until the deadline
                    failure = exc
            if time.monotonic() > deadline:
                raise AssertionError(f"no gateway answered through the shared port (pids {pids}; {failure!r}); "
                                     f"master log: {self.master_log()[-1500:]}")
            time.sleep(0.5)

    def master_log(self) -> str:
        return (self.pool.log / "MasterLog").read_text(errors="replace")


@pytest.fixture(scope="module")
def master() -> Iterator[MasterPool]:
    directory = traversable_directory("birdbath-master-")
    pool = MasterPool(directory)
    try:
        pool.pool.start(slots=0, schedds=0)
        yield pool
    finally:
        pool.pool.stop()
        shutil.rmtree(directory, ignore_errors=True)


def test_clients_reach_the_gateway_through_the_real_shared_port_both_ways(master):
    import zeep

    from birdbath_client import Schedd

    master.answering_pid()
    assert Schedd(master.address).version().startswith("$CondorVersion:")  # the CEDAR connect request
    forwarded = zeep.Client(f"http://127.0.0.1:{master.port}/condorSchedd.wsdl").service  # plain HTTP forwarded
    assert forwarded.getVersionString().message.startswith("$CondorVersion:")


def test_its_keepalives_are_accepted_so_the_master_leaves_it_running(master):
    pid = master.answering_pid()
    time.sleep(3 * TIMEOUT)  # three timeouts: without accepted keepalives the master would have killed it
    assert master.gateway_pids() == [pid]
    assert "no longer responding" not in master.master_log()
    assert "DC_AUTHENTICATE" not in master.master_log()


def test_a_hung_gateway_is_killed_and_started_again(master):
    hung = master.answering_pid()
    os.kill(hung, signal.SIGSTOP)
    restarted = master.answering_pid(timeout=60 + 3 * TIMEOUT, other_than=hung)
    assert f"The BIRDBATH (pid {hung}) was killed because it was no longer responding" in master.master_log()
    assert restarted != hung


def test_condor_off_on_and_restart_act_on_the_gateway(master):
    """``condor_off -daemon BIRDBATH`` stops it gracefully (SIGTERM), ``condor_on`` starts it, ``condor_restart``
    (the master's daemons) restarts it.  ``condor_restart -daemon BIRDBATH`` does not work: that form needs the
    daemon's own command address, which only DaemonCore daemons advertise."""
    running = master.answering_pid()
    master.pool.tool("condor_off", "-daemon", "BIRDBATH")
    master.pool.wait(lambda: not master.gateway_pids(), 30, "the gateway stopped by condor_off")
    assert "shutting down" in master.log.read_text().split(f"pid {running}")[-1].lower()
    master.pool.tool("condor_on", "-daemon", "BIRDBATH")
    started = master.answering_pid(other_than=running)
    master.pool.tool("condor_restart")
    assert master.answering_pid(other_than=started) != started
    refused = master.pool.tool("condor_restart", "-daemon", "BIRDBATH", check=False)
    assert master.gateway_pids() and refused == ""
