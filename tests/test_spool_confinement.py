"""Spool reads are confined to the regular files of the job's own spool directory (backends/spool.py, which both
backends use): a job that writes its spool may leave links, FIFOs or hard links there, and getFile, listSpool,
fetch and the staging MD5 must neither follow, block on nor serve them."""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
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
    spool, nobody = owned
    private = directory(spool).parent / "private"  # the gateway's (root's), on the spool's file system
    private.write_bytes(b"root's secret\n")
    private.chmod(0o600)
    os.link(private, directory(spool) / "hard")  # what a job could do where hard links are not protected
    with pytest.raises(BackendError, match="not a regular file of the job"):
        spool.read(*KEY, "hard", 0, 100)
    assert [info.name for info in spool.list(*KEY)] == ["staged"]
    os.chown(directory(spool) / "staged", nobody.pw_uid, nobody.pw_gid)
    os.link(directory(spool) / "staged", directory(spool) / "again")  # the owner's own file, twice: fine
    assert spool.read(*KEY, "again", 0, 100) == b"input"


def test_giving_a_spool_changes_no_link_target(owned, secret):
    spool, nobody = owned
    assert (directory(spool) / "staged").stat().st_uid == nobody.pw_uid
    (directory(spool) / "link").symlink_to(secret)
    spool.give(*KEY, nobody.pw_uid, nobody.pw_gid)  # again, now with a link in it
    assert secret.stat().st_uid == os.geteuid() and (directory(spool) / "link").lstat().st_uid == 0
