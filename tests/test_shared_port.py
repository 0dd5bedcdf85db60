"""condor_shared_port: the gateway serves the connections it passes, on a named socket in the daemon socket
directory, exactly as it serves its own plain port, with no TCP port of its own: zeep and raw HTTP after the
connect request, zeep unread when the shared port forwards HTTP, and hostile bytes on the named socket dropped.
(The client library's side is in clients/python/tests/test_sharedport.py, the Java one in
tests/test_java_shared_port.py.)

condor_shared_port is :class:`gateway.testing_daemons.SharedPortStandIn`, written from HTCondor's source."""

from __future__ import annotations

import getpass
import http.client
import os
import shutil
import socket
import struct

import pytest

from gateway.daemon import cedar
from gateway.testing_daemons import SharedPortStandIn, short_directory, start_behind_shared_port
from tests.test_execution import wait_until

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = pytest.mark.gateway

SOCK_ID = "birdbath_test"
VERSION = (b'<?xml version="1.0"?><s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body>'
           b'<getVersionString xmlns="urn:condor"/></s:Body></s:Envelope>')


@pytest.fixture(scope="module")
def socket_dir():
    directory = short_directory()
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def gateway(socket_dir, tmp_path_factory):
    process = start_behind_shared_port(tmp_path_factory.mktemp("shared"), socket_dir, SOCK_ID,
                                       "[backends.local]\nslots = 0\n")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def shared_port(socket_dir, gateway):
    with SharedPortStandIn(socket_dir) as standin:
        yield standin


class ConnectFirst(http.client.HTTPConnection):
    """An HTTP connection that sends SHARED_PORT_CONNECT (the gateway's own encoding of it) once connected."""

    def __init__(self, port: int, shared_port_id: str) -> None:
        super().__init__("127.0.0.1", port, timeout=20)
        self.shared_port_id = shared_port_id

    def connect(self) -> None:
        super().connect()
        self.sock.sendall(cedar.connect_request(self.shared_port_id, "TEST", 20))


def soap_version(connection: http.client.HTTPConnection) -> tuple[int, bytes]:
    connection.request("POST", "/", VERSION, {"Content-Type": "text/xml", "SOAPAction": '""'})
    response = connection.getresponse()
    return response.status, response.read()


def test_the_gateway_listens_on_the_named_socket_only(gateway, socket_dir):
    named = socket_dir / SOCK_ID
    assert named.is_socket()
    assert named.stat().st_mode & 0o777 == 0o600  # condor_shared_port connects as root
    assert gateway.port is None
    assert "listening on http" not in gateway.log()


def test_requests_after_the_connect_request_on_one_kept_alive_connection(shared_port, gateway):
    connection = ConnectFirst(shared_port.port, SOCK_ID)
    for _ in range(3):
        status, body = soap_version(connection)
        assert status == 200 and b"SUCCESS" in body
    connection.close()
    request = shared_port.requests[-1]
    assert (request.shared_port_id, request.client_name, request.deadline, request.more_args) == (
        SOCK_ID, "TEST", 20, 0)
    # the passed socket's peer is the real client: a loopback caller is known by its socket's owner
    wait_until(lambda: f"{getpass.getuser()} by socket" in gateway.log())


def test_plain_http_forwarded_unread_serves_zeep_and_the_json_api(socket_dir, gateway):
    import zeep

    with SharedPortStandIn(socket_dir, http_forward_id=SOCK_ID) as forwarding:
        url = f"http://127.0.0.1:{forwarding.port}/"
        service = zeep.Client(url + "condorSchedd.wsdl").create_service("{urn:condor}condorSchedd", url)
        txn = service.beginTransaction(30).transaction
        assert service.newCluster(txn).integer > 0
        assert service.abortTransaction(txn).code == "SUCCESS"
        connection = http.client.HTTPConnection("127.0.0.1", forwarding.port, timeout=20)
        connection.request("POST", "/submission/json/getSubmissions", b"{}", {"Content-Type": "application/json"})
        assert b'"OK"' in connection.getresponse().read()
        assert forwarding.requests == []  # nothing went through SHARED_PORT_CONNECT


def named_connection(socket_dir) -> socket.socket:
    named = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    named.connect(str(socket_dir / SOCK_ID))
    named.settimeout(10)
    return named


PASS_SOCK = cedar.packet(cedar.integers(cedar.SHARED_PORT_PASS_SOCK))

HOSTILE = {
    "another command": cedar.packet(cedar.integers(cedar.SHARED_PORT_CONNECT)),
    "a header HTCondor refuses": b"\x07\xff\xff\xff\xff",
    "an empty packet": b"\x01\x00\x00\x00\x00",
    "the command, then a byte without a socket": PASS_SOCK + b"\0",
    "a short integer": b"\x01\x00\x00\x00\x02\x00\x4c",
}


@pytest.mark.parametrize("data", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_bytes_on_the_named_socket_are_dropped(socket_dir, shared_port, gateway, data):
    with named_connection(socket_dir) as named:
        named.sendall(data)
        assert named.recv(1) == b""  # the gateway closed it
    assert soap_version(ConnectFirst(shared_port.port, SOCK_ID))[0] == 200


def pass_descriptors(socket_dir, *descriptors: int) -> None:
    with named_connection(socket_dir) as named:
        named.sendall(PASS_SOCK)
        named.sendmsg([b"\0"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(descriptors)}i",
                                                                                  *descriptors))])
        assert named.recv(1) == b""


def test_a_passed_socket_that_is_not_tcp_is_closed(socket_dir, gateway):
    left, right = socket.socketpair()
    with right:
        pass_descriptors(socket_dir, left.fileno())
        left.close()
        right.settimeout(10)
        assert right.recv(1) == b""  # the gateway's copy is closed too: nobody holds the other end
    wait_until(lambda: "not a TCP connection" in gateway.log())


def test_of_two_descriptors_the_first_is_served_and_the_second_closed(socket_dir, gateway):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server_end, _ = listener.accept()
        left, right = socket.socketpair()
        with client, server_end, right:
            pass_descriptors(socket_dir, server_end.fileno(), left.fileno())
            server_end.close()
            left.close()
            right.settimeout(10)
            assert right.recv(1) == b""
            client.sendall(b"POST / HTTP/1.0\r\nContent-Type: text/xml\r\nContent-Length: %d\r\n\r\n%s"
                           % (len(VERSION), VERSION))
            client.settimeout(20)
            answer = b""
            while chunk := client.recv(65536):
                answer += chunk
            assert answer.startswith(b"HTTP/1.0 200") and b"SUCCESS" in answer


def test_config_refuses_a_bad_id_and_a_path_too_long(tmp_path):
    from gateway.config import ConfigError, GatewayConfig, check_daemon

    bad = GatewayConfig(use_shared_port=True, daemon_socket_dir=tmp_path, shared_port_id="../etc")
    with pytest.raises(ConfigError, match="shared_port_id"):
        check_daemon(bad)
    long = GatewayConfig(use_shared_port=True, daemon_socket_dir=tmp_path / ("d" * 120), shared_port_id="x")
    with pytest.raises(ConfigError, match="longer than a Unix socket address"):
        check_daemon(long)


def test_cedar_packets_are_read_as_htcondor_reads_them():
    assert cedar.read_packet(PASS_SOCK + b"rest") == (cedar.Packet(True, cedar.integers(76)), b"rest")
    assert cedar.read_packet(PASS_SOCK[:7]) is None
    with pytest.raises(cedar.CedarError):
        cedar.read_packet(b"\x0b\x00\x00\x00\x01x")
    with pytest.raises(cedar.CedarError):
        cedar.read_packet(struct.pack("!BI", 1, cedar.MAX_PACKET + 1))


# -- an unsafe daemon socket directory, a planted link ------------------------------------------------------------
@pytest.fixture
def open_directory():
    """A directory under /tmp that the test opens to other users (its mode is the test's to set)."""
    directory = short_directory()
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_a_world_writable_socket_dir_with_a_planted_link_is_refused_clearly(accounts, open_directory, tmp_path):
    """Anyone may write in it: a link planted at the socket's name (or any swap) must not decide where the gateway
    listens; the start is refused, naming the directory and what to change."""
    thief = accounts.user()
    open_directory.chmod(0o777)
    thief.run("ln", "-s", "/etc/passwd", str(open_directory / SOCK_ID))
    with pytest.raises(RuntimeError) as refused:
        start_behind_shared_port(tmp_path, open_directory, SOCK_ID)
    assert f"every user may write in {open_directory} (mode 0777, no sticky bit)" in str(refused.value)
    assert (open_directory / SOCK_ID).is_symlink() and os.stat("/etc/passwd").st_mode & 0o777 == 0o644


def test_a_socket_dir_of_another_account_is_refused(accounts, tmp_path):
    from gateway.config import ConfigError, GatewayConfig, check_daemon

    thief = accounts.user()
    theirs = short_directory()
    try:
        os.chown(theirs, thief.uid, thief.gid)
        config = GatewayConfig(use_shared_port=True, daemon_socket_dir=theirs / "daemon_sock", shared_port_id="x")
        with pytest.raises(ConfigError, match=f"{theirs} belongs to uid {thief.uid}"):
            check_daemon(config)
        link = short_directory()
        (link / "sock").symlink_to("/run")  # a link of theirs on the way to a directory of root's
        os.chown(link / "sock", thief.uid, thief.gid, follow_symlinks=False)
        with pytest.raises(ConfigError, match=f"{link / 'sock'} belongs to uid {thief.uid}"):
            check_daemon(GatewayConfig(use_shared_port=True, daemon_socket_dir=link / "sock", shared_port_id="x"))
        shutil.rmtree(link)
    finally:
        shutil.rmtree(theirs, ignore_errors=True)


def test_a_link_planted_in_a_sticky_socket_dir_is_removed_never_followed(accounts, open_directory, tmp_path):
    """In a directory like /tmp (world-writable, sticky) anyone may leave a link at the socket's name: it is
    removed (unlink does not follow it), the socket made in its place, and the link's target left alone."""
    thief = accounts.user()
    open_directory.chmod(0o1777)
    target = open_directory / "target"
    thief.run("sh", "-c", f"echo theirs > {target}; ln -s {target} {open_directory / SOCK_ID}")
    gateway = start_behind_shared_port(tmp_path, open_directory, SOCK_ID, "[backends.local]\nslots = 0\n")
    try:
        named = open_directory / SOCK_ID
        assert named.is_socket() and named.lstat().st_uid == os.geteuid() and named.stat().st_mode & 0o777 == 0o600
        assert target.read_text() == "theirs\n" and target.stat().st_mode & 0o777 == 0o644
        assert target.stat().st_uid == thief.uid
        assert "removing the symbolic link" in gateway.log()
    finally:
        gateway.stop()


def test_a_file_at_the_sockets_name_is_left_and_the_start_refused(open_directory, tmp_path):
    (open_directory / SOCK_ID).write_text("somebody's\n")
    with pytest.raises(RuntimeError) as refused:
        start_behind_shared_port(tmp_path, open_directory, SOCK_ID)
    assert "exists and is not a socket" in str(refused.value)
    assert (open_directory / SOCK_ID).read_text() == "somebody's\n"
