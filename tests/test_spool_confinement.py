"""Spool reads are confined to the regular files of the job's own spool directory (backends/spool.py, which both
backends use): a job that writes its spool may leave links, FIFOs or hard links there, and getFile, listSpool,
fetch and the staging MD5 must neither follow, block on nor serve them."""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import stat
import tempfile
import threading
from pathlib import Path

import pytest

from backends.interface import BackendError
from backends.spool import Spool

KEY = (7, 0)


@pytest.fixture
def spool(tmp_path) -> Spool:
    spool = Spool(tmp_path / "spool")
    spool.create(*KEY)
    return spool


@pytest.fixture
def secret(tmp_path) -> Path:
    path = tmp_path / "secret"
    path.write_bytes(b"the secret\n")
    return path


def directory(spool: Spool) -> Path:
    return spool.directory(*KEY)


def test_regular_files_are_read_and_listed(spool):
    (directory(spool) / "data").write_bytes(b"0123456789")
    assert spool.read_job_file(*KEY, "data", 3, 4) == (10, b"3456")
    assert spool.read_job_file(*KEY, "data", 8, 1 << 40) == (10, b"89")  # no buffer larger than the file
    assert spool.read_job_file(*KEY, "data", 20, 5) == (10, b"")
    assert spool.read(*KEY, "data", 0, 3) == b"012"
    assert spool.md5(*KEY, "data") == hashlib.md5(b"0123456789").hexdigest()
    assert [(info.name, info.size) for info in spool.list(*KEY)] == [("data", 10)]


def test_a_symbolic_link_is_never_followed(spool, secret):
    (directory(spool) / "leak").symlink_to(secret)
    for read in (lambda: spool.read(*KEY, "leak", 0, 100), lambda: spool.read_job_file(*KEY, "leak", 0, 100),
                 lambda: spool.md5(*KEY, "leak")):
        with pytest.raises(BackendError, match="symbolic link"):
            read()
    assert spool.list(*KEY) == []


def test_a_fifo_does_not_stall_a_read(spool):
    os.mkfifo(directory(spool) / "fifo")
    outcome: list[object] = []

    def read() -> None:
        try:
            outcome.append(spool.read_job_file(*KEY, "fifo", 0, 100))
        except BackendError as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # free the thread before failing: open a writer so its open returns
        os.close(os.open(directory(spool) / "fifo", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO in the spool blocked")
    assert isinstance(outcome[0], BackendError) and "not a regular file" in str(outcome[0])
    assert spool.list(*KEY) == []


def test_directories_and_other_entries_are_not_files(spool):
    (directory(spool) / "folder").mkdir()
    with pytest.raises(BackendError, match="not a regular file"):
        spool.read(*KEY, "folder", 0, 1)
    assert spool.list(*KEY) == []


@pytest.mark.parametrize("name", ["/etc/passwd", "../secret", "a/b", "", ".", ".."])
def test_only_plain_names_are_read(spool, name):
    with pytest.raises(BackendError, match="plain file name"):
        spool.read_job_file(*KEY, name, 0, 100)


def test_a_spool_directory_swapped_for_a_link_is_not_followed(spool, tmp_path, secret):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "data").write_bytes(b"not the job's")
    shutil.rmtree(directory(spool))
    directory(spool).symlink_to(elsewhere)
    with pytest.raises(BackendError, match="spool directory"):
        spool.read(*KEY, "data", 0, 100)
    with pytest.raises(BackendError, match="not actually a directory"):
        spool.list(*KEY)


def test_a_missing_spool_lists_nothing_and_reads_fail(spool):
    assert spool.list(99, 0) == []
    with pytest.raises(BackendError):
        spool.read(99, 0, "data", 0, 1)


# -- a spool that belongs to the job's owner ---------------------------------------------------------------------
@pytest.fixture
def owned(tmp_path):
    """A spool whose job directory was given to nobody, under a directory others may traverse."""
    if os.geteuid() != 0:
        pytest.skip("giving a spool to another user needs root")
    root = Path(tempfile.mkdtemp(prefix="spool-", dir="/tmp"))
    root.chmod(0o755)
    spool = Spool(root / "spool")
    spool.create(*KEY)
    (directory(spool) / "staged").write_bytes(b"input")
    nobody = pwd.getpwnam("nobody")
    spool.give(*KEY, nobody.pw_uid, nobody.pw_gid)
    yield spool, nobody
    shutil.rmtree(root, ignore_errors=True)


def test_a_hard_link_to_a_file_the_owner_cannot_read_is_refused(owned, tmp_path):
    spool, _ = owned
    private = directory(spool).parent / "private"  # the gateway's (root's), on the spool's file system
    private.write_bytes(b"root's secret\n")
    private.chmod(0o600)
    os.link(private, directory(spool) / "hard")  # what a job could do where hard links are not protected
    with pytest.raises(BackendError, match="not a regular file of the job"):
        spool.read(*KEY, "hard", 0, 100)
    assert [info.name for info in spool.list(*KEY)] == ["staged"]
    assert spool.read(*KEY, "staged", 0, 100) == b"input"  # the owner's own file (given with the spool)
    os.link(directory(spool) / "staged", directory(spool) / "again")  # the owner's own file, twice: a served file
    for name in ("again", "staged"):  # has one name, this one, so it cannot have come from anywhere else
        with pytest.raises(BackendError, match="not a regular file of the job"):
            spool.read(*KEY, name, 0, 100)


def test_giving_a_spool_changes_no_link_target(owned, secret):
    spool, nobody = owned
    assert (directory(spool) / "staged").stat().st_uid == nobody.pw_uid
    (directory(spool) / "link").symlink_to(secret)
    spool.give(*KEY, nobody.pw_uid, nobody.pw_gid)  # again, now with a link in it
    assert secret.stat().st_uid == os.geteuid() and (directory(spool) / "link").lstat().st_uid == 0


# -- another account's file, renamed in; levels that are not the gateway's --------------------------------------
def shared_secret(accounts, traversable: Path):
    """Two accounts in one group, a directory of that group's, and the victim's 0600 file in it."""
    group = accounts.group()
    victim, thief = accounts.user(group), accounts.user(group)
    common = traversable / "common"
    common.mkdir()
    os.chown(common, 0, group.gr_gid)
    common.chmod(0o2770)  # a group's shared directory: its members may rename each other's files out of it
    victim.run("sh", "-c", f"umask 077; echo 'the victim secret' > {common}/private")
    return victim, thief, common / "private"


def test_another_accounts_private_file_renamed_into_a_spool_is_refused(accounts, traversable):
    victim, thief, private = shared_secret(accounts, traversable)
    spool = Spool(traversable / "spool")
    spool.create(*KEY)
    spool.give(*KEY, thief.uid, thief.gid)
    thief.run("mv", str(private), str(directory(spool) / "private"))  # what a job of the thief's can do
    thief.run("sh", "-c", f"echo mine > {directory(spool)}/mine")
    assert (directory(spool) / "private").stat().st_uid == victim.uid  # one link, another account's, 0600
    for read in (lambda: spool.read(*KEY, "private", 0, 100), lambda: spool.read_job_file(*KEY, "private", 0, 100),
                 lambda: spool.md5(*KEY, "private")):
        with pytest.raises(BackendError, match="not a regular file of the job"):
            read()
    assert [info.name for info in spool.list(*KEY)] == ["mine"]
    assert spool.read_job_file(*KEY, "mine", 0, 100) == (5, b"mine\n")  # the owner's own file is served


def test_a_gateway_file_in_a_spool_it_gave_away_is_refused(owned):
    """Once the directory is the owner's, the gateway writes nothing there: a root file in it was moved in."""
    spool, _ = owned
    (directory(spool) / "roots").write_bytes(b"root's\n")
    with pytest.raises(BackendError, match="not a regular file of the job"):
        spool.read(*KEY, "roots", 0, 100)
    assert spool.read(*KEY, "staged", 0, 100) == b"input"


def test_a_level_above_a_job_swapped_for_a_link_is_not_followed(spool, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "0" / "cluster7.proc0.subproc0").mkdir(parents=True)
    (elsewhere / "0" / "cluster7.proc0.subproc0" / "data").write_bytes(b"not the job's")
    level = spool.root / "7"
    shutil.rmtree(level)
    level.symlink_to(elsewhere)
    with pytest.raises(BackendError, match="spool directory of job 7.0"):
        spool.read(*KEY, "data", 0, 100)


def test_a_level_others_may_write_is_refused(spool):
    (directory(spool) / "data").write_bytes(b"data")
    (spool.root / "7").chmod(0o777)  # anyone could swap the job's directory in it for another
    with pytest.raises(BackendError, match="not the gateway's alone"):
        spool.read(*KEY, "data", 0, 100)
    (spool.root / "7").chmod(0o755)
    assert spool.read(*KEY, "data", 0, 100) == b"data"


def test_a_new_spool_directory_is_private_and_its_root_traversable(tmp_path):
    spool = Spool(tmp_path / "spool")
    spool.create(*KEY)
    assert stat.S_IMODE(directory(spool).stat().st_mode) == 0o700
    assert stat.S_IMODE(spool.root.stat().st_mode) == 0o755


@pytest.mark.skipif(os.geteuid() != 0, reason="jobs run as their owners only when the gateway is root")
def test_a_gateway_serves_a_jobs_own_files_but_not_another_accounts_renamed_in(accounts, traversable,
                                                                                  start_gateway):
    """A job of the thief's moves the victim's 0600 file from their group's directory into its spool: getFile,
    listSpool and the submission API's fetch refuse it, and serve the job's own output."""
    import json
    import urllib.request

    from tests.conftest import zeep_client
    from tests.test_execution import status_is, submit, wait_for

    _, thief, private = shared_secret(accounts, traversable)
    gateway = start_gateway("[backends.local]\nslots = 1\n", state_dir=traversable / "state")
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    (key,) = submit(schedd, Owner=thief.name, Cmd="/bin/sh", Out="out.txt",
                    Arguments=f"-c 'mv {private} private && echo mine'")
    assert wait_for(schedd, key, status_is(4))["ExitCode"] == "0"
    assert not private.exists()

    def fetch(file: str) -> dict:
        body = json.dumps({"id": f"{key[0]}.{key[1]}", "file": file, "start": 0, "end": 5}).encode()
        request = urllib.request.Request(gateway.url + "submission/json/fetch", body,
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    assert {item.name for item in schedd.listSpool(None, *key).info.item} == {"out.txt"}
    refused = schedd.getFile(None, *key, "private", 0, 100)
    assert refused.status.code == "FAIL" and "not a regular file of the job" in refused.status.message
    assert fetch("private")["status"]["code"] == "FAIL"
    assert schedd.getFile(None, *key, "out.txt", 0, 5).data == b"mine\n"
    assert fetch("OUT")["data"] == "bWluZQo="  # base64 of the job's own "mine\n"
