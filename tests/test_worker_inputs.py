"""What a worker reads must be what the core read (gateway.workers.inputs): the configuration file's bytes, and
with TLS on the files its front ends read once; not the files read at each use, nor a CA directory's other files."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import load
from gateway.testing import TestPki
from gateway.workers.inputs import InputsChanged, check_configuration_file, check_inputs, inputs_digest


@pytest.fixture
def pki(tmp_path: Path) -> TestPki:
    pki = TestPki(tmp_path / "pki")
    pki.password_file.write_text("")
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "POOL").write_bytes(b"key")
    (tmp_path / "cas").mkdir()
    pki.ca_file.rename(tmp_path / "cas" / "ca.pem")
    return pki


def configured(tmp_path: Path, pki: TestPki, ssl: bool = True):
    file = tmp_path / "gateway.toml"
    file.write_text(f'[birdbath]\nenable_soap_ssl = {str(ssl).lower()}\nsoap_ssl_server_keyfile = "{pki.server_keyfile}"\n'
                    f'soap_ssl_ca_dir = "{tmp_path / "cas"}"\ncertificate_mapfile = "{pki.mapfile}"\n'
                    f'password_file = "{pki.password_file}"\nsec_password_directory = "{tmp_path / "keys"}"\n')
    return file, load(file)


def test_an_edit_of_a_file_read_once_changes_the_digest(tmp_path, pki):
    file, config = configured(tmp_path, pki)
    digest = inputs_digest(config)
    check_inputs(inputs_digest(load(file)), digest)  # read again, unchanged: nothing raised
    for edit in (lambda: pki.password_file.write_text("alice:x\n"),
                 lambda: pki.mapfile.write_text(pki.MAP_FILE + "# another rule\n"),
                 lambda: (tmp_path / "cas" / "other.pem").write_bytes(TestPki(tmp_path / "other").ca_file.read_bytes()),
                 lambda: pki.server_keyfile.write_bytes(pki.server_keyfile.read_bytes() + b"\n")):
        edit()
        with pytest.raises(InputsChanged, match="a file the configuration names"):
            check_inputs(inputs_digest(load(file)), digest)
        digest = inputs_digest(load(file))


def test_what_the_gateway_passes_over_or_reads_at_each_use_is_not_an_edit(tmp_path, pki):
    file, config = configured(tmp_path, pki)
    digest = inputs_digest(config)
    (tmp_path / "cas" / "abcd1234.r0").write_text("a revocation list, rewritten by fetch-crl\n")
    (tmp_path / "keys" / "another").write_bytes(b"a new signing key: read when a token names it")
    check_inputs(inputs_digest(load(file)), digest)


def test_with_tls_off_its_files_are_not_read(tmp_path, pki):
    file, config = configured(tmp_path, pki, ssl=False)
    digest = inputs_digest(config)
    pki.password_file.write_text("alice:x\n")
    check_inputs(inputs_digest(load(file)), digest)


def test_the_configuration_file_is_checked_before_it_is_parsed(tmp_path, pki):
    file, config = configured(tmp_path, pki)
    digest = inputs_digest(config)
    check_configuration_file(file, digest)
    file.write_text("[birdbath\nnot TOML at all\n")  # an invalid edit is an edit, refused as such
    with pytest.raises(InputsChanged, match="configuration file"):
        check_configuration_file(file, digest)
    file.unlink()
    with pytest.raises(InputsChanged):
        check_configuration_file(file, digest)


def test_the_defaults_read_no_file():
    assert inputs_digest(load(None)).startswith("none:")
    check_configuration_file(None, inputs_digest(load(None)))
