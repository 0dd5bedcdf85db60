"""A queue of many jobs and the QMF agent's objects over it, in this process on the local backend, counting the job
ads the backend hands the core: what the QMF tests check and bench/qmf_queries.py times (the cost of a
console's object query on a large queue)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import classad2
from twisted.internet.defer import maybeDeferred
from twisted.internet.task import Clock

from backends.local import LocalBackend
from gateway.core.adstruct import Attr, AttrType
from gateway.core.auth import AccessPolicy, Caller
from gateway.core.collector import BirdbathCollector
from gateway.core.queries import QueryRunner
from gateway.core.schedd import BirdbathSchedd
from gateway.core.submissions import SubmissionService, SubmissionSettings
from gateway.core.transactions import AdRules, NewCluster, WholeTransaction
from gateway.qmf.objects import Objects
from tests.synchronous import run

SCHEDD = "many.example"
CALLER = Caller("127.0.0.1")


def _call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return maybeDeferred(function, *args, **kwargs)


class ManyJobs:
    """``clusters`` clusters of ``per_cluster`` jobs each (the submission API's rules, so each cluster is the
    submission ``many.example#<cluster>``; every tenth cluster names its own, ``named-<cluster>``), and
    :attr:`read`: the job ads the backend's query, get_job and history calls answered since it was last reset."""

    def __init__(self, state: Path, clusters: int, per_cluster: int) -> None:
        self.backend = LocalBackend(state / "backend", schedd_name=SCHEDD, slots=0)
        policy = AccessPolicy()
        self.schedd = BirdbathSchedd(self.backend, _call, policy, Clock())
        self.submissions = SubmissionService(self.backend, _call, policy, Clock(), SubmissionSettings(
            schedd_name=SCHEDD, staging_root=state / "staging"), clusters=self.schedd.clusters,
            writer=self.schedd.writer)
        self.collector = BirdbathCollector(self.backend, _call, policy, Clock(), QueryRunner(_call), lambda: "")
        self.objects = Objects(self.submissions, self.collector, f"com.redhat.grid:scheduler:{SCHEDD}", 0.0, True)
        self.clusters = self._submit(clusters, per_cluster)
        self.read = 0
        for name in ("query", "get_job", "history"):
            setattr(self.backend, name, self._counted(getattr(self.backend, name)))

    def _submit(self, clusters: int, per_cluster: int) -> list[int]:
        made = []
        for index in range(clusters):
            job = [Attr("Cmd", AttrType.STRING, "/bin/true"), Attr("Iwd", AttrType.STRING, "/tmp"),
                   Attr("Requirements", AttrType.EXPRESSION, "TRUE"), Attr("Owner", AttrType.STRING, "nobody")]
            if index % 10 == 9:
                job.append(Attr("Submission", AttrType.STRING, f"named-{index}"))
            made.append(run(self.schedd.submit_transaction(CALLER, WholeTransaction(
                [NewCluster([job] * per_cluster, rules=AdRules.SUBMISSION_API)]))).jobs[0][0])
        return made

    def _counted(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            found = function(*args, **kwargs)
            self.read += len(found) if isinstance(found, list) else int(isinstance(found, classad2.ClassAd))
            return found
        return counted

    def close(self) -> None:
        self.backend.close()
