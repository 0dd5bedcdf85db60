"""Bearer tokens (gateway.identity.bearer, idtokens, scitoken): HTCondor IDTOKENs and SciTokens over TLS.

- the key handling against HTCondor itself: tokens made by HTCondor 24.0's own library (``Condor_Auth_Passwd::
  generate_token`` in the ``htcondor`` wheel's libcondor_utils, called through tests/data/idtokens/
  htcondor_token_shim.cpp) verify here, and the gateway's signature of their header and payload is HTCondor's
  byte for byte (HTCondor checks a token by signing those again), both from stored tokens and live when a C++
  compiler is at hand;
- end to end, a real gateway with its SSL port on loopback: IDTOKENs submit and query through the submission API,
  SOAP and Aviary; expired, wrong-key, wrong-kid, wrong-issuer, malformed, ``alg: none`` and under-scoped tokens are
  refused, each saying why, with RFC 6750's challenge; a token on the plain port is refused unchecked; SciTokens
  from an issuer the test serves on loopback TLS (OIDC discovery and JWKS, keys made by the test) are accepted,
  mapped by SCITOKENS rules, and refused when expired, from an untrusted issuer or unmapped;
- ``birdbath token create`` makes a token the client library finds in the token directory and uses.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import classad2
import jwt
import pytest
import requests
import scitokens
from cryptography.hazmat.primitives.asymmetric import rsa
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from gateway.config import ConfigError, load, validate
from gateway.core.auth import Authentication, Caller, Permission
from gateway.identity import idtokens, scopes
from gateway.identity.bearer import BearerTokens
from gateway.identity.callers import Connection, Identification, Refusal
from gateway.identity.idtokens import POOL, IdTokens, InvalidToken, SigningKeys, TokenPolicy
from gateway.identity.mapfile import CertificateMap
from gateway.identity.scitoken import SciTokens, SciTokenSettings, configure
from gateway.identity.throttle import LoginThrottle, ThrottleSettings
from gateway.testing import QUEUE_ONLY, GatewayProcess, TestPki
from tests.conftest import ROOT
from tests.test_logging import wait_for_line
from tests.wire import body_element

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = pytest.mark.gateway

DATA = ROOT / "tests" / "data" / "idtokens"
#: the trust domain the stored tokens were made for
STORED_DOMAIN = "pool.example.org"
DOMAIN = "birdbath.test"
JSON_JOB = {"Cmd": {"TYPE": 3, "VALUE": "/bin/true"}, "Requirements": {"TYPE": 0, "VALUE": "FALSE"},
            "Iwd": {"TYPE": 3, "VALUE": "/tmp"}}


def private_copy(source: Path, target: Path) -> Path:
    """A key file as HTCondor wants it: the reader's own, mode 600 (git keeps neither)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    target.chmod(0o600)
    return target


@pytest.fixture(scope="module")
def stored_keys(tmp_path_factory) -> SigningKeys:
    tmp = tmp_path_factory.mktemp("stored-keys")
    private_copy(DATA / "keys" / "other", tmp / "keys" / "other")
    return SigningKeys(private_copy(DATA / "POOL", tmp / "POOL"), tmp / "keys")


# -- HTCondor's key handling -------------------------------------------------------------------------------
def test_key_files_are_unscrambled_and_the_pool_key_doubled_as_htcondor_reads_them(stored_keys):
    raw = (DATA / "POOL").read_bytes()
    plain = bytes(byte ^ (0xDE, 0xAD, 0xBE, 0xEF)[index % 4] for index, byte in enumerate(raw))
    assert stored_keys.key(POOL) == plain + plain
    assert idtokens.scramble(idtokens.scramble(raw)) == raw
    other = (DATA / "keys" / "other").read_bytes()
    assert stored_keys.key("other") == idtokens.scramble(other)  # a named key is not doubled


@pytest.mark.parametrize("name, kid, subject, scope", [
    ("pool.token", POOL, "alice@pool.example.org", ("condor:/READ", "condor:/WRITE")),
    ("other.token", "other", "bob@pool.example.org", ("condor:/READ",)),
])
def test_tokens_made_by_htcondors_library_verify_and_are_signed_as_the_gateway_signs(stored_keys, name, kid, subject,
                                                                                     scope):
    token = (DATA / name).read_text().strip()
    claims = IdTokens(stored_keys, TokenPolicy(STORED_DOMAIN)).verify(token)
    assert (claims.subject, claims.scopes, claims.expires) == (subject, scope, None)  # made with -lifetime -1
    header, _, signed, signature = idtokens.split(token)
    assert header == {"alg": "HS256", "kid": kid}
    assert idtokens.sign(stored_keys, kid, signed) == signature


def test_a_token_the_gateway_makes_reads_as_htcondors_do(stored_keys):
    token = idtokens.create(stored_keys, POOL, STORED_DOMAIN, "alice@pool.example.org", lifetime=60,
                            authorizations=("READ", "WRITE"), now=1000)
    header, payload, signed, _ = idtokens.split(token)
    assert header == {"alg": "HS256", "kid": POOL}
    assert set(payload) == {"iat", "exp", "iss", "jti", "sub", "scope"} and payload["exp"] == 1060
    # the same JSON text HTCondor's writer makes: sorted keys, no blanks, "/" escaped
    text = base64.urlsafe_b64decode(signed.split(".")[1] + "==").decode()
    assert '"scope":"condor:\\/READ condor:\\/WRITE"' in text and text.startswith('{"exp":1060,"iat":1000,')


SHIM = DATA / "htcondor_token_shim.cpp"
HTCONDOR_LIBS = Path(__import__("htcondor").__file__).parent.parent / "htcondor.libs"
MINT_WITH_HTCONDOR = """
import ctypes, sys, htcondor
lib = ctypes.CDLL(sys.argv[1])
for name, value in (("TRUST_DOMAIN", sys.argv[2]), ("SEC_TOKEN_POOL_SIGNING_KEY_FILE", sys.argv[3])):
    lib.birdbath_param_insert(name.encode(), value.encode())
out = ctypes.create_string_buffer(4096)
size = lib.birdbath_generate_token(sys.argv[4].encode(), b"POOL", b"READ", ctypes.c_long(600), out, 4096)
assert size > 0, size
print(out.value.decode())
"""


def test_a_token_htcondor_makes_now_with_a_new_key_verifies_here(tmp_path):
    """Live: HTCondor's generate_token from the wheel's library, with a key file the gateway just made."""
    library = next(HTCONDOR_LIBS.glob("libcondor_utils_*.so"), None)
    if shutil.which("g++") is None or library is None:
        pytest.skip("needs g++ and the htcondor wheel's libcondor_utils")
    shim = tmp_path / "shim.so"
    subprocess.run(["g++", "-shared", "-fPIC", str(SHIM), "-o", str(shim), f"-L{HTCONDOR_LIBS}",
                    f"-l:{library.name}", f"-Wl,-rpath,{HTCONDOR_LIBS}"], check=True, timeout=120)
    idtokens.create_key_file(tmp_path / "POOL")
    made = subprocess.run([sys.executable, "-c", MINT_WITH_HTCONDOR, str(shim), DOMAIN, str(tmp_path / "POOL"),
                           "carol@birdbath.test"], capture_output=True, text=True, timeout=120, check=False,
                          env=dict(os.environ, CONDOR_CONFIG="/dev/null"))
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    keys = SigningKeys(tmp_path / "POOL")
    claims = IdTokens(keys, TokenPolicy(DOMAIN)).verify(token)
    assert claims.subject == "carol@birdbath.test" and claims.scopes == ("condor:/READ",)
    assert 590 <= claims.expires - time.time() <= 600
    _, _, signed, signature = idtokens.split(token)
    assert idtokens.sign(keys, POOL, signed) == signature


def test_key_files_others_may_read_or_that_are_missing_are_refused(tmp_path):
    key = private_copy(DATA / "POOL", tmp_path / "POOL")
    key.chmod(0o640)
    with pytest.raises(InvalidToken, match="may be read or written by others"):
        SigningKeys(key).key(POOL)
    with pytest.raises(InvalidToken, match="no signing key file"):
        SigningKeys(key, tmp_path).key("absent")
    for kid in ("../POOL", ".."):
        with pytest.raises(InvalidToken, match="not a key name"):
            SigningKeys(key, tmp_path / "keys").key(kid)


def test_scopes_bound_permissions_with_htcondors_hierarchy():
    assert scopes.permissions(("condor:/READ",), bounded=False) == {Permission.READ}
    assert scopes.permissions(("condor:/WRITE",), bounded=False) == {Permission.READ, Permission.WRITE}
    assert scopes.permissions(("condor:/ADMINISTRATOR",), bounded=False) == {Permission.READ, Permission.WRITE}
    assert scopes.permissions(("condor:/ADVERTISE_STARTD",), bounded=False) == {Permission.READ}
    assert scopes.permissions(("storage.read:/",), bounded=False) is None  # an IDTOKEN without condor scopes
    assert scopes.permissions(("storage.read:/",), bounded=True) == frozenset()  # a SciToken: nothing


def test_the_revocation_expression_and_max_age_are_honoured(stored_keys):
    token = idtokens.create(stored_keys, POOL, DOMAIN, "alice@birdbath.test", lifetime=600)
    jti = idtokens.split(token)[1]["jti"]
    revoking = IdTokens(stored_keys, TokenPolicy(DOMAIN, revocation=classad2.ExprTree(f'jti == "{jti}"')))
    with pytest.raises(InvalidToken, match="revoked"):
        revoking.verify(token)
    other = idtokens.create(stored_keys, POOL, DOMAIN, "alice@birdbath.test", lifetime=600)
    assert revoking.verify(other).subject == "alice@birdbath.test"
    undecided = IdTokens(stored_keys, TokenPolicy(DOMAIN, revocation=classad2.ExprTree("nosuchclaim")))
    with pytest.raises(InvalidToken, match="revoked"):  # undefined: revoked, out of caution
        undecided.verify(other)
    old = idtokens.create(stored_keys, POOL, DOMAIN, "alice@birdbath.test", now=time.time() - 100)
    with pytest.raises(InvalidToken, match="sec_token_max_age"):
        IdTokens(stored_keys, TokenPolicy(DOMAIN, max_age=60)).verify(old)


def test_the_knobs_are_checked_at_start(tmp_path):
    key = private_copy(DATA / "POOL", tmp_path / "POOL")
    base = ("[birdbath]\nenable_soap_ssl = true\nsoap_ssl_server_keyfile = \"/nonexistent\"\n"
            f'trust_domain = "{DOMAIN}"\n')
    for extra, message in [
        (f'sec_token_pool_signing_key_file = "{tmp_path / "absent"}"', "no signing key file"),
        ('sec_password_directory = "/nonexistent/keys"', "is not a directory"),
        ('scitokens_trusted_issuers = ["http://issuer.example"]', "not an https:// URL"),
        (f'sec_token_pool_signing_key_file = "{key}"\nsec_token_revocation_expr = "jti =="',
         "not a ClassAd expression"),
    ]:
        path = tmp_path / "gateway.toml"
        path.write_text(base + extra + "\n")
        with pytest.raises(ConfigError, match=message):
            load(path).identification()
    path.write_text(base + f'sec_token_pool_signing_key_file = "{key}"\n')
    with pytest.raises(ConfigError, match="soap_ssl_server_keyfile"):  # tokens alone are a way in: TLS is next
        validate(load(path))


# -- identification, unit: throttled like passwords ----------------------------------------------------------
def test_an_invalid_token_counts_as_a_failed_login_and_a_valid_one_waits_out_the_penalty(stored_keys):
    clock = Clock()
    tokens = BearerTokens(IdTokens(stored_keys, TokenPolicy(DOMAIN)), None, None)
    identification = Identification(tokens=tokens, throttle=LoginThrottle(clock, ThrottleSettings(2.0, 60.0)))

    def attempt(token: str) -> list:
        found: list = []
        header = f"Bearer {token}".encode()
        call = Deferred.fromCoroutine(identification.caller(Connection(True, "192.0.2.7", 40000, "192.0.2.1", 1985),
                                                            header))
        call.addCallbacks(found.append, lambda failure: found.append(failure.trap(Refusal) and failure.value))
        return found

    good = idtokens.create(stored_keys, POOL, DOMAIN, "alice@birdbath.test", lifetime=600)
    forged = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    bad = attempt(forged)
    assert bad == []  # its answer waits the penalty
    refused = attempt(good)
    assert refused[0].code == 429 and refused[0].retry_after == 2
    clock.advance(2)
    assert bad[0].code == 401 and bad[0].token_error and "signature does not match" in bad[0].message
    (caller,) = attempt(good)
    assert caller == Caller("192.0.2.7", "alice@birdbath.test", Authentication.IDTOKEN) and caller.permissions is None


def test_an_invalid_token_challenge_is_rfc_6750s():
    refusal = Refusal(401, 'Invalid bearer token: the token\'s issuer "x" \\ is not trusted', token_error=True)
    assert refusal.challenges() == [(b'Bearer realm="birdbath", error="invalid_token", '
                                     b"error_description=\"Invalid bearer token: the token's issuer 'x' ? is not "
                                     b'trusted"')]


def test_idtokens_rules_of_the_map_file_map_subjects_and_others_stay_as_they_are(stored_keys):
    mapfile = CertificateMap.parse('IDTOKENS "^robot@birdbath\\.test$" carol\n')
    tokens = BearerTokens(IdTokens(stored_keys, TokenPolicy(DOMAIN)), None, mapfile)
    robot = idtokens.create(stored_keys, POOL, DOMAIN, "robot@birdbath.test")
    assert tokens.verify(robot, "h").caller.user == "carol"
    alice = idtokens.create(stored_keys, POOL, DOMAIN, "alice@birdbath.test", authorizations=("READ",))
    caller = tokens.verify(alice, "h").caller
    assert caller == Caller("h", "alice@birdbath.test", Authentication.IDTOKEN)
    assert caller.permissions == {Permission.READ}


# -- end to end ------------------------------------------------------------------------------------------------
class Issuer:
    """A SciTokens issuer served on loopback TLS: OIDC discovery and a JWKS of one RSA key made for the test."""

    KID = "test-key"

    def __init__(self, pki: TestPki) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.update(kid=self.KID, alg="RS256", use="sig")
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # the name http.server calls
                documents = {"/issuer/.well-known/openid-configuration":
                             {"issuer": issuer.url, "jwks_uri": issuer.url + "/jwks"},
                             "/issuer/jwks": {"keys": [jwk]}}
                body = json.dumps(documents[self.path]).encode() if self.path in documents else b"{}"
                self.send_response(200 if self.path in documents else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(pki.server_keyfile))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}/issuer"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def token(self, subject: str, scope: str = "condor:/READ condor:/WRITE", lifetime: int = 600,
              issuer: str | None = None) -> str:
        token = scitokens.SciToken(key=self.key, key_id=self.KID)
        token.update_claims({"sub": subject, "scope": scope})
        return token.serialize(issuer=issuer or self.url, lifetime=lifetime).decode()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> TestPki:
    return TestPki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def issuer(pki):
    served = Issuer(pki)
    yield served
    served.close()


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> SigningKeys:
    tmp = tmp_path_factory.mktemp("gateway-keys")
    (tmp / "keys").mkdir()
    idtokens.create_key_file(tmp / "keys" / "second")
    idtokens.create_key_file(tmp / "POOL")
    return SigningKeys(tmp / "POOL", tmp / "keys")


def config_text(pki: TestPki, keys: SigningKeys, issuer: Issuer) -> str:
    pattern = issuer.url.replace(".", "\\\\.")
    pki.mapfile.write_text(TestPki.MAP_FILE + f'SCITOKENS "^{pattern},(sci[a-z]+)$" \\1\n')
    return (QUEUE_ONLY + pki.config(extra=f'trust_domain = "{DOMAIN}"\n'
                                          f'sec_token_pool_signing_key_file = "{keys.pool_file}"\n'
                                          f'sec_password_directory = "{keys.directory}"\n'
                                          f'scitokens_trusted_issuers = ["{issuer.url}"]\n'
                                          "password_failure_delay = 1\nmax_password_failure_delay = 1\n"))


@pytest.fixture(scope="module")
def gateway(pki, keys, issuer, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gateway")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SSL_CERT_FILE", str(pki.ca_file))  # the gateway trusts the test issuer's certificate
        process = GatewayProcess(tmp / "state", config_text(pki, keys, issuer), tmp=tmp, ssl=True).start()
    yield process
    process.stop()


def call(gateway: GatewayProcess, pki: TestPki, token: str | None, operation: str, **params) -> requests.Response:
    http = requests.Session()
    http.trust_env = False
    http.verify = str(pki.ca_file)
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return http.post(gateway.https_url + f"submission/json/{operation}", data=json.dumps(params), headers=headers,
                     timeout=60)


def submitted_owner(gateway, pki, token) -> str:
    answer = call(gateway, pki, token, "submit", ad=JSON_JOB)
    assert answer.status_code == 200 and answer.json()["status"]["code"] == "OK", answer.text
    job = answer.json()["id"].rsplit("#", 1)[1]
    found = call(gateway, pki, token, "getJobAd", id=job)
    assert found.json()["status"]["code"] == "OK", found.text
    return found.json()["ad"]["Owner"]["VALUE"]


def test_an_idtoken_submits_and_queries_as_its_subject(gateway, pki, keys):
    token = idtokens.create(keys, POOL, DOMAIN, "alice@birdbath.test", lifetime=600)
    assert submitted_owner(gateway, pki, token) == "alice"
    wait_for_line(gateway.log, "submit from 127.0.0.1: OK", "(alice@birdbath.test by idtoken)")
    named = idtokens.create(keys, "second", DOMAIN, "bob@birdbath.test", lifetime=600)  # sec_password_directory
    assert submitted_owner(gateway, pki, named) == "bob"


def test_a_read_token_queries_but_may_not_submit(gateway, pki, keys):
    token = idtokens.create(keys, POOL, DOMAIN, "alice@birdbath.test", lifetime=600, authorizations=("READ",))
    assert call(gateway, pki, token, "getSubmissions").json()["status"]["code"] == "OK"
    answer = call(gateway, pki, token, "submit", ad=JSON_JOB).json()["status"]
    assert answer["code"] == "FAIL" and "scope does not grant WRITE (condor:/WRITE)" in answer["text"]


def test_a_token_works_for_soap_too_and_refusals_come_as_faults(gateway, pki, keys):
    from tests.test_tls import GET_VERSION

    http = requests.Session()
    http.trust_env = False
    http.verify = str(pki.ca_file)
    good = idtokens.create(keys, POOL, DOMAIN, "alice@birdbath.test", lifetime=600)
    answer = http.post(gateway.https_url, data=GET_VERSION, headers={"Authorization": f"Bearer {good}"}, timeout=60)
    assert answer.status_code == 200, answer.text
    answer = http.post(gateway.https_url, data=GET_VERSION, headers={"Authorization": "Bearer not-a-token"},
                       timeout=60)
    assert answer.status_code == 401
    assert "not a JSON Web Token" in body_element(answer.content).findtext("faultstring")
    assert answer.headers["WWW-Authenticate"].startswith('Bearer realm="birdbath", error="invalid_token"')


def forged(keys: SigningKeys, header: dict, payload: dict, signature: bytes | None = None) -> str:
    encode = idtokens._b64  # the token's own encoding
    signed = encode(json.dumps(header).encode()) + "." + encode(json.dumps(payload).encode())
    return signed + "." + encode(signature if signature is not None else idtokens.sign(keys, POOL, signed))


def bad_tokens(keys: SigningKeys, tmp: Path) -> list[tuple[str, str, str]]:
    now = int(time.time())
    claims = {"iss": DOMAIN, "sub": "alice@birdbath.test", "iat": now, "jti": "1234"}
    idtokens.create_key_file(tmp / "POOL")
    other_key = SigningKeys(tmp / "POOL")
    return [
        ("expired", idtokens.create(keys, POOL, DOMAIN, "alice@birdbath.test", lifetime=60, now=now - 3600),
         "the token expired"),
        ("wrong key", idtokens.create(other_key, POOL, DOMAIN, "alice@birdbath.test"),
         "signature does not match signing key 'POOL'"),
        ("wrong kid", forged(keys, {"alg": "HS256", "kid": "nosuch"}, claims, b"x" * 32), "no signing key file"),
        ("wrong issuer", forged(keys, {"alg": "HS256", "kid": POOL}, {**claims, "iss": "elsewhere.example"}),
         "issuer 'elsewhere.example' is not trusted"),
        ("malformed", "abc.def", "not a JSON Web Token"),
        ("alg none", forged(keys, {"alg": "none", "kid": POOL}, claims, b""), "algorithm 'none' is not accepted"),
        ("no subject", forged(keys, {"alg": "HS256", "kid": POOL}, {k: v for k, v in claims.items() if k != "sub"}),
         "no subject"),
    ]


def test_invalid_idtokens_are_refused_with_the_reason_and_a_bearer_challenge(gateway, pki, keys, tmp_path):
    for name, token, reason in bad_tokens(keys, tmp_path):
        answer = call(gateway, pki, token, "getSubmissions")
        assert answer.status_code == 401, name
        assert answer.json()["status"]["code"] == "FAIL" and reason in answer.json()["status"]["text"], name
        challenge = answer.headers["WWW-Authenticate"]
        assert challenge.startswith('Bearer realm="birdbath", error="invalid_token", error_description="'), name
        assert reason.replace('"', "'") in challenge, name
    wait_for_line(gateway.log, "Bearer token of 'alice@birdbath.test' from 127.0.0.1 failed")


def test_a_token_on_the_plain_port_is_refused_unchecked(gateway, keys):
    token = idtokens.create(keys, POOL, DOMAIN, "alice@birdbath.test", lifetime=600)
    answer = requests.post(gateway.url + "submission/json/getSubmissions", data="{}", timeout=60,
                           headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    assert answer.status_code == 403
    assert "Bearer tokens are accepted only on the SSL port" in answer.json()["status"]["text"]


def test_without_credentials_the_challenge_offers_bearer(gateway, pki):
    answer = call(gateway, pki, None, "getSubmissions")
    assert answer.status_code == 401 and answer.headers["WWW-Authenticate"] == 'Bearer realm="birdbath"'
    assert "a client certificate or a bearer token" in answer.json()["status"]["text"]


def test_the_rest_face_refuses_with_the_same_challenges(gateway, pki):
    http = requests.Session()
    http.trust_env = False
    http.verify = str(pki.ca_file)
    answer = http.get(gateway.https_url + "api/v1/jobs", timeout=60)
    assert answer.status_code == 401 and answer.headers["WWW-Authenticate"] == 'Bearer realm="birdbath"'
    assert answer.headers["Content-Type"] == "application/problem+json"
    invalid = http.get(gateway.https_url + "api/v1/jobs", headers={"Authorization": "Bearer not.a.token"}, timeout=60)
    assert invalid.status_code == 401
    assert invalid.headers["WWW-Authenticate"].startswith('Bearer realm="birdbath", error="invalid_token"')


def test_a_scitoken_from_the_trusted_issuer_submits_as_its_mapped_user(gateway, pki, issuer):
    assert submitted_owner(gateway, pki, issuer.token("scialice")) == "scialice"
    wait_for_line(gateway.log, "submit from 127.0.0.1: OK", "(scialice by scitoken)")


def test_a_read_scitoken_may_not_submit(gateway, pki, issuer):
    token = issuer.token("scialice", scope="condor:/READ")
    assert call(gateway, pki, token, "getSubmissions").json()["status"]["code"] == "OK"
    answer = call(gateway, pki, token, "submit", ad=JSON_JOB).json()["status"]
    assert answer["code"] == "FAIL" and "condor:/WRITE" in answer["text"]


class SilentIssuer:
    """An issuer's address whose server accepts every connection and never sends a byte."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self.server.getsockname()[1]}/issuer"
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                self.held.append(self.server.accept()[0])
            except OSError:
                return  # closed

    def close(self) -> None:
        self.server.close()
        for connection in self.held:
            connection.close()


@pytest.fixture
def library(tmp_path, pki):
    """The scitokens library as the gateway configures it, with fetches bounded by half a second; its process-wide
    settings are put back afterwards."""
    from scitokens.utils import config as library_config
    from scitokens.utils import keycache

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keycache, "request", urllib.request)
        patch.setattr(keycache, "KEYCACHE_INSTANCE", None)
        patch.setattr(library_config, "configuration", library_config.configuration)
        patch.setenv("SSL_CERT_FILE", str(pki.ca_file))  # the test issuer's certificate is trusted
        configure(tmp_path, fetch_timeout=0.5)
        yield


def test_a_scitokens_keys_are_fetched_within_the_bound(library, issuer):
    claims = SciTokens(SciTokenSettings((issuer.url,))).verify(issuer.token("scialice"))
    assert (claims.issuer, claims.subject) == (issuer.url, "scialice")


def test_a_scitoken_whose_issuer_never_answers_is_refused_after_the_timeout(library, issuer):
    silent = SilentIssuer()
    try:
        token = issuer.token("scialice", issuer=silent.url)  # signed by a key the silent issuer would never send
        with pytest.raises(InvalidToken) as refused:
            SciTokens(SciTokenSettings((silent.url,))).verify(token)
    finally:
        silent.close()
    assert str(refused.value) == (f"the keys of issuer {silent.url} could not be had: {silent.url}/.well-known/"
                                  f"openid-configuration did not answer within 0.5 s")
    assert silent.held  # it was reached, and said nothing


def test_bad_scitokens_are_refused(gateway, pki, issuer):
    expired = call(gateway, pki, issuer.token("scialice", lifetime=-60), "getSubmissions")
    assert expired.status_code == 401 and "the token has expired" in expired.json()["status"]["text"]
    stranger = issuer.token("scialice", issuer="https://127.0.0.1:1/elsewhere")
    untrusted = call(gateway, pki, stranger, "getSubmissions")
    assert untrusted.status_code == 401 and "is not trusted" in untrusted.json()["status"]["text"]
    unmapped = call(gateway, pki, issuer.token("mallory"), "getSubmissions")
    assert unmapped.status_code == 403
    assert f"{issuer.url},mallory is not mapped" in unmapped.json()["status"]["text"]
    assert "WWW-Authenticate" not in unmapped.headers


def test_a_token_from_birdbath_token_create_is_found_and_used_by_the_client(gateway, pki, keys, tmp_path):
    from birdbath_client import Credentials, Schedd

    config = tmp_path / "gateway.toml"
    config.write_text(f'[birdbath]\ntrust_domain = "{DOMAIN}"\n'
                      f'sec_token_pool_signing_key_file = "{keys.pool_file}"\n')
    tokens = tmp_path / "tokens.d"
    environment = dict(os.environ, _CONDOR_SEC_TOKEN_DIRECTORY=str(tokens), CONDOR_CONFIG="/dev/null",
                       PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'clients' / 'python'}")
    made = subprocess.run([sys.executable, "-m", "birdbath_client.cli", "token", "create", "-identity",
                           "dave@birdbath.test", "-lifetime", "600", "-authz", "READ", "-authz", "WRITE",
                           "-token", "gateway", "-config", str(config)], env=environment, capture_output=True,
                          text=True, timeout=120, check=False)
    assert made.returncode == 0, made.stderr
    assert (tokens / "gateway").stat().st_mode & 0o777 == 0o600
    credentials = Credentials.from_environment({"_CONDOR_SEC_TOKEN_DIRECTORY": str(tokens),
                                                "BIRDBATH_CA": str(pki.ca_file)})
    assert credentials.token == (tokens / "gateway").read_text().strip()
    schedd = Schedd(gateway.https_url, credentials=credentials)
    (job,) = schedd.submit({"Cmd": "/bin/true", "Requirements": "FALSE"})
    assert schedd.job(job)["Owner"] == "dave"
    assert schedd.submission_api.job_ad(job)["Owner"] == "dave"  # the JSON API (urllib) sends it too
    assert Credentials(token="t").headers("http://127.0.0.1:1984/") == {}  # never in clear text


def test_birdbath_token_create_without_the_gateway_installed_says_where_it_runs(monkeypatch, capsys):
    """The client finds the command through the entry point the gateway's distribution declares: with no
    distribution declaring it (the client installed alone), it says so instead of failing on an import."""
    from birdbath_client import cli

    assert [point.value for point in cli.entry_points(group=cli.COMMANDS, name="token")] == \
        ["gateway.identity.tokentool:main"]
    monkeypatch.setattr(cli, "entry_points", lambda **_: ())
    assert cli.main(["token", "create", "-identity", "dave@birdbath.test"]) == 1
    assert "runs where the gateway is installed" in capsys.readouterr().err


def test_the_client_finds_tokens_as_htcondors_tools_do(tmp_path):
    from birdbath_client.credentials import discover_token

    (tmp_path / "b").write_text("# a comment\n\ntoken-b\n")
    (tmp_path / "a").write_text("token-a\n")
    assert discover_token({"_CONDOR_SEC_TOKEN_DIRECTORY": str(tmp_path)}) == "token-a"
    assert discover_token({"BEARER_TOKEN_FILE": str(tmp_path / "b"), "_CONDOR_SEC_TOKEN_DIRECTORY": "/x"}) == \
        "token-b"
    assert discover_token({"BEARER_TOKEN": " token-c \n", "BEARER_TOKEN_FILE": str(tmp_path / "b")}) == "token-c"
    assert discover_token({"_CONDOR_SEC_TOKEN_DIRECTORY": str(tmp_path / "none")}) is None



def read_token_service(gateway, pki, keys, wsdl: str):
    """A zeep client of the service at ``wsdl`` that sends a READ-only IDTOKEN of alice's over TLS."""
    import zeep
    from zeep.transports import Transport

    token = idtokens.create(keys, POOL, DOMAIN, "alice@birdbath.test", lifetime=600, authorizations=("READ",))
    http = requests.Session()
    http.trust_env = False
    http.verify = str(pki.ca_file)
    http.headers["Authorization"] = f"Bearer {token}"
    return zeep.Client(gateway.https_url + wsdl, transport=Transport(session=http)).service


def test_aviary_takes_the_token_and_its_scope(gateway, pki, keys):
    query = read_token_service(gateway, pki, keys, "services/query?wsdl")
    assert query.getSubmissionSummary() is not None
    job = read_token_service(gateway, pki, keys, "services/job?wsdl")
    answer = job.submitJob(cmd="/bin/true", args="", owner="alice", iwd="/tmp")
    assert answer.status.code != "OK" and "condor:/WRITE" in answer.status.text


def test_a_read_token_on_soap_reads_but_begins_no_transaction(gateway, pki, keys):
    schedd = read_token_service(gateway, pki, keys, "condorSchedd.wsdl")
    assert schedd.getJobAds(None, "TRUE").status.code == "SUCCESS"
    refused = schedd.beginTransaction(60).status
    assert refused.code == "FAIL" and "condor:/WRITE" in refused.message
