"""The job template of ``createJobTemplate`` (as HTCondor's 6.8-8.6 schedd built it) and the file list of
``discoverJobRequirements``, both computed without touching the queue."""

from __future__ import annotations

import classad2

from jobmodel.arguments import ArgumentSyntaxError, join_v2, parse_v2
from jobmodel.classads import comma_list, evaluate, evaluate_string
from jobmodel.expressions import ExpressionLimits
from jobmodel.exprtext import SourceExpr, TextedAd
from jobmodel.jobs import JobStatus
from jobmodel.values import parse_expression

#: the template's expressions, as the 8.x schedd wrote them
LEAVE_IN_QUEUE = "FilesRetrieved=?=FALSE"
REQUEST_MEMORY = "ifthenelse(MemoryUsage isnt undefined,MemoryUsage,( ImageSize + 1023 ) / 1024)"
NULL_FILES = ("", "/dev/null", "NUL")


class TemplateError(ValueError):
    """The template could be built only partly; ``ad`` holds what was built."""

    def __init__(self, message: str, ad: classad2.ClassAd) -> None:
        super().__init__(message)
        self.ad = ad


def job_template(cluster: int, proc: int, owner: str | None, universe: int, cmd: str | None,
                 args: str | None, requirements: str | None, *, now: int, version: str, platform: str,
                 leave_in_queue: str | None = None, limits: ExpressionLimits = ExpressionLimits()) -> classad2.ClassAd:
    """A ready-to-edit job ad, as ``CreateJobAd`` plus the SOAP stub's edits made it in 8.x.

    The client's ``requirements`` are checked against ``limits`` (ExpressionRefused) and for literals the library
    would change (BadValue) before they are parsed."""
    ad = TextedAd()  # its expressions are printed as written here, and the client's requirements as sent
    if owner is not None:
        ad["Owner"] = owner
    ad["JobUniverse"] = universe
    if cmd is not None:
        ad["Cmd"] = cmd
    for name, value in _TEMPLATE_CONSTANTS.items():
        ad[name] = value
    for name in ("QDate", "EnteredCurrentStatus"):
        ad[name] = now
    ad["JobStatus"] = int(JobStatus.IDLE)
    ad["Requirements"] = parse_expression(requirements, limits, "the requirements") if requirements \
        else classad2.ExprTree("true")
    clause = LEAVE_IN_QUEUE if not leave_in_queue else f"{LEAVE_IN_QUEUE} && ({leave_in_queue})"
    ad["LeaveJobInQueue"] = SourceExpr(clause)
    ad["RequestMemory"] = SourceExpr(REQUEST_MEMORY)
    ad["RequestDisk"] = classad2.ExprTree("DiskUsage")
    ad["CondorVersion"] = version
    ad["CondorPlatform"] = platform
    ad["ClusterId"] = cluster
    ad["ProcId"] = proc
    try:
        ad["Arguments"] = join_v2(parse_v2(args or ""))
    except ArgumentSyntaxError:
        raise TemplateError("Invalid arguments string.", ad) from None
    return ad


_TEMPLATE_CONSTANTS: dict[str, object] = {
    "CompletionDate": 0,
    "RemoteWallClockTime": 0.0, "LocalUserCpu": 0.0, "LocalSysCpu": 0.0, "RemoteUserCpu": 0.0,
    "RemoteSysCpu": 0.0,
    "CoreSize": -1, "ExitStatus": 0, "ExitBySignal": False,
    **{name: 0 for name in (
        "NumCkpts", "NumJobStarts", "NumJobCompletions", "NumRestarts", "NumSystemHolds", "CommittedTime",
        "CumulativeSlotTime", "CommittedSlotTime", "TotalSuspensions", "LastSuspensionTime",
        "CumulativeSuspensionTime", "CommittedSuspensionTime")},
    "RootDir": "/", "MinHosts": 1, "MaxHosts": 1, "CurrentHosts": 0,
    "WantRemoteSyscalls": False, "WantCheckpoint": False, "WantRemoteIO": True,
    "JobPrio": 0, "NiceUser": False, "JobNotification": 0, "ImageSize": 100,
    "In": "/dev/null", "Out": "/dev/null", "Err": "/dev/null",
    "BufferSize": 524288, "BufferBlockSize": 32768,
    "ShouldTransferFiles": "YES", "WhenToTransferOutput": "ON_EXIT",
    "PeriodicHold": False, "PeriodicRemove": False, "PeriodicRelease": False, "OnExitHold": False,
    "OnExitRemove": True,
    "DiskUsage": 1, "RequestCpus": 1, "StreamOut": False, "StreamErr": False,
    "StageInStart": 1, "StageInFinish": 1, "FilesRetrieved": False,
}


def input_files(ad: classad2.ClassAd) -> list[str]:
    """The files a job needs transferred, in FileTransfer's order: TransferInput, PublicInputFiles,
    stdin, the proxy, then the executable unless ``TransferExecutable`` is false or it is listed already."""
    files: list[str] = []
    for attribute in ("TransferInput", "PublicInputFiles"):
        files.extend(comma_list(evaluate_string(ad, attribute)))
    stdin = evaluate_string(ad, "In")
    if stdin not in NULL_FILES:
        files.append(stdin)
    proxy = evaluate_string(ad, "x509userproxy")
    if proxy:
        files.append(proxy)
    cmd = evaluate_string(ad, "Cmd")
    if cmd and evaluate(ad, "TransferExecutable") is not False and cmd not in files:
        files.append(cmd)
    return files
