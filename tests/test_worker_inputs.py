"""What a worker reads must be what the core read (gateway.workers.inputs): the digest covers the configuration
file and every file it names that a worker reads, directories of them included."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import load
from gateway.workers.inputs import InputsChanged, check_inputs, input_files, inputs_digest


@pytest.fixture
def configured(tmp_path: Path):
    """A configuration naming a password file and a directory of signing keys."""
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "POOL").write_bytes(b"key")
    (tmp_path / "passwords").write_text("")
    file = tmp_path / "gateway.toml"
    file.write_text(f'[birdbath]\npassword_file = "{tmp_path / "passwords"}"\n'
                    f'sec_password_directory = "{tmp_path / "keys"}"\n')
    return tmp_path, load(file)


def test_the_digest_covers_the_file_its_settings_and_the_files_they_name(configured):
    tmp_path, config = configured
    assert list(input_files(config)) == [tmp_path / "gateway.toml", tmp_path / "passwords", tmp_path / "keys" / "POOL"]
    digest = inputs_digest(config)
    check_inputs(config, digest)  # unchanged: nothing raised
    for edit in (lambda: (tmp_path / "passwords").write_text("alice:x\n"),
                 lambda: (tmp_path / "keys" / "other").write_bytes(b"another key"),
                 lambda: (tmp_path / "keys" / "POOL").unlink(),
                 lambda: (tmp_path / "gateway.toml").write_text((tmp_path / "gateway.toml").read_text() + "#\n")):
        edit()
        with pytest.raises(InputsChanged, match="restart the gateway"):
            check_inputs(config, digest)
        digest = inputs_digest(config)


def test_an_unreadable_file_counts_as_such(configured):
    tmp_path, config = configured
    digest = inputs_digest(config)
    (tmp_path / "passwords").unlink()
    assert inputs_digest(config) != digest
    with pytest.raises(InputsChanged):
        check_inputs(config, digest)


def test_the_defaults_read_no_file():
    assert list(input_files(load(None))) == []
