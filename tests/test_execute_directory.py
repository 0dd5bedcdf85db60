"""HTCondor's ``execute`` knob on the local backend (``[backends.local] execute``): running jobs' directories where
the site puts them, e.g. on a faster file system (bench/README.md says what it is worth to short jobs), refused
unless it is the gateway's own, and marked as the top of unrelated directories where the file system has the
attribute; and a trash on each file system the backend keeps directories on."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from backends.local import topdir
from backends.local.backend import LocalBackend
from backends.local.trash import Trash
from tests.conftest import zeep_client
from tests.test_execution import RUNNER, submit, wait_until


@pytest.fixture
def other_file_system(tmp_path: Path):
    """A directory on another file system than ``tmp_path`` (tmpfs), removed at the end."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no /dev/shm on a file system of its own here: the cross-file-system case cannot be made")
    place = shm / f"birdbath-test-{uuid.uuid4().hex[:8]}"
    yield place
    shutil.rmtree(place, ignore_errors=True)


def test_a_job_runs_in_the_execute_directory_the_configuration_names(start_gateway, tmp_path, other_file_system):
    execute = other_file_system / "execute"
    gateway = start_gateway(f'{RUNNER}execute = "{execute}"\n')
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    seen = tmp_path / "seen"
    submit(schedd, Cmd="/bin/sh", Arguments=f"-c 'echo $_CONDOR_JOB_AD $PATH > {seen}.tmp; mv {seen}.tmp {seen}'",
           Iwd=str(tmp_path), LeaveJobInQueue=False, WantIOProxy=True)  # (chirp: the tools on its PATH)
    wait_until(seen.exists)
    job_ad, path = seen.read_text().split()
    directory = Path(job_ad).parent  # (<execute>/dir_<cluster>.<proc>/.job.ad)
    assert directory.parent == execute and directory.name.startswith("dir_")
    assert path.split(":")[0] == str(execute / "libexec")  # the tools jobs find, beside their directories
    wait_until(lambda: not directory.exists())  # its run is over: into the trash of its file system
    wait_until(lambda: list((execute / ".trash").iterdir()) == [])  # and emptied there
    assert not (gateway.state_dir / "execute").exists()


def test_a_trash_per_file_system_takes_the_directories_of_its_own(tmp_path, other_file_system, monkeypatch):
    other_file_system.mkdir()
    trash = Trash(tmp_path / "trash", other_file_system / "trash")
    here, there = tmp_path / "dir_1.0", other_file_system / "dir_2.0"
    for spent in (here, there):
        (spent / "sandbox").mkdir(parents=True)
    moved: list[tuple[str, str]] = []
    rename = os.rename

    def watched(source, target):
        moved.append((str(source), str(target)))
        rename(source, target)

    monkeypatch.setattr(os, "rename", watched)
    trash.discard(here)
    trash.discard(there)
    monkeypatch.undo()
    trash.close()
    assert [Path(target).parent for _, target in moved] == [tmp_path / "trash", other_file_system / "trash"]
    assert not here.exists() and not there.exists()
    assert list((tmp_path / "trash").iterdir()) == list((other_file_system / "trash").iterdir()) == []


def test_the_execute_directory_may_be_anywhere_on_the_same_file_system(tmp_path):
    backend = LocalBackend(tmp_path / "state", execute=str(tmp_path / "scratch" / "execute"))
    try:
        assert (tmp_path / "scratch" / "execute" / "libexec" / "condor_chirp").exists()
        assert not (tmp_path / "scratch" / "execute" / ".trash").exists()  # (the state directory's trash serves)
    finally:
        backend.close()


@pytest.mark.parametrize("execute, words", [
    ("execute", "execute must be an absolute directory path, not 'execute'"),
    (7, "execute must be an absolute directory path, not 7"),
])
def test_an_execute_that_is_no_absolute_path_stops_the_start(tmp_path, execute, words):
    with pytest.raises(ValueError, match=words):
        LocalBackend(tmp_path / "state", execute=execute)


def test_an_execute_that_is_a_file_stops_the_start(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=f"cannot use {tmp_path}/file as the execute directory: "):
        LocalBackend(tmp_path / "state", execute=str(tmp_path / "file"))
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    with pytest.raises(ValueError, match="it is not a directory"):  # (a link is not followed)
        LocalBackend(tmp_path / "state", execute=str(link))


def test_an_execute_directory_of_another_user_stops_the_start(tmp_path, accounts):
    """Another user could swap a job's directory in it for one of theirs."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    other = accounts.user()
    os.chown(theirs, other.uid, other.gid)
    with pytest.raises(ValueError, match=f"it belongs to uid {other.uid}, who could replace the jobs' directories"):
        LocalBackend(tmp_path / "state", execute=str(theirs))
    assert list(theirs.iterdir()) == []  # nothing was made in it


def test_an_execute_directory_others_may_write_in_is_tightened(tmp_path):
    ours = tmp_path / "ours"
    ours.mkdir()
    ours.chmod(0o777)
    LocalBackend(tmp_path / "state", execute=str(ours)).close()
    assert ours.stat().st_mode & 0o777 == 0o755


def lsattr(path: Path) -> str:
    """The attribute letters e2fsprogs' ``lsattr`` shows for the directory ``path``."""
    if shutil.which("lsattr") is None:
        pytest.skip("no lsattr (e2fsprogs) to read the attributes with")
    return subprocess.run(["lsattr", "-d", str(path)], check=True, capture_output=True, text=True).stdout.split()[0]


def test_the_execute_directory_is_marked_as_the_top_of_unrelated_directories(tmp_path):
    """So that ext2/3/4 spread the jobs' directories over their block groups (backends/local/topdir.py says what it
    is worth), as ``chattr +T`` would; the directory's other attributes are kept."""
    probe = tmp_path / "probe"
    probe.mkdir()
    if not topdir.mark_top(probe):
        pytest.skip("the test's file system has no T attribute (no ext2/3/4 here)")
    if shutil.which("chattr") is None:
        pytest.skip("no chattr (e2fsprogs) to set another attribute with")
    execute = tmp_path / "execute"
    execute.mkdir()
    subprocess.run(["chattr", "+d", str(execute)], check=True)  # (no dump: any attribute the site set)
    assert "T" not in lsattr(execute)
    LocalBackend(tmp_path / "state", execute=str(execute)).close()
    assert "T" in lsattr(execute) and "d" in lsattr(execute)
    assert topdir.mark_top(execute)  # (again: nothing changes)
    assert "T" in lsattr(execute) and "d" in lsattr(execute)


def test_an_execute_directory_on_a_file_system_without_the_attribute_is_left_as_it_is(tmp_path, other_file_system):
    """tmpfs (Linux 6.0 and later have some attributes, not this one; before, none)."""
    other_file_system.mkdir()
    assert not topdir.mark_top(other_file_system)
    LocalBackend(tmp_path / "state", execute=str(other_file_system / "execute")).close()
    assert (other_file_system / "execute" / "libexec").is_dir()  # (the backend started all the same)
    if shutil.which("lsattr") is not None:
        listed = subprocess.run(["lsattr", "-d", str(other_file_system / "execute")], capture_output=True, text=True)
        assert listed.returncode != 0 or "T" not in listed.stdout.split()[0]


def test_a_link_is_not_marked(tmp_path):
    """(``_execute_root`` refuses a link before; the mark never follows one either.)"""
    (tmp_path / "target").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(OSError):
        topdir.mark_top(tmp_path / "link")
