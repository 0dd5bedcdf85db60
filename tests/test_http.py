"""HTTP behaviour: faults for what cannot be parsed, statuses for the rest, and nothing crashes the server."""

from __future__ import annotations

import getpass
import socket

import pytest

from tests.test_logging import wait_for_line
from tests.wire import SOAP_ENV, body_element, post

GET_VERSION = (b'<?xml version="1.0"?><s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/">'
               b'<s:Body><c:getVersionString xmlns:c="urn:condor"/></s:Body></s:Envelope>')


def envelope(inner: str) -> bytes:
    return (f'<s:Envelope xmlns:s="{SOAP_ENV}" xmlns:c="urn:condor"><s:Body>{inner}</s:Body></s:Envelope>').encode()


def fault(answer: bytes) -> tuple[str, str]:
    element = body_element(answer)
    assert element.tag == f"{{{SOAP_ENV}}}Fault"
    return element.findtext("faultcode"), element.findtext("faultstring")


def assert_alive(gateway) -> None:
    status, _, answer = post(gateway.port, GET_VERSION)
    assert status == 200 and body_element(answer).tag == "{urn:condor}getVersionStringResponse"


@pytest.mark.parametrize("head", [
    ["POST / HTTP/1.0", "Content-Type: text/xml"],
    ["POST /any/path/at/all HTTP/1.1", "Content-Type: text/xml; charset=utf-8", 'SOAPAction: "whatever"'],
    ["POST /condorSchedd HTTP/1.1"],
    ["POST / HTTP/1.1", "Content-Type: application/soap+xml", "Connection: close"],
    # bodies are never forms: twisted's form parsing would answer 400 for a SOAP body said to be multipart
    ["POST / HTTP/1.1", "Content-Type: multipart/form-data; boundary=x"],
    ["POST / HTTP/1.1", "Content-Type: application/x-www-form-urlencoded"],
])
def test_soap_on_any_path_with_or_without_soapaction_and_content_type(gateway, head):
    status, _, answer = post(gateway.port, GET_VERSION, head)
    assert status == 200
    assert body_element(answer).tag == "{urn:condor}getVersionStringResponse"


@pytest.mark.parametrize("head, body, status", [
    (["POST / HTTP/1.1", "Content-Type: text/xml"], GET_VERSION, 200),  # a SOAP answer
    (["POST / HTTP/1.1", "Content-Type: text/xml"], envelope("<c:frobnicate/>"), 500),  # a SOAP fault
    (["POST /submission/json/getSubmissions HTTP/1.1", "Content-Type: application/json"], b"{}", 200),  # JSON
    (["POST /submission/json/nothing HTTP/1.1", "Content-Type: application/json"], b"{}", 404),  # JSON, unknown
    (["GET /api/v1/history HTTP/1.1"], b"", 200),  # the REST face
    (["GET /api/v1/nothing HTTP/1.1"], b"", 404),  # a REST problem
    (["GET /healthz HTTP/1.1"], b"", 200),  # the monitoring pages
])
def test_a_whole_answer_says_its_length_and_is_not_chunked(gateway, head, body, status):
    """What the gateway answers at once carries its Content-Length (only a streamed answer is chunked): a client
    reads it in one go, and the connection stays open for the next request."""
    answered, headers, answer = post(gateway.port, body, head)
    assert answered == status, answer[:300]
    assert "transfer-encoding" not in headers and int(headers["content-length"]) == len(answer) > 0
    assert_alive(gateway)


def test_chunked_request_bodies(gateway):
    status, _, answer = post(gateway.port, GET_VERSION, chunked=True)
    assert status == 200 and body_element(answer).tag == "{urn:condor}getVersionStringResponse"


def test_unknown_operation_is_a_client_fault_with_gsoaps_text(gateway):
    status, _, answer = post(gateway.port, envelope("<c:frobnicate/>"))
    assert status == 500
    code, text = fault(answer)
    assert code.endswith(":Client")
    assert text == "Method 'frobnicate' not implemented: method name or namespace not recognized"


def test_a_known_operation_in_another_namespace_is_a_fault(gateway):
    status, _, answer = post(gateway.port, envelope('<x:getVersionString xmlns:x="urn:other"/>'))
    assert status == 500 and "not implemented" in fault(answer)[1]


def test_an_unqualified_wrapper_is_matched_by_name_like_gsoap(gateway):
    status, _, answer = post(gateway.port, envelope("<getVersionString/>"))
    assert status == 200 and body_element(answer).tag == "{urn:condor}getVersionStringResponse"


@pytest.mark.parametrize("body", [b"", b"not xml", b"<s:Envelope", b"<a><b></a>",
                                  b'<?xml version="1.0"?><notsoap/>',
                                  envelope("").replace(b"<s:Body></s:Body>", b"")])
def test_malformed_xml_is_a_client_fault(gateway, body):
    status, _, answer = post(gateway.port, body)
    assert status == 500
    code, text = fault(answer)
    assert code.endswith(":Client") and text
    assert_alive(gateway)


@pytest.mark.parametrize("inner, field", [
    ("<c:beginTransaction><duration>sixty</duration></c:beginTransaction>", "sixty"),
    ("<c:getJobAd><clusterId>1.5</clusterId><jobId>0</jobId></c:getJobAd>", "1.5"),
    ("<c:createJobTemplate><clusterId>1</clusterId><jobId>0</jobId><type>WARP</type></c:createJobTemplate>", "WARP"),
    ("<c:beginTransaction><duration>99999999999</duration></c:beginTransaction>", "99999999999"),
])
def test_wrong_types_are_client_faults_naming_the_value(gateway, inner, field):
    status, _, answer = post(gateway.port, envelope(inner))
    assert status == 500
    code, text = fault(answer)
    assert code.endswith(":Client") and field in text
    assert_alive(gateway)


def test_entities_are_never_expanded(gateway):
    bomb = (b'<?xml version="1.0"?><!DOCTYPE s:Envelope [<!ENTITY a "aaaaaaaaaa">'
            b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>' + envelope("<c:getJobAds><constraint>&b;</constraint>"
                                                                          "</c:getJobAds>"))
    status, _, answer = post(gateway.port, bomb)
    assert status == 500 and "DTD" in fault(answer)[1]
    external = (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
                + envelope("<c:getJobAds><constraint>&e;</constraint></c:getJobAds>"))
    status, _, answer = post(external and gateway.port, external)
    assert status == 500 and b"root:" not in answer


def test_oversized_bodies_are_refused(start_gateway):
    gateway = start_gateway("[gateway]\nmax_request_bytes = 2000\n")
    big = envelope("<c:getJobAds><constraint>" + "x" * 5000 + "</constraint></c:getJobAds>")
    status, _, answer = post(gateway.port, big)
    assert status == 413 and "max_request_bytes" in fault(answer)[1]
    status, _, answer = post(gateway.port, big, chunked=True)
    assert status == 413
    assert_alive(gateway)


def test_hosts_outside_allow_soap_are_closed_at_accept_without_a_byte_read(start_gateway):
    gateway = start_gateway('[birdbath]\nallow_soap = ["10.0.0.0/8"]\n')
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as connection:
            # nothing sent: a gateway that waited for the request before checking would keep the connection open
            try:
                assert connection.recv(100) == b""
            except ConnectionResetError:
                pass
    with pytest.raises((ConnectionError, OSError)):
        post(gateway.port, GET_VERSION)
    refused = "closing connections from 127.0.0.1 as they are accepted: not in allow_soap"
    wait_for_line(gateway.log, refused)  # (written by the log's own thread, shortly after)
    log = gateway.log()
    assert log.count(refused) == 1, log


def test_write_permission_is_checked_per_operation(start_gateway):
    gateway = start_gateway('[birdbath]\nallow_write = ["10.0.0.0/8"]\n')
    status, _, answer = post(gateway.port, envelope("<c:beginTransaction><duration>5</duration>"
                                                    "</c:beginTransaction>"))
    response = body_element(answer).find("response")
    assert status == 200 and response.findtext("status/code") == "FAIL"
    assert response.findtext("status/message") == "Permission denied"
    status, _, answer = post(gateway.port, envelope("<c:getJobAds/>"))
    assert body_element(answer).find("response").findtext("status/code") == "SUCCESS"  # reading is still allowed


def test_read_permission_is_checked_per_operation(start_gateway):
    gateway = start_gateway('[birdbath]\nallow_read = ["10.0.0.0/8"]\nallow_write = ["10.0.0.0/8"]\n')
    status, _, answer = post(gateway.port, envelope("<c:getJobAds/>"))
    response = body_element(answer).find("response")
    assert status == 200 and response.findtext("status/message") == "Permission denied"
    assert_alive(gateway)  # getVersionString needs no permission


def test_a_client_that_hangs_up_early_does_not_hurt(gateway):
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n<s:Envelope")
    assert_alive(gateway)


def test_keep_alive_connections_serve_several_requests(gateway):
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    for _ in range(3):
        connection.request("POST", "/", GET_VERSION, {"Content-Type": "text/xml"})
        response = connection.getresponse()
        assert response.status == 200 and b"getVersionStringResponse" in response.read()
    connection.close()


def test_every_request_is_logged_with_operation_client_status_duration_and_caller(gateway):
    post(gateway.port, envelope("<c:getJobAd><clusterId>424242</clusterId><jobId>0</jobId></c:getJobAd>"))
    assert_alive(gateway)
    # the log is written by a background thread: the line comes shortly after the answer
    line = wait_for_line(gateway.log, "getJobAd from 127.0.0.1: UNKNOWNJOB in")
    # a loopback caller is the user owning its socket: this test's user
    assert line.rstrip().endswith(f" ms ({getpass.getuser()} by socket)")


def fill(port: int, jobs: int) -> None:
    """``jobs`` jobs in one cluster, submitted on one kept-alive connection."""
    import http.client
    import re

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(inner: str) -> bytes:
        connection.request("POST", "/", envelope(inner), {"Content-Type": "text/xml"})
        answer = connection.getresponse().read()
        assert b"<code>SUCCESS</code>" in answer, answer
        return answer

    txn = int(re.search(rb"<id>(\d+)</id>", call("<c:beginTransaction><duration>600</duration></c:beginTransaction>"))
              .group(1))
    transaction = f"<transaction><id>{txn}</id><duration>600</duration></transaction>"
    cluster = int(re.search(rb"<integer>(\d+)</integer>", call(f"<c:newCluster>{transaction}</c:newCluster>"))
                  .group(1))
    for _ in range(jobs):
        proc = int(re.search(rb"<integer>(\d+)</integer>", call(
            f"<c:newJob>{transaction}<clusterId>{cluster}</clusterId></c:newJob>")).group(1))
        call(f"<c:submit>{transaction}<clusterId>{cluster}</clusterId><jobId>{proc}</jobId><jobAd><item>"
             f"<name>Cmd</name><type>STRING-ATTR</type><value>/bin/true</value></item></jobAd></c:submit>")
    call(f"<c:commitTransaction>{transaction}</c:commitTransaction>")
    connection.close()


def test_large_job_ads_answers_are_streamed_whole_to_every_kind_of_client(start_gateway):
    from gateway.birdbath.schedd import STREAMED_ADS

    gateway = start_gateway("[backends.local]\nslots = 0\n")
    fill(gateway.port, STREAMED_ADS + 1)
    query = envelope("<c:getJobAds><constraint>TRUE</constraint></c:getJobAds>")
    status, headers, answer = post(gateway.port, query)  # HTTP/1.1: chunked, no length
    assert status == 200 and headers.get("transfer-encoding") == "chunked" and "content-length" not in headers
    ads = body_element(answer).find("response/classAdArray")
    assert len(ads) == STREAMED_ADS + 1 and all(ad[0].findtext("name") == "MyType" for ad in ads)
    status, headers, old = post(gateway.port, query, ["POST / HTTP/1.0", "Content-Type: text/xml"])  # to the close
    assert status == 200 and len(body_element(old).find("response/classAdArray")) == STREAMED_ADS + 1
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:  # a client that leaves halfway
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(query), query))
        sock.recv(1000)
    assert_alive(gateway)
    from tests.test_execution import wait_until

    wait_until(lambda: gateway.log().count("getJobAds from 127.0.0.1: SUCCESS") == 3)  # each logged once, when done
