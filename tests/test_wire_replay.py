"""Replays of what real Axis 1.4, gSOAP and zeep clients sent (tests/data/wire/requests): each request is parsed into
the values the client sent, and answered with the operation's wrapper in gSOAP's shape, valid against the WSDL."""

from __future__ import annotations

import base64
import re

import pytest
from lxml import etree

from gateway.birdbath.schedd import schedd_service
from tests.conftest import WIRE
from tests.wire import CLIENTS, assert_valid, body_element, captured, post

#: condorSchedd's operations, read from its WSDL: each has recorded requests to replay
OPERATIONS = tuple(schedd_service().contract.operations)
XSI_NIL = "{http://www.w3.org/2001/XMLSchema-instance}nil"


# -- parsing: the values the client sent ----------------------------------------------------------------------
def sent_values(wrapper: etree._Element) -> dict:
    """What a capture carries, read generically from the XML: {child: text, or nested dict/list, or None}."""
    return {etree.QName(child).localname: _value(child) for child in wrapper}


def _value(element: etree._Element):
    if element.get(XSI_NIL) in ("true", "1"):
        return None
    children = list(element)
    if not children:
        return (element.text or "").strip()
    if all(etree.QName(c).localname == "item" for c in children):
        return [_value(c) for c in children]
    return {etree.QName(c).localname: _value(c) for c in children}


def parsed_values(body: bytes) -> dict:
    """What the gateway's codec hands the operation, as comparable text."""
    return {name: _text(value) for name, value in SERVICE.read(body).arguments.items()}


SERVICE = schedd_service()


def _text(value):
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, str)):
        return str(value)
    if isinstance(value, list):
        return [_text(v) for v in value]
    return {k: _text(v) for k, v in value.items() if v is not None}


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("operation", OPERATIONS)
def test_each_capture_is_parsed_into_the_values_the_client_sent(client, operation):
    _, body = captured(client, operation)
    sent = sent_values(body_element(body))
    parsed = {name: value for name, value in parsed_values(body).items() if value is not None}
    expected = {name: value for name, value in sent.items() if value is not None}
    assert parsed == expected


# -- answering: a replayed session -----------------------------------------------------------------------------
SESSION = [
    "getVersionString", "getPlatformString", "beginTransaction", "newCluster", "newJob", "declareFile",
    "sendFile", "submit", "extendTransaction", "commitTransaction", "beginTransaction", "abortTransaction",
    "getJobAds", "getJobAd", "listSpool", "getFile", "holdJob", "releaseJob", "closeSpool", "removeJob",
    "removeCluster", "requestReschedule", "discoverJobRequirements", "createJobTemplate",
]

#: the session's answers that are not SUCCESS: its one job left the queue at removeJob (closeSpool had let it), so
#: the cluster is gone, and the tests' loopback caller is identified (HTCondor's authenticated soap->user)
ANSWERED = {"removeCluster": ("FAIL", "Cluster not found")}


def retarget(body: bytes, ids: dict[str, int]) -> bytes:
    """Point a captured request at this session's transaction, cluster and job."""
    root = etree.fromstring(body)
    wrapper = root.find("{http://schemas.xmlsoap.org/soap/envelope/}Body")[0]
    if etree.QName(wrapper).localname == "createJobTemplate":
        return body
    for element in wrapper.iter():
        local = etree.QName(element).localname if isinstance(element.tag, str) else None
        parent = element.getparent()
        if local == "id" and parent is not None and etree.QName(parent).localname == "transaction" and "txn" in ids:
            element.text = str(ids["txn"])
        elif local == "clusterId" and "cluster" in ids:
            element.text = str(ids["cluster"])
        elif local == "jobId" and "proc" in ids:
            element.text = str(ids["proc"])
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


@pytest.mark.parametrize("client", CLIENTS)
def test_a_replayed_session_succeeds_in_gsoap_shape(gateway, client):
    ids: dict[str, int] = {}
    for operation in SESSION:
        head, body = captured(client, operation)
        status, headers, answer = post(gateway.port, retarget(body, ids), head)
        assert status == 200, (operation, answer)
        assert headers["content-type"].startswith("text/xml")
        wrapper = body_element(answer)
        assert wrapper.tag == f"{{urn:condor}}{operation}Response"
        assert_valid(wrapper)
        response = wrapper.find("response")
        assert response is not None and [etree.QName(c).namespace for c in response.iter()] == \
            [None] * len(list(response.iter()))
        status_element = response.find("status") if response.find("status") is not None else response
        outcome = (status_element.findtext("code"), status_element.findtext("message"))
        assert outcome == ANSWERED.get(operation, ("SUCCESS", outcome[1])), (operation, etree.tostring(wrapper))
        if operation == "beginTransaction":
            ids["txn"] = int(response.findtext("transaction/id"))
        elif operation == "newCluster":
            ids["cluster"] = int(response.findtext("integer"))
        elif operation == "newJob":
            ids["proc"] = int(response.findtext("integer"))
        elif operation == "getFile":
            assert base64.b64decode(response.findtext("data")) == b"hello"


@pytest.mark.parametrize("operation", OPERATIONS)
def test_gsoaps_own_answers_are_valid_against_our_schema(operation):
    """The validator used above accepts the shape gSOAP itself produces."""
    assert_valid(body_element((WIRE / "gsoap-responses" / f"{operation}.xml").read_bytes()))


# -- other styles old clients send -----------------------------------------------------------------------------
ENVELOPE = ('<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope '
            'xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema" '
            'xmlns:ns1="urn:condor"><soapenv:Body>{}</soapenv:Body></soapenv:Envelope>')


def answer_of(gateway, inner: str) -> etree._Element:
    status, _, answer = post(gateway.port, ENVELOPE.format(inner).encode())
    assert status == 200, answer
    wrapper = body_element(answer)
    assert_valid(wrapper)
    return wrapper.find("response")


def test_numeric_enums_are_accepted(gateway):
    template = answer_of(gateway, "<ns1:createJobTemplate><clusterId>1</clusterId><jobId>0</jobId>"
                                  "<owner>me</owner><type>12</type><cmd>/bin/true</cmd></ns1:createJobTemplate>")
    items = {i.findtext("name"): i.findtext("value") for i in template.find("classAd")}
    assert items["JobUniverse"] == "12"
    needs = answer_of(gateway, "<ns1:discoverJobRequirements><jobAd><item><name>TransferInput</name>"
                               "<type>115</type><value>a,b</value></item></jobAd></ns1:discoverJobRequirements>")
    assert [i.text for i in needs.find("requirements")] == ["a", "b"]


def test_both_spellings_of_the_local_universe(gateway):
    for name in ("LOCAL", "LOCALUNIVESE"):
        template = answer_of(gateway, f"<ns1:createJobTemplate><clusterId>1</clusterId><jobId>0</jobId>"
                                      f"<type>{name}</type></ns1:createJobTemplate>")
        assert {i.findtext("name"): i.findtext("value") for i in template.find("classAd")}["JobUniverse"] == "12"


def test_axis_style_xsi_types_and_nil_transactions(gateway):
    begun = answer_of(gateway, '<ns1:beginTransaction><duration xsi:type="xsd:int">60</duration>'
                               '</ns1:beginTransaction>')
    txn = begun.findtext("transaction/id")
    cluster = answer_of(gateway, f'<ns1:newCluster><transaction xsi:type="ns1:Transaction"><id xsi:type="xsd:int">'
                                 f'{txn}</id><duration xsi:type="xsd:int">60</duration></transaction>'
                                 f'</ns1:newCluster>')
    assert cluster.findtext("status/code") == "SUCCESS"
    listing = answer_of(gateway, '<ns1:getJobAds><transaction xsi:type="ns1:Transaction" xsi:nil="true"/>'
                                 '<constraint xsi:type="xsd:string">ClusterId == -5</constraint></ns1:getJobAds>')
    assert listing.findtext("status/code") == "SUCCESS"
    empty = answer_of(gateway, "<ns1:getJobAds><transaction/></ns1:getJobAds>")
    assert empty.findtext("status/code") == "SUCCESS"


def test_dotnet_style_qualified_children_in_any_order_with_extras(gateway):
    begun = answer_of(gateway, '<beginTransaction xmlns="urn:condor"><duration>60</duration>'
                               '<unexpected>ignored</unexpected></beginTransaction>')
    txn = begun.findtext("transaction/id")
    cluster = answer_of(gateway, f'<newCluster xmlns="urn:condor"><transaction><duration>60</duration><id>{txn}'
                                 f'</id></transaction></newCluster>')
    assert cluster.findtext("status/code") == "SUCCESS" and int(cluster.findtext("integer")) > 0


def test_an_empty_array_is_an_empty_element_and_a_null_one_is_omitted(gateway):
    listing = answer_of(gateway, "<ns1:getJobAds><constraint>ClusterId == -1</constraint></ns1:getJobAds>")
    array = listing.find("classAdArray")
    assert array is not None and len(array) == 0
    missing = answer_of(gateway, "<ns1:getJobAd><clusterId>999999</clusterId><jobId>0</jobId></ns1:getJobAd>")
    assert missing.findtext("status/code") == "UNKNOWNJOB" and missing.find("classAd") is None


def test_an_empty_string_value_is_sent_as_an_empty_element(gateway):
    template = answer_of(gateway, "<ns1:createJobTemplate><clusterId>1</clusterId><jobId>0</jobId>"
                                  "<type>VANILLA</type></ns1:createJobTemplate>")
    arguments = [i for i in template.find("classAd") if i.findtext("name") == "Arguments"][0]
    assert arguments.find("value") is not None and (arguments.findtext("value") or "") == ""


def test_status_comes_first_in_every_and_status_answer(gateway):
    begun = answer_of(gateway, "<ns1:beginTransaction><duration>5</duration></ns1:beginTransaction>")
    assert [c.tag for c in begun] == ["status", "transaction"]
    assert re.fullmatch(r"-?\d+", begun.findtext("transaction/id"))
