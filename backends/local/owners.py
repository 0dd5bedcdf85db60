"""Whose privileges a job's work runs with: the local account of the job's ``Owner``.

A gateway started as root runs every job, and opens every path a job's ad names, as the job's owner, as
condor_starter does: a job can then only reach what its owner could reach by logging in, and no caller can make the
gateway read or write with root's rights.  A gateway started as any other user is a personal scheduler: everything
runs as that user, and the owner is only a name.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import select
import signal
import socket
import stat
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from jobmodel.jobs import HoldCode


class NoAccount(Exception):
    """The job's owner cannot run jobs here; ``reason`` is the hold reason a user reads."""

    code = HoldCode.FAILED_TO_CREATE_PROCESS

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Account:
    """A local user a job runs as (the identity condor_starter would switch to)."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str

    @property
    def is_current(self) -> bool:
        """True when switching is a no-op: we already are this user."""
        return self.uid == os.geteuid()

    def switch(self) -> None:
        """Become this user for good (groups first, the user id last, so nothing can be switched back).

        Only for a child process that is about to run the owner's work: it drops root irrevocably."""
        if self.is_current:
            return
        os.setgroups(list(self.groups))
        os.setresgid(self.gid, self.gid, self.gid)
        os.setresuid(self.uid, self.uid, self.uid)

    def environment(self) -> dict[str, str]:
        """The minimal environment of a login of this user: what work done as the owner sees, never the gateway's."""
        return {"HOME": self.home, "USER": self.name, "LOGNAME": self.name, "PATH": "/usr/local/bin:/usr/bin:/bin"}

    @classmethod
    def current(cls) -> "Account":
        """The gateway's own user (whose account every job runs as when the gateway does not switch)."""
        entry = pwd.getpwuid(os.geteuid())
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid, tuple(sorted(set(os.getgroups()))), entry.pw_dir)

    def as_spec(self) -> dict[str, object]:
        """What a launcher spec carries so a child process can :meth:`switch` without looking the user up."""
        return {"name": self.name, "uid": self.uid, "gid": self.gid, "groups": list(self.groups), "home": self.home}

    @classmethod
    def from_spec(cls, spec: dict[str, object]) -> "Account":
        return cls(str(spec["name"]), int(spec["uid"]), int(spec["gid"]),  # type: ignore[arg-type]
                   tuple(int(g) for g in spec["groups"]), str(spec["home"]))  # type: ignore[union-attr]


#: HTCondor's default ``PASSWD_CACHE_REFRESH``: seconds an owner's account, once looked up, is used without looking
#: it up again
PASSWD_CACHE_REFRESH = 72000.0
#: the local account files: a change to one drops every account kept
ACCOUNT_FILES = ("/etc/passwd", "/etc/group")


class Accounts:
    """Maps job owners to the accounts their jobs run as.

    ``denied`` are owners that never run jobs here (a job of theirs is held, as a starter refuses it), e.g.
    ``["root"]`` for HTCondor's rule that no job runs as root.  ``switching`` says whether jobs run as their owners:
    by default when the gateway is root, as it must be to switch; ``False`` makes a root gateway a personal scheduler
    too (every job runs as the gateway's user), which tests of that mode use."""

    def __init__(self, denied: Iterable[str] = (), *, switching: bool | None = None,
                 cache_refresh: float = PASSWD_CACHE_REFRESH, clock: Callable[[], float] = time.monotonic,
                 account_files: Iterable[str] = ACCOUNT_FILES) -> None:
        root = os.geteuid() == 0
        if switching and not root:
            raise ValueError("jobs can only run as their owners when the gateway runs as root")
        self.denied = frozenset(denied)
        self.switching = root if switching is None else switching
        self._refresh = cache_refresh
        self._clock = clock
        self._files = tuple(account_files)
        #: by owner: until when, the account files' stamps when it was looked up, and the account
        self._kept: dict[str, tuple[float, Stamps, Account]] = {}

    def of(self, owner: str | None) -> Account | None:
        """The account ``owner``'s jobs run as; None when the gateway is not root (everything runs as the gateway's
        user).  Raises NoAccount when the owner may not, or cannot, run jobs here."""
        if owner in self.denied:
            raise NoAccount(f"Jobs of {owner!r} may not run on this gateway (denied_owners)")
        if not self.switching:
            return None
        if not owner:
            raise NoAccount("The job has no Owner to run as")
        return self._kept_account(owner)

    def _kept_account(self, owner: str) -> Account:
        """The owner's account as last looked up, kept ``cache_refresh`` seconds (HTCondor's
        ``PASSWD_CACHE_REFRESH``: every job's start and every user-log event asks, and a lookup reads the account
        files, or asks a directory server, each time) and dropped at once when a local account file changes
        (``useradd``, ``usermod``, ``gpasswd``...).  An owner found to have no account is not kept: an account made
        for it is used at once."""
        files = _stamps(self._files)  # (before the lookup: one that overlaps a change is not used past it)
        now = self._clock()
        kept = self._kept.get(owner)
        if kept is not None and now < kept[0] and kept[1] == files:
            return kept[2]
        account = _look_up(owner)
        self._kept[owner] = now + self._refresh, files, account
        return account


def _look_up(owner: str) -> Account:
    """The local account of ``owner`` (raises NoAccount when there is none, or it is another name for root)."""
    try:
        entry = pwd.getpwnam(owner)
    except KeyError:
        raise NoAccount(f"The job's owner {owner!r} has no local account on this machine") from None
    if entry.pw_uid == 0 and owner != "root":  # another name of root's: root's jobs are root's alone
        raise NoAccount(f"The job's owner {owner!r} is another name for root (uid 0); only root's own jobs "
                        f"run as root")
    groups = set(os.getgrouplist(owner, entry.pw_gid))  # what initgroups would set, from every group source
    return Account(owner, entry.pw_uid, entry.pw_gid, tuple(sorted(groups)), entry.pw_dir)


Stamps = tuple[tuple[int, int, int] | None, ...]


def _stamps(paths: Iterable[str]) -> Stamps:
    """What tells a file changed: its inode (the account tools replace the file), size and change time (which, unlike
    the modification time, no one can set back)."""
    stamps: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            status = os.stat(path)
        except OSError:
            stamps.append(None)
            continue
        stamps.append((status.st_ino, status.st_size, status.st_ctime_ns))
    return tuple(stamps)


def to_switch(account: Account | None) -> Account | None:
    """The account work must switch to: None when there is none, or when it is the current user already."""
    return None if account is None or account.is_current else account


def open_as(account: Account | None, path: str | os.PathLike[str], flags: int, mode: int = 0o644,
            opener: Callable[[Any, int, int], int] = os.open) -> int:
    """``os.open`` (or ``opener``, e.g. one confined to a directory) with the rights of ``account`` (None or the
    current user: a plain open).

    The open happens in a forked child that has switched to the account (fork, not exec: the interpreter may live
    where the owner cannot read); the descriptor comes back over a socket pair.  Errors are raised here as the
    OSError the owner's own open would have raised."""
    account = to_switch(account)
    if account is None:
        return opener(path, flags, mode)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child, which leaves through os._exit
            _open_in_child(account, theirs, path, flags, mode, opener)
        theirs.close()
        message, fds, _, _ = socket.recv_fds(ours, 64, 1)
        os.waitpid(child, 0)
    if fds:
        return fds[0]
    number = int(message or b"%d" % errno.EIO)  # nothing received: the child died before it could say
    raise OSError(number, os.strerror(number), os.fspath(path))


def open_regular_as(account: Account | None, path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """:func:`open_as` for a file a job's ad names: opened without blocking (a FIFO the owner made cannot stall the
    gateway), kept only when it is a regular file (else OSError EINVAL), then returned in blocking mode."""
    fd = open_as(account, path, flags | os.O_NONBLOCK, mode)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_in_child(account: Account, channel: socket.socket, path: str | os.PathLike[str], flags: int,
                   mode: int, opener: Callable[[Any, int, int], int]) -> None:  # pragma: no cover - child process
    status = 0
    try:
        account.switch()
        fd = opener(path, flags, mode)
        socket.send_fds(channel, [b"0"], [fd])
    except OSError as exc:
        try:
            channel.sendall(b"%d" % (exc.errno or errno.EIO))
        except OSError:
            status = 1
    except BaseException:
        status = 1
    os._exit(status)


def call_as(account: Account | None, function: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
    """``function(*args)`` with the rights of ``account`` (None or the current user: a plain call).

    For work that is more than one open: removing a file, parsing a description that may include other files or run
    commands.  A forked child (in a process group of its own) switches to the account, with the account's own
    minimal environment instead of the gateway's, calls ``function`` and sends back its result, which must be
    JSON-encodable.  An OSError it raises is raised here as the same OSError, anything else as RuntimeError with its
    message.  After ``timeout`` seconds the child's process group is killed and TimeoutError raised: a pipe or a
    command that never ends must not hang the gateway."""
    account = to_switch(account)
    if account is None:
        return function(*args)
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child, which leaves through os._exit
        os.close(reading)
        _call_in_child(account, writing, function, args)
    os.close(writing)
    try:
        data = _read_until_closed(reading, timeout)
    except TimeoutError:
        _kill_group(child)
        raise TimeoutError(errno.ETIMEDOUT, f"still running as {account.name} after {timeout} s") from None
    finally:
        os.close(reading)
        os.waitpid(child, 0)
    try:
        answer = json.loads(data)
    except ValueError:
        raise RuntimeError(f"the process working as {account.name} died before it answered") from None
    if "oserror" in answer:
        number, text, filename = answer["oserror"]
        raise OSError(number, text, filename) if filename is not None else OSError(number, text)
    if "error" in answer:
        raise RuntimeError(answer["error"])
    return answer["result"]


def _call_in_child(account: Account, channel: int, function: Callable[..., Any],
                   args: tuple[Any, ...]) -> None:  # pragma: no cover - child process
    status = 0
    try:
        os.setpgid(0, 0)
        account.switch()
        os.environ.clear()
        os.environ.update(account.environment())
        try:
            answer: dict[str, Any] = {"result": function(*args)}
        except OSError as exc:
            answer = {"oserror": [exc.errno or errno.EIO, exc.strerror or str(exc),
                                  None if exc.filename is None else os.fsdecode(exc.filename)]}
        except Exception as exc:
            answer = {"error": str(exc) or type(exc).__name__}
        data = json.dumps(answer).encode()
        while data:
            data = data[os.write(channel, data):]
    except BaseException:
        status = 1
    os._exit(status)


def _read_until_closed(fd: int, timeout: float | None) -> bytes:
    """Everything written to ``fd`` until its writer closes it; TimeoutError when that takes longer than ``timeout``."""
    deadline = None if timeout is None else time.monotonic() + timeout
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    chunks: list[bytes] = []
    while True:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not poller.poll(None if left is None else left * 1000):
            raise TimeoutError
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _kill_group(child: int) -> None:
    """Kill a :func:`call_as` child and whatever it started (it may not have made its own group yet)."""
    for kill, target in ((os.killpg, child), (os.kill, child)):
        try:
            kill(target, signal.SIGKILL)
            return
        except ProcessLookupError:
            continue
