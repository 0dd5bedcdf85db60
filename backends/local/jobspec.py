"""From a job ad to what the launcher runs: command line, environment, working directory, standard streams and
the files to transfer, with HTCondor's meaning of each attribute on a single machine.

Planning only computes paths; it never looks at the file system, which the owner's side of the launcher
(``starter.py``) does with the owner's rights.  A job that cannot run whatever the files say (no ``Cmd``, a relative
``Iwd``, bad arguments, a universe this backend does not have) raises :class:`BadJob` with the hold reason and code a
starter would have given.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import classad2

from jobmodel.arguments import ArgumentSyntaxError, parse_environment_v1, parse_environment_v2, parse_v1, parse_v2
from jobmodel.classads import comma_list, evaluate, evaluate_string
from jobmodel.jobs import HoldCode, Universe

from .starter import NULL_FILE, BadJob

SUPPORTED_UNIVERSES = (Universe.VANILLA, Universe.SCHEDULER, Universe.LOCAL, Universe.PARALLEL)
#: universes whose jobs take slots and may run in a sandbox of their own
SLOT_UNIVERSES = (Universe.VANILLA, Universe.PARALLEL)


@dataclass
class Plan:
    """Everything needed to start a job and to bring its output back (paths as the job's ad names them)."""

    executable: Path  # what is executed: the command, or its copy in the sandbox
    command: Path  # the job's Cmd (checked, and copied when it is transferred)
    arguments: list[str]
    environment: dict[str, str]
    cwd: Path
    stdin: Path
    stdout: Path
    stderr: Path
    iwd: Path
    sandboxed: bool
    transfer_executable: bool = False
    input_stream: Path | None = None  # the job's In file (checked readable), None for /dev/null
    inputs: list[Path] = field(default_factory=list)  # files copied into the sandbox (from Iwd)
    outputs: list[str] | None = None  # TransferOutput names; None = every new or changed file
    returns: dict[Path, Path] = field(default_factory=dict)  # sandbox stdout/stderr -> where they belong


def universe_of(ad: classad2.ClassAd) -> int:
    result = evaluate(ad, "JobUniverse", int(Universe.VANILLA))
    return result if isinstance(result, int) else int(Universe.VANILLA)


def uses_slot(ad: classad2.ClassAd) -> bool:
    """Vanilla and parallel jobs need slots; scheduler- and local-universe jobs run beside the schedd, as in
    HTCondor."""
    return universe_of(ad) in SLOT_UNIVERSES


def request_cpus(ad: classad2.ClassAd) -> int:
    result = evaluate(ad, "RequestCpus", 1)
    return max(1, int(result)) if isinstance(result, (int, float)) and not isinstance(result, bool) else 1


def plan(ad: classad2.ClassAd, sandbox: Path, owners_environment: dict[str, str]) -> Plan:
    """What running ``ad`` takes; ``owners_environment`` is what ``GetEnv = true`` gives the job (its owner's login
    environment, or the gateway's when it runs every job as its own user)."""
    universe = universe_of(ad)
    if universe not in SUPPORTED_UNIVERSES:
        names = ", ".join(f"{u.name.lower()} ({int(u)})" for u in SUPPORTED_UNIVERSES)
        raise BadJob(f"JobUniverse {universe} is not supported by the local backend (it runs {names})",
                     HoldCode.FAILED_TO_CREATE_PROCESS)
    iwd = Path(evaluate_string(ad, "Iwd"))
    if not iwd.is_absolute():
        raise BadJob(f"Iwd '{iwd}' is not an existing absolute directory", HoldCode.IWD_ERROR)
    sandboxed = _sandboxed(ad)
    cwd = sandbox if sandboxed else iwd
    command = _command(ad, iwd)
    job = Plan(executable=command, command=command, arguments=_arguments(ad),
               environment=_environment(ad, owners_environment), cwd=cwd, stdin=Path(NULL_FILE),
               stdout=Path(NULL_FILE), stderr=Path(NULL_FILE), iwd=iwd, sandboxed=sandboxed,
               transfer_executable=_transfers_executable(ad))
    _streams(ad, job)
    if sandboxed:
        _transfers(ad, job)
    return job


def _command(ad: classad2.ClassAd, iwd: Path) -> Path:
    cmd = evaluate_string(ad, "Cmd")
    if not cmd:
        raise BadJob("The job has no Cmd (executable)", HoldCode.FAILED_TO_CREATE_PROCESS)
    return _in_iwd(iwd, cmd)


def _sandboxed(ad: classad2.ClassAd) -> bool:
    """A vanilla (or parallel) job with ShouldTransferFiles = YES runs in its own sandbox, its files transferred in
    and out."""
    transfer = evaluate_string(ad, "ShouldTransferFiles", "IF_NEEDED").upper()
    return universe_of(ad) in SLOT_UNIVERSES and transfer == "YES"


def _transfers_executable(ad: classad2.ClassAd) -> bool:
    return _sandboxed(ad) and evaluate(ad, "TransferExecutable", True) is not False


def _arguments(ad: classad2.ClassAd) -> list[str]:
    try:
        if "Arguments" in ad:
            return parse_v2(evaluate_string(ad, "Arguments"))
        return parse_v1(evaluate_string(ad, "Args"))
    except ArgumentSyntaxError as exc:
        raise BadJob(f"Invalid Arguments: {exc}", HoldCode.FAILED_TO_CREATE_PROCESS) from None


#: what a job's environment takes from its owner's when ``GetEnv`` is not true: the starter sets ``HOME`` (and the
#: ``_CONDOR_*`` variables, :func:`sandbox.launch_spec`); no ``PATH``, as HTCondor gives none
OWNERS_VARIABLES = ("HOME",)


def _environment(ad: classad2.ClassAd, owners_environment: dict[str, str]) -> dict[str, str]:
    """The job's environment: its owner's whole environment only with ``GetEnv = true``, else what the ad's
    ``Environment`` (or ``Env``) gives and :data:`OWNERS_VARIABLES`, as condor_starter builds it."""
    if evaluate(ad, "GetEnv", False) is True:
        environment = dict(owners_environment)
    else:
        environment = {name: owners_environment[name] for name in OWNERS_VARIABLES if name in owners_environment}
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
        job.input_stream = source
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
    job.inputs.extend(_in_iwd(job.iwd, item) for item in comma_list(evaluate_string(ad, "TransferInput")))
    if job.transfer_executable:
        if job.command not in job.inputs:
            job.inputs.append(job.command)
        job.executable = job.cwd / job.command.name
    if "TransferOutput" in ad:
        job.outputs = comma_list(evaluate_string(ad, "TransferOutput"))


def _in_iwd(iwd: Path, name: str) -> Path:
    return Path(name) if os.path.isabs(name) else iwd / name
