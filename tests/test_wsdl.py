"""Our wsdl/condorSchedd.wsdl and wsdl/condorCollector.wsdl equal the WSDLs HTCondor shipped in every name and
shape."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
from lxml import etree

from tests.conftest import LEGACY_COLLECTOR_WSDL, LEGACY_WSDL, ROOT

OURS = ROOT / "wsdl" / "condorSchedd.wsdl"
OURS_COLLECTOR = ROOT / "wsdl" / "condorCollector.wsdl"
WSDL = "http://schemas.xmlsoap.org/wsdl/"
SOAP = "http://schemas.xmlsoap.org/wsdl/soap/"
QNAME_ATTRIBUTES = {"type", "element", "message", "binding", "base"}


def shape(element: etree._Element) -> tuple:
    """A comparable form: tag, attributes (QName values resolved to {namespace}name), children in order.

    Left out: comments, white space, <documentation> prose, and the service address (the one thing allowed to
    differ). Namespace prefixes do not matter, only what they resolve to."""
    attributes = {}
    for name, value in element.attrib.items():
        if name in QNAME_ATTRIBUTES and ":" in value:
            prefix, local = value.split(":", 1)
            value = f"{{{element.nsmap[prefix]}}}{local}"
        attributes[name] = value
    if element.tag == f"{{{SOAP}}}address":
        attributes.pop("location", None)
    children = tuple(shape(child) for child in element
                     if isinstance(child.tag, str) and child.tag != f"{{{WSDL}}}documentation")
    return element.tag, tuple(sorted(attributes.items())), children


def first_difference(a: tuple, b: tuple, path: str = "") -> str | None:
    tag_a, attrs_a, kids_a = a
    tag_b, attrs_b, kids_b = b
    where = f"{path}/{etree.QName(tag_a).localname}[{dict(attrs_a).get('name', '')}]"
    if tag_a != tag_b:
        return f"{where}: element {tag_a} vs {tag_b}"
    if attrs_a != attrs_b:
        return f"{where}: attributes {dict(attrs_a)} vs {dict(attrs_b)}"
    for kid_a, kid_b in zip(kids_a, kids_b):
        difference = first_difference(kid_a, kid_b, where)
        if difference:
            return difference
    if len(kids_a) != len(kids_b):
        return f"{where}: {len(kids_a)} children vs {len(kids_b)}"
    return None


def parse(path: Path) -> etree._Element:
    return etree.parse(str(path)).getroot()


@pytest.mark.parametrize("ours, shipped", [(OURS, LEGACY_WSDL), (OURS_COLLECTOR, LEGACY_COLLECTOR_WSDL)],
                         ids=["condorSchedd", "condorCollector"])
def test_our_wsdl_has_the_shape_of_the_shipped_one(ours, shipped):
    assert first_difference(shape(parse(ours)), shape(parse(shipped))) is None


def test_the_comparison_notices_a_collector_query_message_named_like_the_schedd_s(tmp_path):
    """The collector's query input messages are ``<op>Request`` (the schedd's are ``<op>``)."""
    changed = tmp_path / "changed.wsdl"
    changed.write_text(OURS_COLLECTOR.read_text().replace('"queryStartdAdsRequest"', '"queryStartdAds"')
                       .replace('"tns:queryStartdAdsRequest"', '"tns:queryStartdAds"'))
    assert first_difference(shape(parse(changed)), shape(parse(LEGACY_COLLECTOR_WSDL))) is not None


def test_the_comparison_notices_a_changed_name(tmp_path):
    changed = tmp_path / "changed.wsdl"
    changed.write_text(OURS.read_text().replace('name="force-removal"', 'name="forceRemoval"'))
    difference = first_difference(shape(parse(changed)), shape(parse(LEGACY_WSDL)))
    assert difference is not None and "forceRemoval" in difference


def test_the_comparison_notices_a_changed_occurrence(tmp_path):
    changed = tmp_path / "changed.wsdl"
    text = OURS.read_text()
    needle = '<xsd:element name="constraint" type="xsd:string" minOccurs="0" maxOccurs="1" nillable="true"/>'
    assert needle in text
    changed.write_text(text.replace(needle, needle.replace(' nillable="true"', "")))
    assert first_difference(shape(parse(changed)), shape(parse(LEGACY_WSDL))) is not None


@pytest.mark.parametrize("path", ["condorSchedd.wsdl", "?wsdl", "anything/else?wsdl"])
def test_the_server_publishes_the_wsdl_with_its_own_address(gateway, path):
    with urllib.request.urlopen(gateway.url + path) as response:
        assert response.headers["Content-Type"].startswith("text/xml")
        served = etree.fromstring(response.read())
    assert first_difference(shape(served), shape(parse(LEGACY_WSDL))) is None
    address = served.find(f".//{{{SOAP}}}address")
    assert address.get("location") == gateway.url


def test_other_gets_are_not_found(gateway):
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(gateway.url + "index.html")
    assert error.value.code == 404


def test_the_installed_package_serves_its_own_copy_of_the_wsdl(tmp_path):
    """Run the console script outside the checkout, so the WSDL must come from the installed package data."""
    import os
    import shutil
    import subprocess
    import time

    script = shutil.which("birdbath-gateway")
    if script is None:
        pytest.skip("birdbath-gateway is not installed (tox installs it)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    port_file = tmp_path / "port"
    output = tmp_path / "output"
    process = subprocess.Popen([script, "--port", "auto", "--port-file", str(port_file), "--state-dir",
                                str(tmp_path / "state")], cwd=tmp_path, env=env,
                               stdout=open(output, "wb"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()) and time.monotonic() < deadline:
            assert process.poll() is None, output.read_text()
            time.sleep(0.05)
        with urllib.request.urlopen(f"http://127.0.0.1:{port_file.read_text().strip()}/?wsdl") as response:
            served = etree.fromstring(response.read())
        assert first_difference(shape(served), shape(parse(LEGACY_WSDL))) is None
    finally:
        process.terminate()
        process.wait(timeout=15)
