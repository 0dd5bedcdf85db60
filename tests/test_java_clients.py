"""Java programs built on generated stubs (Axis 1.4 WSDL2Java and JAX-WS wsimport, each from our WSDL and from
the shipped 7.2.4 WSDL) submit real jobs and the diamond DAG against the running gateway, and abort their
transaction when a submission fails before its commit."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.birdbath import expr, values
from tests.conftest import LEGACY_WSDL, QUEUE_ONLY, ROOT, module_gateway, require_java, zeep_client
from tests.dags import write_dag
from tests.test_execution import RUNNER, submit

pytestmark = pytest.mark.java

VARIANTS = ["axis-ours", "jaxws-ours", "axis-legacy", "jaxws-legacy"]


@pytest.fixture(scope="session")
def java_clients(tmp_path_factory) -> Path:
    require_java()
    out = tmp_path_factory.mktemp("java")
    subprocess.run([str(ROOT / "clients" / "java" / "build.sh"), str(out), f"ours={ROOT / 'wsdl' / 'condorSchedd.wsdl'}",
                    f"legacy={LEGACY_WSDL}"], check=True, capture_output=True, text=True, timeout=600)
    return out


gateway = module_gateway(RUNNER + "[birdbath]\nqueue_all_users_trusted = true\n")


@pytest.fixture(scope="module")
def schedd(gateway):
    return zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)


#: a gateway that keeps QUEUE_ALL_USERS_TRUSTED false, so an anonymous client's job owned by alice is refused
strict_gateway = module_gateway(QUEUE_ONLY)


@pytest.fixture(scope="module")
def strict_schedd(strict_gateway):
    return zeep_client(strict_gateway.url + "condorSchedd.wsdl", strict_gateway.url)


def run_java(java_clients: Path, variant: str, program: str, *args: str) -> subprocess.CompletedProcess:
    classpath = (java_clients / variant / "classpath").read_text().strip()
    return subprocess.run(["java", "-cp", classpath, f"example.{program}", *args], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ))


@pytest.mark.parametrize("variant", VARIANTS)
def test_submit_a_job_with_an_input_file_and_fetch_its_output(java_clients, gateway, variant, tmp_path):
    program = tmp_path / "shout.sh"
    program.write_text('#!/bin/sh\ntr a-z A-Z < "$1" > shouted.txt\necho "read $1"\nexit 3\n')
    (tmp_path / "words.txt").write_bytes(b"binary \x00\xff and text\n" * 500)
    result = run_java(java_clients, variant, "SubmitJob", gateway.url, str(program), str(tmp_path / "words.txt"),
                      str(tmp_path / "out"))
    assert result.returncode == 3, result.stdout + result.stderr
    assert (tmp_path / "out" / "shouted.txt").read_bytes() == b"BINARY \x00\xff AND TEXT\n" * 500
    assert (tmp_path / "out" / "job.out").read_text() == "read words.txt\n"
    assert "exited with 3" in result.stdout


@pytest.mark.parametrize("variant", VARIANTS)
def test_submit_the_diamond_dag_like_the_blog(java_clients, gateway, variant, tmp_path):
    diamond = "JOB A A.sub\nJOB B B.sub\nJOB C C.sub\nJOB D D.sub\nPARENT A CHILD B C\nPARENT B C CHILD D\n"
    dag = write_dag(tmp_path, diamond, {node: f"echo {node} >> {tmp_path}/order" for node in "ABCD"},
                    name="diamond.dag")
    result = run_java(java_clients, variant, "SubmitDag", gateway.url, "alice", str(dag))
    assert result.returncode == 0, result.stdout + result.stderr
    order = (tmp_path / "order").read_text().split()
    assert order[0] == "A" and order[-1] == "D" and sorted(order[1:3]) == ["B", "C"]
    assert "All jobs Completed!" in Path(f"{dag}.dagman.out").read_text()


@pytest.mark.parametrize("variant", VARIANTS)
def test_list_jobs_with_a_constraint(java_clients, schedd, gateway, variant):
    keys = submit(schedd, procs=2, Cmd="/bin/true", Requirements=expr("FALSE"), Tag=variant)
    result = run_java(java_clients, variant, "ListJobs", gateway.url, f'Tag == "{variant}"')
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert sorted(line.split()[0] for line in lines[:-1]) == sorted(f"{c}.{p}" for c, p in keys)
    assert all(line.split()[1] == "1" for line in lines[:-1]) and lines[-1] == "2 jobs"
    schedd.removeCluster(None, keys[0][0], "done")


@pytest.mark.parametrize("variant", VARIANTS)
def test_hold_release_and_remove(java_clients, schedd, gateway, variant):
    ((cluster, proc),) = submit(schedd, Cmd="/bin/true", Requirements=expr("FALSE"))
    for action, status in (("hold", "5"), ("release", "1"), ("remove", "3")):
        result = run_java(java_clients, variant, "ControlJob", gateway.url, action, str(cluster), str(proc),
                          f"{action} from Java")
        assert result.returncode == 0, result.stdout + result.stderr
        assert values(schedd.getJobAd(None, cluster, proc).classAd)["JobStatus"] == status
    held_twice = run_java(java_clients, variant, "ControlJob", gateway.url, "release", str(cluster), str(proc), "x")
    assert held_twice.returncode != 0 and "Failed to release job." in held_twice.stderr


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("program", ["SubmitDag", "SubmitJob"])
def test_a_submission_that_fails_aborts_its_transaction(java_clients, strict_gateway, strict_schedd, variant,
                                                        program, tmp_path):
    if program == "SubmitDag":  # the gateway refuses the Owner at submit
        dag = write_dag(tmp_path, "JOB A A.sub\n", {"A": "true"}, name="refused.dag")
        args, failure = ("alice", str(dag)), "may not submit jobs owned by 'alice'"
    else:  # the client fails half way through spooling: the program is sent, the input does not exist
        (tmp_path / "job.sh").write_text("#!/bin/sh\ntrue\n")
        args, failure = (str(tmp_path / "job.sh"), str(tmp_path / "missing.txt"), str(tmp_path / "out")), "missing.txt"
    result = run_java(java_clients, variant, program, strict_gateway.url, *args)
    assert result.returncode != 0 and failure in result.stderr, result.stdout + result.stderr
    aborted = re.findall(r"^aborted transaction (\d+)$", result.stderr, re.MULTILINE)
    assert len(aborted) == 1, result.stderr
    # An open transaction (its 60 s lease has not run out) would answer SUCCESS.
    answer = strict_schedd.extendTransaction({"id": int(aborted[0]), "duration": 60}, 60)
    assert answer.status.code == "INVALIDTRANSACTION"
