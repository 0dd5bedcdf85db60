"""The local backend's pool (backends/local/pool.py, advertised.py) and the collector's core (gateway/core/collector.py):
the gateway's own daemon ads made from job ads, advertised ads kept and expired on a fake clock, who may do what."""

from __future__ import annotations

import classad2
import pytest
from twisted.internet.defer import succeed

from backends.interface import BackendInfo
from backends.local.advertised import AdRefused, AdvertisedAds
from backends.local.pool import LocalPool, PoolFacts
from gateway.core.adstruct import Attr, AttrType
from gateway.core.auth import AccessPolicy, Caller, HostList
from gateway.core.collector import BirdbathCollector, contact_address
from gateway.core.queries import QueryRunner
from gateway.core.status import BirdbathError
from jobmodel.classads import evaluate
from jobmodel.jobs import JobStatus, Universe
from jobmodel.pool import CLASSAD_LIFETIME, AdType

HOST = "pool.example.org"
INFO = BackendInfo("local", "$CondorVersion: 8.6.13 $", "$CondorPlatform: X86_64-Linux $", "schedd.example.org")
CONTACT = "<10.0.0.5:1984>"


def machine() -> classad2.ClassAd:
    return classad2.ClassAd({"MyType": "Machine", "Machine": HOST, "Arch": "X86_64", "OpSys": "LINUX",
                             "Memory": 8000, "Cpus": 4})


def job(cluster: int, owner: str, status: JobStatus, universe: Universe = Universe.VANILLA, cpus: int = 1,
        started: int = 0) -> classad2.ClassAd:
    return classad2.ClassAd({"ClusterId": cluster, "ProcId": 0, "Owner": owner, "User": f"{owner}@{HOST}",
                             "JobStatus": int(status), "JobUniverse": int(universe), "RequestCpus": cpus,
                             "JobCurrentStartDate": started, "EnteredCurrentStatus": started})


class Pool:
    """A LocalPool over a settable list of job ads and a settable clock."""

    def __init__(self, clock, slots: int = 4, lifetime: float = CLASSAD_LIFETIME, capacity: int = 100) -> None:
        self.jobs: list[classad2.ClassAd] = []
        self.pool = LocalPool(PoolFacts(INFO, machine(), slots, HOST, 1_700_000_000), lambda: list(self.jobs),
                              clock.seconds, AdvertisedAds(clock.seconds, lifetime, capacity))

    def ads(self, ad_type: AdType, constraint: str | None = None) -> list[classad2.ClassAd]:
        parsed = classad2.ExprTree(constraint) if constraint else None
        return self.pool.pool_ads(ad_type, parsed, contact=CONTACT)


def names(ads) -> list[str]:
    return [evaluate(ad, "Name") for ad in ads]


def test_a_scheduler_ad_with_the_live_counts_and_the_soap_interface(clock):
    pool = Pool(clock)
    pool.jobs = [job(1, "alice", JobStatus.IDLE), job(2, "alice", JobStatus.RUNNING), job(3, "bob", JobStatus.HELD),
                 job(4, "bob", JobStatus.IDLE, Universe.LOCAL), job(5, "bob", JobStatus.RUNNING, Universe.SCHEDULER)]
    (schedd,) = pool.ads(AdType.SCHEDD)
    assert {name: evaluate(schedd, name) for name in (
        "MyType", "Name", "MyAddress", "ScheddIpAddr", "HasSOAPInterface", "TotalIdleJobs", "TotalRunningJobs",
        "TotalHeldJobs", "TotalLocalJobsIdle", "TotalSchedulerJobsRunning", "TotalJobAds", "NumUsers")} == {
        "MyType": "Scheduler", "Name": "schedd.example.org", "MyAddress": CONTACT, "ScheddIpAddr": CONTACT,
        "HasSOAPInterface": True, "TotalIdleJobs": 1, "TotalRunningJobs": 1, "TotalHeldJobs": 1,
        "TotalLocalJobsIdle": 1, "TotalSchedulerJobsRunning": 1, "TotalJobAds": 5, "NumUsers": 2}


def test_a_submitter_ad_per_owner_with_its_counts(clock):
    pool = Pool(clock)
    pool.jobs = [job(1, "alice", JobStatus.IDLE, cpus=2), job(2, "alice", JobStatus.RUNNING),
                 job(3, "bob", JobStatus.HELD)]
    submitters = {evaluate(ad, "Name"): ad for ad in pool.ads(AdType.SUBMITTOR)}
    assert sorted(submitters) == [f"alice@{HOST}", f"bob@{HOST}"]
    alice = submitters[f"alice@{HOST}"]
    assert [evaluate(alice, name) for name in ("IdleJobs", "RunningJobs", "HeldJobs", "WeightedIdleJobs",
                                               "ScheddName", "MyType")] == [1, 1, 0, 2, INFO.schedd_name, "Submitter"]
    assert evaluate(submitters[f"bob@{HOST}"], "HeldJobs") == 1


def test_slots_follow_the_jobs_that_hold_cpus(clock):
    pool = Pool(clock, slots=4)
    (free,) = pool.ads(AdType.STARTD)
    assert [evaluate(free, name) for name in ("Name", "State", "Activity", "Cpus", "Memory", "Arch", "OpSys",
                                              "PartitionableSlot")] == \
        [f"slot1@{HOST}", "Unclaimed", "Idle", 4, 8000, "X86_64", "LINUX", True]

    pool.jobs = [job(7, "alice", JobStatus.RUNNING, cpus=2, started=1_700_000_100),
                 job(8, "bob", JobStatus.RUNNING, Universe.SCHEDULER), job(9, "bob", JobStatus.IDLE)]
    partitionable, busy = pool.ads(AdType.STARTD)
    assert evaluate(partitionable, "Cpus") == 2 and evaluate(partitionable, "Memory") == 4000
    assert {name: evaluate(busy, name) for name in ("Name", "State", "Activity", "JobId", "RemoteOwner", "Cpus",
                                                    "EnteredCurrentState", "DynamicSlot")} == {
        "Name": f"slot1_1@{HOST}", "State": "Claimed", "Activity": "Busy", "JobId": "7.0",
        "RemoteOwner": f"alice@{HOST}", "Cpus": 2, "EnteredCurrentState": 1_700_000_100, "DynamicSlot": True}

    pool.jobs = [job(10, "carol", JobStatus.SUSPENDED), job(7, "alice", JobStatus.RUNNING, cpus=2)]
    slots = {evaluate(ad, "JobId"): ad for ad in pool.ads(AdType.STARTD)[1:]}
    assert evaluate(slots["7.0"], "Name") == f"slot1_1@{HOST}", "a job keeps its slot while it runs"
    assert evaluate(slots["10.0"], "Name") == f"slot1_2@{HOST}"
    assert evaluate(slots["10.0"], "Activity") == "Suspended"

    pool.jobs = []
    assert names(pool.ads(AdType.STARTD)) == [f"slot1@{HOST}"]


def test_a_queue_only_gateway_has_no_startd(clock):
    assert Pool(clock, slots=0).ads(AdType.STARTD) == []


def test_any_ads_with_a_mytype_constraint_as_the_original(clock):
    pool = Pool(clock)
    pool.jobs = [job(1, "alice", JobStatus.IDLE)]
    every = pool.ads(AdType.ANY)
    assert sorted({evaluate(ad, "MyType") for ad in every}) == ["Collector", "DaemonMaster", "Machine", "Scheduler",
                                                                  "Submitter"]
    assert names(pool.ads(AdType.ANY, 'MyType == "DaemonMaster"')) == [HOST]
    assert [evaluate(ad, "MyType") for ad in pool.ads(AdType.ANY, 'MyType == "Scheduler" || MyType == "Collector"')] \
        == ["Scheduler", "Collector"]
    assert pool.ads(AdType.LICENSE) == [] and pool.ads(AdType.STORAGE) == []


def test_advertised_ads_live_their_lifetime_unless_advertised_again(clock):
    pool = Pool(clock, lifetime=300)
    vm = classad2.ClassAd({"Name": "vm1", "Machine": "vm1", "MyAddress": "<10.0.0.9:9618>", "Cpus": 8})
    assert pool.pool.advertise(AdType.STARTD, vm) is True
    (kept,) = pool.ads(AdType.STARTD, 'Name == "vm1"')
    assert evaluate(kept, "MyType") == "Machine" and evaluate(kept, "LastHeardFrom") == int(clock.seconds())

    clock.advance(200)
    assert pool.pool.advertise(AdType.STARTD, vm) is False, "the same key: an update"
    clock.advance(200)
    assert names(pool.ads(AdType.STARTD, 'Name == "vm1"')) == ["vm1"], "the update restarted its lifetime"
    clock.advance(100)
    assert pool.ads(AdType.STARTD, 'Name == "vm1"') == []


def test_an_ad_s_own_lifetime_wins(clock):
    pool = Pool(clock, lifetime=300)
    pool.pool.advertise(AdType.LICENSE, classad2.ClassAd({"Name": "matlab", "ClassAdLifetime": 30}))
    clock.advance(29)
    assert names(pool.ads(AdType.LICENSE)) == ["matlab"]
    clock.advance(1)
    assert pool.ads(AdType.LICENSE) == []


def test_ads_are_kept_per_kind_and_key(clock):
    pool = Pool(clock)
    pool.pool.advertise(AdType.STORAGE, classad2.ClassAd({"Name": "disk"}))
    pool.pool.advertise(AdType.LICENSE, classad2.ClassAd({"Name": "disk"}))
    pool.pool.advertise(AdType.MASTER, classad2.ClassAd({"Machine": "node7"}))
    assert names(pool.ads(AdType.STORAGE)) == ["disk"]
    assert [evaluate(ad, "MyType") for ad in pool.ads(AdType.ANY, 'Name == "disk"')] == ["Storage", "License"]
    assert [evaluate(ad, "Machine") for ad in pool.ads(AdType.MASTER, 'Machine == "node7"')] == ["node7"]


@pytest.mark.parametrize("ad_type, attributes, reason", [
    (AdType.SCHEDD, {"Machine": "x"}, "no Name"),
    (AdType.SCHEDD, {"Name": classad2.ExprTree('strcat("a", "b")')}, "no Name"),
    (AdType.SCHEDD, {"Name": INFO.schedd_name}, "own"),
    (AdType.STARTD, {"Name": f"slot1_3@{HOST}"}, "own"),
    (AdType.SUBMITTOR, {"Name": "mallory@x", "ScheddName": INFO.schedd_name}, "own"),
    (AdType.ANY, {"Name": "x"}, "one kind"),
])
def test_ads_the_pool_refuses(clock, ad_type, attributes, reason):
    with pytest.raises(AdRefused, match=reason):
        Pool(clock).pool.advertise(ad_type, classad2.ClassAd(attributes))


def test_the_number_of_advertised_ads_is_capped(clock):
    pool = Pool(clock, lifetime=10, capacity=2)
    for name in ("a", "b"):
        pool.pool.advertise(AdType.GENERIC, classad2.ClassAd({"Name": name}))
    with pytest.raises(AdRefused, match="max_advertised_ads"):
        pool.pool.advertise(AdType.GENERIC, classad2.ClassAd({"Name": "c"}))
    assert pool.pool.advertise(AdType.GENERIC, classad2.ClassAd({"Name": "a"})) is False, "updates still fit"
    clock.advance(10)
    assert pool.pool.advertise(AdType.GENERIC, classad2.ClassAd({"Name": "c"})) is True, "room once they expire"


# -- the core: authorisation and conversion ---------------------------------------------------------------
class PoolBackend:
    """The parts of a backend the collector's core uses, over a LocalPool."""

    from backends.interface import Capability

    capabilities = frozenset({Capability.POOL})

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def info(self) -> BackendInfo:
        return INFO

    def pool_ads(self, ad_type, constraint, *, budget=None, contact=None):
        return self._pool.pool.pool_ads(ad_type, constraint, budget=budget, contact=contact)

    def advertise(self, ad_type, ad):
        return self._pool.pool.advertise(ad_type, ad)


def run_now(function, *args, **kwargs):
    return succeed(function(*args, **kwargs))


def collector(clock, **policy) -> BirdbathCollector:
    return BirdbathCollector(PoolBackend(Pool(clock)), run_now, AccessPolicy(**policy), clock,
                             QueryRunner(run_now), lambda: CONTACT)


def result_of(deferred_or_coroutine):
    from twisted.internet.defer import Deferred

    outcome = []
    Deferred.fromCoroutine(deferred_or_coroutine).addBoth(outcome.append)
    (value,) = outcome
    if hasattr(value, "raiseException"):
        value.raiseException()
    return value


NAME = Attr("Name", AttrType.STRING, "vm9")


def test_insert_needs_write_permission_and_query_read(clock):
    reader = Caller("192.0.2.7")
    core = collector(clock, allow_write=HostList(["127.0.0.1"]))
    with pytest.raises(BirdbathError, match="Permission denied"):
        result_of(core.insert(reader, AdType.STARTD, [NAME]))
    assert result_of(core.query(reader, AdType.SCHEDD, None))  # READ is open
    assert result_of(core.insert(Caller("127.0.0.1"), AdType.STARTD, [NAME])).message == "New ad inserted"
    assert result_of(core.insert(Caller("127.0.0.1"), AdType.STARTD, [NAME])).message == "Updated ad"
    closed = collector(clock, allow_read=HostList([]), allow_write=HostList([]))
    with pytest.raises(BirdbathError, match="Permission denied"):
        result_of(closed.query(reader, AdType.SCHEDD, None))


def test_ads_go_out_with_their_own_mytype_first(clock):
    core = collector(clock)
    (struct,) = result_of(core.query(Caller("127.0.0.1"), AdType.MASTER, None))
    assert [(a.name, a.value) for a in struct[:3]] == [("MyType", "DaemonMaster"), ("TargetType", ""),
                                                      ("ServerTime", str(int(clock.seconds())))]


@pytest.mark.parametrize("attributes, reason", [
    (None, "missing"),
    ([Attr("Name", AttrType.STRING, "x"), Attr("bad name", AttrType.STRING, "x")], "bad name"),
    ([Attr("Name", AttrType.STRING, "x"), Attr("Cpus", AttrType.INTEGER, "1 +")], "Cpus"),
    ([Attr(f"A{n}", AttrType.INTEGER, "1") for n in range(5000)], "more than"),
    ([Attr("Name", AttrType.STRING, "x"), Attr("Blob", AttrType.STRING, "x" * 300_000)], "characters"),
    ([Attr("Machine", AttrType.STRING, "x")], "Internal update failure: the ad has no Name"),
])
def test_insert_refuses_what_it_cannot_store(clock, attributes, reason):
    with pytest.raises(BirdbathError, match=reason):
        result_of(collector(clock).insert(Caller("127.0.0.1"), AdType.SCHEDD, attributes))


def test_a_bad_constraint_answers_nothing(clock):
    core = collector(clock)
    assert result_of(core.query(Caller("127.0.0.1"), AdType.ANY, "MyType ==")) == []
    with pytest.raises(BirdbathError, match="Query failed"):
        result_of(core.query(Caller("127.0.0.1"), AdType.ANY, "(" * 5000 + "1" + ")" * 5000))


def test_contact_addresses():
    from twisted.internet.address import IPv4Address, IPv6Address

    assert contact_address(IPv4Address("TCP", "127.0.0.1", 1984)) == "<127.0.0.1:1984>"
    assert contact_address(IPv6Address("TCP", "::1", 1984)) == "<[::1]:1984>"
    assert contact_address(IPv4Address("TCP", "0.0.0.0", 1984)).endswith(":1984>")
