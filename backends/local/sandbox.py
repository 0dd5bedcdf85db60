"""A job's execute directory: control files beside a sandbox that holds the transferred input, and the copy of
new or changed files back to ``Iwd`` when the job ends (file transfer on one machine)."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import classad2

from jobmodel.jobs import HoldCode

from .jobspec import BadJob, Plan

Snapshot = dict[str, tuple[int, int]]  # name -> (size, mtime_ns)


@dataclass(frozen=True)
class ExecuteDir:
    """``<execute>/dir_<cluster>.<proc>``: ``sandbox/`` for the job, ``control/`` for the gateway."""

    root: Path

    @classmethod
    def of(cls, execute: Path, cluster: int, proc: int) -> "ExecuteDir":
        return cls(execute / f"dir_{cluster}.{proc}")

    @property
    def sandbox(self) -> Path:
        return self.root / "sandbox"

    @property
    def control(self) -> Path:
        return self.root / "control"

    @property
    def spec_file(self) -> Path:
        return self.control / "launch.json"

    @property
    def result_file(self) -> Path:
        return self.control / "result.json"

    @property
    def pgid_file(self) -> Path:
        return self.control / "pgid"

    @property
    def snapshot_file(self) -> Path:
        return self.control / "snapshot.json"

    def create(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.sandbox.mkdir(parents=True)
        self.control.mkdir()

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def result(self) -> dict | None:
        try:
            return json.loads(self.result_file.read_text())
        except (OSError, ValueError):
            return None

    def pgid(self) -> int | None:
        try:
            return int(self.pgid_file.read_text())
        except (OSError, ValueError):
            return None


def prepare(job: Plan, directory: ExecuteDir, ad: classad2.ClassAd, machine: classad2.ClassAd) -> None:
    """Create the execute directory, transfer the input into the sandbox and write the launcher's spec."""
    directory.create()
    (directory.control / ".job.ad").write_text(ad.printOld())
    (directory.control / ".machine.ad").write_text(machine.printOld())
    if job.sandboxed:
        for source in job.inputs:
            target = job.cwd / source.name
            try:
                if source.is_dir():
                    shutil.copytree(source, target)
                else:
                    shutil.copy2(source, target)
            except OSError as exc:
                raise BadJob(f"Transfer input files failure: cannot copy '{source}': {exc.strerror}",
                             HoldCode.TRANSFER_INPUT_ERROR) from None
        if job.executable.exists():
            job.executable.chmod(job.executable.stat().st_mode | 0o755)
        directory.snapshot_file.write_text(json.dumps(snapshot(job.cwd)))
    environment = dict(job.environment)
    environment.setdefault("_CONDOR_SCRATCH_DIR", str(job.cwd))
    environment.setdefault("_CONDOR_JOB_AD", str(directory.control / ".job.ad"))
    environment.setdefault("_CONDOR_MACHINE_AD", str(directory.control / ".machine.ad"))
    directory.spec_file.write_text(json.dumps({
        "executable": str(job.executable), "arguments": job.arguments, "environment": environment,
        "cwd": str(job.cwd), "stdin": str(job.stdin), "stdout": str(job.stdout), "stderr": str(job.stderr),
        "result_file": str(directory.result_file), "pgid_file": str(directory.pgid_file),
        "returns": {str(k): str(v) for k, v in job.returns.items()}, "outputs": job.outputs,
        "iwd": str(job.iwd), "sandboxed": job.sandboxed,
    }))


def snapshot(folder: Path) -> Snapshot:
    return {entry.name: (entry.stat().st_size, entry.stat().st_mtime_ns)
            for entry in folder.iterdir() if entry.is_file()}


def collect(directory: ExecuteDir) -> None:
    """Bring the output of a sandboxed run back: stdout/stderr to Out/Err, then TransferOutput (or every new or
    changed file) into Iwd."""
    try:
        spec = json.loads(directory.spec_file.read_text())
    except (OSError, ValueError):
        return
    if not spec.get("sandboxed"):
        return
    sandbox, iwd = Path(spec["cwd"]), Path(spec["iwd"])
    try:
        for local, destination in spec["returns"].items():
            if Path(local).exists():
                _copy(Path(local), Path(destination))
        returned = set(spec["returns"])
        if spec["outputs"] is not None:
            names = spec["outputs"]
        else:
            before = {name: tuple(value) for name, value in json.loads(directory.snapshot_file.read_text()).items()}
            names = [name for name, state in snapshot(sandbox).items()
                     if before.get(name) != state and str(sandbox / name) not in returned]
        for name in names:
            source = sandbox / name
            if not source.exists():
                raise BadJob(f"Transfer output files failure: '{name}' was not created by the job",
                             HoldCode.TRANSFER_OUTPUT_ERROR)
            _copy(source, iwd / Path(name).name)
    except OSError as exc:
        raise BadJob(f"Transfer output files failure: {exc}", HoldCode.TRANSFER_OUTPUT_ERROR) from None


def _copy(source: Path, destination: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, destination, dirs_exist_ok=True)
    else:
        shutil.copy2(source, destination)
    try:
        os.chmod(destination, 0o644 if not os.access(source, os.X_OK) else 0o755)
    except OSError:
        pass
