"""The site's resource tree (gateway/routes.py) as the installed front ends fill it (gateway/frontend.py): which
resource twisted.web finds for a path, the WSDLs by file name, gSOAP's any-path POSTs split between condorSchedd and
condorCollector by the body (gateway/birdbath/frontend.py), and a resource mounted at a path.

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

from gateway.birdbath.frontend import schedd_or_collector
from gateway.config import GatewayConfig
from gateway.frontend import Core, Sites, installed
from gateway.http import TEXT, Branch, not_found, refusal_in_form
from gateway.routes import Routes, Unserved
from gateway.soap.resource import Service, SoapResource, operation_of
from gateway.submission.frontend import JsonResource

SOAP_ENV = "http://schemas.xmlsoap.org/soap/envelope/"


class Page(Resource):
    isLeaf = True

    def render_GET(self, request) -> bytes:
        return b"page"


#: the services by the name of the contract their dispatcher serves (the submission API's is spyne's)
NAMES = {"condorSchedd": "schedd", "condorCollector": "collector", "aviary-job": "job", "aviary-query": "query"}


def mounted(config: GatewayConfig | None = None) -> Sites:
    """The trees the installed front ends fill, over a core of nothing (no request reaches it here)."""
    config = config or GatewayConfig()
    sites = Sites(Routes(), Routes())
    core = Core(config, None, None, None, None, None, None, lambda *args: None)  # type: ignore[arg-type]
    for front_end in installed():
        if front_end.enabled(config):
            front_end.mount(sites, core)
    return sites


@pytest.fixture
def routes() -> Routes:
    """The gateway's tree."""
    return mounted().gateway


def found(routes: Routes, path: str, method: bytes = b"POST", body: bytes = b"") -> tuple[object, str]:
    """The resource the tree gives ``path``, and the service it hands ``body`` to (by its contract's name)."""
    request = DummyRequest(path.encode().split(b"/")[1:])
    request.method = method
    resource = getChildForRequest(routes.root, request)
    if isinstance(resource, Branch):  # a segment on the way to a mounted resource renders as its fallback
        resource = resource.fallback
    service = ""
    if isinstance(resource, SoapResource):
        dispatcher = resource.service(body).dispatcher
        contract = getattr(dispatcher, "contract", None)
        service = NAMES[contract.service] if contract is not None else "submission"
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
    assert routes.mount("/extra/v1", api) is api
    routes.mount("/extra.json", spec)
    assert found(routes, "/extra/v1")[0] is api and found(routes, "/extra/v1/jobs/1.0", b"GET")[0] is api
    assert found(routes, "/extra.json", b"GET")[0] is spec
    assert found(routes, "/extra", body=envelope("getVersionString"))[1] == "schedd"
    assert found(routes, "/extra/v2/jobs", body=envelope("getVersionString"))[1] == "schedd"
    assert found(routes, "/extra/condorCollector.wsdl", b"GET")[0].file_name == b"condorCollector.wsdl"
    assert type(found(routes, "/api/v1/jobs", b"GET")[0]).__name__ == "RestApi"  # the REST front end's
    assert type(found(routes, "/metrics", b"GET")[0]).__name__ == "MetricsPage"


def test_the_collectors_own_port_is_the_collector_at_every_path():
    collector = mounted().collector
    for path in ("/", "/condorSchedd", "/any/where"):
        assert found(collector, path, body=envelope("getVersionString"))[1] == "collector", path
    assert found(collector, "/x/condorCollector.wsdl", b"GET")[0].file_name == b"condorCollector.wsdl"
    assert found(collector, "/condorSchedd.wsdl", b"GET")[0].file_name == b"condorCollector.wsdl"


def test_a_tree_no_front_end_filled_answers_nothing_but_not_found():
    """The transport's tree before any front end: every path its fallback, a 404 to a GET, no SOAP service."""
    empty = Routes()
    resource, service = found(empty, "/any/path", b"GET")
    assert type(resource) is Unserved and service == ""
    request = DummyRequest([b"any"])
    request.refusal = None
    assert resource.render_GET(request) == b"Not found.\n" and request.responseCode == 404
    assert refusal_in_form(empty.root, "too large") == (TEXT, b"too large\n")  # no front end: no protocol's form


def test_a_refusal_before_any_resource_is_in_the_form_of_the_trees_fallback(routes):
    """A body too large is refused before a resource is found: as the front end answering any path says it (the
    schedd's SOAP fault, the codec's), as text on a site of a plain resource (the monitoring port's)."""
    kind, body = refusal_in_form(routes.root, "Request body larger than <the limit> & more")
    assert kind.startswith(b"text/xml")
    assert etree.fromstring(body).findtext(".//faultstring") == "Request body larger than <the limit> & more"
    assert refusal_in_form(Resource(), "too large") == (TEXT, b"too large\n")
    assert refusal_in_form(None, "too large") == (TEXT, b"too large\n")


def test_each_front_end_refuses_in_its_own_form(routes):
    soap, _ = found(routes, "/submission", b"GET")
    json_resource, _ = found(routes, "/submission/json/submit")
    assert etree.fromstring(soap.refusal("no")).findtext(".//faultcode").endswith("Client")
    assert json_resource.content_type == b"application/json"
    assert json.loads(json_resource.refusal("no"))["status"]["code"] == "FAIL"


def test_a_404_says_the_signposts_the_front_ends_put_on_the_tree(routes):
    request = DummyRequest([b"nothing.html"])
    request.site = type("Site", (), {"resource": routes.root})()
    text = not_found(request).decode()
    assert request.responseCode == 404 and text.startswith("Not found. ") and text.endswith(".\n")
    for signpost in ("GET /condorSchedd.wsdl (or /?wsdl)", "GET /submission.wsdl (or /submission?wsdl)",
                     "POST SOAP requests to any path", "POST JSON to /submission/json/<operation>"):
        assert signpost in routes.signposts and signpost in text


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
