"""The published WSDL: the project's static file from ``wsdl/``, with the service address set to the server's."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from lxml import etree

WSDL_SOAP = "http://schemas.xmlsoap.org/wsdl/soap/"


def wsdl_path(name: str) -> Path:
    """``wsdl/<name>`` in a source checkout, or the copy installed as package data."""
    checkout = Path(__file__).resolve().parents[2] / "wsdl" / name
    if checkout.is_file():
        return checkout
    return Path(str(resources.files("gateway.wsdl") / name))


class PublishedWsdl:
    """A WSDL document whose ``soap:address`` is rewritten per request to the address the client used."""

    def __init__(self, path: Path) -> None:
        self._tree = etree.parse(str(path), etree.XMLParser(resolve_entities=False, no_network=True))
        self._addresses = self._tree.getroot().findall(f".//{{{WSDL_SOAP}}}address")
        self._cache: dict[str, bytes] = {}

    def render(self, location: str) -> bytes:
        cached = self._cache.get(location)
        if cached is None:
            for address in self._addresses:
                address.set("location", location)
            cached = etree.tostring(self._tree, xml_declaration=True, encoding="UTF-8")
            if len(self._cache) < 64:  # a handful of names a server is reached by; never unbounded
                self._cache[location] = cached
        return cached
