"""Reaching a gateway through condor_shared_port: the client library and the birdbath command from a sinful
string or a URL with ``?sock=``, and zeep with the documented transport adapter.  The gateway serves only its named
socket; condor_shared_port is the stand-in written from HTCondor's source (``gateway.testing_daemons``)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import requests

from birdbath_client import GatewayUnavailable, Schedd
from birdbath_client.sharedport import SharedPortAdapter, connect_request, split
from gateway.testing_daemons import SharedPortStandIn, read_connect_request, short_directory, start_behind_shared_port

SOCK_ID = "birdbath_client_test"


@pytest.fixture(scope="module")
def shared_port(tmp_path_factory):
    directory = short_directory()
    gateway = start_behind_shared_port(tmp_path_factory.mktemp("shared"), directory, SOCK_ID,
                                       "[birdbath]\nqueue_all_users_trusted = true\n[backends.local]\nslots = 0\n")
    try:
        with SharedPortStandIn(directory) as standin:
            yield standin
    finally:
        gateway.stop()
        shutil.rmtree(directory, ignore_errors=True)


def test_the_library_submits_and_queries_from_a_sinful_string(shared_port):
    schedd = Schedd(f"<127.0.0.1:{shared_port.port}?sock={SOCK_ID}>")
    assert schedd.url == f"http://127.0.0.1:{shared_port.port}/"
    [job] = schedd.submit({"Cmd": "/bin/true", "JobUniverse": 5, "Iwd": "/tmp"})
    assert schedd.job(job)["ClusterId"] == job.cluster
    assert any(summary["ClusterId"] == job.cluster for summary in schedd.submission_api.live_summaries())
    assert shared_port.requests[-1].shared_port_id == SOCK_ID


def test_the_command_from_a_url_with_sock(shared_port):
    [job] = Schedd(f"<127.0.0.1:{shared_port.port}?sock={SOCK_ID}>").submit(
        {"Cmd": "/bin/true", "JobUniverse": 5, "Iwd": "/tmp"})
    result = subprocess.run([sys.executable, "-m", "birdbath_client.cli", "--url",
                             f"http://127.0.0.1:{shared_port.port}/?sock={SOCK_ID}", "q", str(job.cluster)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"{job.cluster}.0" in result.stdout


def test_zeep_with_the_transport_adapter(shared_port):
    import zeep
    from zeep.transports import Transport

    url = f"http://127.0.0.1:{shared_port.port}/"
    session = requests.Session()
    session.mount(url, SharedPortAdapter(SOCK_ID))
    client = zeep.Client(url + "condorSchedd.wsdl", transport=Transport(session=session))
    service = client.create_service("{urn:condor}condorSchedd", url)
    assert service.getPlatformString().status.code == "SUCCESS"


def test_an_id_nobody_listens_on_is_an_unreachable_gateway(shared_port):
    with pytest.raises(GatewayUnavailable):
        Schedd(f"<127.0.0.1:{shared_port.port}?sock=nobody_here>")
    assert any("nobody_here" in refusal for refusal in shared_port.refusals)


@pytest.mark.parametrize("address, expected", [
    ("http://host:1984/", ("http://host:1984/", None)),
    ("<10.0.0.1:9618?sock=birdbath>", ("http://10.0.0.1:9618/", "birdbath")),
    ("<10.0.0.1:9618?addrs=10.0.0.1-9618&alias=h.example&sock=gw_1>", ("http://10.0.0.1:9618/", "gw_1")),
    ("<[::1]:9618?sock=birdbath>", ("http://[::1]:9618/", "birdbath")),
    ("<10.0.0.1:9618>", ("http://10.0.0.1:9618/", None)),
    ("http://host:9618/?sock=birdbath", ("http://host:9618/", "birdbath")),
    ("http://host:9618?sock=birdbath", ("http://host:9618/", "birdbath")),
])
def test_addresses(address, expected):
    assert split(address) == expected


@pytest.mark.parametrize("address", ["<host>", "<host:port?sock=x>", "<1.2.3.4:9618?sock=../../etc>",
                                     "https://host:9618/?sock=birdbath", "http://host:9618/?sock="])
def test_bad_addresses_are_refused(address):
    with pytest.raises(ValueError):
        split(address)


def test_the_connect_request_reads_as_condor_shared_port_reads_it():
    import socket

    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.sendall(connect_request("birdbath", 30) + b"GET / HTTP/1.1\r\n")
        request = read_connect_request(theirs)
        assert (request.shared_port_id, request.client_name, request.deadline, request.more_args) == (
            "birdbath", "BIRDBATH_CLIENT", 30, 0)
        assert theirs.recv(100) == b"GET / HTTP/1.1\r\n"  # HTTP follows, unread by the shared port
    with pytest.raises(ValueError):
        connect_request("no/slashes")
