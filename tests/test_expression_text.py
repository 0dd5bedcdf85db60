"""Expressions come back as clients sent them, over Birdbath and the submission API (SOAP and JSON), after a restart
and from the history; and a replayed gSOAP client's job ads carry its text where a legacy regular expression finds it."""

from __future__ import annotations

import json
import re
import urllib.request
from xml.sax.saxutils import escape

import pytest
import zeep
from lxml import etree

from tests.birdbath import as_dict, expr, submit_job
from tests.conftest import QUEUE_ONLY, module_gateway
from tests.test_exprtext import REWRITTEN
from tests.test_wire_replay import retarget
from tests.wire import assert_valid, body_element, captured, post

gateway = module_gateway(QUEUE_ONLY)
#: attribute name -> expression text, as sent
SENT = {f"E{number}": text for number, text in enumerate(REWRITTEN)}
#: what a cloud provisioning client matches job requirements with (a real, public legacy client)
VM_TYPE = re.compile(r'VMType\s=\?=\s"(.+?)"')


@pytest.fixture(scope="module")
def schedd(gateway):
    return zeep.Client(gateway.url + "condorSchedd.wsdl").service


@pytest.fixture(scope="module")
def api(gateway):
    return zeep.Client(gateway.url + "submission?wsdl").service


def call(gateway, operation: str, **params) -> dict:
    request = urllib.request.Request(gateway.url + f"submission/json/{operation}", json.dumps(params).encode())
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())
    assert answer["status"]["code"] == "OK", answer
    return answer


def sent_back(values: dict[str, str]) -> dict[str, str]:
    return {name: values.get(name) for name in SENT}


def expected() -> dict[str, str]:
    return {name: text.strip() for name, text in SENT.items()}


def birdbath_values(schedd, cluster: int) -> list[dict[str, str]]:
    """The job's expression attributes from getJobAd and from getJobAds."""
    one = as_dict(schedd.getJobAd(None, cluster, 0).classAd)
    (many,) = schedd.getJobAds(None, f"ClusterId == {cluster}").classAdArray.item
    return [{name: value for name, (kind, value) in found.items() if kind == "EXPRESSION-ATTR"}
            for found in (one, as_dict(many))]


def json_values(gateway, job: str) -> dict[str, str]:
    return {name: typed["VALUE"] for name, typed in call(gateway, "getJobAd", id=job)["ad"].items()
            if typed["TYPE"] == 0}


def soap_values(api, job: str) -> dict[str, str]:
    return {a.name: a.value for a in api.getJobAd(job).ad.Attribute if a.type == "EXPR"}


@pytest.fixture(scope="module")
def jobs(gateway, schedd, api, tmp_path_factory):
    """One job per way in: Birdbath submit, JSON submit, JSON setAttribute, SOAP submit, SOAP setAttribute."""
    iwd = str(tmp_path_factory.mktemp("iwd"))
    base = {"Cmd": "/bin/true", "Iwd": iwd, "Requirements": {"TYPE": 0, "VALUE": "FALSE"}}
    cluster, _ = submit_job(schedd, Requirements=expr("FALSE"), **{n: expr(t) for n, t in SENT.items()})
    by_json = call(gateway, "submit", ad={**base, **{n: {"TYPE": 0, "VALUE": t} for n, t in SENT.items()}})["id"]
    set_json = call(gateway, "submit", ad=base)["id"]
    for name, text in SENT.items():
        call(gateway, "setAttribute", id=set_json, name=name, type="EXPR", value=text)
    wire = [{"name": n, "type": "STRING", "value": v} for n, v in (("Cmd", "/bin/true"), ("Iwd", iwd))]
    wire += [{"name": "Requirements", "type": "EXPR", "value": "FALSE"}]
    by_soap = api.submit({"Attribute": wire + [{"name": n, "type": "EXPR", "value": t} for n, t in SENT.items()]},
                         None).id
    set_soap = api.submit({"Attribute": wire}, None).id
    for name, text in SENT.items():
        assert api.setAttribute(set_soap, name, None, text).code == "OK"
    return cluster, [by_json, set_json, by_soap, set_soap]


def check_all(gateway, schedd, api, jobs) -> None:
    cluster, ids = jobs
    for found in birdbath_values(schedd, cluster):
        assert sent_back(found) == expected()
    for job in ids:
        assert sent_back(json_values(gateway, job)) == expected()
        assert sent_back(soap_values(api, job)) == expected()


def test_expressions_come_back_as_sent_over_both_apis(gateway, schedd, api, jobs):
    check_all(gateway, schedd, api, jobs)
    summary = call(gateway, "getJobSummaries", ids=[jobs[1][0]])["jobs"][0]["ad"]
    assert "Requirements" not in summary and summary["Cmd"]["VALUE"] == "/bin/true"


def test_constraints_on_them_still_evaluate(schedd, jobs):
    cluster, _ = jobs
    constraint = f"ClusterId == {cluster} && E1 =?= FALSE && E3 && isUndefined(E2) && E4 =?= UNDEFINED"
    (job,) = schedd.getJobAds(None, constraint).classAdArray.item
    assert as_dict(job)["E0"][1] == SENT["E0"]
    assert schedd.getJobAds(None, f"ClusterId == {cluster} && E1").classAdArray is None


def test_texts_outlive_the_gateways_edits_and_templates_print_as_the_8x_schedd_did(gateway, schedd):
    cluster, _ = submit_job(schedd, Requirements=expr("FALSE"), Plain=expr("a is b || c isnt 1.0E3"),
                            Template=expr("x =?= TRUE"))
    # ... and after the gateway rewrites the job: hold and release copy the ad, the texts go with it
    assert schedd.holdJob(None, cluster, 0, "pause", False, False, False).code == "SUCCESS"
    assert schedd.releaseJob(None, cluster, 0, "go", False, False).code == "SUCCESS"
    values = as_dict(schedd.getJobAd(None, cluster, 0).classAd)
    assert values["Plain"] == ("EXPRESSION-ATTR", "a is b || c isnt 1.0E3")  # the client's own text
    assert values["Template"] == ("EXPRESSION-ATTR", "x =?= TRUE")
    template = as_dict(schedd.createJobTemplate(1, 0, "me", "VANILLA", "/bin/true", None, "x=?=TRUE").classAd)
    assert template["Requirements"] == ("EXPRESSION-ATTR", "x=?=TRUE")
    assert template["LeaveJobInQueue"] == ("EXPRESSION-ATTR", "FilesRetrieved=?=FALSE")


def test_expressions_survive_a_restart_and_reach_the_history(gateway, schedd, api, jobs):
    gateway.restart()
    schedd = zeep.Client(gateway.url + "condorSchedd.wsdl").service
    api = zeep.Client(gateway.url + "submission?wsdl").service
    check_all(gateway, schedd, api, jobs)
    cluster, ids = jobs
    assert schedd.removeCluster(None, cluster, "to the history").code == "SUCCESS"
    for job in ids:
        call(gateway, "remove", id=job, reason="to the history")
    history = call(gateway, "getHistory", constraint=f"ClusterId >= {cluster}")["jobs"]
    assert len(history) == 1 + len(ids)
    for job in history:
        assert sent_back({n: t["VALUE"] for n, t in job["ad"].items() if t["TYPE"] == 0}) == expected()


def test_a_replayed_gsoap_client_reads_its_own_requirements(gateway):
    """The gSOAP capture's submit, with a cloud provisioning client's requirements; the raw getJobAds answer, in
    gSOAP's shape, carries them as sent, where that client's regular expression finds the VM type."""
    requirements = '(VMType =?= "csvm-large") && (Arch == "X86_64") && (Memory >= 1.0E3)'
    ids: dict[str, int] = {}
    for operation in ("beginTransaction", "newCluster", "newJob", "submit", "commitTransaction"):
        head, body = captured("gsoap", operation)
        if operation == "submit":
            body = body.replace(b"<value>TRUE</value>", f"<value>{escape(requirements)}</value>".encode())
        status, _, answer = post(gateway.port, retarget(body, ids), head)
        response = body_element(answer).find("response")
        assert status == 200 and "SUCCESS" in etree.tostring(response).decode(), answer
        if operation == "beginTransaction":
            ids["txn"] = int(response.findtext("transaction/id"))
        elif operation in ("newCluster", "newJob"):
            ids["cluster" if operation == "newCluster" else "proc"] = int(response.findtext("integer"))
    head, body = captured("gsoap", "getJobAds")
    body = body.replace(b"JobStatus == 1", f"ClusterId == {ids['cluster']}".encode())
    status, _, answer = post(gateway.port, body, head)
    wrapper = body_element(answer)
    assert status == 200
    assert_valid(wrapper)
    items = {item.findtext("name"): (item.findtext("type"), item.findtext("value"))
             for item in wrapper.iterfind("response/classAdArray/item/item")}
    assert items["Requirements"] == ("EXPRESSION-ATTR", requirements)
    assert VM_TYPE.search(answer.decode()).group(1) == "csvm-large"
