"""The client library and the CLI against a gateway served over HTTPS only: a client certificate, or a user name and
password, with the test CA trusted; the jobs are the user's the gateway identified."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys

import pytest

from birdbath_client import Credentials, Expr, GatewayError, GatewayUnavailable, Schedd
from gateway.testing import GatewayProcess, TestPki

USER = getpass.getuser()  # the jobs stay idle, so no account switch is needed: any mapped name would do
PASSWORD = "correct horse"
NEVER = Expr("FALSE")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    pki = TestPki(tmp_path_factory.mktemp("pki"))
    pki.passwords({USER: PASSWORD})
    return pki


@pytest.fixture(scope="module")
def tls_gateway(pki, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tls-gateway")
    process = GatewayProcess(tmp / "state", "[backends.local]\nslots = 0\n" + pki.config(passwords=True), tmp=tmp,
                             ssl=True, plain=False).start()
    yield process
    process.stop()


def test_a_client_certificate_submits_as_its_mapped_user(pki, tls_gateway):
    client = pki.client(USER)
    schedd = Schedd(tls_gateway.https_url, credentials=Credentials(cert=str(client.certificate),
                                                                    key=str(client.key), ca=str(pki.ca_file)))
    (job,) = schedd.submit({"Cmd": "/bin/true", "Requirements": NEVER})
    assert schedd.job(job)["Owner"] == USER
    # the submission API (JSON over urllib) presents the same certificate
    assert schedd.submission_api.job_ad(job)["Owner"] == USER
    assert f"({USER} by certificate)" in tls_gateway.log()


def test_a_password_login_reaches_both_apis(pki, tls_gateway):
    schedd = Schedd(tls_gateway.https_url, credentials=Credentials(ca=str(pki.ca_file), username=USER,
                                                                    password=PASSWORD))
    (job,) = schedd.submit({"Cmd": "/bin/true", "Requirements": NEVER})
    assert schedd.submission_api.job_ad(job)["Owner"] == USER
    assert f"({USER} by password)" in tls_gateway.log()


def test_a_wrong_password_or_an_untrusted_gateway_is_an_error(pki, tls_gateway, tmp_path_factory):
    wrong = Credentials(ca=str(pki.ca_file), username=USER, password="guess")
    with pytest.raises((GatewayUnavailable, GatewayError)):
        Schedd(tls_gateway.https_url, credentials=wrong).version()
    other_ca = TestPki(tmp_path_factory.mktemp("other-pki")).ca_file  # does not vouch for the gateway's key
    with pytest.raises(GatewayUnavailable, match="certificate"):
        Schedd(tls_gateway.https_url, credentials=Credentials(ca=str(other_ca), username=USER, password=PASSWORD))


def test_the_cli_takes_its_credentials_from_the_environment(pki, tls_gateway):
    environment = dict(os.environ, BIRDBATH_URL=tls_gateway.https_url, BIRDBATH_CA=str(pki.ca_file),
                       BIRDBATH_USER=USER, BIRDBATH_PASSWORD=PASSWORD)
    listed = subprocess.run([sys.executable, "-m", "birdbath_client.cli", "q", "-af", "Owner"], env=environment,
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    environment["BIRDBATH_PASSWORD"] = "guess"
    refused = subprocess.run([sys.executable, "-m", "birdbath_client.cli", "q"], env=environment,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "401" in refused.stderr
