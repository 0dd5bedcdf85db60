"""The methods of the published classes, on the core's submission service (the same identity, owner rules, limits
and transactions as every other face).  Each answers its out-arguments, or raises :class:`QmfError` with QMF's
status and text: the schema's error numbers (``STATUS_USER + n``) as HTCondor's plugins numbered them, or one of
``qpid::management::Manageable``'s codes for a call that does not fit the schema."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.core.auth import Caller
from gateway.core.schedd import BirdbathSchedd
from gateway.core.status import BirdbathError
from gateway.core.submissions import ApiError, ApiStatus, JobRef, SubmissionService, api_ad
from gateway.core.transactions import AdRules, NewCluster, WholeTransaction
from jobmodel.jobs import JobAction

from . import ads
from .schema import GRID, MASTER, NEGOTIATOR, SUBSYSTEMS, Method, QmfClass, QmfType

#: the first of the application's own status codes
STATUS_USER = 0x10000
INT32 = (-(1 << 31), (1 << 31) - 1)
UINT32 = (0, (1 << 32) - 1)


class Status(enum.IntEnum):
    """``qpid::management::Manageable``'s status codes."""

    OK = 0
    UNKNOWN_OBJECT = 1
    UNKNOWN_METHOD = 2
    NOT_IMPLEMENTED = 3
    PARAMETER_INVALID = 4
    FEATURE_NOT_IMPLEMENTED = 5
    FORBIDDEN = 6
    EXCEPTION = 7


class QmfError(Exception):
    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


def user_error(number: int, text: str) -> QmfError:
    return QmfError(STATUS_USER + number, text)


@dataclass(frozen=True)
class Call:
    """One method call: who calls, on which object (its class and key), with which input arguments."""

    caller: Caller
    klass: QmfClass
    key: str
    method: Method
    args: dict[str, Any]


def checked_arguments(method: Method, given: Any) -> dict[str, Any]:
    """The call's input arguments as the schema types them, or PARAMETER_INVALID saying what is wrong."""
    if not isinstance(given, Mapping):
        raise QmfError(Status.PARAMETER_INVALID, "_arguments must be a map")
    inputs = {arg.name: arg for arg in method.inputs()}
    unknown = sorted(str(name) for name in given if name not in inputs)
    if unknown:
        raise QmfError(Status.PARAMETER_INVALID, f"{method.name} has no argument {', '.join(unknown)}")
    checked = {}
    for name, arg in inputs.items():
        if name not in given:
            raise QmfError(Status.PARAMETER_INVALID, f"{method.name}: argument {name} is missing")
        checked[name] = _typed(method.name, name, arg.type, given[name])
    return checked


def _typed(method: str, name: str, kind: QmfType, value: Any) -> Any:
    where = f"{method}: argument {name}"
    if kind in (QmfType.SSTR, QmfType.LSTR):
        try:
            return ads.text_value(name, value)
        except ads.BadAd:
            raise QmfError(Status.PARAMETER_INVALID, f"{where} must be a string, not {type(value).__name__}") from None
    if kind in (QmfType.S32, QmfType.U32):
        low, high = INT32 if kind is QmfType.S32 else UINT32
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise QmfError(Status.PARAMETER_INVALID, f"{where} must be an integer from {low} to {high}, "
                                                     f"not {value!r:.60}")
        return int(value)
    if kind in (QmfType.FLOAT, QmfType.DOUBLE):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise QmfError(Status.PARAMETER_INVALID, f"{where} must be a number, not {type(value).__name__}")
        return float(value)
    if kind is QmfType.MAP and not isinstance(value, Mapping):
        raise QmfError(Status.PARAMETER_INVALID, f"{where} must be a map, not {type(value).__name__}")
    return value


def _job_id(text: str) -> str:
    """A job id as the schema's methods take it, or +0 "Invalid Id"."""
    try:
        return str(JobRef.parse(text))
    except ApiError as exc:
        raise user_error(0, exc.text) from None


def _submit_status(exc: ApiError) -> QmfError:
    """SubmitJob's numbers: +4 missing attributes, +6 a value that does not parse, +3 a refused name, +1 else."""
    for prefix, number in (("Job ad is missing", 4), ("Failed to parse", 6), ("Invalid attribute name", 3)):
        if exc.text.startswith(prefix):
            return user_error(number, exc.text)
    return user_error(1, exc.text)


def _set_status(exc: ApiError) -> QmfError:
    """SetJobAttribute's: +1 the Submission, +2 an attribute the schedd owns, +3 an invalid name, +4 else."""
    if exc.text.startswith("Changes to submission"):
        return user_error(1, exc.text)
    if exc.text.endswith("set by the schedd and cannot be changed"):
        return user_error(2, exc.text)
    if exc.text.startswith("Invalid attribute name"):
        return user_error(3, exc.text)
    return user_error(4, exc.text)


class Methods:
    """Submitting is one whole transaction of the core (``BirdbathSchedd.submit_transaction``), as every front end
    submits, with the submission API's rules for the ad; the rest is the submission service's."""

    def __init__(self, schedd: BirdbathSchedd, submissions: SubmissionService) -> None:
        self._schedd = schedd
        self._submissions = submissions
        self._table: dict[str, Callable[[Call, str], Awaitable[dict[str, Any]]]] = {
            "SubmitJob": self._submit, "Submit": self._submit,
            "GetJobAd": self._job_ad, "GetAd": self._job_ad,
            "SetJobAttribute": self._set, "SetAttribute": self._set,
            "HoldJob": self._act, "ReleaseJob": self._act, "RemoveJob": self._act, "SuspendJob": self._act,
            "ContinueJob": self._act, "Hold": self._act, "Release": self._act, "Remove": self._act,
            "FetchJobData": self._fetch, "Fetch": self._fetch,
            "GetJobSummaries": self._summaries, "echo": self._echo,
            **{method.name: self._daemon for method in (*NEGOTIATOR.methods, *MASTER.methods)}}

    async def run(self, call: Call) -> dict[str, Any]:
        """The method's out-arguments; QmfError for every refusal (an unexpected exception is the agent's to log
        and answer EXCEPTION)."""
        job = call.key if call.klass.name == "job" else call.args.get("Id", "")
        return await self._table[call.method.name](call, job)

    async def _submit(self, call: Call, _: str) -> dict[str, Any]:
        try:
            attrs = ads.from_grid(call.args["Ad"]) if call.klass.package == GRID else ads.from_typed(call.args["Ad"])
        except ads.BadAd as exc:
            raise user_error(6, f"Failed to parse job ad attribute: {exc}") from None
        settings = self._submissions.settings
        try:
            ad = api_ad(attrs, settings.limits, spooled=False)
        except ApiError as exc:
            raise _submit_status(exc) from None
        try:
            made = await self._schedd.submit_transaction(call.caller, WholeTransaction(
                [NewCluster([ad], rules=AdRules.SUBMISSION_API)]))
        except BirdbathError as exc:  # the Owner refused, the caller may not write, the backend failed
            raise user_error(1, exc.status.message or str(exc)) from None
        cluster, proc = made.jobs[0]
        return {"Id": f"{settings.schedd_name}#{cluster}.{proc}"}

    async def _job_ad(self, call: Call, job: str) -> dict[str, Any]:
        job = _job_id(job)
        try:
            attrs = await self._submissions.job_ad(call.caller, job)
        except ApiError as exc:
            raise user_error(0 if exc.code is ApiStatus.NO_MATCH else 2, exc.text) from None
        if call.klass.package == GRID:
            return {"JobAd": ads.to_grid(attrs)}
        return {"Ad": ads.to_typed(attrs)}

    async def _set(self, call: Call, job: str) -> dict[str, Any]:
        job = _job_id(job)
        try:
            await self._submissions.set_attribute(call.caller, job, call.args["Name"], None, call.args["Value"])
        except ApiError as exc:
            raise _set_status(exc) from None
        return {}

    async def _act(self, call: Call, job: str) -> dict[str, Any]:
        job = _job_id(job)
        action = JobAction(call.method.name.removesuffix("Job").lower())
        try:
            await self._submissions.act(call.caller, job, action, call.args["Reason"] or None)
        except ApiError as exc:
            raise user_error(1, f"Failed to {action.value} job: {exc.text}") from None
        return {}

    async def _fetch(self, call: Call, job: str) -> dict[str, Any]:
        job = _job_id(job)
        try:
            data = await self._submissions.fetch(call.caller, job, call.args["File"], call.args["Start"],
                                                 call.args["End"])
        except ApiError as exc:
            if exc.code is ApiStatus.NO_MATCH:
                raise QmfError(Status.UNKNOWN_OBJECT, exc.text) from None
            raise user_error(10 if exc.code is ApiStatus.INVALID_OFFSET else 1, exc.text) from None
        # lstr is text: bytes that are not UTF-8 go as Latin-1, one character a byte (binary-safe, unlike the C one)
        try:
            return {"Data": data.decode("utf-8")}
        except UnicodeDecodeError:
            return {"Data": data.decode("latin-1")}

    async def _summaries(self, call: Call, _: str) -> dict[str, Any]:
        try:
            jobs = await self._submissions.submission_jobs(call.caller, call.key)
        except ApiError as exc:
            raise user_error(1, exc.text) from None
        return {"Jobs": jobs}

    async def _daemon(self, call: Call, _: str) -> dict[str, Any]:
        """The negotiator's and the master's methods: the gateway neither negotiates for a pool nor runs HTCondor's
        daemons, so each is NOT_IMPLEMENTED saying so (a Subsystem that is none is PARAMETER_INVALID first)."""
        subsystem = call.args.get("Subsystem")
        if subsystem is not None and subsystem not in SUBSYSTEMS:
            raise QmfError(Status.PARAMETER_INVALID, f"{call.method.name}: Subsystem must be one of "
                                                     f"{', '.join(SUBSYSTEMS)}, not {subsystem!r:.60}")
        if call.klass is MASTER:
            raise QmfError(Status.NOT_IMPLEMENTED, f"{call.method.name} {subsystem}: the gateway does not start or "
                                                   f"stop HTCondor's daemons; its master object only reports")
        raise QmfError(Status.NOT_IMPLEMENTED, f"{call.method.name}: the gateway does not run the pool's negotiator "
                                               f"(its priorities, limits and configuration are the pool's own)")

    async def _echo(self, call: Call, _: str) -> dict[str, Any]:
        return dict(call.args)
