"""The execute directory marked as the top of unrelated directory trees (ext2/3/4's ``T`` attribute, what
``chattr +T`` sets), so that the file system spreads the jobs' directories over its block groups as it spreads
directories made at its root.

Without it, every job's directory and files are made in the block group of the execute directory itself.  On an
ext4 without a journal the kernel will not reuse an inode freed in the last minute (five, while its table block is
unwritten), and looks at each such inode again for every inode it makes: short jobs free a few inodes each, hundreds
a second, so each file a job's start made cost about a millisecond of the gateway's CPU (measured with ``perf``: a
fifth of the gateway's CPU at about a hundred trivial jobs a second, all of it in ``recently_deleted``).  Spread over
the block groups, that search stays short.  On a journaled ext4 the attribute changes where the directories go and
nothing else; a file system without it (tmpfs, XFS, btrfs) refuses the request, which is then left alone.
"""

from __future__ import annotations

import array
import errno
import fcntl
import os
from pathlib import Path

#: ``FS_IOC_GETFLAGS`` and ``FS_IOC_SETFLAGS`` (``<linux/fs.h>``: ``_IOR('f', 1, long)``, ``_IOW('f', 2, long)``;
#: the kernel reads and writes an ``int`` through them)
GET_FLAGS, SET_FLAGS = 0x80086601, 0x40086602
#: ``FS_TOPDIR_FL``: the top of directory hierarchies, for the Orlov block allocator
TOPDIR = 0x00020000
#: what a file system without inode flags (or without this one) answers
UNSUPPORTED = (errno.ENOTTY, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS)


def flags(path: Path) -> int | None:
    """The inode flags of ``path`` (None: its file system has none)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        value = array.array("i", [0])
        try:
            fcntl.ioctl(fd, GET_FLAGS, value, True)
        except OSError as exc:
            if exc.errno in UNSUPPORTED:
                return None
            raise
        return value[0]
    finally:
        os.close(fd)


def mark_top(path: Path) -> bool:
    """Mark the directory ``path`` as the top of unrelated trees; whether it is marked now (False: its file system
    has no such attribute)."""
    current = flags(path)
    if current is None:
        return False
    if current & TOPDIR:
        return True
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, SET_FLAGS, array.array("i", [current | TOPDIR]))
    except OSError as exc:
        if exc.errno in UNSUPPORTED:
            return False
        raise
    finally:
        os.close(fd)
    return True
