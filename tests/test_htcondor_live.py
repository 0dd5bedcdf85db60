"""The htcondor backend against real HTCondor daemons: a personal pool (tests/live_pool.py) started once per session
from the install ``BIRDBATH_HTCONDOR`` names.  Skipped, saying why, where there is none; CI always has one."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import pkgutil
import pwd
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backends.contract import BackendContract
from backends.htcondor import HTCondorBackend
from gateway.testing import TEST_WORKERS, GatewayProcess
from gateway.testing_htcondor import PersonalPool, find_release
from tests.accounts import run_as
from tests.birdbath import ad, begin, expr, new_job, submit_job, values
from tests.conftest import DATA
from tests.live_pool import traversable_directory

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = pytest.mark.gateway


class TestTheContractOnARealSchedd(BackendContract):
    @pytest.fixture
    def backend(self, live_state: Path, live_pool: PersonalPool) -> Iterator[HTCondorBackend]:
        backend = HTCondorBackend(live_state, collector=live_pool.collector_host)
        yield backend
        backend.close()


@pytest.fixture(scope="module")
def live_gateway(live_pool: PersonalPool) -> Iterator[GatewayProcess]:
    directory = traversable_directory("birdbath-live-gateway-")
    config = f'[gateway]\nbackend = "htcondor"\n[backends.htcondor]\ncollector = "{live_pool.collector_host}"\n'
    gateway = GatewayProcess(directory / "state", config, tmp=directory).start()
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def schedd(live_gateway: GatewayProcess) -> Any:
    import zeep

    return zeep.Client(live_gateway.url + "condorSchedd.wsdl").service


def job_values(schedd: Any, key: tuple[int, int]) -> dict[str, str]:
    answer = schedd.getJobAd(None, *key)
    return values(answer.classAd) if answer.status.code == "SUCCESS" else {}


def wait_for(schedd: Any, key: tuple[int, int], status: str, timeout: float = 120) -> dict[str, str]:
    """Polls the gateway until the job has this JobStatus: the real daemons run on their own clocks."""
    deadline = time.monotonic() + timeout
    while (current := job_values(schedd, key)).get("JobStatus") != status:
        if time.monotonic() > deadline:
            raise AssertionError(f"job {key} never reached JobStatus {status}; last seen {current}")
        time.sleep(0.5)
    return current


def condor_q(pool: PersonalPool, constraint: str, *attributes: str, history: bool = False) -> list[list[str]]:
    """What HTCondor's own tool says, one row of attribute values per job."""
    tool = ("condor_history",) if history else ("condor_q",)
    out = pool.tool(*tool, "-constraint", constraint, "-af", *attributes)
    return sorted(line.split() for line in out.splitlines() if line.strip())


#: a job that runs on the pool (as nobody, whom the schedd maps root to) and stays until its output is fetched
RUNS = dict(Owner="nobody", ShouldTransferFiles="YES", WhenToTransferOutput="ON_EXIT",
            LeaveJobInQueue=expr("JobStatus == 4 && (StageOutFinish =?= undefined)"))
#: a job that never matches: for job control and queries
WAITS = dict(Owner="nobody", Requirements=expr("FALSE"))


def test_a_birdbath_job_runs_on_the_pool_and_its_output_comes_back(schedd, live_pool):
    key = submit_job(schedd, {"input.txt": b"spooled input\n"}, Cmd="/bin/cat", Arguments="input.txt",
                     Out="out.txt", TransferInput="input.txt", **RUNS)
    assert condor_q(live_pool, f"BirdbathClusterId == {key[0]}", "BirdbathProcId", "Owner") == [["0", "nobody"]]
    done = wait_for(schedd, key, "4")
    assert done["ExitCode"] == "0" and int(done["SchedulerClusterId"]) < 1_000_000_000
    listed = schedd.listSpool(None, *key)
    assert {(f.name, f.size) for f in listed.info.item} >= {("out.txt", 14)}
    assert schedd.getFile(None, *key, "out.txt", 0, 100).data == b"spooled input\n"


def test_hold_release_and_remove_show_in_condor_q_and_condor_history(schedd, live_pool):
    key = submit_job(schedd, **WAITS)
    assert schedd.holdJob(None, *key, "wait a moment", False, False, False).code == "SUCCESS"
    ((status, reason),) = [(row[0], " ".join(row[1:])) for row in
                           condor_q(live_pool, f"BirdbathClusterId == {key[0]}", "JobStatus", "HoldReason")]
    assert status == "5" and reason.startswith("wait a moment")  # the schedd adds " (by user nobody)"
    assert schedd.releaseJob(None, *key, "go on", False, False).code == "SUCCESS"
    assert condor_q(live_pool, f"BirdbathClusterId == {key[0]}", "JobStatus") == [["1"]]
    assert schedd.removeJob(None, *key, "enough", False).code == "SUCCESS"
    live_pool.wait(lambda: condor_q(live_pool, f"BirdbathClusterId == {key[0]}", "JobStatus", history=True)
                   == [["3"]], 60, "the removed job in the history")
    assert job_values(schedd, key) == {}
    found = schedd.getJobAds(None, f"ClusterId == {key[0]}")
    assert found.status.code == "SUCCESS" and not (found.classAdArray and found.classAdArray.item)


def test_constraints_in_the_gateways_ids_select_what_condor_q_selects(schedd, live_pool):
    txn = begin(schedd)
    first = schedd.newCluster(txn).integer
    procs = [schedd.newJob(txn, first).integer for _ in range(3)]
    for proc in procs:
        assert schedd.submit(txn, first, proc, ad(Cmd="/bin/true", Tag=f"p{proc}", **WAITS)).status.code == "SUCCESS"
    assert schedd.commitTransaction(txn).code == "SUCCESS"
    constraint = f'ClusterId == {first} && ProcId >= 1 && Tag != "p2"'
    answer = schedd.getJobAds(None, constraint)
    through_gateway = sorted((values(one)["ClusterId"], values(one)["ProcId"]) for one in answer.classAdArray.item)
    assert through_gateway == [(str(first), "1")]
    schedd_side = condor_q(live_pool, f'BirdbathClusterId == {first} && BirdbathProcId >= 1 && Tag != "p2"',
                           "BirdbathClusterId", "BirdbathProcId")
    assert [tuple(row) for row in schedd_side] == through_gateway


def test_a_cluster_the_schedd_refuses_rolls_the_whole_transaction_back(schedd, live_pool):
    txn = begin(schedd)
    good, _ = new_job(schedd, txn)
    assert schedd.submit(txn, good, 0, ad(Cmd="/bin/true", Tag="fine", **WAITS)).status.code == "SUCCESS"
    bad, _ = new_job(schedd, txn)
    assert schedd.submit(txn, bad, 0, ad(Cmd="/bin/true", Tag="refused", **WAITS)).status.code == "SUCCESS"
    answer = schedd.commitTransaction(txn)
    assert answer.code == "FAIL" and "Tags may not be refused" in answer.message, answer
    assert "rolled back" in answer.message
    assert condor_q(live_pool, f"BirdbathClusterId == {good} || BirdbathClusterId == {bad}", "ClusterId") == []
    removed = condor_q(live_pool, f"BirdbathClusterId == {good}", "JobStatus", "RemoveReason", history=True)
    assert [" ".join(row[1:5]) for row in removed] == ["Birdbath transaction rolled back"]
    for cluster in (good, bad):
        assert job_values(schedd, (cluster, 0)) == {}


def test_the_schedds_own_refusal_reaches_the_client_in_its_words(schedd, live_pool):
    txn = begin(schedd)
    cluster, proc = new_job(schedd, txn)
    assert schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true", Owner="root")).status.code == "SUCCESS"
    answer = schedd.commitTransaction(txn)
    assert answer.code == "FAIL" and 'Setting job owner to "root" is not permitted' in answer.message, answer


def test_the_install_is_the_one_named_else_the_one_on_path(tmp_path):
    release = tmp_path / "release"
    (release / "sbin").mkdir(parents=True)
    (release / "sbin" / "condor_master").write_text("#!/bin/sh\n")
    (release / "sbin" / "condor_master").chmod(0o755)
    assert find_release({"BIRDBATH_HTCONDOR": str(release), "PATH": "/usr/bin"}) == (release, "")
    assert find_release({"PATH": f"/usr/bin:{release / 'sbin'}"}) == (release, "")


def test_no_install_is_a_reason_to_skip_not_a_failure(tmp_path):
    found, reason = find_release({"BIRDBATH_HTCONDOR": str(tmp_path), "PATH": "/usr/bin"})
    assert found is None and reason == f"BIRDBATH_HTCONDOR={tmp_path} holds no sbin/condor_master"
    found, reason = find_release({"PATH": str(tmp_path)})
    assert found is None and "set BIRDBATH_HTCONDOR to a RELEASE_DIR" in reason


def test_the_seeds_dag_recipe_runs_under_the_pools_condor_dagman(schedd, live_pool):
    """The 2009 recipe (clients/java/*/example/SubmitDag.java): a scheduler-universe job ad running condor_dagman,
    submitted through Birdbath; the pool's real DAGMan submits the node jobs to the schedd and they run."""
    directory = traversable_directory("birdbath-live-dag-")
    nobody = pwd.getpwnam("nobody")
    os.chown(directory, nobody.pw_uid, nobody.pw_gid)
    (directory / "A.sub").write_text("executable = /bin/echo\narguments = node A\noutput = A.out\nqueue\n")
    (directory / "B.sub").write_text("executable = /bin/echo\narguments = node B\noutput = B.out\nqueue\n")
    (directory / "diamond.dag").write_text("JOB A A.sub\nJOB B B.sub\nPARENT A CHILD B\n")
    dag = str(directory / "diamond.dag")
    txn = begin(schedd)
    cluster, proc = new_job(schedd, txn)
    recipe = ad(Owner="nobody", Iwd=str(directory), JobUniverse=7, Cmd=str(live_pool.release / "bin" / "condor_dagman"),
                JobStatus=1, JobNotification=0, UserLog=dag + ".dagman.log", RemoveKillSig="SIGUSR1",
                # a pool whose configuration is not in /etc/condor names it to DAGMan (condor_submit_dag's getenv)
                Env=f"_CONDOR_MAX_DAGMAN_LOG=0;_CONDOR_DAGMAN_LOG={dag}.dagman.out;CONDOR_CONFIG={live_pool.config}",
                Out=dag + ".stdout", Err=dag + ".stderr", ShouldTransferFiles="NO", Requirements=expr("TRUE"),
                OnExitRemove=expr("(ExitSignal =?= 11 || (ExitCode =!= UNDEFINED && ExitCode >=0 && ExitCode <= 2))"),
                LeaveJobInQueue=expr("FilesRetrieved =?= FALSE"), FilesRetrieved=expr("FALSE"),
                Arguments=f"-f -l . -Debug 3 -AutoRescue 1 -DoRescueFrom 0 -Allowversionmismatch -Lockfile {dag}.lock"
                          f" -Dag {dag}", ClusterId=cluster, ProcId=proc)
    assert schedd.submit(txn, cluster, proc, recipe).status.code == "SUCCESS"
    assert schedd.commitTransaction(txn).code == "SUCCESS"
    assert schedd.requestReschedule().code == "SUCCESS"
    assert condor_q(live_pool, f"BirdbathClusterId == {cluster}", "Requirements") == [["true"]]
    done = wait_for(schedd, (cluster, proc), "4", timeout=180)
    assert done["ExitCode"] == "0", (directory / "diamond.dag.dagman.out").read_text()[-2000:]
    assert (directory / "A.out").read_text() == "node A\n" and (directory / "B.out").read_text() == "node B\n"
    nodes = condor_q(live_pool, f"DAGManJobId == {done['SchedulerClusterId']}", "Cmd", "ExitCode", history=True)
    assert nodes == [["/bin/echo", "0"], ["/bin/echo", "0"]]
    shutil.rmtree(directory, ignore_errors=True)


def test_the_rest_face_queues_a_callers_job_as_the_caller_and_fetches_its_output(live_gateway, live_pool, accounts):
    """A real other user on this machine submits over REST; the gateway (a queue super user at the schedd) queues
    the job with that Owner, and the pool runs it as that user."""
    from tests.accounts import post_as
    from tests.rest import call, tar_members
    from tests.rest import wait_for as wait_for_rest

    user = accounts.user()
    body = json.dumps({"submit_file": "executable = /usr/bin/id\narguments = -un\noutput = out.txt\nqueue\n"})
    submitted = json.loads(post_as(user.name, live_gateway.port, "/api/v1/jobs", body, "application/json"))
    assert "job_ids" in submitted, submitted
    job = submitted["job_ids"][0]
    assert condor_q(live_pool, f"BirdbathClusterId == {submitted['cluster_id']}", "Owner") == [[user.name]]
    assert wait_for_rest(live_gateway.port, job, "^4$", timeout=120)["JobStatus"] == 4
    output = call(live_gateway.port, "GET", f"/api/v1/jobs/{job}/output")
    assert output.status == 200 and tar_members(output.body)["out.txt"] == f"{user.name}\n".encode()


@pytest.mark.skipif(TEST_WORKERS not in ("0", "default"), reason="run once, in the environment without worker "
                    "processes (a minute of real time; the gateway's layout is not what it tests)")
def test_the_parallel_rendezvous_recipe_runs_under_the_dedicated_scheduler(live_gateway, live_pool, accounts):
    """HTCondor's parallel-universe recipe (tests/data/parallel, seed 000) submitted with ``birdbath submit`` by a
    real user: the schedd's dedicated scheduler starts both nodes together, and node 1 reads with the pool's
    ``condor_chirp`` the attribute node 0 set."""
    user = accounts.user()
    directory = traversable_directory("birdbath-live-parallel-")
    shutil.copy(DATA / "parallel" / "job.sub", directory / "job.sub")
    shutil.copy(DATA / "parallel" / "rendezvous.sh", directory / "run.sh")
    for path in (directory, *directory.iterdir()):
        os.chown(path, user.uid, user.gid)
    # getenv = true: the nodes find condor_config_val (and through it condor_chirp) on the submitter's PATH
    environment = {"PATH": f"{live_pool.release / 'bin'}:/usr/bin:/bin", "HOME": str(directory),
                   "CONDOR_CONFIG": str(live_pool.config)}
    import birdbath_client
    from birdbath_client import cli, submitfile

    # what the command needs imported here, as root: the user may not read this interpreter's library nor the
    # environment's site-packages (tox makes .tox root's alone)
    for module in pkgutil.iter_modules(birdbath_client.__path__):
        importlib.import_module(f"birdbath_client.{module.name}")
    submitfile.clusters(directory / "job.sub")[0].ads(1)
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["--url", live_gateway.url, "q"]) == 0

    def submit() -> bytes:  # as the user, in a forked child (run_as): birdbath submit job.sub in its directory
        os.chdir(directory)
        os.environ.clear()
        os.environ.update(environment)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            status = cli.main(["--url", live_gateway.url, "submit", "job.sub"])
        assert status == 0, printed.getvalue()
        return printed.getvalue().encode()

    submitted = run_as(user, submit).decode()
    cluster = int(submitted.split("cluster ")[1].rstrip(".\n"))
    live_pool.wait(lambda: condor_q(live_pool, f"BirdbathClusterId == {cluster}", "JobStatus", "ExitCode",
                                    history=True) == [["4", "0"]], 240, "the parallel job done, in the history")
    assert (directory / "out.1").read_text() == 'JobServerAddress is "This is my address"\n'
    assert (directory / "err.1").read_text() == ""
    shutil.rmtree(directory, ignore_errors=True)
