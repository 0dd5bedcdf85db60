"""The local backend's trash (``backends/local/trash.py``): a directory it is done with is moved out of the way at
once and removed by the trash's thread; what a crash left there is removed when the next trash starts."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from backends.local.trash import Trash
from gateway.testing import QUEUE_ONLY, GatewayProcess

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = pytest.mark.gateway


def tree(root: Path) -> Path:
    (root / "control").mkdir(parents=True)
    (root / "control" / "run.jsonl").write_text("{}\n")
    (root / "sandbox").mkdir()
    return root


def test_a_discarded_directory_is_gone_at_once_and_emptied_in_the_background(tmp_path):
    trash = Trash(tmp_path / "trash")
    spent = tree(tmp_path / "execute" / "dir_1.0")
    trash.discard(spent)
    assert not spent.exists() and (tmp_path / "execute").exists()
    spent.mkdir()  # (its name is free at once: a job that starts again gets a fresh directory)
    trash.close()
    assert list((tmp_path / "trash").iterdir()) == [] and spent.exists()


def test_a_directory_that_is_not_there_is_nothing_to_discard(tmp_path):
    trash = Trash(tmp_path / "trash")
    trash.discard(tmp_path / "no-such-directory")
    trash.close()
    assert list((tmp_path / "trash").iterdir()) == []


def test_what_a_crash_left_in_the_trash_is_removed_at_the_next_start(tmp_path):
    tree(tmp_path / "trash" / "123.4")
    Trash(tmp_path / "trash").close()
    assert list((tmp_path / "trash").iterdir()) == []


def test_a_directory_that_cannot_be_moved_is_removed_at_once(tmp_path, monkeypatch):
    import backends.local.trash as trash_module

    def cross_device(source, target):
        raise OSError(18, "Invalid cross-device link")

    trash = Trash(tmp_path / "trash")
    monkeypatch.setattr(trash_module.os, "rename", cross_device)
    spent = tree(tmp_path / "spool" / "cluster1.proc0.subproc0")
    trash.discard(spent)
    assert not spent.exists()
    trash.close()


@pytest.fixture
def small_disk(tmp_path) -> Path:
    """A 16 MiB tmpfs of its own, for a disk the test can fill (needs root to mount)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0755", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def fill(directory: Path) -> None:
    """Write into ``directory`` until the file system is full."""
    directory.mkdir()
    with open(directory / "spent", "wb", buffering=0) as stream, pytest.raises(OSError) as full:
        while True:  # (unbuffered: a write the disk took in part leaves nothing for the close to fail on)
            stream.write(b"\0" * (1 << 16))
    assert full.value.errno == errno.ENOSPC


def test_a_gateway_killed_on_a_full_disk_restarts_by_emptying_its_trash_first(small_disk, tmp_path):
    """kill -9 leaves spent directories in the trash and the disk full of them: the next start must free their
    space before it writes anything (opening the queue's journal needs some), and lose nothing committed."""
    from tests.conftest import zeep_client
    from tests.test_execution import job, submit

    gateway = GatewayProcess(small_disk / "state", QUEUE_ONLY, tmp_path)
    try:
        gateway.start()
        schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
        (key,) = submit(schedd, files={"input.txt": b"kept\n"}, Cmd="/bin/true")
        killed = gateway.process.pid
        gateway.kill()
        fill(small_disk / "state" / "trash" / f"{killed}.0")  # what it was emptying when it died
        with pytest.raises(OSError):
            (small_disk / "state" / "probe").write_bytes(b"\0" * 4096)
        gateway.start()
        assert list((small_disk / "state" / "trash").iterdir()) == []
        schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
        assert job(schedd, key)["JobStatus"] == "1"
        assert schedd.getFile(None, *key, "input.txt", 0, 5).data == b"kept\n"
    finally:
        gateway.stop()
