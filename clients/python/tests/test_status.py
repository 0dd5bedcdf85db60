"""The pool through the client: ``Collector`` queries and advertising, and ``birdbath status`` as condor_status."""

from __future__ import annotations

import getpass
import time
import uuid

import pytest
from test_cli import birdbath

from birdbath_client import Collector, Expr, GatewayError


@pytest.fixture(scope="module")
def collector(gateway):
    return Collector(gateway.url)


def wait_for(condition, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, f"{condition} stayed false for {timeout}s"
        time.sleep(0.1)
    return found


@pytest.fixture
def running_job(schedd):
    """A job of this user's that runs (sleeping) while the test looks at the pool."""
    (job,) = schedd.submit({"Cmd": "/bin/sleep", "Arguments": "60", "Requirements": Expr("TRUE"),
                            "Owner": getpass.getuser()})
    yield job
    schedd.remove(job)


def test_machines_schedds_and_submitters(collector, running_job):
    busy = wait_for(lambda: collector.machines(f'JobId == "{running_job}"'))
    assert [(ad["State"], ad["Activity"], ad["RemoteOwner"].split("@")[0]) for ad in busy] == \
        [("Claimed", "Busy", getpass.getuser())]
    assert isinstance(busy[0]["Cpus"], int) and busy[0]["OpSys"] == "LINUX"
    (schedd_ad,) = collector.schedds("HasSOAPInterface")
    assert schedd_ad["TotalRunningJobs"] >= 1 and schedd_ad["HasSOAPInterface"] is True
    mine = collector.submitters(f'Name == "{busy[0]["RemoteOwner"]}"')
    assert mine and mine[0]["RunningJobs"] >= 1
    assert {ad["MyType"] for ad in collector.query("any")} >= {"Machine", "Scheduler", "DaemonMaster", "Collector"}
    assert [ad["MyType"] for ad in collector.query("collector")] == ["Collector"]


def test_advertise_and_find_again(collector):
    name = f"vm-{uuid.uuid4().hex[:8]}"
    assert collector.advertise("startd", {"Name": name, "Cpus": 32, "Start": Expr("true")}) == "New ad inserted"
    assert collector.advertise("startd", {"Name": name, "Cpus": 64}) == "Updated ad"
    (found,) = collector.machines(f'Name == "{name}"')
    assert found["Cpus"] == 64
    with pytest.raises(GatewayError, match="no Name"):
        collector.advertise("schedd", {"Machine": "nameless"})
    with pytest.raises(ValueError, match="unknown kind"):
        collector.query("printers")


def test_status_prints_machines_like_condor_status(gateway, running_job):
    wait_for(lambda: f"{running_job}" in birdbath(gateway, "status", "-af", "JobId").stdout)
    shown = birdbath(gateway, "status")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["Name", "OpSys", "Arch", "State", "Activity", "LoadAv", "Mem", "ActvtyTime"]
    claimed = [line for line in lines if " Claimed " in line]
    assert claimed and claimed[0].split()[3:5] == ["Claimed", "Busy"]
    assert lines[-1].split()[0] == "Total"


def test_status_of_schedulers_submitters_and_by_constraint(gateway, running_job):
    wait_for(lambda: "Claimed" in birdbath(gateway, "status", "-af", "State").stdout)
    schedds = birdbath(gateway, "status", "-schedd").stdout.splitlines()
    assert schedds[0].split() == ["Name", "Machine", "RunningJobs", "IdleJobs", "HeldJobs"] and len(schedds) == 3
    submitters = birdbath(gateway, "--url", gateway.url, "status", "--submitters").stdout
    assert f"{getpass.getuser()}@" in submitters
    long_form = birdbath(gateway, "status", "-constraint", f'JobId == "{running_job}"', "-long").stdout
    assert 'State = "Claimed"' in long_form and f'JobId = "{running_job}"' in long_form
    masters = birdbath(gateway, "status", "-master", "-af", "MyType").stdout.split()
    assert masters == ["DaemonMaster"]
    nothing = birdbath(gateway, "status", "-constraint", "State == ")
    assert nothing.returncode == 0 and nothing.stdout.splitlines()[2:] == []


def test_status_against_nothing_is_an_error(tmp_path):
    import subprocess

    from test_cli import command

    class Nowhere:
        url = "http://127.0.0.1:9/"

    done = subprocess.run(command(Nowhere, "status"), capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (
        1, "birdbath: cannot connect to the gateway at http://127.0.0.1:9/: connection refused\n")
