"""The gateway in front of a pool of several hosts, each a network namespace on one LAN (tests/lan.py): a central
manager (collector, negotiator), two execute hosts (a startd of one core each) and the submit host (this machine's
own namespace: the schedd, the gateway, the clients).  Jobs submitted through the gateway spread over both execute
hosts; an execute host that dies while a job runs on it loses the job to the other host, where it runs again and
completes (seed 004's eviction).  Real HTCondor daemons, from ``BIRDBATH_HTCONDOR``; skipped saying why without."""

from __future__ import annotations

import os
import shutil
from typing import Any, Iterator

import pytest

from gateway.testing import TEST_WORKERS, GatewayProcess
from gateway.testing_htcondor import PersonalPool
from tests.birdbath import ad, begin, expr, new_job, values
from tests.lan import Lan, LanHost
from tests.live_pool import release_or_skip, traversable_directory

#: every host's part of the pool: its own address and name on the LAN, the central manager's collector, CLAIMTOBE
#: beside FS (FS proves an identity only on one host), and a collector that forgets a host silent for 15 s (by
#: default 15 minutes, during which the negotiator keeps matching jobs to a dead host's last ad)
NETWORK = """\
NETWORK_INTERFACE = {address}
NETWORK_HOSTNAME = {name}
CONDOR_HOST = {manager}
SEC_DEFAULT_AUTHENTICATION_METHODS = FS, CLAIMTOBE
SEC_CLIENT_AUTHENTICATION_METHODS = FS, CLAIMTOBE
NUM_CPUS = 1
CLASSAD_LIFETIME = 15
"""


#: these tests take minutes of real time and run once, in the suite's first environment: what they test is the
#: pool's, whatever the gateway's layout (they start gateway processes of their own: the mark is
#: gateway.testing.GATEWAY_MARK)
pytestmark = [pytest.mark.gateway, pytest.mark.skipif(TEST_WORKERS not in ("0", "default"),
                                                      reason="run once, in the environment without worker processes")]


class Hosts:
    def __init__(self, lan: Lan, pools: dict[str, PersonalPool], hosts: dict[str, LanHost]) -> None:
        self.lan, self.pools, self.hosts = lan, pools, hosts

    @property
    def submit(self) -> PersonalPool:
        return self.pools["submit"]


@pytest.fixture(scope="module")
def hosts() -> Iterator[Hosts]:
    release = release_or_skip()
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("a pool of several hosts needs root and ip (iproute2) to make network namespaces")
    directory = traversable_directory("birdbath-hosts-")
    lan = Lan("hc")
    pools: dict[str, PersonalPool] = {}
    try:
        made = {name: lan.add(name, own_namespace=name != "submit") for name in ("cm", "ex1", "ex2", "submit")}
        collector = f"{made['cm'].address}:9618"
        daemons = {"cm": ("MASTER", "COLLECTOR", "NEGOTIATOR"), "ex1": ("MASTER", "STARTD"),
                   "ex2": ("MASTER", "STARTD"), "submit": ("MASTER", "SCHEDD")}
        for name, host in made.items():
            (directory / name).mkdir()
            pools[name] = PersonalPool(release, directory / name, daemons=daemons[name], collector=collector,
                                       launcher=tuple(host.command()), extra_config=NETWORK.format(
                                           address=host.address, name=name, manager=made["cm"].address))
        for pool in pools.values():
            pool.start(slots=0, schedds=0)
        pools["submit"].wait(lambda: pools["submit"].count("-startd") >= 2 and
                             pools["submit"].count("-schedd") >= 1, 90, "both execute hosts and the schedd")
        yield Hosts(lan, pools, made)
    finally:
        for pool in pools.values():
            pool.stop(timeout=10)
        lan.remove()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def schedd(hosts: Hosts) -> Iterator[Any]:
    import zeep

    directory = traversable_directory("birdbath-hosts-gateway-")
    config = f'[gateway]\nbackend = "htcondor"\n[backends.htcondor]\ncollector = "{hosts.submit.collector_host}"\n'
    gateway = GatewayProcess(directory / "state", config, tmp=directory).start()
    yield zeep.Client(gateway.url + "condorSchedd.wsdl").service
    gateway.stop()
    shutil.rmtree(directory, ignore_errors=True)


def submit_cluster(schedd: Any, count: int, **attributes: Any) -> int:
    txn = begin(schedd)
    cluster, _ = new_job(schedd, txn)
    for proc in range(count):
        if proc:
            assert schedd.newJob(txn, cluster).integer == proc
        answer = schedd.submit(txn, cluster, proc, ad(Owner="nobody", ShouldTransferFiles="YES",
                                                      WhenToTransferOutput="ON_EXIT", **attributes))
        assert answer.status.code == "SUCCESS", answer
    assert schedd.commitTransaction(txn).code == "SUCCESS"
    return cluster


def job(schedd: Any, cluster: int, proc: int) -> dict[str, str]:
    answer = schedd.getJobAd(None, cluster, proc)
    return values(answer.classAd) if answer.status.code == "SUCCESS" else {}


def running_on(ad: dict[str, str]) -> str | None:
    """The execute host a running job is on (None while it is not running)."""
    return host_of(ad["RemoteHost"]) if ad.get("JobStatus") == "2" and "RemoteHost" in ad else None


def host_of(slot: str) -> str:
    """``slot1_1@ex2`` -> ``ex2``."""
    return slot.strip('"').rpartition("@")[2]


def test_jobs_spread_over_both_execute_hosts(schedd, hosts):
    cluster = submit_cluster(schedd, 2, Cmd="/bin/sleep", Arguments="8",
                             LeaveJobInQueue=expr("JobStatus == 4 && (StageOutFinish =?= undefined)"))
    hosts.submit.wait(lambda: all(job(schedd, cluster, proc).get("JobStatus") == "4" for proc in (0, 1)), 180,
               "both jobs completed")
    ran_on = {host_of(job(schedd, cluster, proc)["LastRemoteHost"]) for proc in (0, 1)}
    assert ran_on == {"ex1", "ex2"}


def test_a_job_whose_execute_host_dies_runs_again_on_the_other(schedd, hosts):
    cluster = submit_cluster(schedd, 1, Cmd="/bin/sleep", Arguments="20", JobLeaseDuration=10,
                             LeaveJobInQueue=expr("JobStatus == 4 && (StageOutFinish =?= undefined)"))
    hosts.submit.wait(lambda: running_on(job(schedd, cluster, 0)) is not None, 120, "the job running")
    first = running_on(job(schedd, cluster, 0))
    hosts.hosts[first].crash()
    hosts.submit.wait(lambda: job(schedd, cluster, 0).get("JobStatus") == "4", 240,
                      lambda: f"the job completed elsewhere: "
                      f"{hosts.submit.tool('condor_q', '-better-analyze', check=False)[-3000:]}; "
                      f"{hosts.submit.tool('condor_status', '-af', 'Name', 'State', 'RemoteOwner', check=False)}")
    done = job(schedd, cluster, 0)
    assert host_of(done["LastRemoteHost"]) == ({"ex1", "ex2"} - {first}).pop()
    assert int(done["NumShadowStarts"]) >= 2 and done["ExitCode"] == "0"
