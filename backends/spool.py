"""Per-job spool directories (shared by the backends), laid out as HTCondor 7.5.5+ did:
``<c%10000>/<p%10000>/cluster<C>.proc<P>.subproc0``.

A job's spool directory may belong to the job's owner (a job that runs as its owner writes its output there), so
whatever is in it may have been put there by the job: a symbolic link to a secret, a FIFO, a hard link, or another
user's private file it renamed in from a directory they share.  Every read for a client therefore goes through
:meth:`Spool._open`: the directories are walked from the spool's root one name at a time (``openat`` with
``O_NOFOLLOW``; the levels above a job's directory must be the gateway's and writable by nobody else, so a job
cannot swap its directory for another), the file is opened relative to the job directory's descriptor without
following a link and without blocking (``O_NONBLOCK``), and the open descriptor's ``fstat`` must show a regular file
with one link that belongs to the job directory's owner (see :func:`_servable`).

That owner is whom the gateway made it for: the directory is created by the gateway, and only the gateway (root)
ever changes its owner, to the account the job runs as (:meth:`Spool.give`, which hands over the files the gateway
staged with it).  A directory that is still the gateway's has only ever been written by the gateway, for this job.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from backends.interface import BackendError, FileInfo
from jobmodel.files import is_plain_name, write_at

_JOB_DIRECTORY = re.compile(r"cluster(?P<cluster>\d+)\.proc(?P<proc>\d+)\.subproc0")
#: how a spool file is opened for reading: never through a link, never waiting for a writer, never kept across exec
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Spool:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        root.chmod(0o755)  # the gateway's, traversable by the jobs that run as their owners (whatever the umask)

    def directory(self, cluster: int, proc: int) -> Path:
        return self.root / str(cluster % 10000) / str(proc % 10000) / f"cluster{cluster}.proc{proc}.subproc0"

    def create(self, cluster: int, proc: int) -> Path:
        path = self.directory(cluster, proc)
        try:
            # the levels above are the gateway's, traversable by the job that runs as its owner
            for level in (path.parent.parent, path.parent):
                if not level.is_dir():
                    level.mkdir(parents=True, exist_ok=True)
                    level.chmod(0o755)
            path.mkdir(mode=0o700, exist_ok=True)  # the job's alone (give hands it to the job's account)
        except OSError as exc:
            raise BackendError(f"Failed to create the spool directory of job {cluster}.{proc}, reason: "
                               f"{exc.strerror}") from None
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

    def size(self) -> int:
        """Bytes the spool's files take (their lengths; links are not followed), for the operators' figures."""
        total = 0
        for folder, _, names in os.walk(self.root):
            for name in names:
                try:
                    total += os.lstat(os.path.join(folder, name)).st_size
                except OSError:  # (removed meanwhile)
                    continue
        return total

    def give(self, cluster: int, proc: int, uid: int, gid: int) -> None:
        """Hand a job's spool directory and the regular files in it to the account the job runs as (only it may
        enter), as HTCondor's CHOWN_JOB_SPOOL_FILES does; nothing is followed through a link."""
        with self._directory(cluster, proc) as fd:
            for entry in os.scandir(fd):
                if entry.is_file(follow_symlinks=False):
                    os.chown(entry.name, uid, gid, dir_fd=fd, follow_symlinks=False)
            os.fchown(fd, uid, gid)
            os.fchmod(fd, 0o700)

    def _file(self, cluster: int, proc: int, name: str) -> Path:
        return self.directory(cluster, proc) / _plain(name)

    def stage(self, cluster: int, proc: int, name: str) -> None:
        """Create the file without truncating it (the original opened with O_CREAT and no O_TRUNC)."""
        path = self._file(cluster, proc, name)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
        except OSError as exc:
            raise BackendError(f"Failed to open '{name}' for writing, reason: {exc.strerror}") from None

    def write(self, cluster: int, proc: int, name: str, offset: int, data: bytes) -> None:
        try:
            write_at(self._file(cluster, proc, name), offset, data)
        except OSError as exc:
            raise BackendError(f"Failed to write to '{name}', reason: {exc.strerror}") from None

    def md5(self, cluster: int, proc: int, name: str) -> str:
        digest = hashlib.md5()
        with self._open(cluster, proc, name, f"Failed to open file '{name}'") as (fd, _):
            try:
                for block in iter(lambda: os.read(fd, 1 << 20), b""):
                    digest.update(block)
            except OSError as exc:
                raise BackendError(f"Failed to read file '{name}', reason: {exc.strerror}") from None
        return digest.hexdigest()

    def sync(self, cluster: int, proc: int) -> None:
        """fsync every file of a job's spool and the directory itself, so a commit never loses accepted data."""
        directory = self.directory(cluster, proc)
        if not directory.is_dir():
            return
        with self._directory(cluster, proc) as fd:
            try:
                entries = list(os.scandir(fd))
                for entry in entries:
                    if entry.is_file(follow_symlinks=False):
                        opened = os.open(entry.name, _READ_FLAGS, dir_fd=fd)
                        try:
                            os.fsync(opened)
                        finally:
                            os.close(opened)
                if entries:  # (an empty spool holds nothing to lose: most jobs, and a sync a commit need not wait for)
                    os.fsync(fd)
            except OSError as exc:
                raise BackendError(f"Failed to store the spool of job {cluster}.{proc} durably, reason: "
                                   f"{exc.strerror}") from None

    def list(self, cluster: int, proc: int) -> list[FileInfo]:
        """The files of a job's spool that can be read (:func:`_servable`); links, FIFOs, sub-directories and the
        like are not listed, as no read could return them."""
        directory = self.directory(cluster, proc)
        if not os.path.lexists(directory):
            return []
        try:
            with self._directory(cluster, proc) as fd:
                owner = os.fstat(fd).st_uid
                found = []
                for entry in os.scandir(fd):
                    status = entry.stat(follow_symlinks=False)
                    if _servable(status, owner):
                        found.append(FileInfo(entry.name, status.st_size))
        except BackendError:
            raise BackendError(f"spool directory '{directory}' is not actually a directory.") from None
        return sorted(found, key=lambda info: info.name)

    def read(self, cluster: int, proc: int, name: str, offset: int, length: int) -> bytes:
        return self.read_job_file(cluster, proc, name, offset, length)[1]

    def read_job_file(self, cluster: int, proc: int, name: str, offset: int, length: int) -> tuple[int, bytes]:
        """A spool file's size and up to ``length`` bytes from ``offset``; ``name`` is a plain name in the job's
        spool (nothing outside it can be named)."""
        with self._open(cluster, proc, name, f"Failed to open file '{name}'") as (fd, size):
            return read_range(fd, size, offset, length)

    # -- confinement ------------------------------------------------------------------------------------
    @contextmanager
    def _directory(self, cluster: int, proc: int, missing: str | None = None) -> Iterator[int]:
        """The job's spool directory, opened one level at a time from the spool's root without following a link
        anywhere below it; every level above the job's directory must be the gateway's alone to write (``missing``:
        the failure to report when there is none, as for a file missing from it: a job gets its spool with its first
        file)."""
        try:
            fd = os.open(self.root, _DIRECTORY_FLAGS)
        except OSError as exc:
            raise BackendError(f"Failed to open the spool directory {self.root}, reason: {exc.strerror}") from None
        try:
            for name in self.directory(cluster, proc).relative_to(self.root).parts:
                _check_level(os.fstat(fd), cluster, proc)
                child = os.open(name, _DIRECTORY_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
        except OSError as exc:
            os.close(fd)
            if missing is not None and exc.errno == errno.ENOENT:
                raise BackendError(f"{missing}, reason: {exc.strerror}") from None
            raise BackendError(f"Failed to open the spool directory of job {cluster}.{proc}, reason: "
                               f"{exc.strerror}") from None
        except BaseException:
            os.close(fd)
            raise
        try:
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def _open(self, cluster: int, proc: int, name: str, failure: str) -> Iterator[tuple[int, int]]:
        """A servable file of the job's spool, opened for reading: its descriptor and size."""
        _plain(name)
        with self._directory(cluster, proc, failure) as directory:
            try:
                fd = os.open(name, _READ_FLAGS, dir_fd=directory)
            except OSError as exc:
                reason = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror  # O_NOFOLLOW refused
                raise BackendError(f"{failure}, reason: {reason}") from None
            try:
                status = os.fstat(fd)
                if not _servable(status, os.fstat(directory).st_uid):
                    raise BackendError(f"{failure}, reason: it is not a regular file of the job")
                yield fd, status.st_size
            finally:
                os.close(fd)


def _plain(name: str) -> str:
    """``name``, when it names a file directly in the spool; else BackendError."""
    if not is_plain_name(name):
        raise BackendError(f"'{name}' is not a plain file name")
    return name


def read_range(fd: int, size: int, offset: int, length: int) -> tuple[int, bytes]:
    """A file's ``size`` and up to ``length`` bytes of it from ``offset`` (what every job-file read answers)."""
    offset = max(0, offset)
    return size, read_at(fd, offset, min(length, size - offset))


def read_at(fd: int, offset: int, length: int) -> bytes:
    """Up to ``length`` bytes from ``offset`` (never a buffer larger than what the file had when it was opened)."""
    chunks = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset, length = offset + len(chunk), length - len(chunk)
    return b"".join(chunks)


def _check_level(status: os.stat_result, cluster: int, proc: int) -> None:
    """A directory above a job's spool must be the gateway's and writable by nobody else (or a job could swap a
    level for one of its own, with any job's directory in it)."""
    if status.st_uid != os.geteuid() or status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise BackendError(f"Failed to open the spool directory of job {cluster}.{proc}, reason: a directory above "
                           f"it is not the gateway's alone (owner uid {status.st_uid}, mode "
                           f"{stat.S_IMODE(status.st_mode):04o})")


def _servable(status: os.stat_result, directory_owner: int) -> bool:
    """A file a spool read may return: a regular file with one link (its only name is this one) that belongs to the
    owner of the job's directory: the account the job runs as, or the gateway while the directory is still its own
    (see the module's docstring).  Another user's file a job renamed or hard-linked in is refused, whatever its
    mode, and so is a file of the gateway's in a directory it gave away."""
    return stat.S_ISREG(status.st_mode) and status.st_uid == directory_owner and status.st_nlink == 1
