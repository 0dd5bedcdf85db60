"""Caller identity (gateway/identity): unit tests of the certificate map file, the password file, the kernel's
socket tables, the subject's one-line form and the decisions that turn them into a Caller; and, end to end as
root, a loopback caller identified as the user owning its socket."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import os
import socket
import sys
import urllib.request
import warnings

import bcrypt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gateway.core.auth import Authentication, Caller
from gateway.identity import peers
from gateway.identity.callers import Connection, Identification, Refusal, basic_credentials, describe
from gateway.identity.mapfile import SSL, CertificateMap, MapFileError
from gateway.identity.passwords import PasswordFile, PasswordFileError, RememberedPasswords
from gateway.identity.tls import SHORT_NAMES, subject_oneline
from tests.as_user import post_as
from tests.test_logging import wait_for_line
from tests.test_tls import JSON_JOB

ALICE = "/C=US/O=Example/OU=People/CN=alice"


def run(coroutine):
    return asyncio.run(coroutine)


# -- the certificate map file ------------------------------------------------------------------------------
MAP = r'''
# people: the CN is the user, in the example.org domain
SSL "^/C=US/O=Example/OU=People/CN=([a-z]+)$"     \1@example.org

   # robots: a fixed user; "first match wins" puts this after the people
SSL "/OU=Robots/CN=(build|test)-robot$"  robot-\1   # a comment after the rule
ssl "/CN=alice$"                          never-reached
SSL /O=Bare/CN=(.*)                       bare-\1
GSI "^/DC=org/DC=grid/CN=(.*)$"           grid-\1
SSL "/CN=quote \"q\" (x)$"                quoted-\1
SSL "^/O=Optional(/OU=([^/]*))?/CN=(.*)$" \3-\2-\5-\\
'''


@pytest.fixture(scope="module")
def mapping() -> CertificateMap:
    return CertificateMap.parse(MAP)


@pytest.mark.parametrize("subject, user", [
    (ALICE, "alice@example.org"),  # \1 substitution
    ("/C=US/O=Example/OU=Robots/CN=build-robot", "robot-build"),
    ("/C=US/O=Other/CN=alice", "never-reached"),  # unanchored search; method names ignore case
    ("/O=Bare/CN=x y", "bare-x y"),  # a principal without quotes
    ('/CN=quote "q" x', "quoted-x"),  # \" inside a quoted principal
    ("/O=Optional/CN=z", r"z--\5-\\"),  # a group that took no part is empty; past the groups, \N stays as written
    ("/O=Optional/OU=u/CN=z", r"z-u-\5-\\"),
])
def test_map_file_rules_map_subjects_first_match_wins(mapping, subject, user):
    assert mapping.canonicalize(SSL, subject) == user


def test_an_unmapped_subject_and_other_methods_map_to_nobody(mapping):
    assert mapping.canonicalize(SSL, "/C=US/O=Example/OU=People/CN=Alice1") is None  # anchored, [a-z]+ only
    assert mapping.canonicalize(SSL, "/DC=org/DC=grid/CN=carol") is None  # a GSI rule does not map SSL subjects
    assert mapping.canonicalize("GSI", "/DC=org/DC=grid/CN=carol") == "grid-carol"


def test_comments_and_blank_lines_make_no_rules(mapping):
    assert [rule.line for rule in mapping.rules] == [3, 6, 7, 8, 9, 10, 11]


@pytest.mark.parametrize("line, named", [
    ('SSL "^/CN=alice$"', "expected METHOD"),  # no user
    ("SSL", "expected METHOD"),
    ('SSL "^/CN=(alice$" alice', "bad regular expression"),
    ('SSL "^/CN=alice$" alice bob', "unexpected text"),
    ("SSL ^/CN=alice smith$ alice", "unexpected text"),  # blanks in an unquoted principal
    ('SSL "^/CN=alice$ alice', "expected METHOD"),  # an unterminated quote runs to the end of the line
    ("@include /etc/other.map", "@include"),
])
def test_a_bad_line_refuses_the_whole_file_and_says_where(line, named):
    with pytest.raises(MapFileError) as error:
        CertificateMap.parse(f"# first\n{line}\n", "map")
    assert "map line 2" in str(error.value) and named in str(error.value)


def test_a_map_file_that_cannot_be_read_is_refused(tmp_path):
    with pytest.raises(MapFileError, match="cannot read"):
        CertificateMap.load(tmp_path / "missing")
    (tmp_path / "binary").write_bytes(b"SSL \xff\xfe x\n")
    with pytest.raises(MapFileError, match="cannot read"):
        CertificateMap.load(tmp_path / "binary")


# -- the password file -------------------------------------------------------------------------------------
#: a bcrypt hash of "x" (fixed: parametrized test ids must be the same in every xdist worker)
HASH_OF_X = "$2b$04$9d/spSCG/lJQA.khY3y8Yevh1gsDz79OnS/Qt/ONEwTqwNPNtofee"


def bcrypt_hash(password: str, prefix: str = "$2b$") -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode().replace("$2b$", prefix, 1)


@pytest.fixture(scope="module")
def passwords() -> PasswordFile:
    return PasswordFile.parse(f"# made by htpasswd -B (which writes $2y$)\n\n"
                              f"alice:{bcrypt_hash('wonderland', '$2y$')}\n"
                              f"bob@example.org:{bcrypt_hash('b0b pass wörd')}\n")


def test_passwords_are_checked_against_their_bcrypt_hashes(passwords):
    assert PasswordFile.parse(f"x:{HASH_OF_X}\n").check("x", "x")
    assert passwords.check("alice", "wonderland")
    assert passwords.check("bob@example.org", "b0b pass wörd")
    assert not passwords.check("alice", "Wonderland")
    assert not passwords.check("alice", "")
    assert not passwords.check("bob", "b0b pass wörd")  # the user is bob@example.org
    assert not passwords.check("nobody", "wonderland")  # an unknown user, even with another user's password


@pytest.mark.parametrize("line, named", [
    ("alice", "expected user:hash"),
    (":$2b$04$" + "a" * 53, "expected user:hash"),
    ("alice smith:" + HASH_OF_X, "expected user:hash"),
    ("alice:wonderland", "not a bcrypt hash"),  # a clear-text password
    ("alice:$apr1$Ko3RBqMe$1FjgcHkNhq0xgQzvWEEIk/", "not a bcrypt hash"),  # htpasswd's default MD5
    ("alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", "not a bcrypt hash"),
    ("alice:" + HASH_OF_X[:-1], "not a bcrypt hash"),  # truncated
])
def test_a_bad_password_line_refuses_the_whole_file(line, named):
    with pytest.raises(PasswordFileError) as error:
        PasswordFile.parse(f"bob:{bcrypt_hash('b')}\n{line}\n", "passwords")
    assert "passwords line 2" in str(error.value) and named in str(error.value)


def test_a_user_named_twice_is_refused():
    with pytest.raises(PasswordFileError, match="named twice"):
        PasswordFile.parse(f"bob:{bcrypt_hash('a')}\nbob:{bcrypt_hash('b')}\n")


def test_remembered_passwords_are_forgotten_after_their_lifetime_and_beyond_the_size(clock):
    remembered = RememberedPasswords(lifetime=60, size=2, clock=clock.seconds)
    remembered.remember("alice", "wonderland")
    assert ("alice", "wonderland") in remembered
    assert ("alice", "Wonderland") not in remembered and ("bob", "wonderland") not in remembered
    clock.advance(60)
    assert ("alice", "wonderland") not in remembered
    for user in ("a", "b", "c"):
        remembered.remember(user, "pw")
    assert ("a", "pw") not in remembered and ("b", "pw") in remembered and ("c", "pw") in remembered


def test_remembered_passwords_keep_no_password():
    remembered = RememberedPasswords()
    remembered.remember("alice", "wonderland")
    assert "wonderland" not in repr(vars(remembered))


# -- the kernel's socket tables ----------------------------------------------------------------------------
little_endian = pytest.mark.skipif(sys.byteorder != "little", reason="the samples are a little-endian kernel's")

TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:07C0 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 576 1 0 100 0 0 10 0
   1: 0100007F:07C0 0100007F:B26E 01 00000000:00000000 00:00000000 00000000     0        0 578 1 0 20 4 30 10 -1
   2: 0100007F:B26E 0100007F:07C0 01 00000000:00000000 00:00000000 00000000  1000        0 577 1 0 20 4 30 10 -1
   3: 0200007F:B26E 0100007F:07C0 01 00000000:00000000 00:00000000 00000000  1001        0 579 1 0 20 4 30 10 -1
   4: 0100007F:B26F 0100007F:07C0 06 00000000:00000000 03:00000F1B 00000000     0        0 0 3 0
   5: garbage line
"""
TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when \
retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:D431 00000000000000000000000001000000:07C0 01 00000000:00000000 \
00:00000000 00000000  1002        0 580 1 0 20 4 30 10 -1
   1: 0000000000000000FFFF00000300007F:D431 0000000000000000FFFF00000100007F:07C0 01 00000000:00000000 \
00:00000000 00000000  1003        0 581 1 0 20 4 30 10 -1
"""


@little_endian
@pytest.mark.parametrize("text, host, port", [
    ("0100007F:0CC8", "127.0.0.1", 3272),
    ("0200007F:B26E", "127.0.0.2", 45678),
    ("00000000000000000000000001000000:07C0", "::1", 1984),
    ("0000000000000000FFFF00000100007F:07C0", "127.0.0.1", 1984),  # IPv4-mapped: the IPv4 address
    ("B80D0120000000000000000001000000:0050", "2001:db8::1", 80),
])
def test_table_addresses_decode_word_by_word_in_the_machines_byte_order(text, host, port):
    assert peers.decode_endpoint(text) == peers.endpoint(host, port)


@pytest.mark.parametrize("text", ["0100007F", "0100007F:", "01007F:0050", "XYZ0007F:0050"])
def test_a_malformed_table_address_is_refused(text):
    with pytest.raises(ValueError):
        peers.decode_endpoint(text)


@little_endian
def test_the_client_end_of_a_connection_is_found_not_the_servers(tmp_path):
    tcp, tcp6 = tmp_path / "tcp", tmp_path / "tcp6"
    tcp.write_text(TCP)
    tcp6.write_text(TCP6)
    tables = (tcp, tcp6, tmp_path / "unreadable")
    server = peers.endpoint("127.0.0.1", 1984)

    def owner(host: str, port: int, to=server):
        return peers.socket_owner(peers.endpoint(host, port), to, tables)

    assert owner("127.0.0.1", 45678) == 1000  # not line 1, the server's own socket (uid 0)
    assert owner("127.0.0.2", 45678) == 1001
    assert owner("::1", 54321, peers.endpoint("::1", 1984)) == 1002
    assert owner("::ffff:127.0.0.3", 54321) == 1003  # a dual-stack listener's IPv4 client
    assert owner("127.0.0.1", 45679) is None  # a TIME_WAIT line (uid 0) is no socket of root's
    assert owner("127.0.0.1", 45680) is None
    assert owner("127.0.0.1", 45678, peers.endpoint("127.0.0.1", 1985)) is None
    assert len(list(peers.parse_table(TCP))) == 5


def test_only_lines_showing_both_ports_are_decoded():
    kept = peers.lines_with_ports(TCP, 45678, 1984).splitlines()
    assert kept and all(":B26E " in line and ":07C0 " in line for line in kept)
    assert len(kept) < len(TCP.splitlines()) - 1
    assert peers.lines_with_ports(TCP, 1, 2) == ""


def connected_pair(family: int, listen_host: str, connect_host: str):
    server = socket.socket(family)
    server.bind((listen_host, 0))
    server.listen()
    client = socket.create_connection((connect_host, server.getsockname()[1]))
    accepted, peer = server.accept()
    server.close()
    return client, accepted, peer


@pytest.mark.parametrize("family, listen_host, connect_host", [
    (socket.AF_INET, "127.0.0.1", "127.0.0.1"),
    (socket.AF_INET6, "::1", "::1"),
    (socket.AF_INET6, "::", "127.0.0.1"),  # the server sees ::ffff:127.0.0.1, the kernel lists an IPv4 socket
], ids=["ipv4", "ipv6", "dual-stack"])
def test_the_kernel_names_this_process_as_the_owner_of_a_loopback_client(family, listen_host, connect_host):
    if not socket.has_ipv6 and family == socket.AF_INET6:
        pytest.skip("no IPv6")
    try:
        client, accepted, peer = connected_pair(family, listen_host, connect_host)
    except OSError as exc:
        pytest.skip(f"cannot connect on {listen_host}: {exc}")
    with client, accepted:
        local = accepted.getsockname()
        found = peers.socket_owner(peers.endpoint(peer[0], peer[1]), peers.endpoint(local[0], local[1]))
    assert found == os.geteuid()


def test_loopback_peers_are_127_8_and_1_and_their_mapped_forms():
    assert all(map(peers.is_loopback, ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"]))
    assert not any(map(peers.is_loopback, ["10.0.0.1", "::ffff:10.0.0.1", "2001:db8::1", "localhost", ""]))


def test_user_names_come_from_the_password_database():
    assert peers.user_name(0) == "root"
    assert peers.user_name(2**31 - 2) is None


# -- the subject as HTCondor saw it ------------------------------------------------------------------------
def certificate(*attributes: x509.NameAttribute) -> x509.Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(list(attributes))
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))


def openssl_oneline(cert: x509.Certificate) -> str:
    """OpenSSL's own X509_NAME_oneline, as pyOpenSSL's X509Name shows it."""
    from OpenSSL import crypto

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        shown = repr(crypto.X509.from_cryptography(cert).get_subject())
    return shown[shown.index("'") + 1:shown.rindex("'")]


@pytest.mark.parametrize("attributes", [
    [(NameOID.COUNTRY_NAME, "US"), (NameOID.ORGANIZATION_NAME, "Example"), (NameOID.COMMON_NAME, "alice")],
    [(NameOID.COMMON_NAME, "al/ice+x"), (NameOID.ORGANIZATIONAL_UNIT_NAME, "ü\tz"),
     (NameOID.EMAIL_ADDRESS, "alice@example.org")],
    [(NameOID.DOMAIN_COMPONENT, "org"), (NameOID.DOMAIN_COMPONENT, "example"), (NameOID.USER_ID, "alice"),
     (x509.ObjectIdentifier("1.3.6.1.4.1.99999.1"), "private")],  # an OID OpenSSL has no name for
], ids=["plain", "escapes", "dc-uid-oid"])
def test_the_subject_is_named_as_openssl_names_it(attributes):
    cert = certificate(*(x509.NameAttribute(oid, value) for oid, value in attributes))
    assert subject_oneline(cert) == openssl_oneline(cert)


def test_every_short_name_is_openssls():
    values = {"2.5.4.6": "US", "1.3.6.1.4.1.311.60.2.1.3": "US"}  # country codes are two letters
    attributes = [x509.NameAttribute(x509.ObjectIdentifier(oid), values.get(oid, "v"))
                  for oid in SHORT_NAMES if oid != "2.5.4.45"]  # x500UniqueIdentifier is a bit string
    cert = certificate(*attributes)
    assert subject_oneline(cert) == openssl_oneline(cert)


# -- deciding who the caller is ----------------------------------------------------------------------------
class Kernel:
    """Socket owners by client port, counting the look-ups."""

    def __init__(self, owners: dict[int, int]) -> None:
        self.owners = owners
        self.lookups = 0

    def socket_owner(self, client: peers.Endpoint, server: peers.Endpoint) -> int | None:
        self.lookups += 1
        return self.owners.get(client.port)


class Offload:
    """Runs checks inline, counting them."""

    def __init__(self) -> None:
        self.checks = 0

    async def __call__(self, check, *args) -> bool:
        self.checks += 1
        return check(*args)


def plain(host: str = "127.0.0.1", port: int = 40000) -> Connection:
    return Connection(False, host, port, "127.0.0.1", 1984)


def tls(certificate: x509.Certificate | None = None, port: int = 40000) -> Connection:
    return Connection(True, "192.0.2.7", port, "192.0.2.1", 1985, certificate)


def basic(user: str, password: str) -> bytes:
    return b"Basic " + base64.b64encode(f"{user}:{password}".encode())


@pytest.fixture
def kernel() -> Kernel:
    return Kernel({40000: 0, 40001: 65534, 40002: 2**31 - 2})


@pytest.fixture
def offload() -> Offload:
    return Offload()


@pytest.fixture
def identification(mapping, passwords, kernel, offload) -> Identification:
    return Identification(mapping, passwords, offload, kernel.socket_owner)


def test_a_loopback_caller_is_its_sockets_owner_looked_up_once_per_connection(identification, kernel):
    connection = plain(port=40001)
    assert run(identification.caller(connection, None)) == Caller("127.0.0.1", "nobody", Authentication.SOCKET)
    assert run(identification.caller(connection, None)).user == "nobody"
    assert kernel.lookups == 1
    assert run(identification.caller(plain(port=40000), None)).user == "root"
    assert kernel.lookups == 2


def test_a_loopback_caller_the_kernel_does_not_list_or_name_is_refused(identification):
    """Not anonymous: a local client could otherwise drop its identity (reset the connection after sending its
    request) and act as default_owner."""
    for port, reason in ((49999, "not in the kernel's tables"), (40002, f"uid {2**31 - 2} has no name")):
        with pytest.raises(Refusal) as refusal:
            run(identification.caller(plain(port=port), None))
        assert refusal.value.code == 403 and reason in refusal.value.message


def test_a_remote_plain_caller_is_anonymous_without_a_look_up(identification, kernel):
    assert run(identification.caller(plain("192.0.2.7"), None)) == Caller("192.0.2.7")
    assert run(identification.caller(plain("::ffff:192.0.2.7"), None)).authentication is Authentication.NONE
    assert kernel.lookups == 0


def test_basic_on_the_plain_port_is_refused_without_checking_the_password(identification, offload):
    for credentials in (basic("alice", "wonderland"), basic("alice", "wrong"), b"Basic !!!"):
        with pytest.raises(Refusal) as refusal:
            run(identification.caller(plain(port=40001), credentials))
        assert refusal.value.code == 403 and "only on the SSL port" in refusal.value.message
    assert offload.checks == 0
    # other schemes mean nothing here and are not refused
    assert run(identification.caller(plain(port=40001), b"Bearer abc")).user == "nobody"


def test_a_mapped_certificate_is_its_user_even_with_a_password(identification, offload):
    connection = tls(certificate_of((NameOID.COUNTRY_NAME, "US"), (NameOID.ORGANIZATION_NAME, "Example"),
                                    (NameOID.ORGANIZATIONAL_UNIT_NAME, "People"), (NameOID.COMMON_NAME, "alice")))
    assert run(identification.caller(connection, basic("bob@example.org", "wrong"))) == \
        Caller("192.0.2.7", "alice@example.org", Authentication.CERTIFICATE)
    assert offload.checks == 0


def certificate_of(*attributes: tuple[x509.ObjectIdentifier, str]) -> x509.Certificate:
    return certificate(*(x509.NameAttribute(oid, value) for oid, value in attributes))


def test_an_unmapped_certificate_is_refused_even_with_the_right_password(identification):
    connection = tls(certificate_of((NameOID.ORGANIZATION_NAME, "Elsewhere"), (NameOID.COMMON_NAME, "zed")))
    with pytest.raises(Refusal) as refusal:
        run(identification.caller(connection, basic("alice", "wonderland")))
    assert refusal.value.code == 403 and "/O=Elsewhere/CN=zed is not mapped" in refusal.value.message


def test_basic_over_tls_is_checked_once_per_credentials(identification, offload):
    assert run(identification.caller(tls(), basic("alice", "wonderland"))) == \
        Caller("192.0.2.7", "alice", Authentication.PASSWORD)
    assert run(identification.caller(tls(port=40005), basic("alice", "wonderland"))).user == "alice"
    assert offload.checks == 1  # a new connection with the same credentials: remembered
    assert run(identification.caller(tls(), basic("bob@example.org", "b0b pass wörd"))).user == "bob@example.org"
    assert offload.checks == 2


@pytest.mark.parametrize("header, message", [
    (None, "Authentication required"),
    (b"Bearer abc", "Authentication required"),
    (basic("alice", "Wonderland"), "Wrong user name or password"),
    (basic("mallory", "wonderland"), "Wrong user name or password"),
    (b"Basic !!!", "Malformed"),
    (b"Basic " + base64.b64encode(b"no colon"), "Malformed"),
    (b"Basic " + base64.b64encode(b":nouser"), "Malformed"),
    (b"Basic " + base64.b64encode(b"\xff\xfe:x"), "Malformed"),
])
def test_a_tls_caller_without_a_certificate_or_good_credentials_is_refused_with_a_challenge(
        identification, header, message):
    with pytest.raises(Refusal) as refusal:
        run(identification.caller(tls(), header))
    assert refusal.value.code == 401 and refusal.value.challenge and message in refusal.value.message


def test_a_wrong_password_is_not_remembered(identification, offload):
    for _ in range(2):
        with pytest.raises(Refusal):
            run(identification.caller(tls(), basic("alice", "guess")))
    assert offload.checks == 2


def test_without_a_password_file_basic_is_no_way_in(mapping, kernel):
    identification = Identification(mapping, None, socket_owner=kernel.socket_owner)
    with pytest.raises(Refusal) as refusal:
        run(identification.caller(tls(), basic("alice", "wonderland")))
    assert refusal.value.code == 401 and not refusal.value.challenge


def test_basic_credentials_are_parsed_as_rfc_7617_says():
    assert basic_credentials(basic("alice", "pass:word")) == ("alice", "pass:word")
    assert basic_credentials(b"basic " + base64.b64encode(b"a:b")) == ("a", "b")  # the scheme ignores case
    assert basic_credentials(None) is None and basic_credentials(b"Digest x") is None


def test_the_log_names_the_user_and_how_it_was_identified():
    assert describe(Caller("h", "alice", Authentication.CERTIFICATE)) == "alice by certificate"
    assert describe(Caller("h", "bob", Authentication.SOCKET)) == "bob by socket"
    assert describe(Caller("h", "carol", Authentication.PASSWORD)) == "carol by password"
    assert describe(Caller("h")) == "anonymous"


# -- end to end: a loopback caller is the user owning its socket ---------------------------------------------
def request_as(user: str, port: int, operation: str, **params) -> dict:
    """A JSON call to the submission API made as ``user`` (``tests.as_user``)."""
    return json.loads(post_as(user, port, f"/submission/json/{operation}", json.dumps(params), "application/json"))


def call(port: int, operation: str, **params) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/submission/json/{operation}",
                                     json.dumps(params).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
def test_a_loopback_callers_jobs_are_owned_by_the_user_of_its_socket(gateway):
    theirs = request_as("nobody", gateway.port, "submit", ad=JSON_JOB)
    assert theirs["status"]["code"] == "OK", theirs
    mine = call(gateway.port, "submit", ad=JSON_JOB)
    assert mine["status"]["code"] == "OK", mine
    their_job, my_job = (answer["id"].rsplit("#", 1)[1] for answer in (theirs, mine))
    assert call(gateway.port, "getJobAd", id=their_job)["ad"]["Owner"]["VALUE"] == "nobody"
    assert call(gateway.port, "getJobAd", id=my_job)["ad"]["Owner"]["VALUE"] == "root"
    # and the gateway knows the difference: nobody may not hold root's job
    assert request_as("nobody", gateway.port, "hold", id=my_job, reason="mine now")["status"]["code"] != "OK"
    wait_for_line(gateway.log, "submit from 127.0.0.1: OK in", "(nobody by socket)")
    wait_for_line(gateway.log, "submit from 127.0.0.1: OK in", "(root by socket)")
