"""The state directory's private parts are the gateway's alone, as HTCondor keeps its job queue log: the queue
(``queue.sqlite3`` and SQLite's ``-wal`` and ``-shm``) 0600, the trash and the staging areas 0700, each job's spool
0700 and its ``.job.ad`` the job's own 0600, while the jobs that run as their owners still reach
their spool and execute directories.  A state directory made before is tightened when the gateway starts.  Another
real account tries to read them."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import zeep_client
from tests.test_execution import fetch, status_is, submit, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="jobs run as their owners only when the gateway is root")

CONFIG = "[backends.local]\nslots = 1\n"
QUEUE_FILES = ("queue.sqlite3", "queue.sqlite3-wal", "queue.sqlite3-shm")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def refused(account, *command: str) -> bool:
    """True when ``command`` run as ``account`` fails for want of permission."""
    try:
        account.run(*command)
    except subprocess.CalledProcessError as exc:
        return "Permission denied" in exc.stderr
    return False


def test_the_private_parts_are_private_and_jobs_still_reach_theirs(accounts, traversable, start_gateway):
    owner, other = accounts.user(), accounts.user()
    state = traversable / "state"
    gateway = start_gateway(CONFIG, state_dir=state)
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    (key,) = submit(schedd, files={"in.txt": b"input\n"}, Owner=owner.name, Cmd="/bin/sh", Out="out.txt",
                    Arguments="-c 'cat in.txt; stat -c \"%U %a\" \"$_CONDOR_JOB_AD\" \"$_CONDOR_MACHINE_AD\"; "
                              "grep -c \"^Owner = \" \"$_CONDOR_JOB_AD\"; grep -c \"^MyType = \" \"$_CONDOR_MACHINE_AD\"'")
    assert wait_for(schedd, key, status_is(4))["ExitCode"] == "0"
    # the job ad is the job's alone; the machine ad is the slot's, the gateway's and public (as condor_status shows it)
    gateway_user = pwd.getpwuid(os.geteuid()).pw_name
    assert fetch(schedd, key, "out.txt") == f"input\n{owner.name} 600\n{gateway_user} 644\n1\n1\n".encode()
    spool = state / "spool" / str(key[0]) / str(key[1]) / f"cluster{key[0]}.proc{key[1]}.subproc0"
    assert mode(spool) == 0o700 and spool.stat().st_uid == owner.uid
    assert {name: mode(state / name) for name in (*QUEUE_FILES, "trash", "staging")} == {
        **dict.fromkeys(QUEUE_FILES, 0o600), "trash": 0o700, "staging": 0o700}
    for path in (*(state / name for name in QUEUE_FILES), spool / "in.txt"):
        assert refused(other, "cat", str(path)), path
    for directory in ("trash", "staging"):
        assert refused(other, "ls", str(state / directory)), directory


def test_an_older_state_directory_is_tightened_at_start(accounts, traversable, start_gateway):
    other = accounts.user()
    state = traversable / "state"
    start_gateway(CONFIG, state_dir=state).kill()  # (killed: the -wal and -shm files stay, as after a crash)
    for name in QUEUE_FILES:
        (state / name).chmod(0o644)  # as an older gateway left them
    (state / "trash").chmod(0o755)
    assert not refused(other, "cat", str(state / "queue.sqlite3"))
    start_gateway(CONFIG, state_dir=state)
    assert {name: mode(state / name) for name in (*QUEUE_FILES, "trash")} == {**dict.fromkeys(QUEUE_FILES, 0o600),
                                                                              "trash": 0o700}
    assert refused(other, "cat", str(state / "queue.sqlite3"))
