"""Real unprivileged accounts made by the tests (useradd), and running test code as one of them.

The interpreter may not be readable by other users (it lives under root's home here), so code runs as another user
in a forked child that switches user after fork: whatever it needs must be imported before the fork.
"""

from __future__ import annotations

import os
import pwd
import secrets
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int


@contextmanager
def temporary_account(prefix: str = "bbt") -> Iterator[Account]:
    """A new account with no home and no login shell, removed afterwards (needs root)."""
    name = f"{prefix}{secrets.token_hex(4)}"
    subprocess.run(["useradd", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
                    "--user-group", name], check=True, capture_output=True)
    try:
        entry = pwd.getpwnam(name)
        yield Account(name, entry.pw_uid, entry.pw_gid)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


def run_as(account: Account, work: Callable[[], bytes]) -> bytes:
    """``work()`` run in a forked child as ``account`` (groups, group, then user); what it returns is handed back
    through a pipe.  An exception in the child fails the call with its text."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: switch user, work, hand the answer back, and never return into pytest
        status = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(account.gid)
            os.setuid(account.uid)
            try:
                answer = memoryview(work())
                status = 0
            except BaseException as exc:  # noqa: BLE001 - the parent reports it
                answer = memoryview(f"{type(exc).__name__}: {exc}".encode())
            while answer:
                answer = answer[os.write(write, answer):]
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        answer = stream.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, answer.decode(errors="replace")
    return answer
