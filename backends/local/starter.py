"""The owner's side of a run, as condor_starter does it: every path a job's ad names is checked, read and written
here, by a process that already runs as the job's owner (a child the launcher forked and switched), never by the
gateway with its own rights.

Before the program starts, :func:`prepare` checks ``Iwd``, the executable and standard input and copies the input
files into the sandbox, and :func:`open_streams` opens ``In``/``Out``/``Err``; after it ended, :func:`collect` copies
its output back to ``Iwd``.  What fails is a :class:`BadJob` with the hold reason and code a starter would give; the
launcher reports it in the run's result and the scheduler holds the job.

A switched process may not be able to read the interpreter's own files: this module imports everything it uses
when it is loaded (the standard library and ``jobmodel.jobs`` only), before any switch.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from jobmodel.jobs import HoldCode

Snapshot = dict[str, tuple[int, int]]  # name -> (size, mtime_ns)
NULL_FILE = "/dev/null"


class BadJob(Exception):
    """A job that cannot run (or whose output cannot be returned); ``reason`` and ``code`` are its hold's."""

    def __init__(self, reason: str, code: HoldCode) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


def prepare(spec: dict[str, Any]) -> Snapshot:
    """Check what the job needs and transfer its input into the sandbox; returns the sandbox as the job finds it
    (what :func:`collect` compares against), empty for a job without a sandbox."""
    iwd = spec["iwd"]
    _check_iwd(iwd)
    _check_command(spec["command"], spec["transfer_executable"])
    if spec["input_stream"] is not None and not os.access(spec["input_stream"], os.R_OK):
        raise BadJob(f"Error from starter: cannot open standard input '{spec['input_stream']}'",
                     HoldCode.UNABLE_TO_OPEN_INPUT)
    if not spec["sandboxed"]:
        return {}
    sandbox = Path(spec["cwd"])
    for source in map(Path, spec["inputs"]):
        if not os.path.exists(source) or not os.access(source, os.R_OK):
            raise BadJob(f"Transfer input files failure: cannot read '{source}'", HoldCode.TRANSFER_INPUT_ERROR)
    for source in map(Path, spec["inputs"]):
        target = sandbox / source.name
        try:
            if source.is_dir():
                shutil.copytree(source, target)
            else:
                shutil.copy2(source, target)
        except OSError as exc:
            raise BadJob(f"Transfer input files failure: cannot copy '{source}': {exc.strerror or exc}",
                         HoldCode.TRANSFER_INPUT_ERROR) from None
    executable = Path(spec["executable"])
    if spec["transfer_executable"] and executable.exists():
        executable.chmod(executable.stat().st_mode | 0o755)
    return snapshot(sandbox)


def _check_iwd(iwd: str) -> None:
    try:
        is_directory = stat.S_ISDIR(os.stat(iwd).st_mode)
    except OSError as exc:
        if exc.errno == errno.EACCES:  # it may exist, but not for this owner
            raise BadJob(f"Iwd '{iwd}' cannot be reached: {exc.strerror}", HoldCode.IWD_ERROR) from None
        is_directory = False
    if not is_directory:
        raise BadJob(f"Iwd '{iwd}' is not an existing absolute directory", HoldCode.IWD_ERROR)
    if not os.access(iwd, os.X_OK):
        raise BadJob(f"Iwd '{iwd}' cannot be reached: Permission denied", HoldCode.IWD_ERROR)


def _check_command(command: str, transferred: bool) -> None:
    try:
        status = os.stat(command)
    except OSError as exc:
        reason = "No such file" if exc.errno == errno.ENOENT else exc.strerror
        raise BadJob(f"Error from starter: Failed to execute '{command}': {reason}",
                     HoldCode.FAILED_TO_CREATE_PROCESS) from None
    if not stat.S_ISREG(status.st_mode):
        raise BadJob(f"Error from starter: Failed to execute '{command}': No such file",
                     HoldCode.FAILED_TO_CREATE_PROCESS)
    executable = os.access(command, os.X_OK) and status.st_mode & 0o111  # root may "access" any file
    if not executable and not transferred:  # a transferred copy is made executable
        raise BadJob(f"Error from starter: Failed to execute '{command}': Permission denied (not executable)",
                     HoldCode.FAILED_TO_CREATE_PROCESS)


#: the job's standard streams: descriptor, spec key, open flags, the stream's name in a hold reason, the hold code
STREAMS = ((0, "stdin", os.O_RDONLY, "input", HoldCode.UNABLE_TO_OPEN_INPUT),
           (1, "stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "output", HoldCode.UNABLE_TO_OPEN_OUTPUT),
           (2, "stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "error", HoldCode.UNABLE_TO_OPEN_OUTPUT))


def open_streams(spec: dict[str, Any]) -> None:
    """Open the job's standard streams onto descriptors 0, 1 and 2 (in the job's process, before exec)."""
    for stream in STREAMS:
        opened = open_stream(spec, *stream)
        os.dup2(opened, stream[0])
        os.close(opened)


def open_stream(spec: dict[str, Any], _fd: int, key: str, flags: int, name: str, code: HoldCode) -> int:
    """Open one of the job's standard streams (an entry of :data:`STREAMS`), close-on-exec."""
    try:
        return os.open(spec[key], flags | os.O_NOCTTY | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise BadJob(f"Error from starter: cannot open standard {name} '{spec[key]}': {exc.strerror}", code) from None


def snapshot(folder: Path) -> Snapshot:
    found: Snapshot = {}
    for entry in os.scandir(folder):
        if entry.is_file():
            status = entry.stat()
            found[entry.name] = (status.st_size, status.st_mtime_ns)
    return found


def collect(spec: dict[str, Any], before: Snapshot) -> None:
    """Bring the output of a sandboxed run back: stdout/stderr to Out/Err, then TransferOutput (or every new or
    changed file) into Iwd.  A file that cannot be brought back does not keep the others from coming back: every
    one is tried, and the hold names each that failed (with the system's words, never Python's)."""
    sandbox, iwd = Path(spec["cwd"]), Path(spec["iwd"])
    before = {name: tuple(state) for name, state in before.items()}  # (JSON made the pairs lists)
    failures = []
    pairs = [(Path(local), Path(destination)) for local, destination in spec["returns"].items()
             if Path(local).exists()]
    returned = set(spec["returns"])
    try:
        if spec["outputs"] is not None:
            names = spec["outputs"]
        else:
            names = [name for name, state in snapshot(sandbox).items()
                     if before.get(name) != state and str(sandbox / name) not in returned]
    except OSError as exc:
        raise BadJob(f"Transfer output files failure: cannot list the sandbox: {exc.strerror}",
                     HoldCode.TRANSFER_OUTPUT_ERROR) from None
    for name in names:
        if not (sandbox / name).exists():
            failures.append(f"'{name}' was not created by the job")
        else:
            pairs.append((sandbox / name, iwd / Path(name).name))
    for source, destination in pairs:
        try:
            _copy(source, destination)
        except OSError as exc:
            failures.append(f"cannot write '{exc.filename or destination}': {exc.strerror or exc}")
    if failures:
        raise BadJob("Transfer output files failure: " + "; ".join(failures), HoldCode.TRANSFER_OUTPUT_ERROR)


def _copy(source: Path, destination: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, destination, dirs_exist_ok=True)
    else:
        shutil.copy2(source, destination)
    try:
        os.chmod(destination, 0o644 if not os.access(source, os.X_OK) else 0o755)
    except OSError:
        pass
