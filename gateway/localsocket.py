"""The local socket: a Unix-domain socket for clients on this machine, whose user the kernel names (``SO_PEERCRED``).

HTCondor's own tools on the schedd's machine prove who they are through the file system (its FS authentication);
this socket does the same for the gateway: the kernel records the uid of whoever connects, and nothing the client
sends changes it.  It serves the same site as the plain port, under the same rules.

The socket file is made so that nobody else can put something of theirs in its place: its directory must be one
only its owner (root or the gateway's user) can write in, whatever is at the path must be a socket of ours left by
an earlier run (a link or any other file is refused, never followed or replaced), ``bind`` creates the file (it
never follows a link), and its mode comes from the umask at that moment (0666: any local user may connect; who they
are comes from the kernel, not from the file's mode), not from a ``chmod`` that a replaced path could redirect.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path
from typing import Any

from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import Factory

#: the socket's file name in the state directory, by default
LOCAL_SOCKET_NAME = "birdbath.sock"
#: the longest path a Unix socket address holds (``sun_path`` less its NUL)
MAX_SOCKET_PATH = 107
#: what the umask leaves of the socket file's mode while it is bound: read and write for everyone
UMASK_FOR_0666 = 0o111
BACKLOG = 128


class UnsafeSocketPath(ValueError):
    """The local socket cannot be made at this path safely; the message says why."""


def check_path(path: Path, created_with: Path | None = None) -> None:
    """Raise :class:`UnsafeSocketPath` unless the socket can be made at ``path`` safely.

    ``created_with``: a directory the gateway creates itself when it is missing (the state directory)."""
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise UnsafeSocketPath(f"the local socket {path} is longer than a Unix socket address allows "
                               f"({MAX_SOCKET_PATH} bytes): set [gateway] local_socket to a shorter path")
    directory = path.parent
    try:
        info = directory.stat()
    except FileNotFoundError:
        if created_with is not None and directory.absolute() == created_with.absolute():
            return
        raise UnsafeSocketPath(f"cannot make the local socket {path}: {directory} does not exist") from None
    except OSError as exc:
        raise UnsafeSocketPath(f"cannot make the local socket {path}: {exc.strerror} ({directory})") from None
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeSocketPath(f"cannot make the local socket {path}: {directory} is not a directory")
    if info.st_uid not in (0, os.geteuid()) or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeSocketPath(f"refusing to make the local socket in {directory}: other users can write in it "
                               f"(owner uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):04o}), so they could "
                               f"replace the socket; use a directory only root or the gateway's user can write in")
    stale_socket(path)


def stale_socket(path: Path) -> bool:
    """Whether a socket of ours from an earlier run is at ``path`` (False: nothing is there); anything else there,
    a link above all, raises :class:`UnsafeSocketPath`."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISSOCK(info.st_mode) and info.st_uid == os.geteuid():
        return True
    kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a socket of ours"
    raise UnsafeSocketPath(f"refusing to use {path} as the local socket: it is {kind} (uid {info.st_uid}); "
                           f"remove it if it is nobody's")


def _alive(path: Path) -> bool:
    """Whether a process still accepts connections on the socket at ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def listen(reactor: Any, path: Path, factory: Factory) -> IListeningPort:
    """Make the local socket at ``path`` and serve ``factory`` on it (raises UnsafeSocketPath, or OSError).

    A socket left by an earlier run is replaced; one another process still serves is refused."""
    check_path(path)
    if stale_socket(path):
        if _alive(path):
            raise UnsafeSocketPath(f"another process serves the local socket {path}")
        path.unlink()
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        previous = os.umask(UMASK_FOR_0666)
        try:
            listening.bind(os.fsencode(path))
        finally:
            os.umask(previous)
        listening.listen(BACKLOG)
        listening.setblocking(False)  # twisted accepts until EAGAIN: a blocking socket would stop the reactor
        # twisted's port removes the file when it stops listening (unlink: a link there would not be followed)
        return reactor.adoptStreamPort(listening.fileno(), socket.AF_UNIX, factory)
    finally:
        listening.close()
