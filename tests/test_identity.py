"""Caller identity (gateway/identity): unit tests of the certificate map file, the password file, the kernel's
socket tables, the subject's one-line form and the decisions that turn them into a Caller; and, end to end as
root, a loopback caller identified as the user owning its socket."""

from __future__ import annotations

import asyncio
import base64
import datetime
import ipaddress
import json
import os
import socket
import time
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
from tests.accounts import post_as
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


# -- the kernel's socket diagnostics ----------------------------------------------------------------------------
def connected_pair(family: int, listen_host: str, connect_host: str):
    server = socket.socket(family)
    server.bind((listen_host, 0))
    server.listen()
    client = socket.create_connection((connect_host, server.getsockname()[1]))
    accepted, peer = server.accept()
    server.close()
    return client, accepted, peer


def ends(accepted: socket.socket, peer: tuple) -> tuple[peers.Endpoint, peers.Endpoint]:
    local = accepted.getsockname()
    return peers.endpoint(peer[0], peer[1]), peers.endpoint(local[0], local[1])


PAIRS = pytest.mark.parametrize("family, listen_host, connect_host", [
    (socket.AF_INET, "127.0.0.1", "127.0.0.1"),
    (socket.AF_INET6, "::1", "::1"),
    (socket.AF_INET6, "::", "127.0.0.1"),  # the server sees ::ffff:127.0.0.1, the kernel has an IPv4 socket
], ids=["ipv4", "ipv6", "dual-stack"])


def pair_or_skip(family: int, listen_host: str, connect_host: str):
    try:
        return connected_pair(family, listen_host, connect_host)
    except OSError as exc:
        pytest.skip(f"cannot connect on {listen_host}: {exc}")


@PAIRS
def test_the_kernel_names_this_process_as_the_owner_of_a_loopback_client(family, listen_host, connect_host):
    client, accepted, peer = pair_or_skip(family, listen_host, connect_host)
    with client, accepted:
        assert peers.tcp_peer_owner(*ends(accepted, peer), accepted) == os.geteuid()


def wait_for_state(local: peers.Endpoint, remote: peers.Endpoint, state: peers.TcpState) -> peers.DiagSocket:
    deadline = time.monotonic() + 10
    while (found := peers.tcp_socket(local, remote)) is None or found.state != state:
        assert time.monotonic() < deadline, f"the socket never became {state.name}: {found}"
        time.sleep(0.01)
    return found


@PAIRS
def test_a_client_that_closed_its_socket_is_not_proven(family, listen_host, connect_host):
    """Its end is an orphan (FIN_WAIT2, inode 0, listed with uid 0): never root, never anyone."""
    client, accepted, peer = pair_or_skip(family, listen_host, connect_host)
    with accepted:
        client_end, server_end = ends(accepted, peer)
        client.close()
        orphan = wait_for_state(client_end, server_end, peers.TcpState.FIN_WAIT2)
        assert orphan.inode == 0 and orphan.uid == 0
        with pytest.raises(peers.Unproven, match="our end of it is CLOSE_WAIT"):
            peers.tcp_peer_owner(client_end, server_end, accepted)


def test_only_the_connection_we_accepted_counts():
    """The four-tuple's server end must be our socket: the same ports on another socket prove nothing."""
    client, accepted, peer = connected_pair(socket.AF_INET, "127.0.0.1", "127.0.0.1")
    other = socket.socket()
    with client, accepted, other:
        with pytest.raises(peers.Unproven, match="does not list our end"):
            peers.tcp_peer_owner(*ends(accepted, peer), other)
        with pytest.raises(peers.Unproven, match="does not list our end"):
            peers.tcp_peer_owner(*ends(accepted, peer), None)
        client_end, server_end = ends(accepted, peer)
        elsewhere = peers.Endpoint(client_end.address, server_end.port + 1 if server_end.port < 65535 else 1)
        with pytest.raises(peers.Unproven):
            peers.tcp_peer_owner(client_end, elsewhere, accepted)


def test_the_kernel_answers_by_the_exact_four_tuple():
    client, accepted, peer = connected_pair(socket.AF_INET, "127.0.0.1", "127.0.0.1")
    with client, accepted:
        client_end, server_end = ends(accepted, peer)
        found = peers.tcp_socket(client_end, server_end)
        assert found is not None and (found.local, found.remote) == (client_end, server_end)
        assert found.state == peers.TcpState.ESTABLISHED and found.inode == os.fstat(client.fileno()).st_ino
        assert peers.tcp_socket(peers.Endpoint(client_end.address, 1), server_end) is None
        assert peers.tcp_socket(client_end, peers.endpoint("::1", server_end.port)) is None  # families differ


def test_a_short_diagnostics_message_is_refused():
    with pytest.raises(ValueError):
        peers.parse_diag_message(b"\x02\x01" + b"\0" * 40)


@pytest.mark.parametrize("host, local", [
    ("127.0.0.1", True), ("127.9.9.9", True), ("::1", True),
    ("192.0.2.254", False), ("203.0.113.9", False), ("2001:db8::9", False),  # documentation networks
])
def test_this_host_is_what_the_kernel_routes_locally(host, local):
    assert peers.is_this_host(ipaddress.ip_address(host)) is local


def test_a_unix_socket_peer_is_named_by_its_credentials():
    mine, theirs = socket.socketpair()
    with mine, theirs:
        assert peers.unix_peer_owner(mine) == os.geteuid()
    with pytest.raises(peers.Unproven):
        peers.unix_peer_owner(None)


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
    now = datetime.datetime.now(datetime.UTC)
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
    """Socket owners by client port, this host's addresses, counting the look-ups."""

    def __init__(self, owners: dict[int, int], addresses: frozenset[str] = frozenset({"192.0.2.1"})) -> None:
        self.owners = owners
        self.addresses = addresses
        self.lookups = 0

    def is_this_host(self, address) -> bool:
        return address.is_loopback or str(address) in self.addresses

    def tcp_peer_owner(self, client: peers.Endpoint, server: peers.Endpoint, accepted) -> int:
        self.lookups += 1
        if client.port not in self.owners:
            raise peers.Unproven("its socket is FIN_WAIT2, no longer a process's")
        return self.owners[client.port]

    def unix_peer_owner(self, sock) -> int:
        self.lookups += 1
        return 65534  # nobody

    user_name = staticmethod(peers.user_name)


class Offload:
    """Runs checks inline, counting them."""

    def __init__(self) -> None:
        self.checks = 0

    async def __call__(self, check, *args) -> bool:
        self.checks += 1
        return check(*args)


def plain(host: str = "127.0.0.1", port: int = 40000) -> Connection:
    """A plain connection, not yet accepted."""
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
    return Identification(mapping, passwords, offload)


@pytest.fixture
def accept(identification, kernel):
    """Accept a connection as the gate does: its client's owner asked of the test's kernel, once."""
    def accepted(connection: Connection) -> Connection:
        identification.accepted(connection, owner(connection, kernel))
        return connection
    return accepted


def owner(connection: Connection, kernel: Kernel) -> peers.PeerOwner:
    return peers.owner_of(connection.peer_host, connection.peer_port, connection.local_host, connection.local_port,
                          connection.unix, None, kernel)


def test_a_loopback_caller_is_its_sockets_owner_looked_up_once_when_accepted(accept, identification, kernel):
    connection = accept(plain(port=40001))
    assert kernel.lookups == 1
    assert run(identification.caller(connection, None)) == Caller("127.0.0.1", "nobody", Authentication.SOCKET)
    assert run(identification.caller(connection, None)).user == "nobody"
    assert kernel.lookups == 1
    assert run(identification.caller(accept(plain(port=40000)), None)).user == "root"
    assert kernel.lookups == 2


def test_a_caller_on_one_of_this_hosts_addresses_is_local(accept, identification, kernel):
    connection = accept(plain("192.0.2.1", 40001))
    assert run(identification.caller(connection, None)) == Caller("192.0.2.1", "nobody", Authentication.SOCKET)
    with pytest.raises(Refusal) as refusal:
        run(identification.caller(accept(plain("192.0.2.1", 49999)), None))
    assert "The local user of this local connection could not be identified" in refusal.value.message


def test_a_local_caller_the_kernel_does_not_prove_or_name_is_refused(accept, identification):
    """Not anonymous: a local client could otherwise drop its identity (close its socket after sending its
    request) and act as default_owner; and never root, whom its orphaned socket is listed as."""
    for port, reason in ((49999, "FIN_WAIT2, no longer a process's"), (40002, f"uid {2**31 - 2} has no name")):
        connection = accept(plain(port=port))
        for _ in range(2):  # every request of the connection
            with pytest.raises(Refusal) as refusal:
                run(identification.caller(connection, None))
            assert refusal.value.code == 403 and reason in refusal.value.message
            assert "loopback connection could not be identified" in refusal.value.message


def test_a_connection_not_identified_when_accepted_is_refused(identification):
    with pytest.raises(Refusal) as refusal:
        run(identification.caller(plain(), None))
    assert refusal.value.code == 403


def test_a_local_socket_caller_is_named_by_its_credentials(accept, identification, kernel):
    connection = Connection(False, "localhost", 0, "", 0, unix=True)
    accept(connection)
    assert run(identification.caller(connection, None)) == Caller("localhost", "nobody", Authentication.SOCKET)
    assert kernel.lookups == 1


def test_a_remote_plain_caller_is_anonymous_without_a_look_up(accept, identification, kernel):
    assert run(identification.caller(accept(plain("192.0.2.7")), None)) == \
        Caller("192.0.2.7")
    assert run(identification.caller(accept(plain("::ffff:192.0.2.7")), None)) \
        .authentication is Authentication.NONE
    assert kernel.lookups == 0


def test_basic_on_the_plain_port_is_refused_without_checking_the_password(accept, identification, offload):
    for credentials in (basic("alice", "wonderland"), basic("alice", "wrong"), b"Basic !!!"):
        with pytest.raises(Refusal) as refusal:
            run(identification.caller(accept(plain(port=40001)), credentials))
        assert refusal.value.code == 403 and "only on the SSL port" in refusal.value.message
    assert offload.checks == 0
    # a bearer token is refused as clearly, whether or not the gateway accepts tokens on its SSL port
    with pytest.raises(Refusal) as refusal:
        run(identification.caller(accept(plain(port=40001)), b"Bearer abc"))
    assert refusal.value.code == 403 and "Bearer tokens are accepted only on the SSL port" in refusal.value.message
    # other schemes mean nothing here and are not refused
    assert run(identification.caller(accept(plain(port=40001)), b"Digest abc")).user == \
        "nobody"


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
    identification = Identification(mapping, None)
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
    """A JSON call to the submission API made as ``user`` (:func:`tests.accounts.post_as`)."""
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
