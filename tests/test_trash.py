"""The local backend's trash (``backends/local/trash.py``): a directory it is done with is moved out of the way at
once and removed by the trash's thread; what a crash left there is removed when the next trash starts."""

from __future__ import annotations

from pathlib import Path

from backends.local.trash import Trash


def tree(root: Path) -> Path:
    (root / "control").mkdir(parents=True)
    (root / "control" / "result.json").write_text("{}")
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
