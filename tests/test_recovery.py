"""Crash recovery: a gateway killed with SIGKILL while jobs run loses nothing and runs no finished job twice."""

from __future__ import annotations

import time

import htcondor2

from tests.conftest import zeep_client
from tests.test_execution import RUNNER, job, status_is, submit, wait_for, wait_until


def test_a_job_cut_off_by_a_crash_is_requeued_and_runs_again(start_gateway, tmp_path):
    gateway = start_gateway(RUNNER)
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    marker, log = tmp_path / "runs", tmp_path / "job.log"
    (key,) = submit(schedd, Cmd="/bin/sh", Arguments=f"-c 'echo run >> {marker}; sleep 5'", Iwd=str(tmp_path),
                    UserLog=str(log))
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
    marker = tmp_path / "runs"
    (key,) = submit(schedd, Cmd="/bin/sh", Arguments=f"-c 'echo run >> {marker}; sleep 0.5; exit 5'",
                    Iwd=str(tmp_path))
    wait_for(schedd, key, status_is(2))
    gateway.kill()
    time.sleep(1.5)  # the job ends while no gateway runs; its launcher records how
    gateway.start()
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    done = wait_for(schedd, key, status_is(4))
    assert done["NumJobStarts"] == "1" and done["ExitCode"] == "5"
    time.sleep(1)
    assert marker.read_text() == "run\n" and job(schedd, key)["NumJobStarts"] == "1"


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
