"""The Birdbath codec: contracts read from the shipped WSDLs, requests read by their types with gSOAP's leniencies
(``gateway.soap.lenient``), answers written in gSOAP's shape and valid against the schema, and whatever cannot be
read answered with a Client fault saying why.  End to end, ``test_wire_replay`` replays real clients' traffic."""

from __future__ import annotations

import pytest
from lxml import etree

from gateway.birdbath.collector import collector_service
from gateway.birdbath.schedd import schedd_service
from gateway.soap.codec import ContractService
from gateway.soap.contract import Contract
from gateway.soap.xsd import BUILTIN, Array, Enumeration, Struct, WireFault, read_element
from tests.conftest import LEGACY_COLLECTOR_WSDL, LEGACY_WSDL, ROOT
from tests.synchronous import run
from tests.wire import assert_valid, body_element

SCHEDD = schedd_service()


def envelope(op: str, inner: str = "") -> bytes:
    return (f'<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/" '
            f'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><s:Body><c:{op} xmlns:c="urn:condor">{inner}'
            f'</c:{op}></s:Body></s:Envelope>').encode()


def read(op: str, inner: str = "") -> dict:
    return SCHEDD.read(envelope(op, inner)).arguments


def refused(op: str, inner: str) -> str:
    with pytest.raises(WireFault) as fault:
        read(op, inner)
    return fault.value.message


def shape(kind, seen=()) -> object:
    """A type as comparable plain data (names, members, values), recursion cut at a type already being shown."""
    if kind.name in seen:
        return kind.name
    if isinstance(kind, Struct):
        return {name: shape(member, (*seen, kind.name)) for name, member in kind.members.items()}
    if isinstance(kind, Array):
        return [kind.item, shape(kind.member, seen)]
    if isinstance(kind, Enumeration):
        return sorted(kind.values)
    return kind.name


@pytest.mark.parametrize("served, legacy", [("condorSchedd.wsdl", LEGACY_WSDL),
                                            ("condorCollector.wsdl", LEGACY_COLLECTOR_WSDL)])
def test_the_contract_is_the_one_htcondor_shipped(served, legacy):
    ours, theirs = Contract.load(ROOT / "wsdl" / served), Contract.load(legacy)
    assert list(ours.operations) == list(theirs.operations)
    for name, operation in ours.operations.items():
        other = theirs.operations[name]
        assert shape(operation.parameters) == shape(other.parameters), name
        assert (operation.answer_name, shape(operation.answer)) == (other.answer_name, shape(other.answer)), name


def test_every_operation_has_a_handler():
    """The operations are the WSDL's: a handler missing for one, or one for an operation it does not have, stops
    the service at start-up."""
    with pytest.raises(ValueError, match="getJobAds"):
        ContractService(SCHEDD.contract, {op: None for op in SCHEDD.contract.operations if op != "getJobAds"})
    with pytest.raises(ValueError, match="getJobAdz"):
        ContractService(SCHEDD.contract, {**{op: None for op in SCHEDD.contract.operations}, "getJobAdz": None})


# -- reading ----------------------------------------------------------------------------------------------------
def test_values_of_every_kind_are_read():
    assert read("holdJob", "<transaction><id>5</id><duration>60</duration></transaction><clusterId>1</clusterId>"
                           "<jobId>2</jobId><reason>a &amp; b</reason><system-hold>TRUE</system-hold>"
                           "<email-user>0</email-user>") == {
        "transaction": {"id": 5, "duration": 60}, "clusterId": 1, "jobId": 2, "reason": "a & b",
        "system-hold": True, "email-user": False}
    assert read("submit", "<jobAd><item><name>A</name><type>115</type><value>v</value></item><!-- c -->"
                          "<item><value>1</value></item></jobAd>")["jobAd"] == [
        {"name": "A", "type": "STRING-ATTR", "value": "v"}, {}, {"value": "1"}]


def test_gsoaps_leniencies():
    assert read("createJobTemplate", "<type> 12 </type>")["type"] == "LOCAL"
    assert read("createJobTemplate", "<type>LOCAL</type>")["type"] == "LOCAL"
    assert read("createJobTemplate", "<type>LOCALUNIVESE</type>")["type"] == "LOCALUNIVESE"
    assert read("declareFile", "<hashType>MD5</hashType>")["hashType"] == "MD5HASH"
    assert read("getJobAd", '<x:clusterId xmlns:x="urn:other" xsi:type="xsd:int"> 7 </x:clusterId><extra/>'
                            "<!-- c -->") == {"clusterId": 7}
    assert read("getJobAds", '<transaction xsi:nil="true"/><constraint/>') == {"transaction": None, "constraint": ""}
    assert read("beginTransaction", "<duration>-2147483648</duration>") == {"duration": -2**31}  # xsd:int's least
    unqualified = b'<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body><newJob>' \
                  b'<clusterId>3</clusterId></newJob></s:Body></s:Envelope>'
    assert SCHEDD.read(unqualified).arguments == {"clusterId": 3}


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "iso-8859-1"])
def test_nulls_are_read_wherever_they_are_in_any_encoding(encoding):
    """``xsi:nil`` on a member, an array's item and a field of one, with the namespace declared where it is used,
    in encodings that write ``nil`` as ASCII and one that does not; an empty ``xsi:nil`` is no null."""
    inner = ('<jobAd><item><name>A</name><type>STRING-ATTR</type><value>1</value></item>'
             '<item xmlns:i="http://www.w3.org/2001/XMLSchema-instance" i:nil="1"/>'
             '<item><name>B</name><type i:nil="true" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"/>'
             '<value xsi:nil="">2</value></item></jobAd><clusterId xsi:nil="true">4</clusterId>')
    body = (f"<?xml version='1.0' encoding='{encoding}'?>\n" + envelope("submit", inner).decode()).encode(encoding)
    assert SCHEDD.read(body).arguments == {
        "jobAd": [{"name": "A", "type": "STRING-ATTR", "value": "1"}, None, {"name": "B", "type": None, "value": "2"}],
        "clusterId": None}


@pytest.mark.parametrize("op, inner, message", [
    ("getJobAd", "<clusterId>abc</clusterId>", "Could not cast 'abc' to integer"),
    ("getJobAd", "<clusterId>2147483648</clusterId>", "The value 2147483648 could not be validated."),
    ("getJobAd", "<clusterId>-2147483649</clusterId>", "The value -2147483649 could not be validated."),
    ("getJobAd", "<clusterId>123456789012</clusterId>", "The value '123456789012' could not be validated."),
    ("getJobAd", "<clusterId>1</clusterId><clusterId>1</clusterId>",
     "'clusterId' member does not respect frequency constraints."),
    ("declareFile", "<hashType>SHA</hashType>", "The value 'SHA' could not be validated."),
    ("submit", "<jobAd><item><type></type></item></jobAd>", "The value None could not be validated."),
    ("newCluster", "<transaction><id>1</id><id>2</id></transaction>",
     "'id' member does not respect frequency constraints."),
])
def test_values_that_cannot_be_read_are_client_faults_naming_them(op, inner, message):
    assert refused(op, inner) == message


@pytest.mark.parametrize("body, message", [
    (b"<s:Envelope", "Malformed XML"), (b"<x/>", "Not a SOAP 1.1 envelope"),
    (b'<!DOCTYPE x [<!ENTITY e "x">]><x/>', "DTDs"),
    (b'<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body/></s:Envelope>', "no Body"),
    (envelope("frobnicate"), "Method 'frobnicate' not implemented"),
    (envelope("getVersionString").replace(b"urn:condor", b"urn:other"), "Method 'getVersionString' not"),
    (envelope("insertAd"), "Method 'insertAd' not implemented"),
])
def test_messages_that_are_not_requests_of_the_service_are_client_faults(body, message):
    with pytest.raises(WireFault) as fault:
        SCHEDD.read(body)
    assert fault.value.code == "Client" and message in fault.value.message


def test_the_collector_reads_types_as_text_and_answers_fail_itself():
    collector = collector_service()
    call = collector.read(envelope("insertAd", "<type>NO-SUCH</type><ad><item><type>NUMBER</type></item></ad>"))
    assert call.arguments == {"type": "NO-SUCH", "ad": [{"type": "NUMBER"}]}


# -- writing ----------------------------------------------------------------------------------------------------
OK = {"code": "SUCCESS", "message": "Success"}
ANSWERS = {
    "getVersionString": {"status": {"code": "SUCCESS"}, "message": "$CondorVersion: x $"},
    "beginTransaction": {"status": OK, "transaction": {"id": 7, "duration": 60}},
    "commitTransaction": {"code": "FAIL", "message": "a <b> & c\r\n"},
    "newCluster": {"status": OK, "integer": -1},
    "submit": {"status": OK},
    "discoverJobRequirements": {"status": OK, "requirements": ["a", "b"]},
    "getFile": {"status": OK, "data": b"\x00\xffhello"},
    "listSpool": {"status": OK, "info": [{"name": "f", "size": 2 ** 40}]},
    "createJobTemplate": {"status": OK, "classAd": [{"name": "A", "type": "STRING-ATTR", "value": ""}]},
    "getJobAds": {"status": OK, "classAdArray": [[{"name": "A", "type": "INTEGER-ATTR", "value": "1"}], []]},
}


@pytest.mark.parametrize("operation", ANSWERS)
def test_answers_are_valid_gsoap_shaped_and_read_back(operation):
    document = SCHEDD.write(operation, ANSWERS[operation])
    assert document.startswith(b"<?xml version='1.0' encoding='UTF-8'?>\n")
    wrapper = body_element(document)
    assert wrapper.tag == f"{{urn:condor}}{operation}Response"
    assert_valid(wrapper)
    assert all(etree.QName(e).namespace is None for e in wrapper.iterdescendants())
    sent = dict(ANSWERS[operation])
    if operation == "getFile":
        sent["data"] = "AP9oZWxsbw=="  # base64Binary is read as its text
    assert read_element(SCHEDD.contract.operations[operation].answer, wrapper.find("response")) == sent


def test_empty_members_and_arrays():
    assert b"<requirements/>" in SCHEDD.write("discoverJobRequirements", {"status": OK, "requirements": []})
    assert b"<message></message>" in SCHEDD.write("getVersionString", {"status": OK, "message": ""})
    assert b"<response><status>" in SCHEDD.write("getJobAd", {"status": OK, "classAd": None})


# -- serving ----------------------------------------------------------------------------------------------------
def test_a_handler_that_fails_is_a_server_fault_whether_it_waited_or_not():
    from twisted.internet.defer import Deferred

    async def broken(request, parameters):
        raise RuntimeError("broken at once")

    async def newJob(request, parameters):
        return {"status": OK, "integer": parameters["clusterId"]}

    later: list[Deferred] = []
    handlers = {op: broken for op in SCHEDD.contract.operations}
    handlers["newCluster"] = lambda request, parameters: later.append(Deferred()) or later[-1]
    handlers["newJob"] = newJob
    service = ContractService(SCHEDD.contract, handlers)
    at_once = run(service.dispatch(envelope("getVersionString"), None))
    assert at_once.code == 500 and b"<faultstring>Internal error in getVersionString: broken at once" in at_once.body
    answered = []
    waiting = Deferred.fromCoroutine(service.dispatch(envelope("newCluster"), None)).addCallback(answered.append)
    assert not waiting.called
    later[0].errback(RuntimeError("broken later"))
    assert answered[0].code == 500 and b"Internal error in newCluster: broken later" in answered[0].body
    fine = run(service.dispatch(envelope("newJob", "<clusterId>4</clusterId>"), None))
    assert (fine.code, fine.status, fine.reason) == (200, "SUCCESS", "Success") and b"<integer>4</integer>" in fine.body
    refused = run(service.dispatch(envelope("newJob", "<clusterId>x</clusterId>"), None))
    assert refused.code == 500 and refused.operation == "newJob" and refused.fault.startswith("Client: Could not cast")


def test_a_structs_xml_attributes_are_written_on_its_element_quoted():
    """Aviary's SubmissionID carries its pool and scheduler as XML attributes: written on the member's element (on
    each element of a repeated member), quoted whatever their text, left out when null; read back as they were."""
    submission = Struct("SubmissionID", {"name": BUILTIN["string"]}, attributes=("pool", "scheduler"))
    holder = Struct("Page", {"ids": submission, "remaining": BUILTIN["int"]}, repeated={"ids"})
    written = holder.write({"ids": [{"name": "a", "pool": 'p&"<q>', "scheduler": "s"}, {"name": "b", "pool": None}],
                            "remaining": 0})
    assert written == ('<ids pool="p&amp;&quot;&lt;q&gt;" scheduler="s"><name>a</name></ids><ids><name>b</name></ids>'
                       "<remaining>0</remaining>")
    first = etree.fromstring(f"<page>{written}</page>")[0]
    assert read_element(submission, first) == {"name": "a", "pool": 'p&"<q>', "scheduler": "s"}


def test_one_fault_template_serves_the_codec_and_the_transport():
    """The transport's faults (a request too large or too slow) are the codec's template with its default code:
    a client's words in the text are escaped, never markup."""
    from gateway.soap.codec import fault_document

    fault = etree.fromstring(fault_document("</faultstring><evil/> & more"))
    assert fault.findtext(".//faultcode") == "soap11env:Client" and not fault.findall(".//evil")
    assert fault.findtext(".//faultstring") == "</faultstring><evil/> & more"
    assert etree.fromstring(fault_document("down", "Server")).findtext(".//faultcode") == "soap11env:Server"
