"""The client library and the CLI against a gateway served over HTTPS only: a client certificate, or a user name and
password, with the test CA trusted; the jobs are the user's the gateway identified."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys

import pytest

from birdbath_client import Credentials, Expr, GatewayError, GatewayUnavailable, Refused, Schedd
from birdbath_client.submission import GatewayHttp
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


def cli(environment: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "birdbath_client.cli", *args], env=environment,
                          capture_output=True, text=True, timeout=60)


def test_the_cli_takes_its_credentials_from_the_environment(pki, tls_gateway):
    environment = dict(os.environ, BIRDBATH_URL=tls_gateway.https_url, BIRDBATH_CA=str(pki.ca_file),
                       BIRDBATH_USER=USER, BIRDBATH_PASSWORD=PASSWORD)
    listed = cli(environment, "q", "-af", "Owner")
    assert listed.returncode == 0, listed.stderr
    environment["BIRDBATH_PASSWORD"] = "guess"
    for args in (("q",), ("history",), ("wait", "1.0")):
        refused = cli(environment, *args)
        assert (refused.returncode, refused.stderr) == (1, "birdbath: Wrong user name or password (HTTP 401)\n")
    wrong = Credentials(ca=str(pki.ca_file), username=USER, password="guess")
    with pytest.raises(Refused) as json_refusal:  # the JSON paths say it too
        GatewayHttp(tls_gateway.https_url, credentials=wrong).who_am_i()
    assert (json_refusal.value.status, json_refusal.value.message) == (401, "Wrong user name or password")


def test_q_lists_the_jobs_of_who_the_gateway_says_you_are(pki, tls_gateway):
    """Over TLS the local login name says nothing: a certificate mapped to "carol" lists carol's jobs."""
    carol = pki.client("carol")
    mine = Schedd(tls_gateway.https_url, credentials=Credentials(cert=str(carol.certificate), key=str(carol.key),
                                                                  ca=str(pki.ca_file)))
    (job,) = mine.submit({"Cmd": "/bin/true", "Requirements": NEVER})
    assert mine.owner() == "carol" != getpass.getuser()
    environment = dict(os.environ, BIRDBATH_URL=tls_gateway.https_url, BIRDBATH_CA=str(pki.ca_file),
                       BIRDBATH_CERT=str(carol.certificate), BIRDBATH_KEY=str(carol.key))
    listed = cli(environment, "q", "-af", "ClusterId", "Owner")
    assert (listed.returncode, listed.stdout) == (0, f"{job.cluster} carol\n"), listed.stderr
    assert mine.http.who_am_i() == {"owner": "carol", "user": "carol", "authentication": "certificate"}
    someone = Schedd(tls_gateway.https_url, credentials=Credentials(ca=str(pki.ca_file), username=USER,
                                                                     password=PASSWORD))
    theirs = cli(dict(environment, BIRDBATH_CERT="", BIRDBATH_KEY="", BIRDBATH_USER=USER,
                      BIRDBATH_PASSWORD=PASSWORD), "q", "-af", "ClusterId", "Owner")
    assert theirs.returncode == 0 and f"{job.cluster} carol" not in theirs.stdout.splitlines(), theirs.stderr
    assert {line.split()[1] for line in theirs.stdout.splitlines()} <= {USER}
    assert someone.owner() == USER
    removed = cli(environment, "rm", str(job))
    assert removed.returncode == 0, removed.stderr
    assert mine.job(job, history=True)["RemoveReason"] == "via birdbath rm (by user carol)"  # condor_rm's words
