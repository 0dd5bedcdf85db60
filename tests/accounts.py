"""Real unprivileged accounts for the tests whose point is another user's rights, and a directory they can reach.

A check that one user cannot reach another's files proves something only with two real accounts: these are made
with ``useradd`` (each with a group of its own, no home, no login shell), optionally sharing a group made with
``groupadd``, and removed with ``userdel``/``groupdel`` when the test ends.  Names start with ``bbt`` and a random
part, so tests running side by side never meet.  Needs root (the tests skip otherwise).

A Python program of this checkout run as such an account (a gateway of its own) must import the checkout and its
environment's packages, which a 0700 directory above them (tox's ``.tox`` in a clone under ``/root``, a clone in a
``mktemp -d`` directory) keeps from it: :class:`Reach` bind-mounts them, for that program alone, onto directories
others may traverse, loosening nothing of the machine's.
"""

from __future__ import annotations

import grp
import http.client
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import pytest

from gateway.testing import SOURCE_ROOT

#: an interpreter of this environment's Python version that every account may run (the tests' own may be in a
#: directory of root's, as pyenv's under /root): for jobs, and for programs run as an account with :class:`Reach`
PYTHON = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"

#: useradd's and groupadd's exit statuses when another process holds /etc/passwd or /etc/group: try again
_BUSY = {1, 10}
_TRIES = 20


@dataclass(frozen=True)
class UserAccount:
    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]

    def run(self, *command: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``command`` as this user (its own group and its other groups), failing the test if it fails."""
        return subprocess.run(command, cwd=cwd, user=self.uid, group=self.gid, extra_groups=list(self.groups),
                              env={"PATH": "/usr/bin:/bin", "HOME": "/"}, capture_output=True, text=True,
                              check=True)


def account_tool(*command: str) -> None:
    """Run an account tool, again while another process (a parallel test run) holds the account files."""
    for attempt in range(_TRIES):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return
        if done.returncode not in _BUSY or attempt == _TRIES - 1:
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
        time.sleep(0.1)


class Accounts:
    """Makes accounts and groups for one test and removes them all at its end."""

    def __init__(self) -> None:
        self._users: list[str] = []
        self._groups: list[str] = []

    def group(self) -> grp.struct_group:
        name = f"bbtg{uuid.uuid4().hex[:8]}"
        account_tool("groupadd", name)
        self._groups.append(name)
        return grp.getgrnam(name)

    def user(self, *groups: grp.struct_group) -> UserAccount:
        name = f"bbt{uuid.uuid4().hex[:8]}"
        extra = ["-G", ",".join(group.gr_name for group in groups)] if groups else []
        account_tool("useradd", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", *extra, name)
        self._users.append(name)
        entry = pwd.getpwnam(name)
        return UserAccount(name, entry.pw_uid, entry.pw_gid, tuple(group.gr_gid for group in groups))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.remove()

    def remove(self) -> None:
        for name in reversed(self._users):
            account_tool("userdel", name)  # (its own group goes with it)
        for name in reversed(self._groups):
            account_tool("groupdel", name)


class Reach:
    """This checkout and its environment's packages, where a program run as an account can import them.

    A command line from :meth:`command` runs in a mount namespace of its own (``unshare``), where the source tree
    and each package directory are bind-mounted onto directories under one 0755 temporary directory; then, as the
    account (``setpriv``), it runs with ``PYTHONPATH`` naming those and the source as its working directory.  The
    mounts live only as long as that process and its children (the host's mount table never sees them, even if the
    test dies); every program the command starts inherits them.  Nothing outside the temporary directory changes."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="birdbath-reach-", dir="/tmp"))
        self.directory.chmod(0o755)
        packages = dict.fromkeys(Path(sysconfig.get_paths()[kind]) for kind in ("purelib", "platlib"))
        #: where each directory is seen (mount point), by the directory seen there
        self.mounts = {SOURCE_ROOT: self.directory / "source"} | {
            directory: self.directory / f"packages{index}" for index, directory in enumerate(packages)}
        for mount_point in self.mounts.values():
            mount_point.mkdir()
            mount_point.chmod(0o755)

    @property
    def source(self) -> Path:
        """Where the program sees the checkout (:data:`gateway.testing.SOURCE_ROOT`)."""
        return self.mounts[SOURCE_ROOT]

    def command(self, account: UserAccount, *command: str) -> list[str]:
        """``command`` run as ``account``, seeing the checkout and the packages (first on ``PYTHONPATH``)."""
        pairs = [str(path) for directory, mount_point in self.mounts.items() for path in (directory, mount_point)]
        path = ":".join(str(mount_point) for mount_point in self.mounts.values())
        mount = 'while [ "$1" != -- ]; do mount --bind "$1" "$2" || exit 125; shift 2; done; shift; ' \
                'cd "$0" && exec "$@"'
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, str(self.source), *pairs, "--",
                "setpriv", f"--reuid={account.uid}", f"--regid={account.gid}", "--init-groups",
                "env", f"PYTHONPATH={path}", *command]

    def unreachable(self, account: UserAccount) -> str | None:
        """Why ``account`` cannot run the gateway this way here (None when it can): no mount namespace, no
        interpreter of this version, or packages it still cannot import."""
        if not Path(PYTHON).exists():
            return f"{PYTHON} (this environment's Python version, for any account) is not installed"
        tried = subprocess.run(self.command(account, PYTHON, "-c", "import twisted, classad2, gateway.cli"),
                               capture_output=True, text=True, check=False)
        if tried.returncode == 0:
            return None
        lines = tried.stderr.strip().splitlines()
        return f"another account cannot import this environment's packages through bind mounts in a mount " \
               f"namespace ({', '.join(map(str, self.mounts))}): {lines[-1] if lines else tried.returncode}"

    def remove(self) -> None:
        """Remove the (empty) mount points and their directory, one ``rmdir`` each: never a recursive removal,
        which, were a mount ever seen here, would go on into the checkout and the environment themselves."""
        for mount_point in self.mounts.values():
            mount_point.rmdir()
        self.directory.rmdir()


def run_as(account: UserAccount, work: Callable[[], bytes]) -> bytes:
    """``work()`` run in a forked child as ``account`` (groups, group, then user); what it returns is handed back
    through a pipe.  An exception in the child fails the call with its text.  The interpreter may not be readable by
    other users (it lives under root's home here), so the child switches user after the fork: whatever ``work``
    needs must be imported before."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: switch user, work, hand the answer back, and never return into pytest
        status = 1
        try:
            os.close(read)
            os.setgroups(list(account.groups))
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


def post_as(user: str, port: int, path: str, body: str, content_type: str = "text/xml") -> bytes:
    """A POST to a gateway on loopback made as ``user`` (a real other caller, identified by its socket's owner)."""
    entry = pwd.getpwnam(user)

    def work() -> bytes:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("POST", path, body, {"Content-Type": content_type})
        return connection.getresponse().read()

    return run_as(UserAccount(user, entry.pw_uid, entry.pw_gid, ()), work)


@pytest.fixture
def accounts() -> Iterator[Accounts]:
    if os.geteuid() != 0:
        pytest.skip("making test accounts needs root")
    made = Accounts()
    try:
        yield made
    finally:
        made.remove()


@pytest.fixture
def traversable() -> Iterator[Path]:
    """A fresh directory others may traverse, as a service's state directory is (pytest's tmp_path is root's
    alone), under /tmp: on one file system with what the tests put there."""
    directory = Path(tempfile.mkdtemp(prefix="birdbath-test-", dir="/tmp"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)
