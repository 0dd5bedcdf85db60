"""A recording stand-in for the parts of a condor_schedd the htcondor backend uses, since no HTCondor daemon can
run here: the htcondor2 ``Schedd`` surface (query, act, edit, history, retrieve, reschedule) and the v1 one
(submitMany, spool), over an in-memory queue of real classad2 ads, keeping every call for the tests to check.

It behaves like a schedd where the backend relies on it: the schedd picks cluster ids, jobs submitted with
``spool=True`` wait on hold until ``spool`` is called, actions answer with TotalSuccess/TotalNotFound/
TotalBadStatus, removed and completed jobs leave the queue for the history unless ``LeaveJobInQueue``.
"""

from __future__ import annotations

import time
from typing import Any

import classad2

from jobmodel.classads import matches, parse_constraint


class FakePool:
    def __init__(self) -> None:
        self.jobs: dict[tuple[int, int], classad2.ClassAd] = {}
        self.history: list[classad2.ClassAd] = []
        self.calls: list[tuple[str, tuple]] = []
        self.next_cluster = 1
        self.down = False
        self.schedd = _Schedd(self)
        self.submitter = _Submitter(self)
        self.location = classad2.ClassAd()
        for name, value in (("Name", "schedd@pool.example.org"), ("MyAddress", "<192.0.2.1:9618>"),
                            ("CondorVersion", "$CondorVersion: 24.0.24 2026-09-24 BuildID: 123 $"),
                            ("CondorPlatform", "$CondorPlatform: X86_64-AlmaLinux_9.4 $")):
            self.location[name] = value

    def record(self, name: str, *args: Any) -> None:
        if self.down:
            raise RuntimeError("Failed to connect to schedd at <192.0.2.1:9618>")
        self.calls.append((name, args))

    def select(self, spec: Any) -> list[tuple[tuple[int, int], classad2.ClassAd]]:
        constraint = parse_constraint(str(spec))
        return [(key, ad) for key, ad in sorted(self.jobs.items()) if matches(constraint, ad)]

    def settle(self, key: tuple[int, int]) -> None:
        """Finished jobs leave the queue for the history unless LeaveJobInQueue is true."""
        ad = self.jobs[key]
        keep = "LeaveJobInQueue" in ad and ad.eval("LeaveJobInQueue") is True
        if ad.get("JobStatus") in (3, 4) and not keep:
            self.history.insert(0, self.jobs.pop(key))


class _Schedd:
    """The htcondor2.Schedd methods the backend calls."""

    def __init__(self, pool: FakePool) -> None:
        self.pool = pool

    def query(self, constraint: Any = "true", projection: list[str] | None = None, *args: Any) -> list:
        self.pool.record("query", str(constraint))
        return [_copy(ad) for _, ad in self.pool.select(constraint)]

    def history(self, constraint: Any = None, projection: list[str] | None = None, match: int = -1) -> list:
        self.pool.record("history", str(constraint))
        found = [_copy(ad) for ad in self.pool.history if matches(parse_constraint(str(constraint or "true")), ad)]
        return found if match < 0 else found[:match]

    def act(self, action: Any, job_spec: Any, reason: str | None = None) -> classad2.ClassAd:
        self.pool.record("act", action.name, str(job_spec), reason)
        result = {"TotalSuccess": 0, "TotalBadStatus": 0, "TotalNotFound": 0}
        selected = self.pool.select(job_spec)
        if not selected:
            result["TotalNotFound"] = 1
        for key, ad in selected:
            outcome = _apply(action.name, ad, reason)
            result["TotalSuccess" if outcome else "TotalBadStatus"] += 1
            self.pool.settle(key)
        answer = classad2.ClassAd()
        for name, value in result.items():
            answer[name] = value
        return answer

    def edit(self, job_spec: Any, attr: str, value: Any, *args: Any) -> int:
        self.pool.record("edit", str(job_spec), attr, str(value))
        selected = self.pool.select(job_spec)
        for key, ad in selected:
            ad[attr] = classad2.ExprTree(str(value))
            self.pool.settle(key)
        return len(selected)

    def retrieve(self, job_spec: Any) -> None:
        self.pool.record("retrieve", str(job_spec))

    def reschedule(self) -> None:
        self.pool.record("reschedule")


class _Submitter:
    """The v1 htcondor.Schedd methods the backend calls."""

    def __init__(self, pool: FakePool) -> None:
        self.pool = pool

    def submitMany(self, cluster_ad: Any, proc_ads: list, spool: bool = False, ad_results: list | None = None) -> int:
        self.pool.record("submitMany", [str(ad) for ad, _ in proc_ads], spool)
        cluster = self.pool.next_cluster
        self.pool.next_cluster += 1
        proc = 0
        for v1_ad, count in proc_ads:
            for _ in range(count):
                ad = classad2.parseOne(str(v1_ad))
                ad["ClusterId"], ad["ProcId"], ad["QDate"] = cluster, proc, int(time.time())
                if "JobStatus" not in ad:
                    ad["JobStatus"] = 1
                if spool:
                    ad["JobStatus"], ad["HoldReason"] = 5, "Spooling input data files"
                self.pool.jobs[(cluster, proc)] = ad
                if ad_results is not None:
                    ad_results.append(_copy(ad))
                proc += 1
        return cluster

    def spool(self, ads: list) -> None:
        self.pool.record("spool", [(ad["ClusterId"], ad["ProcId"]) for ad in ads])
        for ad in ads:
            job = self.pool.jobs[(ad["ClusterId"], ad["ProcId"])]
            job["JobStatus"] = 1
            job.pop("HoldReason", None)


def _apply(action: str, ad: classad2.ClassAd, reason: str | None) -> bool:
    status = ad.get("JobStatus")
    if action == "Hold" and status in (1, 2):
        ad["JobStatus"], ad["HoldReason"] = 5, reason or "via condor_hold"
    elif action == "Release" and status == 5:
        ad["JobStatus"] = 1
        ad.pop("HoldReason", None)
    elif action == "Remove" and status not in (3, 4):
        ad["JobStatus"], ad["RemoveReason"] = 3, reason or "via condor_rm"
    else:
        return False
    return True


def _copy(ad: classad2.ClassAd) -> classad2.ClassAd:
    copy = classad2.ClassAd()
    copy.update(ad)
    return copy
