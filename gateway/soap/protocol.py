"""SOAP 1.1 read with a hardened parser (no DTDs, no entity expansion, no network), whatever the Content-Type: the
input of every SOAP endpoint, the Birdbath services' (``codec``) and the submission API's (spyne's,
:class:`HardenedSoap11`).
"""

from __future__ import annotations

import threading
from typing import Any

from lxml import etree
from spyne import Fault
from spyne.protocol.soap import Soap11

from .xsd import WireFault

SOAP_ENV = "http://schemas.xmlsoap.org/soap/envelope/"
BODY = f"{{{SOAP_ENV}}}Body"

_parsers = threading.local()


def _parser() -> etree.XMLParser:
    """This thread's hardened parser (made once: making one costs as much as parsing a small request; a parser must
    not be shared between threads)."""
    parser = getattr(_parsers, "parser", None)
    if parser is None:
        parser = _parsers.parser = etree.XMLParser(
            resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False, huge_tree=False,
            remove_pis=True, strip_cdata=True)
    return parser


def parse_envelope(body: bytes) -> etree._Element:
    """The root of a SOAP message, parsed with the hardened parser: a Client :class:`WireFault` for malformed XML or
    a DTD."""
    try:
        root = etree.fromstring(body, _parser())
    except etree.XMLSyntaxError as exc:
        raise WireFault(f"Malformed XML: {exc}") from None
    if root.getroottree().docinfo.doctype:
        raise WireFault("DTDs (and so XML entities) are not allowed in SOAP messages")
    return root


class HardenedSoap11(Soap11):
    """spyne's SOAP 1.1 read with the hardened parser, whatever the Content-Type (the submission API)."""

    def create_in_document(self, ctx: Any, charset: str | None = None) -> None:
        """Parse the body whatever its Content-Type (gSOAP did not check it); refuse DTDs and so entities."""
        body = b"".join(chunk if isinstance(chunk, bytes) else chunk.encode("utf-8") for chunk in ctx.in_string)
        try:
            ctx.in_document = (parse_envelope(body), {})
        except WireFault as exc:
            raise Fault(faultcode=exc.code, faultstring=exc.message) from None
