"""The classes the agent publishes, declared once: each gives the QMFv1 binary schema answer (``wire``), its QMFv2
schema id, and the checks of a method call's arguments.

Class names go on the wire in lower case, as qpid's qmf-gen wrote them for HTCondor's plugins (the shipped console
scripts ask for ``_class="scheduler"``); a query matches a class name whatever its case.  A class's hash is the MD5
of its description, so that it changes whenever the description does.
"""

from __future__ import annotations

import enum
import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from .wire import ClassKey


class QmfType(enum.IntEnum):
    """QMF's type codes (QMFv1's schema encoding; QMFv2 maps carry the same kinds as AMQP values)."""

    U8 = 1
    U16 = 2
    U32 = 3
    U64 = 4
    SSTR = 6
    LSTR = 7
    ABSTIME = 8
    DELTATIME = 9
    REF = 10
    BOOL = 11
    FLOAT = 12
    DOUBLE = 13
    UUID = 14
    MAP = 15
    S8 = 16
    S16 = 17
    S32 = 18
    S64 = 19
    LIST = 21


#: a QMFv1 type code as the map protocol's schema names it: its ``_type`` and, where it narrows that, ``_subtype``
V2_TYPES: dict[QmfType, tuple[str, str | None]] = {
    **{kind: ("TYPE_INT", None) for kind in (QmfType.U8, QmfType.U16, QmfType.U32, QmfType.U64, QmfType.S8,
                                              QmfType.S16, QmfType.S32, QmfType.S64)},
    QmfType.SSTR: ("TYPE_STRING", None), QmfType.LSTR: ("TYPE_STRING", None),
    QmfType.ABSTIME: ("TYPE_INT", "timestamp"), QmfType.DELTATIME: ("TYPE_INT", "duration"),
    QmfType.REF: ("TYPE_MAP", "reference"), QmfType.BOOL: ("TYPE_BOOL", None),
    QmfType.FLOAT: ("TYPE_FLOAT", None), QmfType.DOUBLE: ("TYPE_FLOAT", None), QmfType.UUID: ("TYPE_UUID", None),
    QmfType.MAP: ("TYPE_MAP", None), QmfType.LIST: ("TYPE_LIST", None)}


def v2_element(name: str, kind: QmfType, **extra: Any) -> dict[str, Any]:
    """One property or argument of a QMFv2 schema map (``extra``: its ``_access``, ``_index``, ``_dir``,
    ``_desc``...)."""
    type_name, subtype = V2_TYPES[kind]
    element: dict[str, Any] = {"_name": name, "_type": type_name, **extra}
    if subtype is not None:
        element["_subtype"] = subtype
    return element


class Direction(str, enum.Enum):
    IN = "I"
    OUT = "O"
    INOUT = "IO"


@dataclass(frozen=True)
class Prop:
    """A property (or, in ``statistics``, a statistic) of a class."""

    name: str
    type: QmfType
    index: bool = False
    desc: str = ""

    def description(self, statistic: bool) -> dict[str, Any]:
        described: dict[str, Any] = {"name": self.name, "type": int(self.type)}
        if not statistic:
            described.update(access="RO", index=int(self.index), optional=0)
        if self.desc:
            described["desc"] = self.desc
        return described


@dataclass(frozen=True)
class Arg:
    name: str
    type: QmfType
    dir: Direction = Direction.IN


@dataclass(frozen=True)
class Method:
    name: str
    args: tuple[Arg, ...] = ()
    desc: str = ""

    def inputs(self) -> list[Arg]:
        return [arg for arg in self.args if arg.dir is not Direction.OUT]


@dataclass(frozen=True)
class QmfClass:
    package: str
    name: str
    properties: tuple[Prop, ...] = ()
    statistics: tuple[Prop, ...] = ()
    methods: tuple[Method, ...] = ()
    hash: uuid.UUID = field(init=False, compare=False)

    def __post_init__(self) -> None:
        text = repr((self.package, self.name, self.properties, self.statistics, self.methods))
        object.__setattr__(self, "hash", uuid.UUID(bytes=hashlib.md5(text.encode()).digest()))

    @property
    def key(self) -> ClassKey:
        return ClassKey(self.package, self.name, self.hash)

    def schema_id(self) -> dict[str, Any]:
        """The QMFv2 ``_schema_id`` map."""
        return {"_package_name": self.package, "_class_name": self.name, "_type": "_data", "_hash": self.hash}

    def v2_schema(self) -> dict[str, Any]:
        """The class's schema as the map protocol answers a ``SCHEMA`` query: its id, its properties and
        statistics (read-only, statistics as properties, as QMFv2 has no other kind), and its methods with their
        arguments' directions."""
        properties = [v2_element(prop.name, prop.type, _access="RO", _index=prop.index,
                                 **({"_desc": prop.desc} if prop.desc else {}))
                      for prop in (*self.properties, *self.statistics)]
        methods = [{"_name": method.name, **({"_desc": method.desc} if method.desc else {}),
                    "_arguments": [v2_element(arg.name, arg.type, _dir=arg.dir.value) for arg in method.args]}
                   for method in self.methods]
        return {"_schema_id": self.schema_id(), "_properties": properties, "_methods": methods}

    def method(self, name: str) -> Method | None:
        return next((method for method in self.methods if method.name == name), None)

    def v1_descriptions(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                       list[tuple[dict[str, Any], list[dict[str, Any]]]]]:
        """The property, statistic and method descriptions of QMFv1's schema answer."""
        methods = []
        for method in self.methods:
            described: dict[str, Any] = {"name": method.name, "argCount": len(method.args)}
            if method.desc:
                described["desc"] = method.desc
            methods.append((described, [{"name": arg.name, "type": int(arg.type), "dir": arg.dir.value}
                                        for arg in method.args]))
        return ([p.description(False) for p in self.properties], [s.description(True) for s in self.statistics],
                methods)


def _props(kind: QmfType, *names: str) -> tuple[Prop, ...]:
    return tuple(Prop(name, kind) for name in names)


IN, OUT = Direction.IN, Direction.OUT
ID = Arg("Id", QmfType.SSTR)
REASON = Arg("Reason", QmfType.SSTR)
ECHO = Method("echo", (Arg("sequence", QmfType.U32, Direction.INOUT), Arg("body", QmfType.LSTR, Direction.INOUT)))
GET_JOB_AD = Method("GetJobAd", (ID, Arg("JobAd", QmfType.MAP, OUT)), "the job's whole ad (live or history)")
FETCH_JOB_DATA = Method("FetchJobData", (ID, Arg("File", QmfType.SSTR), Arg("Start", QmfType.S32),
                                         Arg("End", QmfType.S32), Arg("Data", QmfType.LSTR, OUT)),
                        "bytes of the job's Out, Err, UserLog or a file of its spool, QMF's (Start, End) rules")
DAEMON = (Prop("CondorPlatform", QmfType.SSTR), Prop("CondorVersion", QmfType.SSTR),
          Prop("DaemonStartTime", QmfType.ABSTIME))
NAMED = (Prop("Pool", QmfType.SSTR, True), Prop("System", QmfType.SSTR, True), Prop("Name", QmfType.SSTR, True),
         Prop("Machine", QmfType.SSTR), Prop("MyAddress", QmfType.SSTR))
STATES = ("Idle", "Running", "Removed", "Completed", "Held", "TransferringOutput", "Suspended")

GRID = "com.redhat.grid"
SCHEDULER = QmfClass(
    GRID, "scheduler", NAMED + (Prop("JobQueueBirthdate", QmfType.ABSTIME), Prop("MaxJobsRunning", QmfType.U32))
    + DAEMON,
    _props(QmfType.U32, "NumUsers", "TotalHeldJobs", "TotalIdleJobs", "TotalJobAds", "TotalRemovedJobs",
           "TotalRunningJobs", "UpdateInterval"),
    (Method("SubmitJob", (Arg("Ad", QmfType.MAP), Arg("Id", QmfType.SSTR, OUT)), "one job in a new cluster"),
     GET_JOB_AD,
     Method("SetJobAttribute", (ID, Arg("Name", QmfType.SSTR), Arg("Value", QmfType.LSTR)),
            "Value is ClassAd text: quote strings"),
     Method("HoldJob", (ID, REASON)), Method("ReleaseJob", (ID, REASON)), Method("RemoveJob", (ID, REASON)),
     Method("SuspendJob", (ID, REASON)), Method("ContinueJob", (ID, REASON)),
     FETCH_JOB_DATA, ECHO))
SUBMITTER = QmfClass(
    GRID, "submitter", (Prop("schedulerRef", QmfType.REF), Prop("Name", QmfType.SSTR, True),
                        Prop("Owner", QmfType.SSTR), Prop("Machine", QmfType.SSTR), Prop("ScheddName", QmfType.SSTR),
                        Prop("JobQueueBirthdate", QmfType.ABSTIME)),
    _props(QmfType.U32, "HeldJobs", "IdleJobs", "RunningJobs"), (ECHO,))
JOBSERVER = QmfClass(GRID, "jobserver", (Prop("schedulerRef", QmfType.REF),) + NAMED + DAEMON, (),
                     (GET_JOB_AD, FETCH_JOB_DATA, ECHO))
SUBMISSION = QmfClass(
    GRID, "submission", (Prop("jobserverRef", QmfType.REF), Prop("Name", QmfType.SSTR, True),
                         Prop("Owner", QmfType.SSTR, True), Prop("QDate", QmfType.ABSTIME)),
    _props(QmfType.U32, *STATES),
    (Method("GetJobSummaries", (Arg("Jobs", QmfType.LIST, OUT),), "the member jobs' summaries, by state"), ECHO))

#: the pool's daemons, as far as the gateway's pool knows them (read-only: the plugins' negotiator and master
#: methods reconfigured a real pool, which is not the gateway's to do)
POOL_DAEMON = (Prop("Pool", QmfType.SSTR, True), Prop("System", QmfType.SSTR, True), Prop("Name", QmfType.SSTR, True),
               Prop("Machine", QmfType.SSTR), Prop("MyAddress", QmfType.SSTR), Prop("CondorPlatform", QmfType.SSTR),
               Prop("CondorVersion", QmfType.SSTR))
COLLECTOR = QmfClass(GRID, "collector", POOL_DAEMON,
                     _props(QmfType.U32, "RunningJobs", "IdleJobs", "HostsTotal", "HostsClaimed", "HostsUnclaimed",
                            "HostsOwner"))
NAME = Arg("Name", QmfType.SSTR)
#: the negotiator's methods as HTCondor's plugin declared them (the gateway performs none: methods.py)
NEGOTIATOR = QmfClass(GRID, "negotiator", POOL_DAEMON, (), (
    Method("GetLimits", (Arg("Limits", QmfType.MAP, OUT),), "the pool's concurrency limits"),
    Method("SetLimit", (NAME, Arg("Max", QmfType.DOUBLE))),
    Method("GetStats", (NAME, Arg("Ad", QmfType.MAP, OUT)), "a submitter's accounting ad"),
    Method("SetPriority", (NAME, Arg("Priority", QmfType.DOUBLE))),
    Method("SetPriorityFactor", (NAME, Arg("PriorityFactor", QmfType.DOUBLE))),
    Method("SetUsage", (NAME, Arg("Usage", QmfType.DOUBLE))),
    Method("GetRawConfig", (NAME, Arg("Value", QmfType.LSTR, OUT))),
    Method("SetRawConfig", (NAME, Arg("Value", QmfType.LSTR))),
    Method("Reconfig")))
#: the subsystems a master's Start and Stop name
SUBSYSTEMS = ("STARTD", "SCHEDD", "COLLECTOR", "NEGOTIATOR", "KBDD")
MASTER = QmfClass(GRID, "master", POOL_DAEMON + (Prop("RealUid", QmfType.S32),), (), (
    Method("Start", (Arg("Subsystem", QmfType.SSTR),), "one of " + ", ".join(SUBSYSTEMS)),
    Method("Stop", (Arg("Subsystem", QmfType.SSTR),), "one of " + ", ".join(SUBSYSTEMS))))
SLOT = QmfClass(
    GRID, "slot", POOL_DAEMON + tuple(Prop(name, QmfType.SSTR) for name in (
        "State", "Activity", "Arch", "OpSys", "JobId", "GlobalJobId", "RemoteUser", "SlotType"))
    + (Prop("Requirements", QmfType.LSTR), Prop("Start", QmfType.LSTR)),
    _props(QmfType.U32, "Cpus", "Memory", "Disk", "TotalSlots", "SlotID"))
#: pool ads by class, read through the core's collector
POOL_CLASSES = {COLLECTOR: "COLLECTOR", NEGOTIATOR: "NEGOTIATOR", MASTER: "MASTER", SLOT: "STARTD"}

#: the 2009 prototype's names (the blog's program asks for ``_package="mrg.grid"``, classes scheduler and job)
MRG = "mrg.grid"
MRG_SCHEDULER = QmfClass(MRG, "scheduler", NAMED, (),
                         (Method("Submit", (Arg("Ad", QmfType.MAP), Arg("Id", QmfType.SSTR, OUT)),
                                 'one job from a {"Attr": {"TYPE": 0-3, "VALUE": text}} ad'),))
MRG_JOB = QmfClass(
    MRG, "job", (Prop("CustomId", QmfType.SSTR, True), Prop("ClusterId", QmfType.U32), Prop("ProcId", QmfType.U32),
                 Prop("GlobalJobId", QmfType.SSTR), Prop("Owner", QmfType.SSTR), Prop("Submission", QmfType.SSTR),
                 Prop("Cmd", QmfType.LSTR), Prop("Args", QmfType.LSTR), Prop("Arguments", QmfType.LSTR),
                 Prop("JobStatus", QmfType.U32), Prop("QDate", QmfType.U32),
                 Prop("EnteredCurrentStatus", QmfType.U32), Prop("HoldReason", QmfType.LSTR),
                 Prop("ReleaseReason", QmfType.LSTR)),
    (),
    (Method("GetAd", (Arg("Ad", QmfType.MAP, OUT),)), Method("SetAttribute", (Arg("Name", QmfType.SSTR),
                                                                           Arg("Value", QmfType.LSTR))),
     Method("Hold", (REASON,)), Method("Release", (REASON,)), Method("Remove", (REASON,)),
     Method("Fetch", (Arg("File", QmfType.SSTR), Arg("Start", QmfType.S32), Arg("End", QmfType.S32),
                      Arg("Data", QmfType.LSTR, OUT)))))

CLASSES = (SCHEDULER, SUBMITTER, JOBSERVER, SUBMISSION, COLLECTOR, NEGOTIATOR, MASTER, SLOT, MRG_SCHEDULER, MRG_JOB)


def find_class(package: str | None, name: str) -> list[QmfClass]:
    """The classes a query's ``_schema_id`` names (its package optional, its class name in any case)."""
    return [c for c in CLASSES if c.name == name.lower() and (package is None or c.package == package)]


def class_by_key(key: ClassKey) -> QmfClass | None:
    return next((c for c in CLASSES if c.key == key), None)
