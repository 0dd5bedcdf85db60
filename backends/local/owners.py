"""Whose privileges a job's work runs with: the local account of the job's ``Owner``.

A gateway started as root runs every job, and opens every path a job's ad names, as the job's owner, as
condor_starter does: a job can then only reach what its owner could reach by logging in, and no caller can make the
gateway read or write with root's rights.  A gateway started as any other user is a personal scheduler: everything
runs as that user, and the owner is only a name.
"""

from __future__ import annotations

import grp
import os
import pwd
import socket
from dataclasses import dataclass
from typing import Iterable

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

    def as_spec(self) -> dict[str, object]:
        """What a launcher spec carries so a child process can :meth:`switch` without looking the user up."""
        return {"name": self.name, "uid": self.uid, "gid": self.gid, "groups": list(self.groups), "home": self.home}

    @classmethod
    def from_spec(cls, spec: dict[str, object]) -> "Account":
        return cls(str(spec["name"]), int(spec["uid"]), int(spec["gid"]),  # type: ignore[arg-type]
                   tuple(int(g) for g in spec["groups"]), str(spec["home"]))  # type: ignore[union-attr]


class Accounts:
    """Maps job owners to the accounts their jobs run as.

    ``denied`` are owners that never run jobs here (a job of theirs is held, as a starter refuses it), e.g.
    ``["root"]`` for HTCondor's rule that no job runs as root."""

    def __init__(self, denied: Iterable[str] = ()) -> None:
        self.denied = frozenset(denied)
        self.switching = os.geteuid() == 0

    def of(self, owner: str | None) -> Account | None:
        """The account ``owner``'s jobs run as; None when the gateway is not root (everything runs as the gateway's
        user).  Raises NoAccount when the owner may not, or cannot, run jobs here."""
        if owner in self.denied:
            raise NoAccount(f"Jobs of {owner!r} may not run on this gateway (denied_owners)")
        if not self.switching:
            return None
        if not owner:
            raise NoAccount("The job has no Owner to run as")
        try:
            entry = pwd.getpwnam(owner)
        except KeyError:
            raise NoAccount(f"The job's owner {owner!r} has no local account on this machine") from None
        groups = {entry.pw_gid} | {group.gr_gid for group in grp.getgrall() if owner in group.gr_mem}
        return Account(owner, entry.pw_uid, entry.pw_gid, tuple(sorted(groups)), entry.pw_dir)


def open_as(account: Account | None, path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """``os.open`` with the rights of ``account`` (None or the current user: a plain open).

    The open happens in a forked child that has switched to the account (fork, not exec: the interpreter may live
    where the owner cannot read); the descriptor comes back over a socket pair.  Errors are raised here as the
    OSError the owner's own open would have raised."""
    if account is None or account.is_current:
        return os.open(path, flags, mode)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child, which leaves through os._exit
            _open_in_child(account, theirs, path, flags, mode)
        theirs.close()
        message, fds, _, _ = socket.recv_fds(ours, 64, 1)
        os.waitpid(child, 0)
    if fds:
        return fds[0]
    errno = int(message or b"5")  # nothing received: the child died before it could say (EIO)
    raise OSError(errno, os.strerror(errno), os.fspath(path))


def _open_in_child(account: Account, channel: socket.socket, path: str | os.PathLike[str], flags: int,
                   mode: int) -> None:  # pragma: no cover - child process
    status = 0
    try:
        account.switch()
        fd = os.open(path, flags, mode)
        socket.send_fds(channel, [b"0"], [fd])
    except OSError as exc:
        try:
            channel.sendall(b"%d" % (exc.errno or 5))
        except OSError:
            status = 1
    except BaseException:
        status = 1
    os._exit(status)
