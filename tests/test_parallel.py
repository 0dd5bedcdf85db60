"""Parallel-universe jobs on the local backend: dedicated scheduling (all nodes or none, a wide job never starved
by narrow ones), each node's environment and ``$(Node)``, the shutdown policies, and a hold that ends every node.

The scheduling tests drive the scheduler in the test process (``tests/local_runs.py``, 4 slots); the others run a
gateway and submit through Birdbath SOAP with ``JobUniverse = 11`` and ``MinHosts``/``MaxHosts`` as condor_submit
sets them."""

from __future__ import annotations

import time

import pytest

from backends.local.owners import Accounts
from jobmodel.jobs import JobStatus, Universe
from tests.birdbath import expr
from tests.conftest import module_gateway, zeep_client
from tests.local_runs import make_world
from tests.test_execution import empty_queue_afterwards, status_is, submit, wait_for, wait_until  # noqa: F401

PARALLEL = int(Universe.PARALLEL)


# -- dedicated scheduling (4 slots) -----------------------------------------------------------------------------
@pytest.fixture
def world(tmp_path):
    world = make_world(tmp_path, Accounts(switching=False))
    yield world
    world.queue.store.close()


def parallel(hosts: int, **attributes) -> dict:
    return {"JobUniverse": PARALLEL, "MinHosts": hosts, "MaxHosts": hosts, "Cmd": "/bin/true"} | attributes


def test_a_wide_job_waits_for_its_slots_and_narrow_jobs_behind_it_do_not_take_them(world):
    (wide,) = world.submit(**parallel(4))
    later = world.submit(procs=2)
    assert world.start(free_cpus=2) == []  # 2 free of the 4 it needs: it waits, and keeps them from the others
    assert world.status(wide) is JobStatus.IDLE and all(world.status(key) is JobStatus.IDLE for key in later)
    assert world.start(free_cpus=4) == [wide]  # every node in one launch
    spec = world.spec(wide)
    assert [node["node"] for node in spec["nodes"]] == [0, 1, 2, 3]
    assert world.job(wide).eval("CurrentHosts") == 4


def test_a_job_wider_than_the_machine_keeps_nothing(world):
    (impossible,) = world.submit(**parallel(5))  # 5 nodes, 4 slots: it can never run
    (narrow,) = world.submit()
    assert world.start(free_cpus=4) == [narrow]
    assert world.status(impossible) is JobStatus.IDLE


def test_request_cpus_counts_for_every_node(world):
    (wide,) = world.submit(**parallel(2, RequestCpus=2))
    assert world.start(free_cpus=3) == []
    assert world.start(free_cpus=4) == [wide]


def test_each_node_has_its_sandbox_environment_and_node_number(world):
    (key,) = world.submit(**parallel(2, ShouldTransferFiles="YES", Out="out.#pArAlLeLnOdE#",
                                     Arguments="node #pArAlLeLnOdE#"))
    world.start()
    nodes = world.spec(key)["nodes"]
    assert [node["arguments"] for node in nodes] == [["node", "0"], ["node", "1"]]
    assert [node["returns"][node["stdout"]].rsplit("/", 1)[1] for node in nodes] == ["out.0", "out.1"]
    assert nodes[0]["cwd"] != nodes[1]["cwd"]
    for number, node in enumerate(nodes):
        environment = node["environment"]
        assert environment["_CONDOR_PROCNO"] == str(number) and environment["_CONDOR_NPROCS"] == "2"
        assert environment["_CONDOR_SCRATCH_DIR"] == node["cwd"]
        assert environment["PATH"].split(":")[0].endswith("libexec")
        assert "PYTHONPATH" not in environment and environment["BATCH_SYSTEM"] == "HTCondor"  # not the gateway's


# -- running them ---------------------------------------------------------------------------------------------
runner = module_gateway("[backends.local]\nslots = 3\nkill_grace = 1.0\nperiodic_interval = 0.5\n")


@pytest.fixture(scope="module")
def schedd(runner):
    return zeep_client(runner.url + "condorSchedd.wsdl", runner.url)


def shell(command: str, hosts: int = 2, **attributes) -> dict:
    return {"JobUniverse": PARALLEL, "MinHosts": hosts, "MaxHosts": hosts, "Cmd": "/bin/bash",
            "Arguments": f"-c '{command}'", "WantIOProxy": True} | attributes


def test_node_0_ends_the_job_and_the_others_are_killed(schedd, tmp_path):
    started = time.monotonic()
    (key,) = submit(schedd, **shell("if [ $_CONDOR_PROCNO = 0 ]; then sleep 1; exit 3; fi; sleep 60",
                                    Iwd=str(tmp_path), UserLog=str(tmp_path / "log")))
    done = wait_for(schedd, key, status_is(4), timeout=30)
    assert done["ExitCode"] == "3" and done["CurrentHosts"] == "0"
    assert time.monotonic() - started < 30  # node 1's sleep 60 was cut short
    log = (tmp_path / "log").read_text()
    assert "Node 0 terminated." in log and "Node 1 terminated." not in log and "Job terminated." in log


def test_the_output_of_nodes_the_shutdown_policy_ended_comes_back(schedd, tmp_path):
    (key,) = submit(schedd, **shell("echo from $_CONDOR_PROCNO > made.$_CONDOR_PROCNO; "
                                    "if [ $_CONDOR_PROCNO = 0 ]; then sleep 1; exit 0; fi; sleep 60",
                                    Iwd=str(tmp_path), ShouldTransferFiles="YES", Out="out.#pArAlLeLnOdE#"))
    wait_for(schedd, key, status_is(4), timeout=30)
    assert (tmp_path / "made.0").read_text() == "from 0\n"
    assert (tmp_path / "made.1").read_text() == "from 1\n"  # node 1 was killed when node 0 ended
    assert (tmp_path / "out.1").exists()


def test_wait_for_all_waits_for_every_node(schedd, tmp_path):
    (key,) = submit(schedd, **shell("if [ $_CONDOR_PROCNO = 1 ]; then sleep 2; echo late > late.txt; fi",
                                    Iwd=str(tmp_path), ParallelShutdownPolicy="WAIT_FOR_ALL"))
    done = wait_for(schedd, key, status_is(4), timeout=30)
    assert done["ExitCode"] == "0" and (tmp_path / "late.txt").read_text() == "late\n"


def test_a_parallel_job_wider_than_the_free_slots_waits_then_starts_all_at_once(schedd, tmp_path):
    (blocker,) = submit(schedd, Cmd="/bin/sleep", Arguments="3", Iwd=str(tmp_path))
    wait_for(schedd, blocker, status_is(2))
    (wide,) = submit(schedd, **shell("echo $_CONDOR_PROCNO of $_CONDOR_NPROCS > node.$_CONDOR_PROCNO; sleep 1",
                                     hosts=3, Iwd=str(tmp_path)))
    (narrow,) = submit(schedd, Cmd="/bin/true", Iwd=str(tmp_path))
    time.sleep(1)
    assert wait_for(schedd, wide, status_is(1))["JobStatus"] == "1"  # 2 slots free of 3: it waits
    assert wait_for(schedd, narrow, status_is(1))["JobStatus"] == "1"  # and the job behind it does not take them
    wait_for(schedd, wide, status_is(2, 4), timeout=30)
    wait_for(schedd, wide, status_is(4), timeout=30)
    assert sorted(path.read_text() for path in tmp_path.glob("node.*")) == ["0 of 3\n", "1 of 3\n", "2 of 3\n"]
    wait_for(schedd, narrow, status_is(4), timeout=30)


def test_a_hold_ends_every_node(runner, schedd, tmp_path):
    (key,) = submit(schedd, **shell("echo $$ > pid.$_CONDOR_PROCNO; sleep 60", Iwd=str(tmp_path)))
    wait_for(schedd, key, status_is(2))
    # (the shell makes each file before it writes the pid: one may be there and still empty)
    wait_until(lambda: [path.read_text().endswith("\n") for path in tmp_path.glob("pid.*")] == [True, True])
    pids = [int(path.read_text()) for path in tmp_path.glob("pid.*")]
    assert schedd.holdJob(None, *key, "stop", False, False, True).code == "SUCCESS"
    wait_for(schedd, key, status_is(5))

    def gone(pid: int) -> bool:
        try:
            return open(f"/proc/{pid}/stat").read().split()[2] == "Z"
        except OSError:
            return True

    wait_until(lambda: all(gone(pid) for pid in pids), timeout=15)


def test_the_nodes_rendezvous_through_chirp(schedd, tmp_path):
    command = ('C=`condor_config_val LIBEXEC`/condor_chirp; if [ $_CONDOR_PROCNO = 0 ]; then $C set_job_attr Where '
               '\\"here\\"; sleep 3; else until [ "`$C get_job_attr Where`" != UNDEFINED ]; do sleep 0.2; done; '
               '$C get_job_attr Where > where.txt; fi')
    (key,) = submit(schedd, **shell(command, Iwd=str(tmp_path), LeaveJobInQueue=expr("true")))
    wait_for(schedd, key, status_is(4), timeout=30)
    assert (tmp_path / "where.txt").read_text() == '"here"\n'
