"""A job's execute directory: the gateway's files about the run (the run's file, the launcher's spec to which it appends
how the run goes, and the job ad the job may read) and, for a job that runs in a sandbox (or has a chirp server),
``sandbox/``, the job's own directory, owned by the account it runs as.  The machine ad is the slot's, the same for
every job: one file in the execute root (``.machine.ad``), written when the scheduler starts.  A run makes as few
files as it can: on some file systems (ext4 without a journal) every inode made costs more the more were freed in the
last minute.

Only the gateway's side is made here; the input is transferred into the sandbox, and the output back, by the owner's
side of the launcher (``starter.py``), with the owner's rights."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import classad2

from . import chirpconfig, jobtools, runfile
from .chirpconfig import ChirpPlan
from .family import Control
from .jobspec import Plan
from .owners import Account, to_switch
from .quickio import write_all


@dataclass(frozen=True)
class ExecuteDir:
    """``<execute>/dir_<cluster>.<proc>``: ``sandbox/`` for the job, the rest for the gateway."""

    root: Path

    @classmethod
    def of(cls, execute: Path, cluster: int, proc: int) -> "ExecuteDir":
        return cls(execute / f"dir_{cluster}.{proc}")

    @staticmethod
    def keys_in(execute: Path) -> list[tuple[int, int]]:
        """The jobs that have an execute directory under ``execute``."""
        keys = []
        for entry in os.scandir(execute) if execute.is_dir() else ():
            cluster, dot, proc = entry.name.removeprefix("dir_").partition(".")
            if entry.name.startswith("dir_") and dot and cluster.isdigit() and proc.isdigit():
                keys.append((int(cluster), int(proc)))
        return keys

    # (the paths are cached: a start and an end ask for them dozens of times)
    @cached_property
    def sandbox(self) -> Path:
        return self.root / "sandbox"

    @cached_property
    def control(self) -> Path:
        """Where the gateway's files about the run are: the directory itself."""
        return self.root

    @cached_property
    def run_file(self) -> Path:
        """The run's file: the launcher's spec, then what the launcher says of the run (``runfile.py``)."""
        return self.control / runfile.NAME

    def create(self, account: Account | None = None, sandbox: bool = True) -> None:
        """A fresh directory, the gateway's, readable by the job; with ``sandbox``, the sandbox in it, which belongs
        to ``account`` (None: the gateway's user) and only it may enter."""
        try:
            os.mkdir(self.root)
        except FileExistsError:  # (left by a run a crash cut off)
            shutil.rmtree(self.root, ignore_errors=True)
            os.mkdir(self.root)
        except FileNotFoundError:  # (the execute directory itself went: a cleaned tmpfs)
            self.root.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(self.root)
        for directory, mode in ((self.root, 0o755), *(((self.sandbox, 0o700),) if sandbox else ())):
            if directory is not self.root:
                os.mkdir(directory)
            os.chmod(directory, mode)  # whatever the gateway's umask: the owner must reach its sandbox
        account = to_switch(account)
        if sandbox and account is not None:
            os.chown(self.sandbox, account.uid, account.gid)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def run(self) -> runfile.Run:
        """What the run's file says so far."""
        return runfile.read(self.run_file)

    def result(self) -> dict | None:
        """How the run ended, as its launcher wrote it (None: it did not)."""
        return runfile.read(self.run_file, spec=False).ended

    def started(self) -> runfile.Started | None:
        """The job's process group and its launcher, once the job's first process exists (None: not yet)."""
        return runfile.read(self.run_file, spec=False).started

    def pgid(self) -> int | None:
        """The job's process group (None: its launcher has not started it)."""
        started = self.started()
        return started.group if started is not None else None


def prepare(job: Plan, directory: ExecuteDir, ad: classad2.ClassAd, control: Control,
            account: Account | None = None) -> ChirpPlan | None:
    """Create the execute directory and write the launcher's spec: what its owner's side checks, transfers, opens
    and runs as ``account`` (None: as the gateway's user), and how the launcher keeps it (``control``).  Returns the
    run's chirp servers (None: it has none)."""
    switched = to_switch(account)
    chirp = chirpconfig.plan(ad, [directory.sandbox], switched)
    directory.create(account, sandbox=job.sandboxed or chirp is not None)
    write_job_ad(directory, ad, account)
    spec = launch_spec(job, directory)
    if chirp is not None:
        chirpconfig.add_to_environment(spec["environment"], directory.sandbox, libexec_of(directory), True)
    write_spec(directory, spec | {"account": switched.as_spec() if switched is not None else None}, control)
    return chirp


def write_job_ad(directory: ExecuteDir, ad: classad2.ClassAd, account: Account | None = None) -> None:
    """The job ad the job may read (``_CONDOR_JOB_AD``): the job's alone (it holds its arguments and environment),
    so it belongs to ``account``, the job's (None: the gateway's user)."""
    _write(directory.control / ".job.ad", ad.printOld(), 0o600, to_switch(account))


def machine_ad(execute: Path) -> Path:
    """The machine ad every job may read (``_CONDOR_MACHINE_AD``): the slot's, public as ``condor_status`` shows
    it."""
    return execute / ".machine.ad"


def write_machine_ad(execute: Path, machine: classad2.ClassAd) -> None:
    """Write (again) the machine ad of every job that starts from now on."""
    temporary = machine_ad(execute).with_suffix(".tmp")
    temporary.unlink(missing_ok=True)
    _write(temporary, machine.printOld(), 0o644)
    os.replace(temporary, machine_ad(execute))


def launch_spec(job: Plan, directory: ExecuteDir) -> dict:
    """What the launcher's owner side needs to run one planned process (a job, or one node of a parallel job)."""
    environment = dict(job.environment)
    environment.setdefault("_CONDOR_SCRATCH_DIR", str(job.cwd))
    environment.setdefault("_CONDOR_JOB_AD", str(directory.control / ".job.ad"))
    environment.setdefault("_CONDOR_MACHINE_AD", str(machine_ad(directory.root.parent)))
    environment.setdefault("_CONDOR_JOB_IWD", str(job.iwd))
    environment.setdefault("BATCH_SYSTEM", "HTCondor")
    return {
        "executable": str(job.executable), "command": str(job.command),
        "transfer_executable": job.transfer_executable, "arguments": job.arguments, "environment": environment,
        "cwd": str(job.cwd), "iwd": str(job.iwd), "sandboxed": job.sandboxed,
        "input_stream": None if job.input_stream is None else str(job.input_stream),
        "stdin": str(job.stdin), "stdout": str(job.stdout), "stderr": str(job.stderr),
        "inputs": [str(source) for source in job.inputs],
        "returns": {str(k): str(v) for k, v in job.returns.items()}, "outputs": job.outputs,
        "run_file": str(directory.run_file),
    }


def write_spec(directory: ExecuteDir, spec: dict, control: Control) -> None:
    """The launcher's spec, the gateway's alone (it names the account to switch to), with how the launcher keeps the
    job (``control``: also what the gateway reads to end what a lost run left)."""
    _write(directory.run_file, json.dumps(spec | {"control": control.as_spec()}) + "\n", 0o600)


def libexec_of(directory: ExecuteDir) -> Path:
    """The directory of the tools jobs find on their PATH (``jobtools.py`` installs them there)."""
    return jobtools.libexec(directory.root.parent)


def _write(path: Path, text: str, mode: int, owner: Account | None = None) -> None:
    """A new file with exactly ``mode``, the gateway's or ``owner``'s (the spec is the gateway's alone; the ads the
    job reads are the job's)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)
        if owner is not None:
            os.fchown(fd, owner.uid, owner.gid)
        write_all(fd, text.encode())
    finally:
        os.close(fd)
