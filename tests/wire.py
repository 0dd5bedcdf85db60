"""Raw SOAP over HTTP for replay tests, and schema validation of answers against the published WSDL."""

from __future__ import annotations

import http.client
import socket
from functools import lru_cache
from pathlib import Path

from lxml import etree

from tests.conftest import ROOT, WIRE

SOAP_ENV = "http://schemas.xmlsoap.org/soap/envelope/"
XSD = "http://www.w3.org/2001/XMLSchema"
CLIENTS = ("axis", "gsoap", "zeep")


def captured(client: str, operation: str) -> tuple[list[str], bytes]:
    """The request line plus headers, and the body, that a client stack sent for an operation."""
    base = WIRE / "requests" / client / operation
    head = [line for line in base.with_name(f"{operation}.request.headers").read_text().splitlines() if line.strip()]
    return head, base.with_name(f"{operation}.request.xml").read_bytes()


def post(port: int, body: bytes, head: list[str] | None = None, chunked: bool = False,
         timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
    """Send one request exactly as given (request line, headers, body) and read the answer."""
    head = head or ["POST / HTTP/1.1", "Content-Type: text/xml; charset=utf-8", 'SOAPAction: ""']
    lines = [head[0], f"Host: 127.0.0.1:{port}"] + [h for h in head[1:] if not h.lower().startswith("host:")]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        payload = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in _parts(body, 100)) + b"0\r\n\r\n"
    else:
        lines.append(f"Content-Length: {len(body)}")
        payload = body
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


def _parts(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)] or [b""]


def body_element(document: bytes) -> etree._Element:
    envelope = etree.fromstring(document)
    return envelope.find(f"{{{SOAP_ENV}}}Body")[0]


@lru_cache(maxsize=None)
def schema(wsdl: Path = ROOT / "wsdl" / "condorSchedd.wsdl") -> etree.XMLSchema:
    """The XML Schema embedded in a WSDL (its import of SOAP-ENC, which nothing uses, left out)."""
    source = etree.parse(str(wsdl)).getroot().find(f".//{{{XSD}}}schema")
    source = etree.fromstring(etree.tostring(source))
    for imported in source.findall(f"{{{XSD}}}import"):
        source.remove(imported)
    return etree.XMLSchema(source)


def assert_valid(element: etree._Element) -> None:
    validator = schema()
    if not validator.validate(etree.ElementTree(etree.fromstring(etree.tostring(element)))):
        raise AssertionError(f"not valid against the WSDL schema: {validator.error_log}\n"
                             f"{etree.tostring(element).decode()}")
