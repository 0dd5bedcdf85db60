"""Jobs stay under control, on every kind of gateway: every process a job starts (a ``setsid`` daemon, a double
fork) ends with it -- at ``rm``, hold, the gateway's shut-down and the job's own exit --, suspend freezes all of it,
``request_memory`` is enforced, and usage reaches the ad while the job runs.

Each test runs on three real gateways: root with cgroups (this machine's v1 controllers), root with
``base_cgroup = ""`` (HTCondor's switch for no cgroups: the launcher tracks the job as a subreaper), and a gateway
run by an unprivileged account the tests create (subreaper, as any non-root gateway).  Whether a process is left is
read from ``/proc``."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.testing import GatewayProcess
from jobmodel.arguments import join_v2
from tests.accounts import PYTHON, Accounts, Reach, UserAccount
from tests.conftest import zeep_client
from tests.test_execution import job, status_is, submit, wait_for, wait_until

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = [pytest.mark.gateway,
              pytest.mark.skipif(os.geteuid() != 0, reason="the tests make an account and compare root's ways")]

CONFIG = ("[backends.local]\nslots = 4\nkill_grace = 1.0\nperiodic_interval = 0.5\n"
          "starter_update_interval = 0.5\n")
MODES = ("cgroup", "subreaper", "unprivileged")


class UnprivilegedGateway(GatewayProcess):
    """A gateway run by an ordinary account (``setpriv``): no root, so no cgroups and no switching of users."""

    def __init__(self, account: UserAccount, reach: Reach, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.account = account
        self.reach = reach

    def command(self, port_files):
        _, *arguments = super().command(port_files)
        return self.reach.command(self.account, PYTHON, *arguments)


@dataclass
class Gateway:
    mode: str
    process: GatewayProcess
    base: Path  # a directory the jobs' user may write in
    owner: int  # the uid the jobs run as

    @property
    def schedd(self):
        return zeep_client(self.process.url + "condorSchedd.wsdl", self.process.url)

    def workdir(self) -> Path:
        directory = self.base / uuid.uuid4().hex[:8]
        directory.mkdir()
        os.chown(directory, self.owner, -1)
        return directory


@pytest.fixture(scope="module")
def account() -> Iterator[tuple[UserAccount, Reach]]:
    """A fresh unprivileged account, removed afterwards, and the checkout and packages its gateway imports, bind-mounted
    where it reaches them (:class:`tests.accounts.Reach`): a 0700 directory above them (tox's ``.tox``, a clone in a
    ``mktemp -d`` directory) keeps them from it otherwise."""
    reach = Reach()
    try:
        with Accounts() as made:
            user = made.user()
            why = reach.unreachable(user)
            if why:
                pytest.skip(why)
            yield user, reach
    finally:
        reach.remove()


def test_the_mounts_an_account_imports_through_are_its_process_own(account):
    """The account's program imports the checkout through bind mounts that only its mount namespace has: the host's
    mount table (the test's) never shows them, so nothing outlives the program or widens anyone else's reach."""
    user, reach = account
    look = "import os, gateway; print(os.getuid(), gateway.__file__); print(open('/proc/self/mountinfo').read())"
    seen = subprocess.run(reach.command(user, PYTHON, "-c", look), capture_output=True, text=True, check=True).stdout
    who, mounts = seen.split("\n", 1)
    assert who == f"{user.uid} {reach.source / 'gateway' / '__init__.py'}"
    assert all(f" {mount_point} " in mounts for mount_point in reach.mounts.values()), mounts
    assert str(reach.directory) not in Path("/proc/self/mountinfo").read_text()


def start(mode: str, account: tuple[UserAccount, Reach] | None) -> Gateway:
    base = Path(tempfile.mkdtemp(prefix=f"job-control-{mode}-", dir="/tmp"))
    base.chmod(0o755)
    config = CONFIG + ('base_cgroup = ""\n' if mode == "subreaper" else "")
    if mode == "unprivileged":
        assert account is not None
        user, reach = account
        os.chown(base, user.uid, user.gid)
        process: GatewayProcess = UnprivilegedGateway(user, reach, base / "state", config, base)
        owner = user.uid
    else:
        process, owner = GatewayProcess(base / "state", config, base), 0
    try:
        process.start()
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise
    if mode == "unprivileged":
        for path in base.iterdir():  # (the log, port and config files the test wrote as root)
            os.chown(path, user.uid, user.gid)
    return Gateway(mode, process, base, owner)


def stop(gateway: Gateway) -> None:
    gateway.process.stop()
    shutil.rmtree(gateway.base, ignore_errors=True)


@pytest.fixture(scope="module", params=MODES)
def gateway(request):
    account = request.getfixturevalue("account") if request.param == "unprivileged" else None
    running = start(request.param, account)
    yield running
    stop(running)


def alive(token: str) -> list[int]:
    """The processes (zombies left out) whose command line holds ``token``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if token.encode() in (proc / "cmdline").read_bytes() and \
                    (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX":
                found.append(int(proc.name))
        except (OSError, IndexError):
            continue
    return found


def tokens() -> tuple[str, str]:
    """Two sleep durations no other process has on its command line (around five minutes each)."""
    number = random.randrange(10**6, 10**7)
    return f"311.{number}1", f"311.{number}2"


def daemonizing_job(gateway: Gateway, directory: Path, first: str, second: str, **attributes):
    """A job that leaves two processes behind it: a ``setsid`` daemon and a double-forked one, then waits for
    ``go`` (its exit) and records its cgroups."""
    body = (f"setsid sleep {first} &\n( sleep {second} & ) &\ncat /proc/$$/cgroup > cgroup.txt\n"
            "echo ready > ready\nwhile [ ! -e go ]; do sleep 0.05; done\n")
    return submit(gateway.schedd, Cmd="/bin/sh", Arguments="-c " + join_v2([body]), Iwd=str(directory),
                  ShouldTransferFiles="NO", **attributes)[0]


def check_tracking(gateway: Gateway, directory: Path) -> None:
    """The job ran in a cgroup of its own exactly when the gateway is root with cgroups."""
    freezer = next(line for line in (directory / "cgroup.txt").read_text().splitlines() if ":freezer:" in line)
    assert ("/htcondor/" in freezer) == (gateway.mode == "cgroup"), freezer


@pytest.mark.parametrize("action", ["rm", "hold", "exit"])
def test_every_process_of_a_job_ends_with_it(gateway, action):
    directory = gateway.workdir()
    first, second = tokens()
    key = daemonizing_job(gateway, directory, first, second)
    schedd = gateway.schedd
    wait_until(lambda: (directory / "ready").exists() and alive(first) and alive(second), timeout=20)
    check_tracking(gateway, directory)
    if action == "rm":
        assert schedd.removeJob(None, *key, "enough", False).code == "SUCCESS"
        wait_for(schedd, key, status_is(3))
    elif action == "hold":
        assert schedd.holdJob(None, *key, "wait", False, False, False).code == "SUCCESS"
        wait_for(schedd, key, status_is(5))
    else:
        (directory / "go").touch()
        wait_for(schedd, key, status_is(4))
    wait_until(lambda: not alive(first) and not alive(second), timeout=10)


def daemonizing_dag(gateway: Gateway, directory: Path, first: str, second: str) -> tuple[tuple[int, int], Path]:
    """A DAG whose only node's PRE script leaves a ``setsid`` daemon and a double-forked process behind it, records
    its cgroups and waits for ``go`` (its exit); the node itself is a NOOP."""
    from tests.dags import submit_dag, write_dag

    pre = directory / "pre.sh"
    pre.write_text(f"#!/bin/sh\nsetsid sleep {first} &\n( sleep {second} & ) &\ncat /proc/$$/cgroup > cgroup.txt\n"
                   "echo ready > ready\nwhile [ ! -e go ]; do sleep 0.05; done\n")
    pre.chmod(0o755)
    dag = write_dag(directory, "JOB A A.sub NOOP\nSCRIPT PRE A pre.sh\n", {"A": "true"})
    return submit_dag(gateway.schedd, dag), dag


@pytest.mark.parametrize("fast", [False, True], ids=["sigterm", "sigquit"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("leaver", [daemonizing_job, daemonizing_dag], ids=["job", "dag-script"])
def test_the_gateways_shutdown_ends_every_process_of_its_jobs(leaver, mode, fast, request):
    account = request.getfixturevalue("account") if mode == "unprivileged" else None
    running = start(mode, account)
    try:
        directory = running.workdir()
        first, second = tokens()
        leaver(running, directory, first, second)
        wait_until(lambda: (directory / "ready").exists() and alive(first) and alive(second), timeout=30)
        if fast:  # (condor_master's fast shut-down)
            running.process.process.send_signal(signal.SIGQUIT)
        running.process.stop()
        assert running.process.process.returncode == 0
        wait_until(lambda: not alive(first) and not alive(second), timeout=10)
    finally:
        stop(running)


def test_a_job_with_condor_submits_default_memory_request_runs(gateway):
    """condor_submit's default RequestMemory follows the image size (a few MiB): the slot, and so the limit, is at
    least one quantum, or no ordinary job could run."""
    directory = gateway.workdir()
    (key,) = submit(gateway.schedd, Cmd=PYTHON, Arguments=join_v2(["-S", "-c", "x = b'x' * (40 << 20)"]),
                    RequestMemory=2, Iwd=str(directory), ShouldTransferFiles="NO")
    assert wait_for(gateway.schedd, key, status_is(4), timeout=60)["ExitCode"] == "0"


def test_a_job_over_its_memory_request_is_held(gateway):
    directory = gateway.workdir()
    grow = "import time\nx = b'x' * (300 << 20)\ntime.sleep(60)\n"
    (key,) = submit(gateway.schedd, Cmd=PYTHON, Arguments=join_v2(["-S", "-c", grow]), RequestMemory=64,
                    Iwd=str(directory), ShouldTransferFiles="NO", UserLog=str(directory / "job.log"))
    held = wait_for(gateway.schedd, key, status_is(5), timeout=30)
    assert held["HoldReasonCode"] == "34" and held["HoldReasonSubCode"] == "0"
    # (its slot's memory: the request rounded up to 128 MiB, as a partitionable slot provisions it)
    assert "memory limit of 128 megabytes" in held["HoldReason"], held["HoldReason"]
    assert "Consider resubmitting with a higher request_memory" in held["HoldReason"]
    assert ("cgroup memory limit" in held["HoldReason"]) == (gateway.mode == "cgroup")
    log = (directory / "job.log").read_text()
    assert "006 (" in log and "012 (" in log and "Code 34 Subcode 0" in log
    assert log.index("006 (") < log.index("012 (")
    assert not alive(str(directory))


def test_a_job_within_its_memory_request_runs_to_its_end(gateway):
    directory = gateway.workdir()
    (key,) = submit(gateway.schedd, Cmd=PYTHON, Arguments=join_v2(["-S", "-c", "x = b'x' * (20 << 20)"]),
                    RequestMemory=256, Iwd=str(directory), ShouldTransferFiles="NO")
    done = wait_for(gateway.schedd, key, status_is(4), timeout=30)
    assert done["ExitCode"] == "0" and int(done["MemoryUsage"]) >= 20


def test_usage_reaches_the_ad_while_the_job_runs(gateway):
    directory = gateway.workdir()
    go = directory / "go"
    work = ("import os, time\nwhile time.process_time() < 1.5: pass\nx = b'x' * (80 << 20)\n"
            "open('data', 'wb').write(os.urandom(2 << 20))\n"
            f"while not os.path.exists({str(go)!r}): time.sleep(0.05)\n")
    (key,) = submit(gateway.schedd, Cmd=PYTHON, Arguments=join_v2(["-S", "-c", work]), Iwd=str(directory),
                    ShouldTransferFiles="YES", TransferExecutable=False, UserLog=str(directory / "job.log"))

    def cpu(ad: dict) -> float:  # (the loop asks the kernel for its time: much of it is system time)
        return float(ad.get("RemoteUserCpu", 0)) + float(ad.get("RemoteSysCpu", 0))

    def measured(ad: dict) -> bool:
        return (ad.get("JobStatus") == "2" and int(ad.get("ResidentSetSize", 0)) >= 70000 and cpu(ad) >= 1.4
                and int(ad.get("DiskUsage", 0)) >= 2000)

    running = wait_for(gateway.schedd, key, measured, timeout=30)
    assert int(running["MemoryUsage"]) >= 70 and int(running["ImageSize"]) >= 70000
    assert "MemoryUsage of job (MB)" in (directory / "job.log").read_text()  # an image-size event
    go.touch()
    done = wait_for(gateway.schedd, key, status_is(4), timeout=30)
    assert 1.4 <= cpu(done) < 2.8  # the run's CPU counted once, not once more at its end
    assert int(done["DiskUsage"]) >= 2000 and int(done["MemoryUsage"]) >= 70


def test_a_suspend_right_after_the_start_freezes_every_process(gateway):
    from tests.test_submission_api import call, ok

    directory = gateway.workdir()
    first, _ = tokens()
    loop = f"setsid sh -c 'while true; do echo y >> daemon; sleep 0.02; done; : {first}' &\n" \
           "while true; do echo x >> ticks; sleep 0.02; done\n"
    answer = call(gateway.process, "submit", ad={"Cmd": "/bin/sh", "Arguments": "-c " + join_v2([loop]),
                                                 "Iwd": str(directory), "ShouldTransferFiles": "NO",
                                                 "Requirements": {"TYPE": 0, "VALUE": "TRUE"}})
    ok(answer)
    cluster, proc = (int(part) for part in answer["id"].rsplit("#", 1)[1].split("."))
    wait_for(gateway.schedd, (cluster, proc), status_is(2), timeout=20)

    def sizes() -> list[int]:
        return [(directory / name).stat().st_size if (directory / name).exists() else 0
                for name in ("daemon", "ticks")]

    def frozen() -> list[int]:
        time.sleep(0.5)
        before = sizes()
        time.sleep(1.0)
        assert sizes() == before  # nothing of the job runs, its setsid daemon included
        assert job(gateway.schedd, (cluster, proc))["JobStatus"] == "7"
        return before

    ok(call(gateway.process, "suspend", id=answer["id"]))  # (the launcher may not have started the job yet)
    for _ in range(2):
        before = frozen()
        ok(call(gateway.process, "continue", id=answer["id"]))
        wait_until(lambda before=before: all(now > then for now, then in zip(sizes(), before)))
        ok(call(gateway.process, "suspend", id=answer["id"]))
    ok(call(gateway.process, "remove", id=answer["id"]))  # (a frozen job: thawed to hear its kill signal)
    wait_for(gateway.schedd, (cluster, proc), lambda ad: ad.get("JobStatus", "3") == "3")  # (gone: it left)
    wait_until(lambda: not alive(first), timeout=10)


# -- a DAG's PRE and POST scripts are kept as jobs are ---------------------------------------------------------
@pytest.mark.parametrize("action", ["rm", "exit"])
def test_every_process_of_a_dag_script_ends_with_it(gateway, action):
    from tests.dags import dagman_out, wait_for_dag

    directory = gateway.workdir()
    first, second = tokens()
    key, dag = daemonizing_dag(gateway, directory, first, second)
    wait_until(lambda: (directory / "ready").exists() and alive(first) and alive(second), timeout=30)
    check_tracking(gateway, directory)
    if action == "rm":
        assert gateway.schedd.removeJob(None, *key, "enough", False).code == "SUCCESS"
    else:
        (directory / "go").touch()
        assert wait_for_dag(gateway.schedd, key)["ExitCode"] == "0"
        assert "PRE script of node A completed with status 0" in dagman_out(dag)
    wait_until(lambda: not alive(first) and not alive(second), timeout=10)


# -- request_cpus shares the CPU among jobs (cgroup v1's cpu.shares: the controller this machine gives) ---------
SPINNER = """import os, sys, time
path = next(line.split(':', 2)[2] for line in open('/proc/self/cgroup').read().splitlines()
            if 'cpu' in line.split(':')[1].split(','))
mount = next(line.split()[4] for line in open('/proc/self/mountinfo')
             if ' - cgroup ' in line and 'cpu' in line.split(' - ')[1].split()[2].split(','))
shares = open(mount + path + '/cpu.shares').read().strip()
os.sched_setaffinity(0, {0})
go = sys.argv[1]
while not os.path.exists(go):
    time.sleep(0.01)
start, end = time.process_time(), os.stat(go).st_mtime + 4
while time.time() < end:
    pass
open('result', 'w').write(f'{shares} {time.process_time() - start}')
"""


def test_request_cpus_shares_the_cpu_among_jobs(gateway):
    """Two jobs on one core, one asking for 2 CPUs and one for 1: the first gets about twice the CPU time of the
    second (each job's cgroup has ``cpu.shares`` 1024 per requested CPU, as HTCondor weights a slot's)."""
    if gateway.mode != "cgroup":
        pytest.skip("CPU is shared by request_cpus only through a cgroup's cpu controller")
    go = gateway.workdir() / "go"
    jobs = {}
    for cpus in (2, 1):
        directory = gateway.workdir()
        (key,) = submit(gateway.schedd, Cmd=PYTHON, Arguments=join_v2(["-S", "-c", SPINNER, str(go)]),
                        RequestCpus=cpus, Iwd=str(directory), ShouldTransferFiles="NO")
        jobs[cpus] = key, directory
    for key, _ in jobs.values():
        wait_for(gateway.schedd, key, status_is(2), timeout=20)
    time.sleep(0.5)  # (both are in their waiting loops)
    go.touch()
    seen = {}
    for cpus, (key, directory) in jobs.items():
        wait_for(gateway.schedd, key, status_is(4), timeout=30)
        shares, used = (directory / "result").read_text().split()
        seen[cpus] = int(shares), float(used)
    assert seen[2][0] == 2048 and seen[1][0] == 1024
    assert seen[2][1] > 1.5 * seen[1][1], seen  # (2:1 of what the two jobs' cgroups get of the core)


@pytest.mark.parametrize("mode", MODES)
def test_a_dag_script_ends_with_a_gateway_that_dies(mode, request):
    """A gateway killed outright cannot stop its DAGs' scripts: their keepers hear of its death and end them (the
    DAG, resumed at the next start, runs its PRE script again: two copies must never run)."""
    account = request.getfixturevalue("account") if mode == "unprivileged" else None
    running = start(mode, account)
    try:
        directory = running.workdir()
        first, second = tokens()
        daemonizing_dag(running, directory, first, second)
        wait_until(lambda: (directory / "ready").exists() and alive(first) and alive(second), timeout=30)
        running.process.kill()
        wait_until(lambda: not alive(first) and not alive(second), timeout=10)
    finally:
        stop(running)
