"""``birdbath-passwd``: the password file it writes is one the gateway loads, and the passwords in it check."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.identity.passwords import PasswordFile
from tests.conftest import ROOT

HTPASSWD_LINE = "carol:$2y$05$" + "a" * 53 + "\n"  # written by htpasswd -B: kept as it is


def passwd(*args: str, password: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway.passwd", *args], cwd=ROOT, input=password + "\n",
                          capture_output=True, text=True, timeout=60)


def test_sets_changes_and_removes_passwords_keeping_other_lines(tmp_path: Path):
    path = tmp_path / "passwords"
    assert passwd(str(path), "alice", password="first secret").returncode == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # created readable by its owner only
    path.write_text(path.read_text() + HTPASSWD_LINE)
    assert passwd(str(path), "bob@example.org", password="bob's").returncode == 0
    assert passwd(str(path), "alice", password="second secret").returncode == 0
    users = PasswordFile.load(path)
    assert list(users.hashes) == ["carol", "bob@example.org", "alice"]
    assert users.check("alice", "second secret") and not users.check("alice", "first secret")
    assert users.check("bob@example.org", "bob's")
    assert passwd(str(path), "-D", "bob@example.org").returncode == 0
    assert list(PasswordFile.load(path).hashes) == ["carol", "alice"]
    assert HTPASSWD_LINE in path.read_text()


@pytest.mark.parametrize("user", ["", "a:b", "two words"])
def test_refuses_a_user_name_the_file_cannot_hold(tmp_path: Path, user: str):
    result = passwd(str(tmp_path / "passwords"), user, password="x")
    assert result.returncode == 2 and "not a user name" in result.stderr
    assert not (tmp_path / "passwords").exists()


def test_refuses_an_empty_password_an_unknown_user_to_delete_and_a_broken_file(tmp_path: Path):
    path = tmp_path / "passwords"
    empty = passwd(str(path), "alice", password="")
    assert empty.returncode == 1 and "empty password" in empty.stderr and not path.exists()
    path.write_text("alice:plaintext\n")
    broken = passwd(str(path), "bob", password="x")
    assert broken.returncode == 1 and "not a bcrypt hash" in broken.stderr
    assert path.read_text() == "alice:plaintext\n"  # untouched
    path.write_text(HTPASSWD_LINE)
    missing = passwd(str(path), "-D", "alice")
    assert missing.returncode == 1 and "'alice' is not in" in missing.stderr


def test_a_password_longer_than_bcrypt_reads_is_cut_where_htpasswd_cuts_it(tmp_path: Path):
    path = tmp_path / "passwords"
    long = "é" * 40  # 80 bytes of UTF-8: bcrypt reads 72
    assert passwd(str(path), "alice", password=long).returncode == 0
    users = PasswordFile.load(path)
    assert users.check("alice", long) and users.check("alice", long + "ignored")
    assert not users.check("alice", long[:35])


def test_help_is_plain_text():
    shown = passwd("--help")
    assert shown.returncode == 0
    assert "birdbath-passwd FILE USER: set (or with -D remove) a user's password" in " ".join(shown.stdout.split())
    assert "`" not in shown.stdout
