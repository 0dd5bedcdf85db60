"""The local backend as a one-machine pool: the ads its daemons would send a collector, made from the live queue.

A real pool's collector holds ads the daemons send it every few minutes.  Here the daemons are the gateway itself,
so each query makes their ads afresh from the committed queue (read through the backend's own ``query``): a
``Scheduler`` ad with the counts the schedd publishes, a ``Submitter`` ad per owner with jobs, a ``Machine`` ad per
slot (a partitionable slot with what is free, and a dynamic slot, ``Claimed``/``Busy``, per running job, as a startd
with ``SLOT_TYPE_1_PARTITIONABLE`` carves them), a ``DaemonMaster`` and a ``Collector`` ad.  Ads other programs
advertise (insertAd) are kept beside them (:mod:`.advertised`), and a client's constraint is evaluated over the lot
as any job query's is (:func:`backends.evaluation.filtered`).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Callable, Iterable

import classad2

from backends.evaluation import filtered
from backends.interface import BackendInfo
from jobmodel.classads import copy_ad, evaluate_number, evaluate_string, literal_int, literal_string
from jobmodel.figures import Kind, QueueFigures, tally
from jobmodel.jobs import JobStatus, Universe
from jobmodel.pool import AdType

from .advertised import AdRefused, AdvertisedAds, ad_key
from .jobspec import request_cpus

#: the states in which a job holds its slot
ON_A_SLOT = (JobStatus.RUNNING, JobStatus.SUSPENDED)
IDLE, RUNNING, HELD, REMOVED = JobStatus.IDLE, JobStatus.RUNNING, JobStatus.HELD, JobStatus.REMOVED
SLOT = Kind.SLOT
#: until the gateway says where it listens
NO_CONTACT = "<127.0.0.1:0>"


@dataclass(frozen=True)
class PoolFacts:
    """What stays the same while the gateway runs: who it is, the machine template, how many CPUs it runs jobs on."""

    info: BackendInfo
    machine: classad2.ClassAd  # the startd's machine ad (``machine.py``), which job Requirements match
    slots: int  # CPUs jobs may use (0: a queue-only gateway, with no startd)
    uid_domain: str
    started: int  # DaemonStartTime of every daemon of the gateway


@dataclass(frozen=True)
class _Job:
    """What the ads need of a job (a ``jobmodel.figures.CountedJob``: the Scheduler ad's totals are its tally)."""

    key: tuple[int, int]
    owner: str
    user: str
    status: JobStatus | None
    universe: int
    cpus: int  # the CPUs it takes on a slot while it runs (0: it runs beside the schedd)
    started: int
    entered: int
    hold_code: int


class LocalPool:
    """The pool's ads for ``pool_ads``/``advertise``; ``jobs()`` reads the committed queue (the ads themselves, not
    copies: they are only read)."""

    def __init__(self, facts: PoolFacts, jobs: Callable[[], list[classad2.ClassAd]], clock: Callable[[], float],
                 advertised: AdvertisedAds) -> None:
        self.facts = facts
        self._jobs = jobs
        self._clock = clock
        self.advertised = advertised
        #: the dynamic slot number of each job on a slot, kept while it runs (a startd numbers them slot1_1, ...)
        self._slot_numbers: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()

    # -- the interface ---------------------------------------------------------------------------------------
    def pool_ads(self, ad_type: AdType, constraint: classad2.ExprTree | None, *, budget: float | None = None,
                 contact: str | None = None) -> list[classad2.ClassAd]:
        ads = self.own_ads(ad_type, contact or NO_CONTACT) + self.advertised.ads(ad_type)
        return filtered(ads, constraint, budget)

    def advertise(self, ad_type: AdType, ad: classad2.ClassAd) -> bool:
        if ad_type is AdType.ANY:
            raise AdRefused("an ad must be advertised as one kind of ad, not as any")
        key = ad_key(ad_type, ad)
        if self._is_own(key):
            raise AdRefused(f"{key[1]!r} names one of this gateway's own {ad_type.my_type} ads, which only the "
                            f"gateway publishes")
        if "MyType" not in ad:
            ad = copy_ad(ad)
            ad["MyType"] = ad_type.my_type
        return self.advertised.advertise(ad_type, ad)

    def _is_own(self, key: tuple[AdType, str, str, str]) -> bool:
        """Whether an advertised ad's key is one of the gateway's own ads' (its slots, schedd, submitters, ...)."""
        ad_type, name, extra, _ = key
        host = evaluate_string(self.facts.machine, "Machine")
        if ad_type is AdType.SUBMITTOR:
            return extra == self.facts.info.schedd_name
        if ad_type is AdType.STARTD:
            return name == f"slot1@{host}" or (name.startswith("slot1_") and name.endswith(f"@{host}"))
        return any(ad_key(ad_type, own)[1] == name for own in self.own_ads(ad_type, NO_CONTACT, with_jobs=False))

    # -- the gateway's own daemons -----------------------------------------------------------------------------
    def own_ads(self, ad_type: AdType, contact: str, *, with_jobs: bool = True) -> list[classad2.ClassAd]:
        """This gateway's ads of one kind (every kind for ANY); ``with_jobs=False`` skips reading the queue (for
        the names alone, which do not depend on it)."""
        wanted = [ad_type] if ad_type is not AdType.ANY else list(_MAKERS)
        if not any(kind in _MAKERS for kind in wanted):
            return []
        jobs = self._read_jobs() if with_jobs else []
        now = int(self._clock())
        ads = []
        for kind in wanted:
            maker = _MAKERS.get(kind)
            if maker is not None:
                ads += [self._common(ad, kind, contact, now) for ad in maker(self, jobs, now)]
        return ads

    def _read_jobs(self) -> list[_Job]:
        """What the ads need of each job, read as literals (the schedd writes ids, owner, state and universe as
        such; a few microseconds a job), evaluating only what may be an expression, and only where it counts."""
        jobs = []
        for ad in self._jobs():
            status = _state(ad)
            universe = literal_int(ad, "JobUniverse", int(Universe.VANILLA))
            holds_cpus = status in (JobStatus.IDLE, *ON_A_SLOT) and universe not in (Universe.LOCAL,
                                                                                      Universe.SCHEDULER)
            on_slot = status in ON_A_SLOT
            jobs.append(_Job((literal_int(ad, "ClusterId", 0), literal_int(ad, "ProcId", 0)),
                             literal_string(ad, "Owner"), literal_string(ad, "User") if on_slot else "", status, universe,
                             _cpus(ad, universe) if holds_cpus else 0,
                             literal_int(ad, "JobCurrentStartDate", 0) if on_slot else 0,
                             literal_int(ad, "EnteredCurrentStatus", 0) if on_slot else 0,
                             literal_int(ad, "HoldReasonCode", 0) if status is JobStatus.HELD else 0))
        return jobs

    def queue_figures(self) -> QueueFigures:
        """The queue as the Scheduler and Submitter ads count it (the gateway's metrics read the same)."""
        return tally(self._read_jobs())

    def _common(self, ad: classad2.ClassAd, kind: AdType, contact: str, now: int) -> classad2.ClassAd:
        """What every daemon's ad carries: its type, address, version, and when it was last heard from (now)."""
        facts = self.facts
        ad["MyType"] = kind.my_type
        ad["TargetType"] = kind.target_type()
        ad["MyAddress"] = contact
        ad[_ADDRESS_ATTRIBUTES[kind]] = contact
        ad["Machine"] = evaluate_string(facts.machine, "Machine")
        ad["CondorVersion"] = facts.info.version
        ad["CondorPlatform"] = facts.info.platform
        ad["DaemonStartTime"] = facts.started
        ad["LastHeardFrom"] = now
        return ad

    def _schedd(self, jobs: list[_Job], now: int) -> list[classad2.ClassAd]:
        figures = tally(jobs)
        ad = classad2.ClassAd()
        values: dict[str, object] = {
            "Name": self.facts.info.schedd_name, "HasSOAPInterface": True,
            **_totals(figures, "Total", "Jobs"),
            "TotalRemovedJobs": figures.count(REMOVED, kind=SLOT), "TotalJobAds": figures.total, "TotalFlockedJobs": 0,
            "TotalLocalJobsIdle": figures.count(IDLE, kind=Kind.LOCAL),
            "TotalLocalJobsRunning": figures.count(RUNNING, kind=Kind.LOCAL),
            "TotalSchedulerJobsIdle": figures.count(IDLE, kind=Kind.SCHEDULER),
            "TotalSchedulerJobsRunning": figures.count(RUNNING, kind=Kind.SCHEDULER),
            "NumUsers": len(figures.owners()), "MaxJobsRunning": self.facts.slots,
            "UidDomain": self.facts.uid_domain}
        for name, value in values.items():
            ad[name] = value
        return [ad]

    def _submitters(self, jobs: list[_Job], now: int) -> list[classad2.ClassAd]:
        figures = tally(jobs)
        ads = []
        for owner in figures.owners():
            ad = classad2.ClassAd()
            values: dict[str, object] = {
                "Name": f"{owner}@{self.facts.uid_domain}", "ScheddName": self.facts.info.schedd_name,
                **_totals(figures, "", "Jobs", owner), "FlockedJobs": 0,
                "LocalJobsIdle": figures.count(IDLE, owner=owner, kind=Kind.LOCAL),
                "LocalJobsRunning": figures.count(RUNNING, owner=owner, kind=Kind.LOCAL),
                "SchedulerJobsIdle": figures.count(IDLE, owner=owner, kind=Kind.SCHEDULER),
                "SchedulerJobsRunning": figures.count(RUNNING, owner=owner, kind=Kind.SCHEDULER),
                "WeightedIdleJobs": figures.count(IDLE, owner=owner, kind=SLOT, weighted=True),
                "WeightedRunningJobs": figures.count(RUNNING, owner=owner, kind=SLOT, weighted=True)}
            for name, value in values.items():
                ad[name] = value
            ads.append(ad)
        return ads

    def _slots(self, jobs: list[_Job], now: int) -> list[classad2.ClassAd]:
        """The partitionable slot with what is free, then a dynamic slot per job holding CPUs (none without slots)."""
        facts = self.facts
        if facts.slots <= 0:
            return []
        on_slots = sorted((job for job in jobs if job.status in ON_A_SLOT and job.cpus), key=lambda job: job.key)
        numbers = self._numbers(job.key for job in on_slots)
        memory = int(evaluate_number(facts.machine, "Memory"))
        load = os.getloadavg()[0]
        dynamic = [self._dynamic_slot(job, numbers[job.key], memory, load) for job in on_slots]
        used_cpus = sum(job.cpus for job in on_slots)
        used_memory = sum(int(evaluate_number(ad, "Memory")) for ad in dynamic)
        host = evaluate_string(facts.machine, "Machine")
        partitionable = self._slot(f"slot1@{host}", "Partitionable", max(facts.slots - used_cpus, 0),
                                   max(memory - used_memory, 0), load)
        for name, value in {"State": "Unclaimed", "Activity": "Idle", "EnteredCurrentState": facts.started,
                            "EnteredCurrentActivity": facts.started, "PartitionableSlot": True,
                            "NumDynamicSlots": len(dynamic)}.items():
            partitionable[name] = value
        return [partitionable, *dynamic]

    def _dynamic_slot(self, job: _Job, number: int, memory: int, load: float) -> classad2.ClassAd:
        facts = self.facts
        host = evaluate_string(facts.machine, "Machine")
        ad = self._slot(f"slot1_{number}@{host}", "Dynamic", job.cpus, memory * job.cpus // facts.slots, load)
        cluster, proc = job.key
        for name, value in {"State": "Claimed",
                            "Activity": "Suspended" if job.status is JobStatus.SUSPENDED else "Busy",
                            "EnteredCurrentState": job.started, "EnteredCurrentActivity": job.entered,
                            "DynamicSlot": True, "JobId": f"{cluster}.{proc}", "JobStart": job.started,
                            "JobUniverse": job.universe, "RemoteOwner": job.user, "RemoteUser": job.user,
                            "ClientMachine": host}.items():
            ad[name] = value
        return ad

    def _slot(self, name: str, slot_type: str, cpus: int, memory: int, load: float) -> classad2.ClassAd:
        facts = self.facts
        ad = copy_ad(facts.machine)
        for attribute, value in {"Name": name, "SlotID": 1, "SlotType": slot_type, "Cpus": cpus, "Memory": memory,
                                 "TotalSlotCpus": facts.slots, "TotalCpus": facts.slots,
                                 "TotalMemory": int(evaluate_number(facts.machine, "Memory")),
                                 "TotalLoadAvg": load, "LoadAvg": load}.items():
            ad[attribute] = value
        return ad

    def _numbers(self, keys: Iterable[tuple[int, int]]) -> dict[tuple[int, int], int]:
        """Each job's dynamic slot number: kept while the job holds its slot, the lowest free one for a new job."""
        keys = list(keys)
        with self._lock:
            numbers = {key: number for key, number in self._slot_numbers.items() if key in set(keys)}
            taken = set(numbers.values())
            for key in keys:
                if key not in numbers:
                    number = next(n for n in range(1, len(keys) + 2) if n not in taken)
                    numbers[key] = number
                    taken.add(number)
            self._slot_numbers = numbers
        return numbers

    def _master(self, jobs: list[_Job], now: int) -> list[classad2.ClassAd]:
        ad = classad2.ClassAd()
        ad["Name"] = evaluate_string(self.facts.machine, "Machine")
        ad["RealUid"] = os.getuid()
        return [ad]

    def _collector(self, jobs: list[_Job], now: int) -> list[classad2.ClassAd]:
        slots = self._slots(jobs, now) if self.facts.slots > 0 else []
        claimed = sum(1 for slot in slots if evaluate_string(slot, "State") == "Claimed")
        figures = tally(jobs)
        ad = classad2.ClassAd()
        for name, value in {"Name": f"birdbath-gateway@{evaluate_string(self.facts.machine, 'Machine')}",
                            "HostsTotal": len(slots), "HostsClaimed": claimed,
                            "HostsUnclaimed": len(slots) - claimed, "HostsOwner": 0,
                            "RunningJobs": figures.count(RUNNING, kind=SLOT),
                            "IdleJobs": figures.count(IDLE, kind=SLOT)}.items():
            ad[name] = value
        return [ad]


#: the attribute in which each daemon publishes its address besides ``MyAddress``
_ADDRESS_ATTRIBUTES = {AdType.STARTD: "StartdIpAddr", AdType.SCHEDD: "ScheddIpAddr", AdType.SUBMITTOR: "ScheddIpAddr",
                       AdType.MASTER: "MasterIpAddr", AdType.COLLECTOR: "CollectorIpAddr"}

def _totals(figures: QueueFigures, prefix: str, suffix: str, owner: str | None = None) -> dict[str, int]:
    """The jobs on slots by state, as a Scheduler (``TotalIdleJobs``) or a Submitter ad (``IdleJobs``) names them."""
    return {f"{prefix}{name}{suffix}": figures.count(state, owner=owner, kind=SLOT)
            for name, state in (("Idle", IDLE), ("Running", RUNNING), ("Held", HELD))}


def _cpus(ad: classad2.ClassAd, universe: int) -> int:
    """The CPUs a job takes on a slot (``jobspec``'s rule: vanilla jobs their RequestCpus, others none), its literal
    RequestCpus read without evaluating."""
    if universe != Universe.VANILLA:
        return 0
    value = ad.get("RequestCpus")
    if value is None:
        return 1
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else request_cpus(ad)


def _state(ad: classad2.ClassAd) -> JobStatus | None:
    try:
        return JobStatus(literal_int(ad, "JobStatus", 0))
    except ValueError:
        return None


#: the gateway's daemons, by the kind of ad each publishes
_MAKERS: dict[AdType, Callable[[LocalPool, list[_Job], int], list[classad2.ClassAd]]] = {
    AdType.STARTD: LocalPool._slots, AdType.SCHEDD: LocalPool._schedd, AdType.SUBMITTOR: LocalPool._submitters,
    AdType.MASTER: LocalPool._master, AdType.COLLECTOR: LocalPool._collector,
}
