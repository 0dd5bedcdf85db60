"""The htcondor backend's pool ads (backends/htcondor/pool.py): queries and insertAd go to the pool's collector through
htcondor2.Collector, here a recording stand-in (tests/htcondor_standin.py) since no collector can run here."""

from __future__ import annotations

import classad2
import htcondor2
import pytest

from backends.htcondor import HTCondorBackend
from backends.interface import BackendError, BackendUnavailable, Capability, check
from jobmodel.classads import evaluate
from jobmodel.pool import AdType
from tests.htcondor_standin import FakeCollector, FakePool


@pytest.fixture
def collector() -> FakeCollector:
    return FakeCollector()


@pytest.fixture
def backend(tmp_path, collector):
    pool = FakePool()
    backend = HTCondorBackend(tmp_path, schedd=pool.schedd, submitter=pool.submitter, location=pool.location,
                              pool_collector=collector)
    yield backend
    backend.close()


def ad(**values) -> classad2.ClassAd:
    return classad2.ClassAd(values)


def test_it_declares_the_pool(backend):
    assert Capability.POOL in check(backend).capabilities


def test_queries_go_to_the_collector_with_the_constraint(backend, collector):
    collector.ads = [ad(MyType="Machine", Name="slot1@a", State="Claimed"), ad(MyType="Machine", Name="slot1@b",
                                                                                 State="Unclaimed"),
                     ad(MyType="Scheduler", Name="schedd@a", HasSOAPInterface=True)]
    found = backend.pool_ads(AdType.STARTD, classad2.ExprTree('State == "Claimed"'), budget=5)
    assert [evaluate(a, "Name") for a in found] == ["slot1@a"]
    assert collector.calls[-1] == ("query", (htcondor2.AdType.Startd, 'State == "Claimed"'))
    assert [evaluate(a, "Name") for a in backend.pool_ads(AdType.ANY, None)] == ["slot1@a", "slot1@b", "schedd@a"]
    assert collector.calls[-1] == ("query", (htcondor2.AdType.Any, None))


def test_a_kind_the_bindings_cannot_name_is_asked_for_by_mytype(backend, collector):
    collector.ads = [ad(MyType="Storage", Name="disk1", Free=10), ad(MyType="Storage", Name="disk2", Free=0),
                     ad(MyType="Machine", Name="disk1")]
    found = backend.pool_ads(AdType.STORAGE, classad2.ExprTree("Free > 0"))
    assert [(evaluate(a, "MyType"), evaluate(a, "Name")) for a in found] == [("Storage", "disk1")]
    assert collector.calls[-1] == ("query", (htcondor2.AdType.Any, '(MyType == "Storage") && (Free > 0)'))


def test_insert_is_the_update_command_of_its_kind(backend, collector):
    assert backend.advertise(AdType.STARTD, ad(Name="vm1", Cpus=4)) is True
    assert collector.calls[-1][0] == "advertise" and collector.calls[-1][1][1] == "UPDATE_STARTD_AD"
    assert backend.advertise(AdType.STARTD, ad(Name="vm1", Cpus=8)) is False, "the collector had it: an update"
    (kept,) = backend.pool_ads(AdType.STARTD, None)
    assert (evaluate(kept, "MyType"), evaluate(kept, "Cpus")) == ("Machine", 8)


@pytest.mark.parametrize("ad_type, attributes, reason", [
    (AdType.QUILL, {"Name": "q"}, "Unsupported internal command"),
    (AdType.SCHEDD, {"Machine": "x"}, "no Name"),
])
def test_inserts_it_refuses(backend, ad_type, attributes, reason):
    with pytest.raises(BackendError, match=reason):
        backend.advertise(ad_type, ad(**attributes))


def test_a_collector_that_is_down_is_unavailable(backend, collector):
    collector.down = True
    with pytest.raises(BackendUnavailable, match="the collector did not complete query"):
        backend.pool_ads(AdType.SCHEDD, None)
    with pytest.raises(BackendUnavailable):
        backend.advertise(AdType.SCHEDD, ad(Name="s"))
