"""Per-job spool directories (shared by the backends), laid out as HTCondor 7.5.5+ did: ``<c%10000>/<p%10000>/cluster<C>.proc<P>.subproc0``."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Callable

from backends.interface import BackendError, FileInfo
from jobmodel.files import is_plain_name, md5_of, write_at

_JOB_DIRECTORY = re.compile(r"cluster(?P<cluster>\d+)\.proc(?P<proc>\d+)\.subproc0")


class Spool:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def directory(self, cluster: int, proc: int) -> Path:
        return self.root / str(cluster % 10000) / str(proc % 10000) / f"cluster{cluster}.proc{proc}.subproc0"

    def create(self, cluster: int, proc: int) -> Path:
        path = self.directory(cluster, proc)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def discard(self, cluster: int, proc: int) -> None:
        shutil.rmtree(self.directory(cluster, proc), ignore_errors=True)

    def preen(self, keep: Callable[[int, int], bool]) -> list[tuple[int, int]]:
        """Remove the spool directories of jobs that are not queued (left by a crash mid-transaction)."""
        removed = []
        for path in self.root.glob("*/*/cluster*.proc*.subproc0"):
            match = _JOB_DIRECTORY.fullmatch(path.name)
            if match and not keep(int(match["cluster"]), int(match["proc"])):
                shutil.rmtree(path, ignore_errors=True)
                removed.append((int(match["cluster"]), int(match["proc"])))
        return removed

    def _file(self, cluster: int, proc: int, name: str) -> Path:
        if not is_plain_name(name):
            raise BackendError(f"'{name}' is not a plain file name")
        return self.directory(cluster, proc) / name

    def stage(self, cluster: int, proc: int, name: str) -> None:
        """Create the file without truncating it (the original opened with O_CREAT and no O_TRUNC)."""
        path = self._file(cluster, proc, name)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        except OSError as exc:
            raise BackendError(f"Failed to open '{name}' for writing, reason: {exc.strerror}") from None

    def write(self, cluster: int, proc: int, name: str, offset: int, data: bytes) -> None:
        try:
            write_at(self._file(cluster, proc, name), offset, data)
        except OSError as exc:
            raise BackendError(f"Failed to write to '{name}', reason: {exc.strerror}") from None

    def md5(self, cluster: int, proc: int, name: str) -> str:
        return md5_of(self._file(cluster, proc, name))

    def sync(self, cluster: int, proc: int) -> None:
        """fsync every file of a job's spool and the directory itself, so a commit never loses accepted data."""
        directory = self.directory(cluster, proc)
        if not directory.is_dir():
            return
        for entry in directory.iterdir():
            if entry.is_file():
                fd = os.open(entry, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def list(self, cluster: int, proc: int) -> list[FileInfo]:
        directory = self.directory(cluster, proc)
        if directory.exists() and not directory.is_dir():
            raise BackendError(f"spool directory '{directory}' is not actually a directory.")
        if not directory.exists():
            return []
        return sorted((FileInfo(entry.name, entry.stat().st_size) for entry in directory.iterdir()),
                      key=lambda info: info.name)

    def read(self, cluster: int, proc: int, name: str, offset: int, length: int) -> bytes:
        path = self._file(cluster, proc, name)
        try:
            with open(path, "rb") as stream:
                stream.seek(offset)
                return stream.read(length)
        except OSError as exc:
            raise BackendError(f"Failed to open file '{name}', reason: {exc.strerror}") from None

    def read_job_file(self, cluster: int, proc: int, path: str, offset: int, length: int) -> tuple[int, bytes]:
        """A job file's size and up to ``length`` bytes from ``offset``: ``path`` is a plain name in the job's spool,
        or an absolute path (an output file the job's ad names on a shared file system)."""
        target = Path(path) if os.path.isabs(path) else self._file(cluster, proc, path)
        try:
            with open(target, "rb") as stream:
                size = os.fstat(stream.fileno()).st_size
                stream.seek(offset)
                return size, stream.read(length)
        except OSError as exc:
            raise BackendError(f"Failed to open {target.name}: {exc.strerror}") from None
