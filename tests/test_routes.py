"""The site's resource tree (gateway/routes.py): which resource twisted.web finds for a path, the WSDLs by file name,
gSOAP's any-path POSTs split between condorSchedd and condorCollector by the body, and a resource mounted at a path.

The tree is resolved by twisted.web's own traversal (``getChildForRequest``) on the tree the gateway serves; what
the resources then answer is checked against a running gateway.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from lxml import etree
from twisted.web.resource import Resource, getChildForRequest
from twisted.web.test.requesthelper import DummyRequest

from gateway.http import Branch, JsonResource, Service, SoapResource
from gateway.routes import Routes, gateway_routes, operation_of, schedd_or_collector
from gateway.submission.jsonapi import JsonApi

SOAP_ENV = "http://schemas.xmlsoap.org/soap/envelope/"


class Page(Resource):
    isLeaf = True

    def render_GET(self, request) -> bytes:
        return b"page"


@pytest.fixture
def routes() -> Routes:
    """The gateway's tree, its services named by what they are (no request reaches them here)."""
    services = {name: Service(dispatcher=name, context_for=lambda caller: None)  # type: ignore[arg-type]
                for name in ("schedd", "collector", "submission", "job", "query")}
    return gateway_routes(schedd=services["schedd"], collector=services["collector"],
                          submission=services["submission"], json_api=JsonApi(), aviary_job=services["job"],
                          aviary_query=services["query"], pages={"/metrics": Page(), "/healthz": Page()})


def found(routes: Routes, path: str, method: bytes = b"POST", body: bytes = b"") -> tuple[object, str]:
    """The resource the tree gives ``path``, and the service it hands ``body`` to (its dispatcher's name)."""
    request = DummyRequest(path.encode().split(b"/")[1:])
    request.method = method
    resource = getChildForRequest(routes.root, request)
    if isinstance(resource, Branch):  # a segment on the way to a mounted resource renders as its fallback
        resource = resource.fallback
    service = resource.service(body).dispatcher if isinstance(resource, SoapResource) else ""
    return resource, service


def envelope(operation: str) -> bytes:
    return (f'<s:Envelope xmlns:s="{SOAP_ENV}"><s:Body>\n  <c:{operation} xmlns:c="urn:condor"/></s:Body>'
            f"</s:Envelope>").encode()


@pytest.mark.parametrize("path, service", [
    ("/", "schedd"), ("/any/path/at/all", "schedd"), ("//double", "schedd"), ("/services", "schedd"),
    ("/services/other", "schedd"), ("/condorCollector", "schedd"), ("/submission", "submission"),
    ("/submission/", "submission"), ("/submission/jsonx", "submission"), ("/services/job", "job"),
    ("/services/job/submitJob", "job"), ("/services/query/getJobStatus", "query"),
    ("/services/aviary-common.xsd", "query"), ("/condorSchedd.wsdl", "schedd"), ("/x/submission.wsdl", "schedd"),
])
def test_soap_posts_go_to_the_service_whose_path_they_start_with_else_to_the_schedd(routes, path, service):
    resource, dispatcher = found(routes, path, body=envelope("getVersionString"))
    assert isinstance(resource, SoapResource) and dispatcher == service


@pytest.mark.parametrize("path", ["/", "/condorCollector", "/any/where"])
def test_a_collector_only_operation_goes_to_the_collector_on_any_schedd_path(routes, path):
    assert found(routes, path, body=envelope("queryStartdAds"))[1] == "collector"
    assert found(routes, path, body=envelope("getPlatformString"))[1] == "schedd"  # both have it: the schedd's
    assert found(routes, path, body=b"not soap")[1] == "schedd"  # the schedd answers what cannot be read


def test_a_wsdl_asked_for_by_its_file_name_is_its_services_whatever_the_path_before_it(routes):
    for path, file_name, location in (("/condorCollector.wsdl", b"condorCollector.wsdl", "condorCollector"),
                                      ("/some/where/condorCollector.wsdl", b"condorCollector.wsdl", "condorCollector"),
                                      ("/condorCollector.wsdl/", b"condorCollector.wsdl", "condorCollector"),
                                      ("/x/submission.wsdl", b"submission.wsdl", "submission"),
                                      ("/submission/aviary-job.wsdl", b"aviary-job.wsdl", "services/job")):
        resource, _ = found(routes, path, b"GET")
        assert (resource.file_name, resource.location) == (file_name, location), path
    assert found(routes, "/condorCollector.wsdl/more", b"GET")[0].file_name == b"condorSchedd.wsdl"


def test_json_operations_are_the_json_resource_below_submission(routes):
    for path in ("/submission/json/submit", "/submission/json/", "/submission/json", "/submission/json/a/b"):
        assert isinstance(found(routes, path)[0], JsonResource), path


def test_a_resource_mounted_at_a_path_takes_it_and_its_neighbours_stay_the_schedds(routes):
    api, spec = Page(), Page()
    assert routes.mount("/api/v1", api) is api
    routes.mount("/openapi.json", spec)
    assert found(routes, "/api/v1")[0] is api and found(routes, "/api/v1/jobs/1.0", b"GET")[0] is api
    assert found(routes, "/openapi.json", b"GET")[0] is spec
    assert found(routes, "/api", body=envelope("getVersionString"))[1] == "schedd"
    assert found(routes, "/api/v2/jobs", body=envelope("getVersionString"))[1] == "schedd"
    assert found(routes, "/api/condorCollector.wsdl", b"GET")[0].file_name == b"condorCollector.wsdl"
    assert isinstance(found(routes, "/metrics", b"GET")[0], Page)


@pytest.mark.parametrize("body, name", [
    (envelope("getJobAds"), "getJobAds"), (b"<Body><q:queryAnyAds/>", "queryAnyAds"), (b"<x:Body a='>'>", None),
    (b"", None), (b"<s:Body><!-- c --><c:queryAnyAds/>", None),
])
def test_the_operation_is_read_from_the_bodys_first_element_without_parsing(body, name):
    assert operation_of(body) == name


def test_the_split_is_by_operation_only():
    schedd, collector = (Service(name, lambda caller: None) for name in ("schedd", "collector"))  # type: ignore
    split = schedd_or_collector(schedd, collector)
    assert split(envelope("queryMasterAds")) is collector and split(envelope("getJobAds")) is schedd


# -- what the resources answer, on a running gateway ----------------------------------------------------------------
def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


def soap_address(document: bytes) -> str:
    return etree.fromstring(document).find(".//{http://schemas.xmlsoap.org/wsdl/soap/}address").get("location")


def test_the_gateway_serves_its_tree(gateway):
    status, kind, document = get(gateway.url + "deep/path/condorCollector.wsdl")
    assert status == 200 and kind.startswith("text/xml") and soap_address(document) == gateway.url + "condorCollector"
    assert soap_address(get(gateway.url + "submission/?wsdl")[2]) == gateway.url + "submission"
    assert soap_address(get(gateway.url + "anything?wsdl")[2]) == gateway.url
    status, kind, text = get(gateway.url + "submission/json/getJobAd")  # a GET of an operation: no document
    assert status == 404 and kind.startswith("text/plain") and b"JSON to /submission/json/<operation>" in text
    request = urllib.request.Request(gateway.url + "deep/path", envelope("getVersionString"),
                                     {"Content-Type": "text/xml"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert b"getVersionStringResponse" in response.read()
    request = urllib.request.Request(gateway.url + "submission/json/getJobAd/extra", b"{}")
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=30)
    assert error.value.code == 404 and "'getJobAd/extra'" in json.loads(error.value.read())["status"]["text"]
