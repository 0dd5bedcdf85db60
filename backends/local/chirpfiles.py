"""The chirp file commands, confined to one node's scratch directory and done with its owner's rights.

A job names files relative to its scratch directory (or by an absolute path inside it).  Every name is resolved
one component at a time from the directory's descriptor, without following a symbolic link anywhere
(``O_NOFOLLOW``) and refusing ``..``: a link the job made, or a path that climbs out, can never reach a file outside
(EACCES, which chirp answers as NOT_AUTHORIZED).  The work is done by :func:`owners.call_as` / :func:`owners.open_as`
(a child that has become the job's owner), so even inside the directory the gateway's own rights are never used.

Each operation is a module-level function of (scratch directory, name, ...) returning JSON-able values.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from contextlib import contextmanager
from typing import Any, Iterator

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def components(root: str, name: str) -> list[str]:
    """``name``'s components below ``root``; OSError EACCES for anything that is not inside it."""
    if not name or "\0" in name:
        raise OSError(errno.EINVAL, "an empty name", name)
    if os.path.isabs(name):
        relative = os.path.relpath(os.path.normpath(name), root)
        if relative == "." or relative.startswith(".."):
            raise OSError(errno.EACCES, "outside the job's scratch directory", name)
        name = relative
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        raise OSError(errno.EACCES, "outside the job's scratch directory", name)
    return parts


def is_root(root: str, name: str) -> bool:
    """Whether ``name`` is the scratch directory itself ("." or its absolute path)."""
    return os.path.normpath(os.path.join(root, name)) == os.path.normpath(root)


@contextmanager
def parent(root: str, name: str) -> Iterator[tuple[int, str]]:
    """The descriptor of the directory that holds ``name`` (reached without links) and its last component."""
    *directories, last = components(root, name)
    fd = os.open(root, _DIRECTORY)
    try:
        for directory in directories:
            try:
                inner = os.open(directory, _DIRECTORY, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(directory, fd):
                    raise OSError(errno.EACCES, "a symbolic link on the way", name) from None
                raise
            os.close(fd)
            fd = inner
        yield fd, last
    finally:
        os.close(fd)


def _is_link(name: str, directory: int) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=directory).st_mode)
    except OSError:
        return False


def open_confined(root: str, name: str, flags: int, mode: int) -> int:
    """``open`` of ``name`` under ``root``; the last component is no link either, nor a FIFO that would block."""
    with parent(root, name) as (directory, last):
        fd = os.open(last, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, mode & 0o777,
                     dir_fd=directory)
    try:
        status = os.fstat(fd)
        if not (stat.S_ISREG(status.st_mode) or stat.S_ISDIR(status.st_mode)):
            raise OSError(errno.EACCES, "not a regular file", name)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def stat_line(status: os.stat_result) -> str:
    """A stat as chirp sends it: device inode mode nlink uid gid rdevice size blksize blocks atime mtime ctime."""
    return " ".join(str(int(value)) for value in (
        status.st_dev, status.st_ino, status.st_mode, status.st_nlink, status.st_uid, status.st_gid, status.st_rdev,
        status.st_size, status.st_blksize, status.st_blocks, status.st_atime, status.st_mtime, status.st_ctime))


def do_stat(root: str, name: str) -> str:
    """(``stat`` and ``lstat`` alike: a link is described, never followed.)"""
    with parent(root, name) as (directory, last):
        return stat_line(os.stat(last, dir_fd=directory, follow_symlinks=False))


def do_unlink(root: str, name: str) -> int:
    with parent(root, name) as (directory, last):
        os.unlink(last, dir_fd=directory)
    return 0


def do_mkdir(root: str, name: str, mode: int) -> int:
    with parent(root, name) as (directory, last):
        os.mkdir(last, mode & 0o777, dir_fd=directory)
    return 0


def do_rmdir(root: str, name: str) -> int:
    with parent(root, name) as (directory, last):
        os.rmdir(last, dir_fd=directory)
    return 0


def do_rmall(root: str, name: str) -> int:
    with parent(root, name) as (directory, last):
        if stat.S_ISDIR(os.stat(last, dir_fd=directory, follow_symlinks=False).st_mode):
            shutil.rmtree(last, dir_fd=directory)  # (fd-based: links inside are removed, never followed)
        else:
            os.unlink(last, dir_fd=directory)
    return 0


def do_rename(root: str, old: str, new: str) -> int:
    with parent(root, old) as (source, old_last), parent(root, new) as (target, new_last):
        os.rename(old_last, new_last, src_dir_fd=source, dst_dir_fd=target)
    return 0


def do_chmod(root: str, name: str, mode: int) -> int:
    fd = open_confined(root, name, os.O_RDONLY, 0)
    try:
        os.fchmod(fd, mode & 0o7777 & ~(stat.S_ISUID | stat.S_ISGID))
    finally:
        os.close(fd)
    return 0


def do_truncate(root: str, name: str, length: int) -> int:
    fd = open_confined(root, name, os.O_WRONLY, 0)
    try:
        os.ftruncate(fd, length)
    finally:
        os.close(fd)
    return 0


def do_utime(root: str, name: str, accessed: int, modified: int) -> int:
    with parent(root, name) as (directory, last):
        os.utime(last, (accessed, modified), dir_fd=directory, follow_symlinks=False)
    return 0


def do_access(root: str, name: str, mode: int) -> int:
    with parent(root, name) as (directory, last):
        if not os.access(last, mode & 0o7, dir_fd=directory, follow_symlinks=False):
            raise OSError(errno.EACCES, "access denied", name)
    return 0


def do_getdir(root: str, name: str, long: bool) -> str:
    """The names in a directory (``long``: each followed by its stat line), one a line."""
    fd = os.open(root, _DIRECTORY) if is_root(root, name) else open_confined(root, name, os.O_RDONLY, 0)
    try:
        lines = []
        for entry in sorted(os.listdir(fd)):
            lines.append(entry)
            if long:
                lines.append(stat_line(os.stat(entry, dir_fd=fd, follow_symlinks=False)))
        return "".join(line + "\n" for line in lines)
    finally:
        os.close(fd)


def do_statfs(root: str, name: str) -> str:
    """type bsize blocks bfree bavail files free (of the file system that holds the scratch directory)."""
    if not is_root(root, name):
        components(root, name)  # (only to refuse a name outside)
    found = os.statvfs(root)
    return " ".join(str(value) for value in (0, found.f_bsize, found.f_blocks, found.f_bfree, found.f_bavail,
                                             found.f_files, found.f_ffree))


def do_readlink(root: str, name: str) -> str:
    with parent(root, name) as (directory, last):
        return os.readlink(last, dir_fd=directory)


def run(function: Any, root: str, *args: Any) -> Any:
    """(for :func:`owners.call_as`: one operation, by name, so only this module's operations can be asked for)"""
    return OPERATIONS[function](root, *args)


OPERATIONS = {"stat": do_stat, "unlink": do_unlink, "mkdir": do_mkdir, "rmdir": do_rmdir, "rmall": do_rmall,
              "rename": do_rename, "chmod": do_chmod, "truncate": do_truncate, "utime": do_utime,
              "access": do_access, "getdir": do_getdir, "statfs": do_statfs, "readlink": do_readlink}
