"""From a job ad to what the launcher runs: command line, environment, working directory, standard streams and
the files to transfer, with HTCondor's meaning of each attribute on a single machine.

A job that cannot run (no executable, unreadable input, a universe this backend does not have) raises
:class:`BadJob` with the hold reason and code a starter would have given.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import classad2

from jobmodel.arguments import ArgumentSyntaxError, parse_environment_v1, parse_environment_v2, parse_v1, parse_v2
from jobmodel.classads import comma_list, evaluate, evaluate_string
from jobmodel.jobs import HoldCode, Universe

SUPPORTED_UNIVERSES = (Universe.VANILLA, Universe.SCHEDULER, Universe.LOCAL)
NULL_FILE = "/dev/null"


class BadJob(Exception):
    def __init__(self, reason: str, code: HoldCode) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


@dataclass
class Plan:
    """Everything needed to start a job and to bring its output back."""

    executable: Path
    arguments: list[str]
    environment: dict[str, str]
    cwd: Path
    stdin: Path
    stdout: Path
    stderr: Path
    iwd: Path
    sandboxed: bool
    inputs: list[Path] = field(default_factory=list)  # files copied into the sandbox (from Iwd)
    outputs: list[str] | None = None  # TransferOutput names; None = every new or changed file
    returns: dict[Path, Path] = field(default_factory=dict)  # sandbox stdout/stderr -> where they belong


def universe_of(ad: classad2.ClassAd) -> int:
    result = evaluate(ad, "JobUniverse", int(Universe.VANILLA))
    return result if isinstance(result, int) else int(Universe.VANILLA)


def uses_slot(ad: classad2.ClassAd) -> bool:
    """Vanilla jobs need a slot; scheduler- and local-universe jobs run beside the schedd, as in HTCondor."""
    return universe_of(ad) == Universe.VANILLA


def request_cpus(ad: classad2.ClassAd) -> int:
    result = evaluate(ad, "RequestCpus", 1)
    return max(1, int(result)) if isinstance(result, (int, float)) and not isinstance(result, bool) else 1


def plan(ad: classad2.ClassAd, sandbox: Path, gateway_environment: dict[str, str]) -> Plan:
    universe = universe_of(ad)
    if universe not in SUPPORTED_UNIVERSES:
        names = ", ".join(f"{u.name.lower()} ({int(u)})" for u in SUPPORTED_UNIVERSES)
        raise BadJob(f"JobUniverse {universe} is not supported by the local backend (it runs {names})",
                     HoldCode.FAILED_TO_CREATE_PROCESS)
    iwd = Path(evaluate_string(ad, "Iwd"))
    if not iwd.is_absolute() or not iwd.is_dir():
        raise BadJob(f"Iwd '{iwd}' is not an existing absolute directory", HoldCode.IWD_ERROR)
    sandboxed = universe == Universe.VANILLA and evaluate_string(ad, "ShouldTransferFiles", "IF_NEEDED").upper() == "YES"
    cwd = sandbox if sandboxed else iwd
    job = Plan(executable=_executable(ad, iwd), arguments=_arguments(ad), environment=_environment(
        ad, gateway_environment), cwd=cwd, stdin=Path(NULL_FILE), stdout=Path(NULL_FILE), stderr=Path(NULL_FILE),
        iwd=iwd, sandboxed=sandboxed)
    _streams(ad, job)
    if sandboxed:
        _transfers(ad, job)
    return job


def _executable(ad: classad2.ClassAd, iwd: Path) -> Path:
    cmd = evaluate_string(ad, "Cmd")
    if not cmd:
        raise BadJob("The job has no Cmd (executable)", HoldCode.FAILED_TO_CREATE_PROCESS)
    path = Path(cmd) if os.path.isabs(cmd) else iwd / cmd
    if not path.is_file():
        raise BadJob(f"Error from starter: Failed to execute '{path}': No such file", HoldCode.FAILED_TO_CREATE_PROCESS)
    executable = os.access(path, os.X_OK) and path.stat().st_mode & 0o111  # root may "access" any file
    if not executable and not _transfers_executable(ad):  # a transferred copy is made executable
        raise BadJob(f"Error from starter: Failed to execute '{path}': Permission denied (not executable)",
                     HoldCode.FAILED_TO_CREATE_PROCESS)
    return path


def _transfers_executable(ad: classad2.ClassAd) -> bool:
    return universe_of(ad) == Universe.VANILLA and evaluate_string(ad, "ShouldTransferFiles", "IF_NEEDED").upper() == "YES" \
        and evaluate(ad, "TransferExecutable", True) is not False


def _arguments(ad: classad2.ClassAd) -> list[str]:
    try:
        if "Arguments" in ad:
            return parse_v2(evaluate_string(ad, "Arguments"))
        return parse_v1(evaluate_string(ad, "Args"))
    except ArgumentSyntaxError as exc:
        raise BadJob(f"Invalid Arguments: {exc}", HoldCode.FAILED_TO_CREATE_PROCESS) from None


def _environment(ad: classad2.ClassAd, gateway_environment: dict[str, str]) -> dict[str, str]:
    environment = dict(gateway_environment) if evaluate(ad, "GetEnv", False) is True else {
        "PATH": gateway_environment.get("PATH", "/usr/local/bin:/usr/bin:/bin")}
    try:
        if "Environment" in ad:
            environment.update(parse_environment_v2(evaluate_string(ad, "Environment")))
        elif "Env" in ad:
            environment.update(parse_environment_v1(evaluate_string(ad, "Env")))
    except ArgumentSyntaxError as exc:
        raise BadJob(f"Invalid Environment: {exc}", HoldCode.FAILED_TO_CREATE_PROCESS) from None
    return environment


def _streams(ad: classad2.ClassAd, job: Plan) -> None:
    stdin = evaluate_string(ad, "In", NULL_FILE) or NULL_FILE
    if stdin != NULL_FILE:
        source = _in_iwd(job.iwd, stdin)
        if not os.access(source, os.R_OK):
            raise BadJob(f"Error from starter: cannot open standard input '{source}'", HoldCode.UNABLE_TO_OPEN_INPUT)
        job.stdin = job.cwd / source.name if job.sandboxed else source
        if job.sandboxed:
            job.inputs.append(source)
    for name in ("Out", "Err"):
        target = evaluate_string(ad, name, NULL_FILE) or NULL_FILE
        if target == NULL_FILE:
            continue
        destination = _in_iwd(job.iwd, target)
        if job.sandboxed:
            local = job.cwd / f"_condor_std{name.lower()}"
            job.returns[local] = destination
            setattr(job, "stdout" if name == "Out" else "stderr", local)
        else:
            setattr(job, "stdout" if name == "Out" else "stderr", destination)


def _transfers(ad: classad2.ClassAd, job: Plan) -> None:
    for item in comma_list(evaluate_string(ad, "TransferInput")):
        source = _in_iwd(job.iwd, item)
        if not source.exists() or not os.access(source, os.R_OK):
            raise BadJob(f"Transfer input files failure: cannot read '{source}'", HoldCode.TRANSFER_INPUT_ERROR)
        job.inputs.append(source)
    if _transfers_executable(ad) and job.executable not in job.inputs:
        job.inputs.append(job.executable)
        job.executable = job.cwd / job.executable.name
    if "TransferOutput" in ad:
        job.outputs = comma_list(evaluate_string(ad, "TransferOutput"))


def _in_iwd(iwd: Path, name: str) -> Path:
    return Path(name) if os.path.isabs(name) else iwd / name
