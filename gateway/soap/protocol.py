"""SOAP 1.1 as gSOAP spoke it: lenient on input, gSOAP-shaped on output (docs/birdbath.md §4.3, §11).

Input: any content type, a hardened parser (no DTDs, no entity expansion, no network), wrappers matched by
local name when unqualified, children matched by local name, ``xsi:type`` ignored, and enum fields accepting the
decimal C values (``115`` for STRING-ATTR, ``5`` for VANILLA) as well as the names.
Output: only the body's wrapper element is namespace-qualified; every descendant is unqualified, which is what
gSOAP, Axis and JAXB clients require (spyne always qualifies them).
"""

from __future__ import annotations

import threading
from typing import Any

from lxml import etree
from spyne import Fault
from spyne.protocol.soap import Soap11

from gateway.core.adstruct import AttrType
from jobmodel.jobs import Universe

SOAP_ENV = "http://schemas.xmlsoap.org/soap/envelope/"
BODY = f"{{{SOAP_ENV}}}Body"

#: an attribute type's name by its decimal C value (``115`` -> ``STRING-ATTR``)
ATTR_TYPE_CODES = {str(t.code): t.value for t in AttrType}
_UNIVERSES = {str(int(u)): u.name for u in Universe}
_HASH_TYPES = {"0": "NOHASH", "1": "MD5HASH", "MD5": "MD5HASH"}

#: where each enum sits in a request: operation -> [(path of local names below the wrapper, value map)]
_ENUM_FIELDS: dict[str, list[tuple[tuple[str, ...], dict[str, str]]]] = {
    "submit": [(("jobAd", "item", "type"), ATTR_TYPE_CODES)],
    "discoverJobRequirements": [(("jobAd", "item", "type"), ATTR_TYPE_CODES)],
    "createJobTemplate": [(("type",), _UNIVERSES)],
    "declareFile": [(("hashType",), _HASH_TYPES)],
}


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


def _client_fault(message: str) -> Fault:
    return Fault(faultcode="Client", faultstring=message)


def parse_envelope(body: bytes) -> etree._Element:
    """The root of a SOAP message, parsed with the hardened parser: a Client fault for malformed XML or a DTD."""
    try:
        root = etree.fromstring(body, _parser())
    except etree.XMLSyntaxError as exc:
        raise _client_fault(f"Malformed XML: {exc}") from None
    if root.getroottree().docinfo.doctype:
        raise _client_fault("DTDs (and so XML entities) are not allowed in SOAP messages")
    return root


class HardenedSoap11(Soap11):
    """SOAP 1.1 read with the hardened parser, whatever the Content-Type: every SOAP endpoint's input."""

    def create_in_document(self, ctx: Any, charset: str | None = None) -> None:
        """Parse the body whatever its Content-Type (gSOAP did not check it); refuse DTDs and so entities."""
        body = b"".join(chunk if isinstance(chunk, bytes) else chunk.encode("utf-8") for chunk in ctx.in_string)
        ctx.in_document = (parse_envelope(body), {})


class GsoapSoap11(HardenedSoap11):
    def __init__(self, *args: Any, namespace: str, operations: frozenset[str], **kwargs: Any) -> None:
        kwargs.setdefault("validator", "soft")
        kwargs.setdefault("parse_xsi_type", False)
        super().__init__(*args, **kwargs)
        self._namespace = namespace
        self._operations = operations

    # -- input -------------------------------------------------------------------------------------

    def decompose_incoming_envelope(self, ctx: Any, message: str = Soap11.REQUEST) -> None:
        envelope, _ = ctx.in_document
        operation_element(envelope, self._namespace, self._operations)
        super().decompose_incoming_envelope(ctx, message)
        normalise_enums(ctx.in_body_doc)

    # -- output ------------------------------------------------------------------------------------
    def serialize(self, ctx: Any, message: str) -> None:
        super().serialize(ctx, message)
        _unqualify_descendants(ctx.out_document)


def operation_element(envelope: etree._Element, namespace: str, operations: frozenset[str]) -> etree._Element:
    """The body's operation element (its tag qualified, when the client sent it unqualified): a Client fault when the
    envelope is not SOAP 1.1, has no body, or names an operation the service does not have."""
    if envelope.tag != f"{{{SOAP_ENV}}}Envelope":
        raise _client_fault(f"Not a SOAP 1.1 envelope: root element is {envelope.tag}")
    body = _body(envelope)
    if body is None or len(body) == 0:
        raise _client_fault("The SOAP envelope has no Body, or an empty one")
    wrapper = body[0]
    qname = etree.QName(wrapper)
    if qname.namespace is None and qname.localname in operations:
        wrapper.tag = f"{{{namespace}}}{qname.localname}"  # gSOAP matched unprefixed names loosely
    elif qname.namespace != namespace or qname.localname not in operations:
        raise _client_fault(f"Method '{qname.localname}' not implemented: method name or namespace not recognized")
    return wrapper


def normalise_enums(wrapper: etree._Element, operation: str | None = None) -> None:
    """Enum fields sent as their decimal C values get their names (gSOAP accepted both).  ``operation``: the
    wrapper's local name, when the caller knows it."""
    for path, values in _ENUM_FIELDS.get(operation or etree.QName(wrapper).localname, ()):
        for element in _descend(wrapper, path):
            text = (element.text or "").strip()
            if text in values:
                element.text = values[text]


def _descend(element: etree._Element, path: tuple[str, ...]) -> list[etree._Element]:
    found = [element]
    for name in path:
        qualified = "}" + name  # the local name without making a QName per element (a submit has thousands)
        found = [child for parent in found for child in parent
                 if type(tag := child.tag) is str and (tag == name or tag.endswith(qualified))]
    return found


def _body(envelope: etree._Element) -> etree._Element | None:
    """The envelope's Body element (a loop over its children: ``find()`` parses its path every time)."""
    return next((child for child in envelope if child.tag == BODY), None)


def _unqualify_descendants(envelope: etree._Element) -> None:
    body = _body(envelope)
    if body is None or len(body) == 0:
        return
    for element in body[0].iterdescendants():
        if isinstance(element.tag, str) and element.tag.startswith("{"):
            element.tag = element.tag.split("}", 1)[1]
    etree.cleanup_namespaces(envelope)
