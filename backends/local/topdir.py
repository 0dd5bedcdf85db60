"""The execute directory marked as the top of unrelated directory trees (ext2/3/4's ``T`` attribute, what
``chattr +T`` sets; ``chattr -T`` takes it off), so that the file system spreads the jobs' directories over its
block groups as it spreads directories made at its root.

Without it, every job's directory and files are made in the block group of the execute directory itself.  An ext4
without a journal avoids reusing an inode freed in the last minute (six, while its table block is unwritten), and
looks at each such inode again for every inode it makes in the group: short jobs free a few inodes each, hundreds a
second, so each file a job's start made cost up to a millisecond of the gateway's CPU (measured with ``perf``: a
fifth of the gateway's CPU at about a hundred trivial jobs a second, in ``recently_deleted``).  Spread over the
block groups, that search stays short: a job's three inodes cost 2.8-4 times less.  A journaled ext4 does not look
for recently freed inodes; there the attribute only changes where the directories go, and makes a ``mkdir`` 0.02 ms
dearer (it reads every group's counters to choose one): bench/README.md.  A file system without the attribute
(tmpfs, XFS, btrfs, NFS) refuses it, and is left alone.
"""

from __future__ import annotations

import array
import errno
import fcntl
import os
from pathlib import Path

#: ``FS_IOC_GETFLAGS`` and ``FS_IOC_SETFLAGS`` as x86_64 and aarch64 number them (``<linux/fs.h>``:
#: ``_IOR('f', 1, long)``, ``_IOW('f', 2, long)``; the kernel reads and writes an ``int`` through them).  Where they
#: are numbered otherwise the kernel answers ENOTTY, and nothing is set.
GET_FLAGS, SET_FLAGS = 0x80086601, 0x40086602
#: ``FS_TOPDIR_FL``: the top of directory hierarchies, for the Orlov block allocator
TOPDIR = 0x00020000
#: what a file system without inode attributes, or without this one, answers
UNSUPPORTED = (errno.ENOTTY, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS)


def mark_top(path: Path) -> bool:
    """Mark the directory ``path`` (not a link to one) as the top of unrelated trees, keeping its other attributes;
    whether it is marked now (False: its file system has no such attribute)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        flags = array.array("i", [0])
        fcntl.ioctl(fd, GET_FLAGS, flags, True)
        if not flags[0] & TOPDIR:
            fcntl.ioctl(fd, SET_FLAGS, array.array("i", [flags[0] | TOPDIR]))
    except OSError as exc:
        if exc.errno in UNSUPPORTED:
            return False
        raise
    finally:
        os.close(fd)
    return True
