"""Crash recovery: a gateway killed with SIGKILL while jobs run loses nothing and runs no finished job twice; a job
whose end cannot be recorded, or that cannot be recovered, is held and never left running (the rules themselves are
tested on a real queue in tests/test_scheduler_unit.py; the kill -9 matrix is tests/test_fault_matrix.py)."""

from __future__ import annotations

import htcondor2

from backends.local import sandbox
from backends.local.sandbox import ExecuteDir
from tests.conftest import zeep_client
from tests.local_runs import refuse_writes
from tests.test_execution import RUNNER, status_is, submit, wait_for, wait_until

COULD_NOT = "The gateway could not {what}: BackendError: the job queue could not be written: disk I/O error"


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


def test_the_execute_directory_of_a_job_that_left_the_queue_goes_with_what_runs_in_its_cgroup(start_gateway,
                                                                                             tmp_path):
    """A crash after a job left the queue but before its execute directory went: a restart removes the directory and
    kills whatever is left in the job's cgroup (when the gateway has cgroups: root)."""
    import os
    import subprocess

    from backends.local import cgroups
    from backends.local.family import ControlConfig

    gateway = start_gateway(RUNNER)
    gateway.stop()
    leftover = execute_dir(gateway, (999, 0))
    leftover.create()
    hierarchy = cgroups.detect("htcondor") if os.geteuid() == 0 else None
    control = ControlConfig(hierarchy=hierarchy).for_job(leftover.root, None, 1, [leftover.sandbox])
    sandbox.write_spec(leftover, {}, control)
    cgroup = cgroups.JobCgroup.from_spec(control.cgroup) if control.cgroup is not None else None
    if cgroup is not None:
        cgroup.create(None, cgroups.MemoryPolicy.NONE, 1)
    stray = subprocess.Popen(["sleep", "300"], preexec_fn=cgroup.enter if cgroup is not None else None)
    try:
        gateway.start()
        wait_until(lambda: not leftover.root.exists())
        if control.cgroup is not None:
            assert stray.wait(timeout=5) == -9  # killed in its cgroup
            assert not any(directory.exists() for directory in cgroup.directories())
    finally:
        stray.kill()
        stray.wait()


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


def queue_file(gateway):
    return gateway.state_dir / "queue.sqlite3"


def test_a_job_whose_end_cannot_be_recorded_is_held_and_its_slot_runs_the_next_job(start_gateway, tmp_path):
    gateway = start_gateway("[backends.local]\nslots = 1\nkill_grace = 1.0\nperiodic_interval = 0.5\n")
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    gate = tmp_path / "gate"
    (refused,) = submit(schedd, Cmd="/bin/sh", Arguments=f"-c 'while ! test -e {gate}; do sleep 0.05; done'",
                        Iwd=str(tmp_path))
    # counters a client set to anything once left their job running for ever (and NumJobStarts every job idle)
    (hostile,) = submit(schedd, Cmd="/bin/true", Iwd=str(tmp_path), RemoteWallClockTime="oops", NumJobStarts="x")
    wait_for(schedd, refused, status_is(2))
    refuse_writes(queue_file(gateway), refused, "JobStatus = 4")  # its completion cannot be written: a full disk
    gate.touch()
    held = wait_for(schedd, refused, status_is(5))
    assert (held["HoldReason"], held["HoldReasonCode"]) == (COULD_NOT.format(what="record the end of the job's run"),
                                                            "0")
    done = wait_for(schedd, hostile, status_is(4))  # the one slot was freed
    assert (done["NumJobStarts"], done["ExitCode"]) == ("1", "0")


def test_after_a_crash_a_job_that_cannot_be_recovered_is_held_and_every_other_is_recovered(start_gateway, tmp_path):
    gateway = start_gateway(RUNNER)
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    gate, marker = tmp_path / "gate", tmp_path / "runs"
    (unrecoverable,) = submit(schedd, Cmd="/bin/sh", Iwd=str(tmp_path),
                              Arguments=f"-c 'while ! test -e {gate}; do sleep 0.05; done'")
    body = f"echo run >> {marker}; test $(wc -l < {marker}) -ge 2 || sleep 120"
    (cut_off,) = submit(schedd, Cmd="/bin/sh", Arguments=f"-c '{body}'", Iwd=str(tmp_path))
    wait_for(schedd, unrecoverable, status_is(2))
    wait_until(marker.exists)
    gateway.kill()
    gate.touch()
    wait_until(lambda: execute_dir(gateway, unrecoverable).result() is not None)
    refuse_writes(queue_file(gateway), unrecoverable, "JobStatus = 4")  # recovery cannot record its end
    gateway.start()
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    held = wait_for(schedd, unrecoverable, status_is(5))
    assert held["HoldReason"] == COULD_NOT.format(what="recover the job after a restart")
    again = wait_for(schedd, cut_off, status_is(4))  # recovered after the first job's failure: requeued, run again
    assert again["NumJobStarts"] == "2" and marker.read_text() == "run\nrun\n"
