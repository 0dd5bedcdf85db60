"""The objects the agent publishes, read from the core when a console asks (the agent keeps no copy to go stale):
the scheduler and job server, one submitter per owner with jobs, one submission per ``Submission`` name, and
``mrg.grid``'s scheduler and job objects.  An object's name is ``package:class:key``, as QMFv2 agents name them."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from gateway.core.adstruct import AttrType
from gateway.core.auth import Caller
from gateway.core.collector import BirdbathCollector
from gateway.core.submissions import (
    STATE_NAMES,
    SUMMARY_ATTRIBUTES,
    ApiError,
    ApiStatus,
    JobRef,
    SubmissionInfo,
    SubmissionService,
)
from jobmodel.jobs import JobStatus
from jobmodel.pool import AdType

from .schema import (
    JOBSERVER,
    MRG_JOB,
    MRG_SCHEDULER,
    POOL_CLASSES,
    SCHEDULER,
    SUBMISSION,
    SUBMITTER,
    QmfClass,
    QmfType,
    find_class,
)

NANOSECONDS = 1_000_000_000
#: what the scheduler's and the submitters' counts read of each job
COUNTED = ("JobStatus", "Owner")
#: the kinds a job's integer attributes are published as (a negative value is left out, as an unsigned one cannot
#: carry it)
NUMERIC = frozenset({QmfType.U32, QmfType.U64, QmfType.ABSTIME, QmfType.S32})


@dataclass(frozen=True)
class Published:
    klass: QmfClass
    key: str
    values: dict[str, Any]

    @property
    def name(self) -> str:
        return object_name(self.klass, self.key)


def object_name(klass: QmfClass, key: str) -> str:
    return f"{klass.package}:{klass.name}:{key}"


def parse_name(name: str) -> tuple[QmfClass, str] | None:
    """The class and key an object name names (None: not one of ours)."""
    package, _, rest = name.partition(":")
    class_name, _, key = rest.partition(":")
    found = find_class(package, class_name) if key else []
    return (found[0], key) if found else None


def _typed(klass: QmfClass, values: dict[str, Any]) -> dict[str, Any]:
    """Only the class's properties and statistics, and only values of their kind (a job's attribute may be an
    expression where the schema says integer: it is left out rather than mistyped)."""
    kinds = {p.name: p.type for p in (*klass.properties, *klass.statistics)}
    typed = {}
    for name, value in values.items():
        kind = kinds.get(name)
        if kind is None:
            continue
        if kind in NUMERIC:
            fits = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        else:
            fits = kind is QmfType.REF or isinstance(value, str)
        if fits:
            typed[name] = value
    return typed


class Objects:
    def __init__(self, submissions: SubmissionService, collector: BirdbathCollector, agent_name: str, started: float,
                 publish_submissions: bool) -> None:
        self._submissions = submissions
        self._collector = collector
        self._agent = agent_name
        self._started_ns = int(started * NANOSECONDS)
        self._publish_submissions = publish_submissions
        settings = submissions.settings
        self.schedd = settings.schedd_name
        self._machine = socket.getfqdn()
        info = collector.backend_info
        self._daemon = {"Pool": settings.pool_name, "System": self._machine, "Name": self.schedd,
                        "Machine": self._machine, "MyAddress": "", "CondorPlatform": info.platform,
                        "CondorVersion": info.version, "DaemonStartTime": self._started_ns}

    def classes(self) -> tuple[QmfClass, ...]:
        pool = tuple(POOL_CLASSES) if self._collector.has_pool else ()
        if self._publish_submissions:
            return (SCHEDULER, SUBMITTER, JOBSERVER, SUBMISSION, *pool, MRG_SCHEDULER, MRG_JOB)
        return (SCHEDULER, SUBMITTER, *pool, MRG_SCHEDULER, MRG_JOB)

    def ref(self, klass: QmfClass, key: str) -> dict[str, str]:
        return {"_agent_name": self._agent, "_object_name": object_name(klass, key)}

    def exists(self, klass: QmfClass, key: str) -> bool:
        """Whether a call's object is one of the daemons' (jobs and submissions are looked up by the method)."""
        if klass not in self.classes():
            return False
        if klass in (SCHEDULER, MRG_SCHEDULER):
            return key == self.schedd
        if klass is JOBSERVER:
            return key == f"jobs@{self.schedd}"
        return True

    async def named(self, caller: Caller, klass: QmfClass, key: str) -> list[Published]:
        """The object ``key`` of ``klass`` (none when there is no such object), reading only what it needs: a job
        alone by its id (from the queue or its history, as GetJobAd finds it), a submission by its own jobs; the
        daemons' objects are one each (or the pool's few), read as their class is."""
        if klass is MRG_JOB:
            try:
                job = str(JobRef.parse(key))
            except ApiError:  # a key that is no job id names no job
                return []
            try:
                found = [self._job(summary) for summary in await self._submissions.summaries(caller, [job])]
            except ApiError as exc:
                if exc.code is ApiStatus.NO_MATCH:
                    return []
                raise
            return [item for item in found if item.key == key]  # ("schedd#1.0" names no job object)
        if klass is SUBMISSION and klass in self.classes():
            try:
                return self._submissions_of(await self._submissions.submissions(caller, key))
            except ApiError as exc:
                if exc.code is ApiStatus.NO_MATCH:
                    return []
                raise
        return [item for item in await self.of(caller, [klass]) if item.key == key]

    async def of(self, caller: Caller, wanted: list[QmfClass]) -> list[Published]:
        wanted = [klass for klass in wanted if klass in self.classes()]
        jobs: list[dict[str, Any]] | None = None
        if {SCHEDULER, SUBMITTER, MRG_JOB} & set(wanted):  # counts need two attributes of each job, not summaries
            jobs = await self._submissions.summaries(caller, [], SUMMARY_ATTRIBUTES if MRG_JOB in wanted else COUNTED)
        found: list[Published] = []
        for klass in wanted:
            if klass is SCHEDULER:
                found.append(self._scheduler(jobs or []))
            elif klass is MRG_SCHEDULER:
                found.append(Published(klass, self.schedd, _typed(klass, self._daemon)))
            elif klass is JOBSERVER:
                values = {**self._daemon, "schedulerRef": self.ref(SCHEDULER, self.schedd)}
                found.append(Published(klass, f"jobs@{self.schedd}", _typed(klass, values)))
            elif klass is SUBMITTER:
                found += self._submitters(jobs or [])
            elif klass is SUBMISSION:
                found += await self._submission_objects(caller)
            elif klass is MRG_JOB:
                found += [self._job(job) for job in jobs or []]
            elif klass in POOL_CLASSES:
                found += await self._pool(caller, klass)
        return found

    async def _pool(self, caller: Caller, klass: QmfClass) -> list[Published]:
        """One object per ad of the class's kind in the gateway's pool, keyed by the ad's Name."""
        found = []
        for ad in await self._collector.query(caller, AdType[POOL_CLASSES[klass]], None):
            values: dict[str, Any] = {"Pool": self._daemon["Pool"]}
            for attr in ad:
                values[attr.name] = int(attr.value) if attr.type is AttrType.INTEGER else attr.value
            values.setdefault("System", values.get("Machine", ""))
            if isinstance(values.get("Name"), str):
                found.append(Published(klass, values["Name"], _typed(klass, values)))
        return found

    def _scheduler(self, jobs: list[dict[str, Any]]) -> Published:
        counts = _by_state(jobs)
        values = {**self._daemon, "JobQueueBirthdate": self._started_ns, "MaxJobsRunning": 0,
                  "NumUsers": len({job.get("Owner") for job in jobs}), "TotalJobAds": len(jobs),
                  "TotalHeldJobs": counts["Held"], "TotalIdleJobs": counts["Idle"],
                  "TotalRemovedJobs": counts["Removed"], "TotalRunningJobs": counts["Running"],
                  "UpdateInterval": 0}
        return Published(SCHEDULER, self.schedd, _typed(SCHEDULER, values))

    def _submitters(self, jobs: list[dict[str, Any]]) -> list[Published]:
        owners: dict[str, list[dict[str, Any]]] = {}
        for job in jobs:
            owner = job.get("Owner")
            if isinstance(owner, str):
                owners.setdefault(owner, []).append(job)
        found = []
        for owner, mine in sorted(owners.items()):
            counts = _by_state(mine)
            values = {"schedulerRef": self.ref(SCHEDULER, self.schedd), "Name": owner, "Owner": owner,
                      "Machine": self._machine, "ScheddName": self.schedd, "JobQueueBirthdate": self._started_ns,
                      "HeldJobs": counts["Held"], "IdleJobs": counts["Idle"], "RunningJobs": counts["Running"]}
            found.append(Published(SUBMITTER, owner, _typed(SUBMITTER, values)))
        return found

    async def _submission_objects(self, caller: Caller) -> list[Published]:
        return self._submissions_of(await self._submissions.submissions(caller))

    def _submissions_of(self, infos: list[SubmissionInfo]) -> list[Published]:
        found = []
        for info in infos:
            values = {"jobserverRef": self.ref(JOBSERVER, f"jobs@{self.schedd}"), "Name": info.name,
                      "Owner": info.owner, "QDate": info.qdate * NANOSECONDS, **info.counts}
            found.append(Published(SUBMISSION, info.name, _typed(SUBMISSION, values)))
        return found

    def _job(self, job: dict[str, Any]) -> Published:
        key = f"{job.get('ClusterId')}.{job.get('ProcId')}"
        return Published(MRG_JOB, key, _typed(MRG_JOB, {**job, "CustomId": f"{self.schedd}#{key}"}))


def _by_state(jobs: list[dict[str, Any]]) -> dict[str, int]:
    counts = {name: 0 for name in STATE_NAMES.values()}
    for job in jobs:
        status = job.get("JobStatus")
        if isinstance(status, int) and status in JobStatus._value2member_map_:
            counts[STATE_NAMES.get(JobStatus(status), "Idle")] += 1
    return counts
