"""Connections passed by condor_shared_port, which owns the host's one open port (9618).

A client opens a TCP connection to condor_shared_port and sends SHARED_PORT_CONNECT with the id of the daemon it
wants (``SharedPortClient::sendSharedPortID``).  condor_shared_port connects to the Unix socket named that id in
the daemon socket directory (``DAEMON_SOCKET_DIR``) and, on that connection (``SharedPortState`` in
``shared_port_client.cpp``), sends SHARED_PORT_PASS_SOCK as a CEDAR message, then one byte with the client's
socket attached as SCM_RIGHTS ancillary data; it expects no answer and closes its end.  The daemon
(``SharedPortEndpoint::DoListenerAccept`` and ``ReceiveSocket``) reads the command, then the byte and the
descriptor, and serves the client on it as if it had accepted the connection itself: the socket's peer is the
real client, its local address the shared port's.  What the client sent after its connect request (here: HTTP)
is still unread on it.  Newer condor_shared_port versions can also pass plain HTTP connections unread
(``SHARED_PORT_HTTP_FORWARDING_ID``); they arrive the same way.

The gateway hands the descriptor to Twisted (``adoptStreamConnection``) with the plain port's site, so a passed
connection is served exactly as one accepted on the plain port: same operations, same host checks, and a
loopback client is identified by its own socket's owner.
"""

from __future__ import annotations

import os
import pwd
import re
import socket
import stat
from pathlib import Path
from typing import Any, Callable

from twisted.internet.interfaces import IFileDescriptorReceiver, IListeningPort
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from gateway.daemon import cedar

log = Logger(namespace="birdbath.daemon")

#: HTCondor's rule for shared port ids (``SharedPortClient::SharedPortIdIsValid``): no path characters
VALID_ID = re.compile(r"[A-Za-z0-9._-]+")
#: the longest path a Unix socket address holds (``sun_path`` less its NUL)
MAX_SOCKET_PATH = 107
#: seconds condor_shared_port gets to pass the socket once connected (DaemonCore reads with a time-out too)
PASS_TIMEOUT = 20.0


def check_id(shared_port_id: str) -> None:
    if not VALID_ID.fullmatch(shared_port_id):
        raise ValueError(f"shared_port_id {shared_port_id!r} may hold only letters, digits, '.', '-' and '_'")


class UnsafeSocketPlace(ValueError):
    """The named socket's directory could be changed by someone the gateway does not trust, or its name is taken."""


def trusted_owners() -> frozenset[int]:
    """Who may own the directories on the way to the named socket: root, the gateway's user and HTCondor's own
    account (``condor``, which makes ``$(LOCK)/daemon_sock`` on a pool's hosts)."""
    owners = {0, os.geteuid()}
    try:
        owners.add(pwd.getpwnam("condor").pw_uid)
    except KeyError:
        pass
    return frozenset(owners)


def check_directory(directory: Path) -> None:
    """Raise UnsafeSocketPlace unless only trusted users (:func:`trusted_owners`) can change what ``directory`` holds:
    every name on the way to it (a symbolic link included) and every directory it leads to must belong to one of
    them, and none may be writable by every user unless it has the sticky bit (as /tmp has: there nobody can remove
    or rename another's entry).  Parts that do not exist yet are made by the gateway."""
    trusted = trusted_owners()
    written = Path(os.path.abspath(directory))
    for path, status in [*_existing(written, os.lstat), *_existing(Path(os.path.realpath(written)), os.stat)]:
        if status.st_uid not in trusted:
            raise UnsafeSocketPlace(f"daemon_socket_dir {directory} is not safe: {path} belongs to uid "
                                  f"{status.st_uid}, who could replace the named socket (use a directory of "
                                  f"root's, the gateway's user's or condor's)")
        if stat.S_ISDIR(status.st_mode) and status.st_mode & stat.S_IWOTH and not status.st_mode & stat.S_ISVTX:
            raise UnsafeSocketPlace(f"daemon_socket_dir {directory} is not safe: every user may write in {path} "
                                  f"(mode {stat.S_IMODE(status.st_mode):04o}, no sticky bit) and replace what "
                                  f"it holds (chmod o-w or +t, or use another directory)")


def _existing(path: Path, look: Callable[[Path], os.stat_result]) -> list[tuple[Path, os.stat_result]]:
    """``path`` and its parents, from ``/`` down, as ``look`` (lstat or stat) sees them, up to the first missing."""
    found = []
    for part in (*reversed(path.parents), path):
        try:
            found.append((part, look(part)))
        except FileNotFoundError:
            break
    return found


def socket_path(directory: Path, shared_port_id: str) -> Path:
    """The named socket condor_shared_port connects to for ``shared_port_id`` (raises ValueError)."""
    check_id(shared_port_id)
    path = directory / shared_port_id
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise ValueError(f"the named socket {path} is longer than a Unix socket address allows "
                         f"({MAX_SOCKET_PATH} bytes): choose a shorter daemon_socket_dir")
    return path


@implementer(IFileDescriptorReceiver)
class PassedSocketReceiver(Protocol):
    """One connection from condor_shared_port: SHARED_PORT_PASS_SOCK, then a byte and the client's socket."""

    def __init__(self, site: Factory, reactor: Any) -> None:
        self._site = site
        self._reactor = reactor
        self._buffer = b""
        self._command_read = False
        self._descriptors: list[int] = []
        self._timeout: Any = None

    def connectionMade(self) -> None:
        self._timeout = self._reactor.callLater(PASS_TIMEOUT, self._give_up, "no socket passed in time")

    def fileDescriptorReceived(self, descriptor: int) -> None:
        self._descriptors.append(descriptor)

    def dataReceived(self, data: bytes) -> None:
        self._buffer += data
        try:
            if not self._command_read and not self._read_command():
                return
        except cedar.CedarError as exc:
            self._give_up(str(exc))
            return
        if self._buffer and self._descriptors:
            self._adopt(self._descriptors.pop(0))
            self._finish()
        elif self._buffer:
            self._give_up("data without a socket attached")

    def _read_command(self) -> bool:
        """Read SHARED_PORT_PASS_SOCK off the buffer: True once read, False while incomplete."""
        read = cedar.read_packet(self._buffer)
        if read is None:
            return False
        packet, self._buffer = read
        command, _ = cedar.read_integer(packet.payload)
        if not packet.last or command != cedar.SHARED_PORT_PASS_SOCK:
            raise cedar.CedarError(f"unexpected command {command} on the named socket "
                                   f"(expected SHARED_PORT_PASS_SOCK, {cedar.SHARED_PORT_PASS_SOCK})")
        self._command_read = True
        return True

    def _adopt(self, descriptor: int) -> None:
        """Serve the passed socket with the site; our copy of its descriptor is closed either way."""
        passed = socket.socket(fileno=descriptor)
        try:
            if passed.type != socket.SOCK_STREAM or passed.family not in (socket.AF_INET, socket.AF_INET6):
                log.warn("condor_shared_port passed a socket that is not a TCP connection "
                         "(family {family}, type {type}); closed", family=passed.family, type=passed.type)
                return
            self._reactor.adoptStreamConnection(passed.fileno(), passed.family, self._site)
            log.debug("serving a connection from {peer} passed by condor_shared_port", peer=_peer(passed))
        except OSError as exc:  # the client went away while its socket was being passed
            log.info("a connection passed by condor_shared_port could not be served: {reason}", reason=exc)
        finally:
            passed.close()

    def _give_up(self, reason: str) -> None:
        log.warn("dropped a connection on the shared port's named socket: {reason}", reason=reason)
        self._finish()

    def _finish(self) -> None:
        if self._timeout is not None and self._timeout.active():
            self._timeout.cancel()
        self._timeout = None
        self._close_descriptors()
        self.transport.loseConnection()

    def _close_descriptors(self) -> None:
        for descriptor in self._descriptors:
            os.close(descriptor)
        self._descriptors.clear()

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        if self._timeout is not None and self._timeout.active():
            self._timeout.cancel()
        self._close_descriptors()


def _peer(passed: socket.socket) -> str:
    try:
        host, port = passed.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"


class PassedSocketFactory(Factory):
    noisy = False

    def __init__(self, site: Factory, reactor: Any) -> None:
        self.site = site
        self.reactor = reactor

    def buildProtocol(self, addr: Any) -> PassedSocketReceiver:
        return PassedSocketReceiver(self.site, self.reactor)


def listen(reactor: Any, path: Path, site: Factory) -> IListeningPort:
    """Listen on the named socket at ``path`` for connections condor_shared_port passes, served by ``site``.

    The directory must be safe (:func:`check_directory`; it is created if missing).  A socket left at that path by
    a gateway that died is removed first, as SharedPortEndpoint does, and so is a symbolic link (never followed:
    in a directory with the sticky bit anyone may leave one, to keep the gateway from starting); anything else
    there is somebody's file, and the start is refused.  ``bind`` creates the socket without following a link at
    its name, and in a safe directory nobody else can replace it before it is made private (mode 0600: only its
    owner, and condor_shared_port as root, may connect)."""
    check_directory(path.parent)
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    try:
        status = path.lstat()
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISSOCK(status.st_mode):
            log.warn("removing the named socket {path} left by an earlier process", path=path)
        elif stat.S_ISLNK(status.st_mode):
            log.warn("removing the symbolic link {path} (uid {uid}) where the named socket goes", path=path,
                     uid=status.st_uid)
        else:
            raise UnsafeSocketPlace(f"{path} exists and is not a socket: remove it, or choose another shared_port_id")
        path.unlink()
    return reactor.listenUNIX(str(path), PassedSocketFactory(site, reactor), mode=0o600)
