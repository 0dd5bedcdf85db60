"""A gateway running as root runs a DAG with its owner's rights (docs: issue 12, point 4): the PRE and POST scripts
run as the owner, every file the DAG names is read and written as the owner, and its node jobs belong to the owner
whatever their submit files say.  A DAG of ``nobody`` must not make the gateway read or write anything ``nobody``
could not.

Everything here runs under a world-traversable directory (pytest's own temporary directories are root's alone),
and only as root: skipped otherwise."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterator

import classad2
import pytest

from backends.interface import Batch, NewJob
from backends.local.dag.nodes import NodeJobs
from backends.local.owners import Accounts, NoAccount, call_as
from backends.local.queue import JobQueue
from backends.local.store import JobKey, JobStore
from backends.spool import Spool
from gateway.testing import GatewayProcess, zeep_client
from jobmodel.jobs import HoldCode, JobStatus
from tests.birdbath import values
from tests.dags import dagman_out, submit_dag, wait_for_dag, write_dag
from tests.test_execution import RUNNER, clear_queue, wait_until

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = [pytest.mark.gateway,
              pytest.mark.skipif(os.geteuid() != 0, reason="switching to a DAG's owner needs a gateway run as root")]

NOBODY = pwd.getpwnam("nobody") if os.geteuid() == 0 else None
#: anonymous loopback clients may submit for any owner but root here, so the tests can make DAGs of nobody
CONFIG = RUNNER + '[birdbath]\ndefault_owner = "nobody"\nqueue_all_users_trusted = true\n'


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """A world-traversable directory for the gateway's state and the DAGs (removed afterwards)."""
    path = Path(tempfile.mkdtemp(prefix="dag-as-owner-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def schedd(base: Path):
    gateway = GatewayProcess(base / "state", CONFIG, tmp=base).start()
    client = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    yield client
    gateway.stop()


@pytest.fixture(autouse=True)
def empty_queue_afterwards(schedd):
    yield
    clear_queue(schedd)


@pytest.fixture
def home(base: Path, request: pytest.FixtureRequest) -> Path:
    """A directory of nobody's for one test's DAG."""
    path = base / request.node.name
    path.mkdir()
    os.chown(path, NOBODY.pw_uid, NOBODY.pw_gid)
    return path


@pytest.fixture
def root_only(base: Path, request: pytest.FixtureRequest) -> Path:
    """A directory only root can enter (what /root is on a real machine)."""
    path = base / f"{request.node.name}-root"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
def root_owned(base: Path, request: pytest.FixtureRequest) -> Path:
    """A directory everyone can read but only root can write (what /etc is)."""
    path = base / f"{request.node.name}-etc"
    path.mkdir(mode=0o755)
    return path


def give_to_nobody(*paths: Path) -> None:
    for path in paths:
        os.chown(path, NOBODY.pw_uid, NOBODY.pw_gid, follow_symlinks=False)


def script(path: Path, text: str) -> Path:
    path.write_text(f"#!/bin/sh\n{text}\n")
    path.chmod(0o755)
    give_to_nobody(path)
    return path


def dag_of_nobody(directory: Path, dag: str, nodes: dict[str, str] | None = None) -> Path:
    path = write_dag(directory, dag, nodes or {})
    give_to_nobody(*directory.iterdir())
    return path


def owner_of(path: Path) -> int:
    return path.lstat().st_uid


# -- PRE and POST scripts ---------------------------------------------------------------------------------
def test_pre_and_post_scripts_run_as_the_dags_owner_in_the_nodes_directory(schedd, home):
    script(home / "pre.sh", "id -u > who.pre\npwd > where.pre\necho \"$HOME $USER\" > env.pre")
    script(home / "post.sh", "id -u > who.post")
    dag = dag_of_nobody(home, "JOB A A.sub NOOP\nSCRIPT PRE A pre.sh\nSCRIPT POST A post.sh\n")
    key = submit_dag(schedd, dag, Owner="nobody")
    assert wait_for_dag(schedd, key)["ExitCode"] == "0", dagman_out(dag)
    for made in ("who.pre", "who.post"):
        assert (home / made).read_text() == f"{NOBODY.pw_uid}\n" and owner_of(home / made) == NOBODY.pw_uid
    assert (home / "where.pre").read_text() == f"{home}\n"
    assert (home / "env.pre").read_text() == f"{NOBODY.pw_dir} nobody\n"  # the owner's environment, not root's


def test_a_script_its_owner_cannot_run_fails_its_node_without_running(schedd, home, root_only):
    secret_script = root_only / "pre.sh"
    secret_script.write_text(f"#!/bin/sh\ntouch {root_only}/ran\n")
    secret_script.chmod(0o755)
    dag = dag_of_nobody(home, f"JOB A A.sub NOOP\nSCRIPT PRE A {secret_script}\n")
    assert wait_for_dag(schedd, submit_dag(schedd, dag, Owner="nobody"))["ExitCode"] == "1"
    assert f"{secret_script} is not an executable file" in dagman_out(dag)
    assert not (root_only / "ran").exists()


def test_a_script_cannot_start_in_a_directory_its_owner_cannot_enter(schedd, home, root_only):
    """Node DIR names a directory nobody cannot reach: the script must not run from inside it."""
    hidden = root_only / "hidden"
    hidden.mkdir(mode=0o755)  # open itself, but inside root's directory: nobody cannot get there
    (hidden / "readable").write_text("root's\n")
    script(home / "pre.sh", f"cat readable > {home}/leaked")
    dag = dag_of_nobody(home, f"JOB A A.sub NOOP DIR {hidden}\nSCRIPT PRE A {home}/pre.sh\n")
    assert wait_for_dag(schedd, submit_dag(schedd, dag, Owner="nobody"))["ExitCode"] == "1"
    assert not (home / "leaked").exists()


# -- files the DAG names ----------------------------------------------------------------------------------
def test_what_the_runner_writes_belongs_to_the_owner(schedd, home):
    script(home / "fail.sh", "exit 1")
    dag = dag_of_nobody(home, "JOB A A.sub NOOP\nJOB B B.sub NOOP\nSCRIPT PRE B fail.sh\n")
    key = submit_dag(schedd, dag, Owner="nobody")
    assert wait_for_dag(schedd, key)["ExitCode"] == "1"
    rescue = home / "test.dag.rescue001"
    assert "DONE A" in rescue.read_text() and "DONE B" not in rescue.read_text()
    for made in (rescue, Path(f"{dag}.dagman.out"), Path(f"{dag}.stdout"), Path(f"{dag}.stderr")):
        assert owner_of(made) == NOBODY.pw_uid, made
    assert not Path(f"{dag}.lock").exists()  # made as nobody while it ran, removed as nobody at the end


def test_a_dag_cannot_read_a_submit_file_its_owner_cannot(schedd, home, root_only):
    secret = root_only / "secret.sub"
    secret.write_text(f"executable = /bin/touch\narguments = {root_only}/ran\n+Secret = \"s3cr3t\"\nqueue\n")
    dag = dag_of_nobody(home, f"JOB A {secret}\n")
    key = submit_dag(schedd, dag, Owner="nobody")
    assert wait_for_dag(schedd, key)["ExitCode"] == "1"
    assert f"cannot read submit file {secret}: Permission denied" in dagman_out(dag)
    assert "Submitted node" not in dagman_out(dag) and not (root_only / "ran").exists()
    assert schedd.getJobAds(None, f"DAGManJobId == {key[0]}").classAdArray is None


def test_a_dag_file_its_owner_cannot_read_fails_the_dag(schedd, home, root_only):
    secret = root_only / "secret.dag"
    secret.write_text("JOB A A.sub NOOP\n")
    key = submit_dag(schedd, secret, Owner="nobody", Iwd=str(home),
                     Env=f"_CONDOR_DAGMAN_LOG={home}/dagman.out", Out="dag.out", Err="dag.err",
                     UserLog=f"{home}/dag.log", Arguments=f"-Dag {secret}")
    assert wait_for_dag(schedd, key)["ExitCode"] == "1"
    assert f"cannot read DAG file {secret}: Permission denied" in (home / "dagman.out").read_text()
    assert owner_of(home / "dagman.out") == NOBODY.pw_uid


def test_a_dag_cannot_make_the_gateway_write_where_its_owner_cannot(schedd, home, root_owned):
    lock_victim, log_victim = root_owned / "lock-victim", root_owned / "log-victim"
    for victim in (lock_victim, log_victim):
        victim.write_text("root's own\n")
    dag = dag_of_nobody(home, "JOB A A.sub NOOP\n")
    key = submit_dag(schedd, dag, Owner="nobody", Env=f"_CONDOR_DAGMAN_LOG={log_victim}",
                     Arguments=f"-Lockfile {lock_victim} -Dag {dag}")
    assert wait_for_dag(schedd, key)["ExitCode"] == "1"  # it cannot make its lock file
    for victim in (lock_victim, log_victim):
        assert victim.read_text() == "root's own\n" and owner_of(victim) == 0


def test_a_dagman_out_link_to_a_root_file_is_not_written_through(schedd, home, root_owned):
    victim = root_owned / "victim"
    victim.write_text("root's own\n")
    dag = dag_of_nobody(home, "JOB A A.sub NOOP\n")
    Path(f"{dag}.dagman.out").symlink_to(victim)
    give_to_nobody(Path(f"{dag}.dagman.out"))
    assert wait_for_dag(schedd, submit_dag(schedd, dag, Owner="nobody"))["ExitCode"] == "0"
    assert victim.read_text() == "root's own\n"


# -- node jobs ----------------------------------------------------------------------------------------------
def test_node_jobs_belong_to_the_dags_owner_whatever_their_submit_file_says(schedd, home):
    script(home / "who.sh", 'echo "+IncludedBy = $(id -u)"')
    (home / "A.sub").write_text('executable = /bin/sleep\narguments = 60\n+Owner = "root"\n+User = "root@evil"\n'
                                f"include command : {home}/who.sh\nqueue\n")
    dag = dag_of_nobody(home, "JOB A A.sub\n")
    key = submit_dag(schedd, dag, Owner="nobody")
    wait_until(lambda: "Submitted node A" in dagman_out(dag))
    (node,) = [values(item) for item in schedd.getJobAds(None, f"DAGManJobId == {key[0]}").classAdArray.item]
    assert node["Owner"] == "nobody" and node["User"].startswith("nobody@")
    assert node["IncludedBy"] == str(NOBODY.pw_uid)  # what the submit file runs, runs as its owner


# -- in process: an owner without an account, the helpers ---------------------------------------------------
def queue_with_a_dag(base: Path, directory: Path, owner: str, accounts: Accounts) -> tuple[JobQueue, JobKey]:
    """A real queue in ``base`` holding one DAGMan job of ``owner`` for a DAG in ``directory``."""
    base.mkdir()
    queue = JobQueue(JobStore(base / "queue.sqlite3"), Spool(base / "spool"), "test-schedd", time.time,
                     accounts=accounts)
    dag = dag_of_nobody(directory, "JOB A A.sub NOOP\n")
    key = queue.store.next_cluster_id(), 0
    queue.commit(Batch([NewJob(*key, classad2.ClassAd({
        "Owner": owner, "JobUniverse": 7, "Cmd": "/usr/bin/condor_dagman", "Iwd": str(directory),
        "Out": "dag.out", "Arguments": f"-Lockfile {dag}.lock -Dag {dag}"}))]))
    return queue, key


@pytest.mark.parametrize(("owner", "accounts", "reason"), [
    ("no-such-user-for-dags", Accounts(), "has no local account"),
    ("nobody", Accounts(denied=["nobody"]), "denied_owners"),
])
def test_a_dag_whose_owner_cannot_run_here_is_held_and_nothing_is_touched(base, home, owner, accounts, reason):
    queue, key = queue_with_a_dag(base / f"queue-{owner}", home, owner, accounts)
    setup = NodeJobs(queue, base).dag_setup(key)
    assert setup.refused is not None and reason in setup.refused
    held = queue.store.get(key)
    assert held["JobStatus"] == int(JobStatus.HELD) and reason in held["HoldReason"]
    assert held["HoldReasonCode"] == int(HoldCode.FAILED_TO_CREATE_PROCESS)
    assert sorted(path.name for path in home.iterdir()) == ["test.dag"]  # no lock file, no log, no output


def test_a_dag_that_can_run_is_read_and_set_up_as_its_owner(base, home):
    queue, key = queue_with_a_dag(base / "queue-ok", home, "nobody", Accounts())
    setup = NodeJobs(queue, base).dag_setup(key)
    assert setup.error is None and setup.account is not None and setup.account.uid == NOBODY.pw_uid
    assert list(setup.dag.nodes) == ["A"]
    for made in ("test.dag.lock", "dag.out"):
        assert owner_of(home / made) == NOBODY.pw_uid


def test_call_as_works_with_the_accounts_rights_and_environment():
    nobody = Accounts().of("nobody")
    assert call_as(nobody, os.getuid) == NOBODY.pw_uid
    assert call_as(nobody, lambda: dict(os.environ))["HOME"] == NOBODY.pw_dir
    with pytest.raises(PermissionError):
        call_as(nobody, os.listdir, "/root")
    with pytest.raises(RuntimeError, match="division by zero"):
        call_as(nobody, lambda: 1 / 0)
    with pytest.raises(TimeoutError):
        call_as(nobody, wait_until, lambda: False, 30.0, timeout=0.2)


def test_an_owner_without_an_account_has_no_account():
    with pytest.raises(NoAccount, match="no local account"):
        Accounts().of("no-such-user-for-dags")
