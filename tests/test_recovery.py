"""Crash recovery: a gateway killed with SIGKILL while jobs run loses nothing and runs no finished job twice."""

from __future__ import annotations

import htcondor2

from backends.local.sandbox import ExecuteDir
from tests.conftest import zeep_client
from tests.test_execution import RUNNER, status_is, submit, wait_for, wait_until


def execute_dir(gateway, key) -> ExecuteDir:
    """Where the job's launcher writes how its run ended (also while no gateway runs)."""
    return ExecuteDir.of(gateway.state_dir / "execute", *key)


def test_a_job_cut_off_by_a_crash_is_requeued_and_runs_again(start_gateway, tmp_path):
    gateway = start_gateway(RUNNER)
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    marker, log = tmp_path / "runs", tmp_path / "job.log"
    # the first run outlives any restart (it is killed by the recovery); the second ends at once
    body = f"echo run >> {marker}; test $(wc -l < {marker}) -ge 2 || sleep 120"
    (key,) = submit(schedd, Cmd="/bin/sh", Arguments=f"-c '{body}'", Iwd=str(tmp_path), UserLog=str(log))
    wait_for(schedd, key, status_is(2))
    wait_until(marker.exists)
    gateway.kill()
    gateway.start()
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    done = wait_for(schedd, key, status_is(4), timeout=30)
    assert done["NumJobStarts"] == "2" and marker.read_text() == "run\nrun\n"
    T = htcondor2.JobEventType
    types = [e.type for e in htcondor2.JobEventLog(str(log)).events(stop_after=0)]
    assert types == [T.SUBMIT, T.EXECUTE, T.SHADOW_EXCEPTION, T.EXECUTE, T.JOB_TERMINATED]


def test_a_job_that_finished_while_the_gateway_was_down_is_not_run_again(start_gateway, tmp_path):
    gateway = start_gateway(RUNNER)
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    marker, gate = tmp_path / "runs", tmp_path / "gate"
    (key,) = submit(schedd, Cmd="/bin/sh", Arguments=f"-c 'echo run >> {marker}; "
                                                     f"while ! test -e {gate}; do sleep 0.05; done; exit 5'",
                    Iwd=str(tmp_path))
    wait_for(schedd, key, status_is(2))
    wait_until(marker.exists)
    gateway.kill()
    gate.touch()  # the job ends while no gateway runs ...
    wait_until(lambda: execute_dir(gateway, key).result() is not None)  # ... and its launcher records how
    assert execute_dir(gateway, key).result()["exit_code"] == 5
    gateway.start()
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    done = wait_for(schedd, key, status_is(4))  # completed is final: it cannot be started again
    assert done["NumJobStarts"] == "1" and done["ExitCode"] == "5"
    assert marker.read_text() == "run\n"


def test_a_clean_shutdown_requeues_running_jobs(start_gateway, tmp_path):
    gateway = start_gateway(RUNNER)
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    marker = tmp_path / "runs"
    (key,) = submit(schedd, Cmd="/bin/sh", Arguments=f"-c 'echo run >> {marker}; sleep 30'", Iwd=str(tmp_path))
    wait_for(schedd, key, status_is(2))
    wait_until(marker.exists)
    gateway.restart()
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    again = wait_for(schedd, key, lambda current: current.get("NumJobStarts") == "2")
    assert float(again["RemoteWallClockTime"]) > 0
    schedd.removeJob(None, *key, "done", False)
    wait_for(schedd, key, status_is(3))
