"""The condorCollector service end to end: a gateway process with one slot and a collector port of its own, asked
by zeep clients built from the shipped 7.2.4 WSDL and by raw envelopes written from it."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from lxml import etree

from gateway.testing_ports import HeldPort
from tests.birdbath import submit_job
from tests.conftest import LEGACY_COLLECTOR_WSDL, module_gateway, zeep_client
from tests.test_execution import wait_until
from tests.test_wsdl import SOAP, first_difference, parse, shape

ENVELOPE = ('<?xml version="1.0" encoding="UTF-8"?><SOAP-ENV:Envelope '
            'xmlns:SOAP-ENV="http://schemas.xmlsoap.org/soap/envelope/" xmlns:condor="urn:condor">'
            '<SOAP-ENV:Body>{}</SOAP-ENV:Body></SOAP-ENV:Envelope>')


#: held for the module's gateway, which binds it (held, no other test's socket can take it before)
COLLECTOR_HELD = HeldPort()
COLLECTOR_PORT = COLLECTOR_HELD.port
gateway = module_gateway(f"[backends.local]\nslots = 1\n[birdbath]\ncollector_port = {COLLECTOR_PORT}\n")
COLLECTOR_URL = f"http://127.0.0.1:{COLLECTOR_PORT}/"


@pytest.fixture(scope="module")
def collector(gateway):
    """A zeep client from the shipped WSDL, sent to the gateway's own port."""
    import zeep

    return zeep.Client(str(LEGACY_COLLECTOR_WSDL)).create_service("{urn:condor}condorCollector", gateway.url)


@pytest.fixture(scope="module")
def schedd(gateway):
    return zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)


def ads(result) -> list[dict[str, str]]:
    """zeep's answer to a query (the ``result`` array, None when empty) as {name: value} dicts."""
    return [{item.name: item.value for item in ad.item} for ad in (result or [])]


def post(url: str, inner: str) -> tuple[int, etree._Element]:
    request = urllib.request.Request(url, ENVELOPE.format(inner).encode(), {"Content-Type": "text/xml"})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, etree.fromstring(response.read())
    except urllib.error.HTTPError as error:
        return error.code, etree.fromstring(error.read())


def body(document: etree._Element) -> etree._Element:
    return document.find("{http://schemas.xmlsoap.org/soap/envelope/}Body")[0]


# -- the WSDL ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("where, path, location", [
    ("gateway", "condorCollector.wsdl", "condorCollector"), ("gateway", "condorCollector?wsdl", "condorCollector"),
    ("gateway", "some/where/condorCollector.wsdl", "condorCollector"),
    ("collector", "condorCollector.wsdl", ""), ("collector", "?wsdl", "")])
def test_the_collector_wsdl_is_served_with_the_server_s_address(gateway, where, path, location):
    base = gateway.url if where == "gateway" else COLLECTOR_URL
    with urllib.request.urlopen(base + path) as response:
        served = etree.fromstring(response.read())
    assert first_difference(shape(served), shape(parse(LEGACY_COLLECTOR_WSDL))) is None
    assert served.find(f".//{{{SOAP}}}address").get("location") == base + location


def test_the_schedd_wsdl_is_still_the_schedd_s(gateway):
    with urllib.request.urlopen(gateway.url + "?wsdl") as response:
        assert etree.fromstring(response.read()).get("name") == "condorSchedd"


# -- queries ----------------------------------------------------------------------------------------------
def test_the_scheduler_ad_says_where_the_soap_interface_is(gateway, collector):
    (schedd_ad,) = ads(collector.queryScheddAds("HasSOAPInterface =?= TRUE"))
    assert schedd_ad["MyType"] == "Scheduler" and schedd_ad["HasSOAPInterface"] == "TRUE"
    assert schedd_ad["MyAddress"] == f"<127.0.0.1:{gateway.port}>"
    assert list(schedd_ad)[:3] == ["MyType", "TargetType", "ServerTime"]


def test_a_running_job_claims_a_slot_and_shows_in_the_counts(collector, schedd):
    cluster, proc = submit_job(schedd, Cmd="/bin/sleep", Arguments="60", Owner=_me())
    waiting = submit_job(schedd, Cmd="/bin/sleep", Arguments="60", Owner=_me())
    try:
        wait_until(lambda: any(ad["State"] == "Claimed" for ad in ads(collector.queryStartdAds(None))), 20)
        busy = [ad for ad in ads(collector.queryStartdAds('State == "Claimed"'))]
        assert [(ad["Activity"], ad["JobId"], ad["RemoteOwner"].split("@")[0]) for ad in busy] == \
            [("Busy", f"{cluster}.{proc}", _me())]
        (schedd_ad,) = ads(collector.queryScheddAds(None))
        assert (schedd_ad["TotalRunningJobs"], schedd_ad["TotalIdleJobs"]) == ("1", "1")
        (submitter,) = ads(collector.querySubmittorAds(f'Name == "{busy[0]["RemoteOwner"]}"'))
        assert (submitter["RunningJobs"], submitter["IdleJobs"]) == ("1", "1")
    finally:
        for key in ((cluster, proc), waiting):
            schedd.removeJob(None, *key, "done", False)
    wait_until(lambda: all(ad["State"] == "Unclaimed" for ad in ads(collector.queryStartdAds(None))), 20)
    (free,) = ads(collector.queryStartdAds(None))
    assert (free["Name"].split("@")[0], free["Cpus"], free["Activity"]) == ("slot1", "1", "Idle")
    assert free["Arch"] and free["OpSys"] == "LINUX" and int(free["Memory"]) > 0


def _me() -> str:
    import getpass

    return getpass.getuser()


def test_any_ads_by_mytype(collector):
    kinds = {ad["MyType"] for ad in ads(collector.queryAnyAds(None))}
    assert {"Scheduler", "Machine", "DaemonMaster", "Collector"} <= kinds
    assert {ad["MyType"] for ad in ads(collector.queryAnyAds('MyType == "DaemonMaster"'))} == {"DaemonMaster"}
    assert ads(collector.queryMasterAds(None))[0]["MyType"] == "DaemonMaster"
    assert ads(collector.queryLicenseAds(None)) == []


# -- insertAd ---------------------------------------------------------------------------------------------
def test_inserted_ads_are_returned_and_updated(collector):
    vm = {"item": [{"name": "Name", "type": "STRING-ATTR", "value": "vm-42"},
                   {"name": "Machine", "type": "STRING-ATTR", "value": "vm-42.cloud"},
                   {"name": "Cpus", "type": "INTEGER-ATTR", "value": "16"},
                   {"name": "Start", "type": "EXPRESSION-ATTR", "value": "KeyboardIdle > 15 * 60"}]}
    first = collector.insertAd("STARTD-AD-TYPE", vm)
    assert (first.code, first.message) == ("SUCCESS", "New ad inserted")
    assert collector.insertAd("STARTD-AD-TYPE", vm).message == "Updated ad"
    (found,) = ads(collector.queryStartdAds('Machine == "vm-42.cloud" && Cpus >= 16'))
    assert (found["MyType"], found["Cpus"], found["Start"]) == ("Machine", "16", "KeyboardIdle > 15 * 60")
    assert [ad["Name"] for ad in ads(collector.queryAnyAds('Name == "vm-42"'))] == ["vm-42"]


def test_a_raw_insert_with_c_values_on_the_collector_port():
    inner = ("<condor:insertAd><type>9</type><ad><item><name>Name</name><type>115</type><value>neg1</value></item>"
             "<item><name>Busy</name><type>98</type><value>TRUE</value></item></ad></condor:insertAd>")
    code, answer = post(COLLECTOR_URL, inner)
    assert code == 200 and body(answer).tag == "{urn:condor}insertAdResponse"
    assert body(answer).findtext("status/code") == "SUCCESS"
    _, answer = post(COLLECTOR_URL, '<condor:queryAnyAds><constraint>MyType == "Negotiator"</constraint>'
                                    '</condor:queryAnyAds>')
    (ad,) = body(answer).find("result")
    assert {item.findtext("name"): item.findtext("value") for item in ad}["Busy"] == "TRUE"


def test_collector_operations_at_any_path_of_the_gateway(gateway):
    code, answer = post(gateway.url + "any/path", "<condor:queryScheddAds/>")
    assert code == 200 and body(answer).tag == "{urn:condor}queryScheddAdsResponse"
    assert len(body(answer).find("result")) == 1


def test_the_collector_port_answers_only_the_collector(gateway):
    code, answer = post(COLLECTOR_URL, "<condor:getJobAds/>")
    assert code == 500 and "getJobAds" in answer.findtext(".//faultstring")
    _, answer = post(COLLECTOR_URL, "<condor:getVersionString/>")
    assert body(answer).findtext("response/message").startswith("$CondorVersion:")


# -- hostile ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("inner, message", [
    ("<condor:insertAd><type>NO-SUCH-AD-TYPE</type><ad/></condor:insertAd>", "Unknown type"),
    ("<condor:insertAd><type>99</type><ad/></condor:insertAd>", "Unknown type"),
    ("<condor:insertAd><type>STARTD-AD-TYPE</type></condor:insertAd>", "the ad is missing"),
    ("<condor:insertAd><type>SCHEDD-AD-TYPE</type><ad><item><name>Cpus</name><type>INTEGER-ATTR</type>"
     "<value>1</value></item></ad></condor:insertAd>", "no Name"),
    ("<condor:insertAd><type>STARTD-AD-TYPE</type><ad><item><name>Name</name><type>NUMBER</type><value>1</value>"
     "</item></ad></condor:insertAd>", "type 'NUMBER'"),
    ("<condor:insertAd><type>STARTD-AD-TYPE</type><ad><item><name>Name</name><type>EXPRESSION-ATTR</type>"
     "<value>((((</value></item></ad></condor:insertAd>", "Failed to parse the ClassAdStruct"),
    ("<condor:insertAd><type>STARTD-AD-TYPE</type><ad>" + "<item><name>A</name><type>INTEGER-ATTR</type>"
     "<value>1</value></item>" * 5000 + "</ad></condor:insertAd>", "more than"),
    ("<condor:insertAd><type>STARTD-AD-TYPE</type><ad><item><name>Name</name><type>STRING-ATTR</type>"
     "<value>" + "x" * 1_000_000 + "</value></item></ad></condor:insertAd>", "characters"),
])
def test_bad_inserts_fail_with_a_status(gateway, inner, message):
    code, answer = post(gateway.url, inner)
    assert code == 200, answer
    assert body(answer).findtext("status/code") == "FAIL"
    assert message in body(answer).findtext("status/message")


@pytest.mark.parametrize("constraint", ["MyType ==", "(" * 3000 + ")" * 3000, 'regexp("(a+)+$", Name)',
                                        "x" * 100000])
def test_bad_constraints_answer_an_empty_result(gateway, constraint):
    code, answer = post(gateway.url, f"<condor:queryAnyAds><constraint>{constraint}</constraint></condor:queryAnyAds>")
    assert code == 200 and body(answer).tag == "{urn:condor}queryAnyAdsResponse"
    assert len(body(answer).find("result")) == 0


def test_malformed_xml_is_a_fault_on_both_ports(gateway):
    for url in (gateway.url, COLLECTOR_URL):
        request = urllib.request.Request(url, b"<SOAP-ENV:Envelope><condor:queryAnyAds>", {})
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(request)
        assert error.value.code == 500


def test_the_request_log_says_why_a_query_answered_nothing(gateway):
    post(gateway.url, "<condor:queryAnyAds><constraint>" + "(" * 3000 + "</constraint></condor:queryAnyAds>")
    wait_until(lambda: "queryAnyAds from 127.0.0.1: FAIL" in gateway.log(), 5)
