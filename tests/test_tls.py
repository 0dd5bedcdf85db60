"""The SSL port, end to end: real gateways serving TLS on loopback with a certificate authority made for the test
(gateway.testing.TestPki, from trustme), real clients (zeep and requests, suds, ssl sockets).

Two gateways: ``certificates`` (client certificates required, the plain port on too) and ``mixed`` (certificates
optional, HTTP Basic against a password file, the plain port off).
"""

from __future__ import annotations

import datetime
import json
import socket
import ssl
import urllib.request

import pytest
import requests
import trustme
import zeep
from zeep.transports import Transport

from gateway.config import ConfigError, load, validate
from gateway.testing import QUEUE_ONLY, GatewayProcess, TestPki
from tests.birdbath import submit_job, values
from tests.conftest import LEGACY_WSDL
from tests.test_logging import wait_for_line
from tests.test_startup import assert_refused, refused_start
from tests.wire import SOAP_ENV, body_element

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = pytest.mark.gateway

GET_VERSION = (f'<s:Envelope xmlns:s="{SOAP_ENV}"><s:Body><c:getVersionString xmlns:c="urn:condor"/>'
               f'</s:Body></s:Envelope>').encode()


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> TestPki:
    pki = TestPki(tmp_path_factory.mktemp("pki"))
    pki.passwords({"carol": "c4rol's secret", "dave@example.org": "dave"})
    return pki


def gateway_with(tmp_path_factory, config: str, **options: bool):
    tmp = tmp_path_factory.mktemp("gateway")
    process = GatewayProcess(tmp / "state", config + QUEUE_ONLY, tmp=tmp, ssl=True, **options).start()
    return process


@pytest.fixture(scope="module")
def certificates(pki, tmp_path_factory):
    process = gateway_with(tmp_path_factory, pki.config())
    yield process
    process.stop()


@pytest.fixture(scope="module")
def mixed(pki, tmp_path_factory):
    process = gateway_with(tmp_path_factory, pki.config(passwords=True), plain=False)
    yield process
    process.stop()


def session(pki: TestPki, client=None, auth: tuple[str, str] | None = None) -> requests.Session:
    """A requests session trusting only the test CA (not the environment's bundle), with a client certificate."""
    found = requests.Session()
    found.trust_env = False
    found.verify = str(pki.ca_file)
    if client is not None:
        found.cert = (str(client.certificate), str(client.key))
    found.auth = auth
    return found


def schedd_over(gateway: GatewayProcess, http: requests.Session):
    client = zeep.Client(gateway.https_url + "condorSchedd.wsdl", transport=Transport(session=http))
    return client.service


#: the least job the submission API's submit takes (no Owner: the caller's user owns it)
JSON_JOB = {"Cmd": {"TYPE": 3, "VALUE": "/bin/true"}, "Requirements": {"TYPE": 0, "VALUE": "TRUE"},
            "Iwd": {"TYPE": 3, "VALUE": "/tmp"}}


def json_call(gateway: GatewayProcess, http: requests.Session, operation: str, **params) -> requests.Response:
    return http.post(gateway.https_url + f"submission/json/{operation}", data=json.dumps(params),
                     headers={"Content-Type": "application/json"}, timeout=30)


def handshake(gateway: GatewayProcess, pki: TestPki, client=None) -> str:
    """Connect to the SSL port and ask for the WSDL: the answer's status line, or the TLS error."""
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    if client is not None:
        context.load_cert_chain(str(client.certificate), str(client.key))
    try:
        with socket.create_connection(("127.0.0.1", gateway.ssl_port), timeout=30) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as connection:
                connection.sendall(b"GET /condorSchedd.wsdl HTTP/1.0\r\n\r\n")
                return connection.recv(64).split(b"\r\n")[0].decode()
    except ssl.SSLError as exc:
        return exc.reason or str(exc)


# -- mutual TLS ----------------------------------------------------------------------------------------------
def test_zeep_submits_and_reads_its_job_over_mutual_tls_as_the_mapped_user(certificates, pki):
    schedd = schedd_over(certificates, session(pki, pki.client("alice")))
    cluster, proc = submit_job(schedd)
    answer = schedd.getJobAd(None, cluster, proc)
    assert answer.status.code == "SUCCESS" and values(answer.classAd)["Owner"] == "alice"
    assert schedd.removeJob(None, cluster, proc, "done", False).code == "SUCCESS"
    wait_for_line(certificates.log, "commitTransaction from 127.0.0.1: SUCCESS in", "(alice by certificate)")


def test_another_users_certificate_cannot_act_on_the_job(certificates, pki):
    alice = schedd_over(certificates, session(pki, pki.client("alice")))
    bob = schedd_over(certificates, session(pki, pki.client("bob")))
    cluster, proc = submit_job(alice)
    assert bob.holdJob(None, cluster, proc, "mine now", False, False, False).message == "Not job owner"
    assert alice.removeJob(None, cluster, proc, "done", False).code == "SUCCESS"


def test_suds_submits_over_tls_with_a_client_certificate(certificates, pki):
    from suds.client import Client
    from suds.transport.http import HttpTransport

    alice = pki.client("alice")
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    context.load_cert_chain(str(alice.certificate), str(alice.key))
    transport = HttpTransport()
    transport.urlopener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context),
                                                      urllib.request.ProxyHandler({}))
    client = Client(f"file://{LEGACY_WSDL}", location=certificates.https_url, transport=transport)
    schedd = client.service
    txn = schedd.beginTransaction(60).transaction
    cluster = schedd.newCluster(txn).integer
    job = schedd.newJob(txn, cluster).integer
    ad = client.factory.create("ClassAdStruct")
    for name, kind, value in (("Cmd", "STRING-ATTR", "/bin/true"), ("JobUniverse", "INTEGER-ATTR", "5")):
        item = client.factory.create("ClassAdStructAttr")
        item.name, item.type, item.value = name, kind, value
        ad.item.append(item)
    assert schedd.submit(txn, cluster, job, ad).status.code == "SUCCESS"
    assert schedd.commitTransaction(txn).code == "SUCCESS"
    found = schedd.getJobAd(None, cluster, job)
    assert {item.name: item.value for item in found.classAd.item}["Owner"] == "alice"


def test_the_json_api_over_tls_submits_as_the_mapped_user(certificates, pki):
    http = session(pki, pki.client("alice"))
    answer = json_call(certificates, http, "submit", ad=JSON_JOB)
    assert answer.status_code == 200 and answer.json()["status"]["code"] == "OK", answer.text
    job = answer.json()["id"].rsplit("#", 1)[1]
    ad = json_call(certificates, http, "getJobAd", id=job).json()["ad"]
    assert ad["Owner"]["VALUE"] == "alice"


@pytest.mark.parametrize("path, service", [("condorSchedd.wsdl", ""), ("submission?wsdl", "submission")])
def test_the_wsdl_fetched_over_tls_names_the_https_address(certificates, pki, path, service):
    answer = session(pki, pki.client("alice")).get(certificates.https_url + path, timeout=30)
    assert answer.status_code == 200
    assert f'location="{certificates.https_url}{service}"' in answer.text


# -- refused at the handshake --------------------------------------------------------------------------------
def test_a_client_without_a_certificate_fails_the_handshake(certificates, pki):
    assert "CERTIFICATE_REQUIRED" in handshake(certificates, pki)
    wait_for_line(certificates.log, "TLS connection from 127.0.0.1 failed: peer did not return a certificate")
    with pytest.raises(requests.exceptions.ConnectionError):
        session(pki).post(certificates.https_url, data=GET_VERSION, timeout=30)


def test_a_certificate_from_an_unknown_authority_fails_the_handshake(certificates, pki):
    stranger = pki.client("alice", ca=trustme.CA(organization_name=TestPki.ORGANIZATION))
    assert "UNKNOWN_CA" in handshake(certificates, pki, stranger)


def test_an_expired_certificate_fails_the_handshake(certificates, pki):
    expired = pki.client("alice", not_after=datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc))
    assert "CERTIFICATE_EXPIRED" in handshake(certificates, pki, expired)
    assert handshake(certificates, pki, pki.client("alice")) == "HTTP/1.0 200 OK"  # the same name, in date


# -- refused for who the caller is ---------------------------------------------------------------------------
def test_an_unmapped_subject_is_refused_with_a_fault_and_a_json_status(certificates, pki):
    robot = pki.client("robot", unit="Robots")
    http = session(pki, robot)
    answer = http.post(certificates.https_url, data=GET_VERSION, timeout=30)
    assert answer.status_code == 403
    fault = body_element(answer.content)
    assert fault.findtext("faultstring").startswith(f"The certificate subject {robot.subject} is not mapped to a user")
    answer = json_call(certificates, http, "getSubmissions")
    assert answer.status_code == 403 and answer.headers["Content-Type"] == "application/json"
    assert answer.json()["status"]["code"] == "FAIL" and "is not mapped" in answer.json()["status"]["text"]
    wait_for_line(certificates.log, "refused (403): The certificate subject", "OU=Robots/CN=robot")


def test_basic_on_the_plain_port_is_refused_without_a_look_at_the_password(certificates, pki):
    answer = requests.post(certificates.url, data=GET_VERSION, auth=("carol", "c4rol's secret"), timeout=30)
    assert answer.status_code == 403
    assert "only on the SSL port" in body_element(answer.content).findtext("faultstring")


def test_without_a_password_file_basic_opens_nothing(certificates, pki):
    """Certificates are required here: a client offering only a password does not get past the handshake."""
    with pytest.raises(requests.exceptions.ConnectionError):
        session(pki, auth=("carol", "c4rol's secret")).post(certificates.https_url, data=GET_VERSION, timeout=30)


# -- HTTP Basic over TLS -------------------------------------------------------------------------------------
def test_basic_with_the_right_password_is_the_user(mixed, pki):
    schedd = schedd_over(mixed, session(pki, auth=("carol", "c4rol's secret")))
    cluster, proc = submit_job(schedd)
    assert values(schedd.getJobAd(None, cluster, proc).classAd)["Owner"] == "carol"
    wait_for_line(mixed.log, "commitTransaction from 127.0.0.1: SUCCESS in", "(carol by password)")
    answer = json_call(mixed, session(pki, auth=("dave@example.org", "dave")), "submit",
                       ad=JSON_JOB)
    assert answer.json()["status"]["code"] == "OK", answer.text  # the owner of user@domain is user


@pytest.mark.parametrize("auth", [("carol", "wrong"), ("mallory", "c4rol's secret"), None],
                         ids=["wrong password", "unknown user", "no credentials"])
def test_basic_with_a_wrong_password_or_none_is_refused_with_a_challenge(mixed, pki, auth):
    answer = session(pki, auth=auth).post(mixed.https_url, data=GET_VERSION, timeout=30)
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"].startswith('Basic realm="birdbath"')
    assert body_element(answer.content).tag == f"{{{SOAP_ENV}}}Fault"
    answer = json_call(mixed, session(pki, auth=auth), "getSubmissions")
    assert answer.status_code == 401 and answer.json()["status"]["code"] == "FAIL"


def test_a_certificate_still_works_where_passwords_are_accepted(mixed, pki):
    answer = session(pki, pki.client("alice")).post(mixed.https_url, data=GET_VERSION, timeout=30)
    assert answer.status_code == 200
    wait_for_line(mixed.log, "getVersionString from 127.0.0.1: SUCCESS in", "(alice by certificate)")


def test_an_unmapped_certificate_is_refused_even_with_a_good_password(mixed, pki):
    http = session(pki, pki.client("robot", unit="Robots"), auth=("carol", "c4rol's secret"))
    assert http.post(mixed.https_url, data=GET_VERSION, timeout=30).status_code == 403


def test_with_the_plain_port_off_only_the_ssl_port_listens(mixed):
    assert mixed.port is None
    wait_for_line(mixed.log, "listening on https://127.0.0.1:")
    assert "listening on http://" not in mixed.log()


def test_passwords_alone_need_no_authority_and_ask_for_no_certificate(pki, start_gateway):
    config = (f'[birdbath]\nenable_soap_ssl = true\nsoap_ssl_server_keyfile = "{pki.server_keyfile}"\n'
              f'password_file = "{pki.password_file}"\n')
    gateway = start_gateway(config, ssl=True)
    assert session(pki, auth=("carol", "c4rol's secret")).post(gateway.https_url, data=GET_VERSION,
                                                               timeout=30).status_code == 200
    assert handshake(gateway, pki).startswith("HTTP/1.0 401")


# -- the TLS knobs are checked before anything starts --------------------------------------------------------
def ssl_config(pki: TestPki, tmp_path, **settings: str) -> ConfigError | None:
    """Validate the SSL port's knobs (the test CA's, with these changed): the error, or None."""
    knobs = {"soap_ssl_server_keyfile": str(pki.server_keyfile), "soap_ssl_ca_file": str(pki.ca_file),
             "certificate_mapfile": str(pki.mapfile), **settings}
    lines = ["[birdbath]", "enable_soap_ssl = true"] + [f"{key} = {json.dumps(value)}" for key, value in knobs.items()
                                                         if value is not None]
    path = tmp_path / "gateway.toml"
    path.write_text("\n".join(lines) + "\n")
    config = load(path)
    config.state_dir = tmp_path / "state"
    try:
        validate(config)
    except ConfigError as exc:
        return exc
    return None


def write(path, text: str | bytes) -> str:
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


def test_the_test_cas_knobs_are_valid(pki, tmp_path):
    assert ssl_config(pki, tmp_path) is None
    ca_dir = tmp_path / "ca-dir"
    ca_dir.mkdir()
    write(ca_dir / "README", "not a certificate")
    write(ca_dir / "0a1b2c3d.0", pki.ca_file.read_bytes())
    assert ssl_config(pki, tmp_path, soap_ssl_ca_file=None, soap_ssl_ca_dir=str(ca_dir)) is None


def server_parts(pki: TestPki) -> tuple[bytes, bytes]:
    """The server keyfile's private key and its certificates (trustme writes the key first)."""
    data = pki.server_keyfile.read_bytes()
    start = data.index(b"-----BEGIN CERTIFICATE")
    return data[:start], data[start:]


def encrypted_keyfile(pki: TestPki, path, password: bytes) -> str:
    """The server's certificates first, then its key encrypted with ``password``."""
    from cryptography.hazmat.primitives import serialization

    key, certificates = server_parts(pki)
    encrypted = serialization.load_pem_private_key(key, None).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(password))
    return write(path, certificates + encrypted)


def test_an_encrypted_key_needs_its_password(pki, tmp_path):
    keyfile = encrypted_keyfile(pki, tmp_path / "encrypted.pem", b"s3cret")
    assert ssl_config(pki, tmp_path, soap_ssl_server_keyfile=keyfile,
                      soap_ssl_server_keyfile_password="s3cret") is None
    assert "set soap_ssl_server_keyfile_password" in str(ssl_config(pki, tmp_path, soap_ssl_server_keyfile=keyfile))
    assert "wrong soap_ssl_server_keyfile_password" in str(
        ssl_config(pki, tmp_path, soap_ssl_server_keyfile=keyfile, soap_ssl_server_keyfile_password="guess"))


def test_bad_tls_knobs_are_refused_with_what_is_wrong(pki, tmp_path):
    key, _ = server_parts(pki)
    mismatched = write(tmp_path / "mismatched.pem", trustme.CA().issue_cert("localhost").cert_chain_pems[0].bytes() + key)
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    cases = {
        "soap_ssl_server_keyfile": ({"soap_ssl_server_keyfile": None}, "needs soap_ssl_server_keyfile"),
        "missing keyfile": ({"soap_ssl_server_keyfile": str(tmp_path / "nonesuch.pem")},
                            "cannot read soap_ssl_server_keyfile"),
        "keyfile without a key": ({"soap_ssl_server_keyfile": str(pki.ca_file)}, "no private key"),
        "keyfile without a certificate": ({"soap_ssl_server_keyfile": write(tmp_path / "key.pem", key)},
                                          "holds no PEM certificate"),
        "key of another certificate": ({"soap_ssl_server_keyfile": mismatched}, "does not belong"),
        "no authority": ({"soap_ssl_ca_file": None}, "soap_ssl_ca_file"),
        "missing CA file": ({"soap_ssl_ca_file": str(tmp_path / "nonesuch-ca.pem")}, "cannot read soap_ssl_ca_file"),
        "CA dir without certificates": ({"soap_ssl_ca_file": None, "soap_ssl_ca_dir": str(empty_dir)},
                                        "holds no PEM certificate"),
        "neither map nor passwords": ({"certificate_mapfile": None}, "needs certificate_mapfile (client"),
        "bad map file": ({"certificate_mapfile": write(tmp_path / "map", 'SSL "(" alice\n')},
                         "bad regular expression"),
        "bad password file": ({"password_file": write(tmp_path / "pw", "alice:wonderland\n")}, "not a bcrypt hash"),
    }
    for name, (settings, named) in cases.items():
        error = ssl_config(pki, tmp_path, **settings)
        assert error is not None and named in str(error), (name, error)
    assert not (tmp_path / "state").exists()


def test_a_bad_tls_knob_ends_the_start_with_one_line_and_creates_nothing(pki, tmp_path):
    config = pki.config().replace(str(pki.mapfile), str(tmp_path / "no-such-map"))
    result = refused_start("--state-dir", tmp_path / "state", config=config, tmp=tmp_path)
    assert_refused(result, "certificate map file", "no-such-map")
    assert result.returncode == 2 and not (tmp_path / "state").exists()


def test_the_ssl_flags_override_the_file(pki, tmp_path):
    """--ssl-port enables the SSL port; --ssl-keyfile and --ssl-ca-file name its files."""
    config = f'[birdbath]\ncertificate_mapfile = "{pki.mapfile}"\n'
    gateway = GatewayProcess(tmp_path / "state", config, tmp_path, ("--ssl-keyfile", str(pki.server_keyfile),
                                                                   "--ssl-ca-file", str(pki.ca_file)), ssl=True)
    try:
        gateway.start()
        assert handshake(gateway, pki, pki.client("alice")) == "HTTP/1.0 200 OK"
    finally:
        gateway.stop()


def test_a_port_file_for_the_plain_port_switched_off_is_refused(pki, tmp_path):
    result = refused_start("--port", "0", "--port-file", tmp_path / "port", "--state-dir", tmp_path / "state",
                           config=pki.config(), tmp=tmp_path)
    assert_refused(result, "--port-file", "switches the plain port off")
    assert not (tmp_path / "state").exists()
