"""Naming jobs: ids, states, and the selections HTCondor's tools accept (``27.0``, ``27``, ``alice``, ``-all``)
turned into ClassAd constraints, so every command selects jobs the same way."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, NamedTuple


class JobId(NamedTuple):
    cluster: int
    proc: int

    def __str__(self) -> str:
        return f"{self.cluster}.{self.proc}"

    @classmethod
    def parse(cls, text: str) -> "JobId":
        cluster, _, proc = text.partition(".")
        return cls(int(cluster), int(proc or 0))


class JobStatus(enum.IntEnum):
    """HTCondor's JobStatus values (an IntEnum, so it compares equal to the numbers in ads)."""

    IDLE = 1
    RUNNING = 2
    REMOVED = 3
    COMPLETED = 4
    HELD = 5
    TRANSFERRING_OUTPUT = 6
    SUSPENDED = 7

    @classmethod
    def of(cls, ad: Mapping[str, Any]) -> "JobStatus | None":
        """The ad's status, or None when it has no (valid) JobStatus."""
        try:
            return cls(ad.get("JobStatus"))
        except ValueError:
            return None

    @property
    def label(self) -> str:
        return JOB_STATES[self]

    @property
    def letter(self) -> str:
        """condor_q's ST column."""
        return "IRXCH>S"[self - 1]


#: the names condor_q uses; keyed by JobStatus, which also answers to the plain numbers
JOB_STATES = {JobStatus.IDLE: "Idle", JobStatus.RUNNING: "Running", JobStatus.REMOVED: "Removed",
              JobStatus.COMPLETED: "Completed", JobStatus.HELD: "Held",
              JobStatus.TRANSFERRING_OUTPUT: "Transferring Output", JobStatus.SUSPENDED: "Suspended"}

#: a job in one of these states will not change any more (it leaves the queue unless LeaveJobInQueue)
FINAL_STATES = frozenset({JobStatus.REMOVED, JobStatus.COMPLETED})


def quote(text: str) -> str:
    """A ClassAd string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Scope(enum.Enum):
    JOB = "job"
    CLUSTER = "cluster"
    OWNER = "owner"
    CONSTRAINT = "constraint"
    ALL = "all"


@dataclass(frozen=True)
class Selection:
    """What condor_q/condor_rm take as arguments: ``27.0`` one job, ``27`` a whole cluster, ``alice`` the jobs
    of an owner (anything that is not a number), or every job (``-all``)."""

    scope: Scope
    cluster: int = 0
    proc: int = 0
    owner: str = ""
    expression: str = ""

    @classmethod
    def parse(cls, text: str) -> "Selection":
        if re.fullmatch(r"\d+", text):
            return cls(Scope.CLUSTER, cluster=int(text))
        if re.fullmatch(r"\d+\.\d+", text):
            job = JobId.parse(text)
            return cls(Scope.JOB, cluster=job.cluster, proc=job.proc)
        if not text or text[0].isdigit() or text.startswith("-"):
            raise ValueError(f"{text!r} is neither CLUSTER, CLUSTER.PROC nor an owner's name")
        return cls(Scope.OWNER, owner=text)

    @classmethod
    def everything(cls) -> "Selection":
        return cls(Scope.ALL)

    @classmethod
    def matching(cls, expression: str) -> "Selection":
        """The jobs for which a ClassAd expression is true (``-constraint EXPR``)."""
        return cls(Scope.CONSTRAINT, expression=expression)

    @property
    def job(self) -> JobId:
        return JobId(self.cluster, self.proc)

    def constraint(self) -> str:
        if self.scope is Scope.JOB:
            return f"ClusterId == {self.cluster} && ProcId == {self.proc}"
        if self.scope is Scope.CLUSTER:
            return f"ClusterId == {self.cluster}"
        if self.scope is Scope.OWNER:
            return f"Owner == {quote(self.owner)}"
        if self.scope is Scope.CONSTRAINT:
            return self.expression
        return "true"

    def __str__(self) -> str:
        """As condor_rm's messages name it: "job 27.0", "cluster 27", 'user "alice"', "all jobs"."""
        if self.scope is Scope.JOB:
            return f"job {self.job}"
        if self.scope is Scope.CLUSTER:
            return f"cluster {self.cluster}"
        if self.scope is Scope.OWNER:
            return f"user {quote(self.owner)}"
        if self.scope is Scope.CONSTRAINT:
            return f"constraint ({self.expression})"
        return "all jobs"


def any_of(selections: Iterable[Selection]) -> str | None:
    """The constraint matching a job any of the selections names (None: no restriction)."""
    parts = [f"({selection.constraint()})" for selection in selections]
    return " || ".join(parts) or None


def all_of(*constraints: str | None) -> str | None:
    """The conjunction of the given constraints, skipping absent ones (None when none is given)."""
    parts = [f"({constraint})" for constraint in constraints if constraint]
    return " && ".join(parts) or None
