"""A recording stand-in for the parts of a condor_schedd the htcondor backend uses, since no HTCondor daemon can
run here: the htcondor2 ``Schedd`` surface (query, act, edit, history, retrieve, reschedule) and the v1 one
(submitMany, spool), over an in-memory queue of real classad2 ads, keeping every call for the tests to check.

Argument handling follows the installed 24.0 bindings, so that a call a real pool would misread fails or
misbehaves here too:

- ``htcondor2.Schedd.act`` (``htcondor2/_schedd.py``): the reason is kept only as a ``(text, code)`` tuple (the
  code becomes ``HoldReasonSubCode``) or ``None`` ("Python-initiated action"); a plain string is dropped and the
  schedd gets no reason at all.  ``job_spec`` goes through ``job_spec_hack``: a list or a ``"C"``/``"C.P"`` string
  is a list of job ids, any other string a constraint, and anything else (an ``ExprTree``, despite the docstring)
  raises ``TypeError`` from ``re.fullmatch``.
- Acting by constraint, the schedd (``Scheduler::actOnJobs``) adds a clause on the job's status, so a job in the
  wrong state does not match and the totals are all 0; acting by id it answers TotalBadStatus/TotalAlreadyDone/
  TotalPermissionDenied/TotalNotFound per job.
- ``htcondor2.Schedd.edit``: the value is sent as expression text (``repr`` of an ``ExprTree``, ``str`` of anything
  else); a constraint that matches no job raises ``OSError`` ("Unable to edit jobs matching constraint").
- ``htcondor2.Schedd.query``: ``str(constraint)`` (so ``None`` is the attribute ``None``, matching nothing), an
  unparsable one raises ``RuntimeError``; ``projection`` must be a ``list`` of ``str`` (``[]``: every attribute);
  every ad also carries ``ServerTime``, as the bindings ask for it.
- ``htcondor2.Schedd.history``: ``None`` or ``""`` is every job, an unparsable constraint raises ``ValueError``,
  ``projection`` is joined with commas, ``match`` limits the number of matches (newest first).
- v1 ``htcondor.Schedd.submitMany`` takes a v1 ``classad.ClassAd`` for the cluster and ``(v1 ClassAd, count)``
  pairs (a classad2 ad is refused, as Boost.Python does); with ``spool=True`` the jobs are held ("Spooling input
  data files", HoldReasonCode 16) with LeaveJobInQueue replaced as ``make_spool`` does; ``ad_results`` receives v1
  ads, which v1 ``spool`` requires.

Not modelled: the schedd appends " (by user <name>)" to a non-empty hold/remove/release reason; it adds its own
attributes to submitted jobs (Owner, User, Requirements clauses, ...); removals and completions leave the queue
at once here, a little later on a schedd.
"""

from __future__ import annotations

import re
import time
from typing import Any

import classad2

from jobmodel.classads import matches, projected

HELD, IDLE, RUNNING, REMOVED, COMPLETED, SUSPENDED = 5, 1, 2, 3, 4, 7
USER_REQUEST, SPOOLING_INPUT = 1, 16  # HoldReasonCode values (condor_holdcodes.h)


class InjectedFailure(RuntimeError):
    """What a failing bindings call raises here (the real ones raise HTCondor's own exception types)."""


class FakePool:
    def __init__(self) -> None:
        self.jobs: dict[tuple[int, int], classad2.ClassAd] = {}
        self.history: list[classad2.ClassAd] = []
        self.calls: list[tuple[str, tuple]] = []
        self.next_cluster = 1
        self.down = False
        self.failures: dict[str, dict[int, bool]] = {}  # call name -> {nth call: fails after doing its work}
        self.counts: dict[str, int] = {}
        self.schedd = _Schedd(self)
        self.submitter = _Submitter(self)
        self.location = classad2.ClassAd()
        for name, value in (("Name", "schedd@pool.example.org"), ("MyAddress", "<192.0.2.1:9618>"),
                            ("CondorVersion", "$CondorVersion: 24.0.24 2026-09-24 BuildID: 123 $"),
                            ("CondorPlatform", "$CondorPlatform: X86_64-AlmaLinux_9.4 $")):
            self.location[name] = value

    def fail(self, name: str, nth: int = 1, *, after: bool = False) -> None:
        """Make the ``nth`` call of ``name`` (from now) raise: before it changes anything, or ``after`` it did (a
        reply lost after the schedd committed)."""
        self.failures.setdefault(name, {})[self.counts.get(name, 0) + nth] = after

    def record(self, name: str, *args: Any) -> bool:
        """Note a call; raise when the pool is down or the call is to fail now; True when it fails afterwards."""
        if self.down:
            raise RuntimeError("Failed to connect to schedd at <192.0.2.1:9618>")
        self.calls.append((name, args))
        self.counts[name] = self.counts.get(name, 0) + 1
        after = self.failures.get(name, {}).pop(self.counts[name], None)
        if after is False:
            raise InjectedFailure(f"{name} failed (injected)")
        return bool(after)

    def called(self, name: str) -> list[tuple]:
        return [args for call, args in self.calls if call == name]

    def select(self, job_spec: Any) -> tuple[str, list[tuple[int, int]]]:
        """``job_spec_hack`` of htcondor2/_schedd.py: ("ids", keys) or ("constraint", matching keys)."""
        if isinstance(job_spec, list):
            return "ids", [_job_id(text) for text in ", ".join(job_spec).split(",") if text.strip()]
        if re.fullmatch(r"\d+(\.\d+)?", job_spec):  # raises TypeError for an ExprTree, as the bindings do
            return "ids", [_job_id(job_spec)]
        constraint = _parse(str(job_spec) or "true", RuntimeError)
        return "constraint", [key for key, ad in sorted(self.jobs.items()) if matches(constraint, ad)]

    def keys_of(self, kind: str, keys: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Job ids as the schedd expands them: a cluster id ("C", proc -1) is every job of the cluster."""
        if kind == "constraint":
            return keys
        expanded = []
        for cluster, proc in keys:
            expanded += [key for key in sorted(self.jobs) if key[0] == cluster] if proc < 0 else [(cluster, proc)]
        return expanded

    def settle(self, key: tuple[int, int]) -> None:
        """Finished jobs leave the queue for the history unless LeaveJobInQueue is true."""
        ad = self.jobs[key]
        keep = "LeaveJobInQueue" in ad and ad.eval("LeaveJobInQueue") is True
        if ad.get("JobStatus") in (REMOVED, COMPLETED) and not keep:
            self.history.insert(0, self.jobs.pop(key))


class _Schedd:
    """The htcondor2.Schedd methods the backend calls, with the argument handling of the 24.0 bindings."""

    def __init__(self, pool: FakePool) -> None:
        self.pool = pool

    def query(self, constraint: Any = "True", projection: Any = [],  # noqa: B006 (htcondor2's own)
              callback: Any = None, limit: int = -1, opts: Any = 0) -> list:
        text = str(constraint)
        _check_projection(projection)
        self.pool.record("query", text, list(projection))
        parsed = _parse(text, RuntimeError) if text else None
        found = [ad for _, ad in sorted(self.pool.jobs.items()) if matches(parsed, ad)]
        if limit >= 0:
            found = found[:limit]
        answers = []
        for ad in found:
            answer = projected(ad, projection) if projection else _copy(ad)
            answer["ServerTime"] = int(time.time())  # CondorQ::requestServerTime(true) in _schedd_query
            answers.append(answer)
        if callback is not None:
            answers = [result for result in map(callback, answers) if result is not None]
        return answers

    def history(self, constraint: Any = None, projection: Any = [], match: int = -1,  # noqa: B006 (htcondor2's own)
                since: Any = None) -> list:
        names = [name for name in re.split(r"[\s,]+", ",".join(projection)) if name]
        text = "" if constraint is None else str(constraint)
        self.pool.record("history", text, names, int(match))
        parsed = _parse(text, ValueError) if text else None
        found = [(projected(ad, names) if names else _copy(ad)) for ad in self.pool.history if matches(parsed, ad)]
        return found[:match] if match > 0 else found

    def act(self, action: Any, job_spec: Any, reason: Any = None) -> classad2.ClassAd:
        import htcondor2

        if not isinstance(action, htcondor2.JobAction):
            raise TypeError("action must be a JobAction")
        text, code = None, None  # htcondor2.Schedd.act: a plain string reason is dropped
        if reason is None:
            text = "Python-initiated action"
        elif isinstance(reason, tuple):
            text, code = reason
        failing_after = self.pool.record("act", action.name, job_spec if isinstance(job_spec, list) else str(job_spec),
                                         text, code)
        kind, keys = self.pool.select(job_spec)
        totals = dict.fromkeys(("TotalError", "TotalSuccess", "TotalNotFound", "TotalBadStatus", "TotalAlreadyDone",
                                "TotalPermissionDenied"), 0)
        subcode = int(code) if isinstance(code, int) or (isinstance(code, str) and code.isdigit()) else 0
        for key in self.pool.keys_of(kind, keys):
            ad = self.pool.jobs.get(key)
            outcome = "TotalNotFound" if ad is None else _check(action.name, ad, by_constraint=kind == "constraint")
            if outcome == "TotalSuccess":
                _apply(action.name, ad, text or "", subcode)
                self.pool.settle(key)
            if outcome is not None:
                totals[outcome] += 1
        answer = classad2.ClassAd()
        for name, value in totals.items():
            answer[name] = value
        answer["TotalJobAds"] = len(self.pool.jobs)
        answer["TotalChangedAds"] = 1 if totals["TotalSuccess"] else 0
        if failing_after:
            raise InjectedFailure("act: the reply was lost (injected)")
        return answer

    def edit(self, job_spec: Any, attr: str, value: Any, flags: Any = None) -> int:
        text = repr(value) if isinstance(value, classad2.ExprTree) else str(value)
        self.pool.record("edit", job_spec if isinstance(job_spec, list) else str(job_spec), attr, text)
        kind, keys = self.pool.select(job_spec)
        expression = _parse(text, RuntimeError if kind == "ids" else OSError)
        if kind == "constraint" and not keys:
            raise OSError("Unable to edit jobs matching constraint")
        for key in keys:
            if key not in self.pool.jobs:
                raise RuntimeError("Unable to edit job")
            self.pool.jobs[key][attr] = expression
            self.pool.settle(key)
        return len(keys)

    def retrieve(self, job_spec: Any) -> None:
        self.pool.record("retrieve", job_spec if isinstance(job_spec, list) else str(job_spec))
        _, keys = self.pool.select(job_spec)
        for key in keys:
            if key in self.pool.jobs:
                self.pool.jobs[key]["StageOutFinish"] = int(time.time())

    def reschedule(self) -> None:
        self.pool.record("reschedule")


class _Submitter:
    """The v1 htcondor.Schedd methods the backend calls."""

    def __init__(self, pool: FakePool) -> None:
        self.pool = pool

    def submitMany(self, cluster_ad: Any, proc_ads: Any, spool: bool = False, ad_results: Any = None) -> int:
        import classad

        if not isinstance(cluster_ad, classad.ClassAd):
            raise TypeError("submitMany: cluster_ad must be a (v1) classad.ClassAd")
        pairs = list(proc_ads)
        for pair in pairs:
            if not isinstance(pair[0], classad.ClassAd) or not isinstance(pair[1], int):
                raise TypeError("submitMany: proc_ads must be (classad.ClassAd, int) pairs")
        failing_after = self.pool.record("submitMany", [str(ad) for ad, _ in pairs], spool)
        cluster = self.pool.next_cluster
        self.pool.next_cluster += 1
        base = classad2.parseOne(str(cluster_ad))
        proc = 0
        for v1_ad, count in pairs:
            for _ in range(count):
                ad = classad2.ClassAd()
                for name, value in (("JobUniverse", 5), ("JobStatus", IDLE), ("Cmd", "/bin/echo")):
                    ad[name] = value
                ad.update(base)
                ad.update(classad2.parseOne(str(v1_ad)))
                ad["ClusterId"], ad["ProcId"], ad["QDate"] = cluster, proc, int(time.time())
                if spool:  # make_spool in the v1 bindings' schedd.cpp
                    ad["JobStatus"], ad["HoldReason"], ad["HoldReasonCode"] = HELD, "Spooling input data files", \
                        SPOOLING_INPUT
                    ad["LeaveJobInQueue"] = classad2.ExprTree(
                        "JobStatus == 4 && (CompletionDate =?= undefined || CompletionDate == 0 || "
                        "((time() - CompletionDate) < 864000))")
                self.pool.jobs[(cluster, proc)] = ad
                if isinstance(ad_results, list):
                    ad_results.append(classad.parseOne(str(ad)))
                proc += 1
        if failing_after:
            raise InjectedFailure("submitMany: the reply was lost after the commit (injected)")
        return cluster

    def spool(self, ads: Any) -> None:
        import classad

        if not all(isinstance(ad, classad.ClassAd) for ad in ads):
            raise TypeError("spool: the job ads must be (v1) classad.ClassAd")
        self.pool.record("spool", [(ad["ClusterId"], ad["ProcId"]) for ad in ads])
        for ad in ads:
            job = self.pool.jobs[(ad["ClusterId"], ad["ProcId"])]
            job["JobStatus"] = IDLE  # the schedd releases the job once its input arrived
            job["StageInFinish"] = int(time.time())
            for name in ("HoldReason", "HoldReasonCode"):
                job.pop(name, None)


def _check(action: str, ad: classad2.ClassAd, *, by_constraint: bool) -> str | None:
    """Scheduler::actOnJobs: whether the job may take the action; ``None`` when the status clause the schedd adds
    to a constraint leaves it out."""
    status, code = ad.get("JobStatus"), ad.get("HoldReasonCode")
    excluded = {"Hold": status in (REMOVED, COMPLETED),
                "Release": status != HELD or code == SPOOLING_INPUT,
                "Remove": status == REMOVED,
                "Suspend": status not in (RUNNING, 6),
                "Continue": status != SUSPENDED}.get(action, False)
    if by_constraint and excluded:
        return None
    if action == "Hold":
        if status == HELD and code in (USER_REQUEST, SPOOLING_INPUT):
            return "TotalAlreadyDone"
        return "TotalPermissionDenied" if excluded else "TotalSuccess"
    if action == "Remove" and excluded:
        return "TotalAlreadyDone"
    return "TotalBadStatus" if excluded else "TotalSuccess"


def _apply(action: str, ad: classad2.ClassAd, reason: str, subcode: int) -> None:
    if action == "Hold":
        _move(ad, "ReleaseReason", "LastReleaseReason")
        ad["JobStatus"], ad["HoldReason"], ad["HoldReasonCode"], ad["HoldReasonSubCode"] = \
            HELD, reason, USER_REQUEST, subcode
    elif action == "Release":
        ad["JobStatus"] = ad.get("JobStatusOnRelease", IDLE)
        for name in ("HoldReason", "HoldReasonCode", "HoldReasonSubCode"):
            _move(ad, name, "Last" + name)
        if reason:
            ad["ReleaseReason"] = reason
    elif action == "Remove":
        ad["JobStatus"] = REMOVED
        for name in ("HoldReason", "HoldReasonCode", "HoldReasonSubCode"):
            _move(ad, name, "Last" + name)
        if reason:
            ad["RemoveReason"] = reason
    elif action == "Suspend":
        ad["JobStatus"] = SUSPENDED
    elif action == "Continue":
        ad["JobStatus"] = RUNNING


def _move(ad: classad2.ClassAd, name: str, to: str) -> None:
    if name in ad:
        ad[to] = ad.pop(name)


def _job_id(text: str) -> tuple[int, int]:
    cluster, _, proc = text.strip().partition(".")
    return int(cluster), int(proc) if proc else -1


def _check_projection(projection: Any) -> None:
    if not isinstance(projection, list):
        raise TypeError("projection must be a list")
    if not all(isinstance(name, str) for name in projection):
        raise TypeError("projection must be a list of strings")


def _parse(text: str, error: type[Exception]) -> classad2.ExprTree:
    try:
        return classad2.ExprTree(text)
    except classad2.ClassAdException:
        raise error(f"Parse error in constraint: {text}") from None


def _copy(ad: classad2.ClassAd) -> classad2.ClassAd:
    copy = classad2.ClassAd()
    copy.update(ad)
    return copy


class FakeCollector:
    """The htcondor2 ``Collector`` surface the backend's pool uses (``query``, ``advertise``), over ads kept by
    kind, as the 24.0 bindings take their arguments: ``ad_type`` an ``htcondor2.AdType``, ``constraint`` a string
    or None (an unparsable one raises, as the collector refuses it), ``advertise`` a list of ads and one of
    condor_advertise's command names.  Not modelled: the collector's keying and expiry (an ad with the same ``Name``
    replaces the earlier one), its authorisation."""

    COMMANDS = {"UPDATE_STARTD_AD": "Machine", "UPDATE_SCHEDD_AD": "Scheduler", "UPDATE_SUBMITTOR_AD": "Submitter",
                "UPDATE_LICENSE_AD": "License", "UPDATE_MASTER_AD": "DaemonMaster", "UPDATE_CKPT_SRVR_AD": "CkptServer",
                "UPDATE_COLLECTOR_AD": "Collector", "UPDATE_STORAGE_AD": "Storage",
                "UPDATE_NEGOTIATOR_AD": "Negotiator", "UPDATE_HAD_AD": "HAD", "UPDATE_AD_GENERIC": None}
    MY_TYPES = {"Startd": "Machine", "Schedd": "Scheduler", "Submitter": "Submitter", "License": "License",
                "Master": "DaemonMaster", "Collector": "Collector", "Negotiator": "Negotiator", "HAD": "HAD",
                "Generic": "Generic"}

    def __init__(self) -> None:
        self.ads: list[classad2.ClassAd] = []
        self.calls: list[tuple[str, tuple]] = []
        self.down = False

    def query(self, ad_type: Any = None, constraint: Any = None, projection: Any = None, statistics: Any = None):
        import htcondor2

        self.calls.append(("query", (ad_type, constraint)))
        if self.down:
            raise RuntimeError("Failed to connect to collector <192.0.2.1:9618>")
        if not isinstance(ad_type, htcondor2.AdType):
            raise TypeError(f"ad_type must be an AdType, not {ad_type!r}")
        wanted = self.MY_TYPES.get(ad_type.name)
        parsed = _parse(constraint, ValueError) if constraint is not None else None
        return [_copy(ad) for ad in self.ads
                if (wanted is None or ad.get("MyType") == wanted) and matches(parsed, ad)]

    def advertise(self, ad_list: Any, command: str = "UPDATE_AD_GENERIC", use_tcp: bool = True) -> None:
        self.calls.append(("advertise", (ad_list, command)))
        if self.down:
            raise RuntimeError("Failed to connect to collector <192.0.2.1:9618>")
        if command not in self.COMMANDS:
            raise ValueError(f"invalid command {command}")
        for ad in ad_list:
            self.ads = [kept for kept in self.ads if kept.get("Name") != ad.get("Name")] + [_copy(ad)]
