"""The worked example of docs/architecture.md ("Adding an operation") holds: its WSDL snippets added to a copy of
the shipped condorSchedd WSDL and its handler added to ``HANDLERS`` serve the new operation through the codec, on a real core
over a real local backend, and nothing else is needed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lxml import etree
from twisted.internet.defer import maybeDeferred
from twisted.internet.task import Clock

from backends.local import LocalBackend
from gateway.birdbath import schedd as birdbath
from gateway.birdbath.context import RequestContext
from gateway.core.auth import AccessPolicy, Authentication, Caller
from gateway.core.schedd import BirdbathSchedd
from gateway.core.transactions import NewCluster, WholeTransaction
from gateway.soap.codec import ContractService
from gateway.soap.contract import Contract
from jobmodel.exprtext import TextedAd
from tests.conftest import ROOT
from tests.synchronous import run

DOC = ROOT / "docs" / "architecture.md"
ALICE = Caller("127.0.0.1", "alice", Authentication.SOCKET)
#: where each XML snippet of the document goes in the WSDL, in the document's order
PLACES = ("    </xsd:schema>", "  <portType", "  </portType>", "  </binding>")


def snippets(kind: str) -> list[str]:
    section = DOC.read_text().split("\n## Adding an operation\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{kind}\n(.*?)```", section, re.S)


def extended_wsdl(tmp_path: Path) -> Path:
    text = (ROOT / "wsdl" / "condorSchedd.wsdl").read_text()
    xml = snippets("xml")
    assert len(xml) == len(PLACES)
    for snippet, place in zip(xml, PLACES):
        assert text.count(place) == 1, place
        text = text.replace(place, snippet + place)
    path = tmp_path / "condorSchedd.wsdl"
    path.write_text(text)
    return path


def the_handler() -> dict:
    (python,) = snippets("python")
    return eval("{" + python + "}", vars(birdbath).copy())  # noqa: S307 - the document's own example


@pytest.fixture
def core(tmp_path):
    backend = LocalBackend(tmp_path / "state", schedd_name="test.example")
    yield BirdbathSchedd(backend, lambda f, *a, **k: maybeDeferred(f, *a, **k), AccessPolicy(), Clock())
    backend.close()


def a_job() -> TextedAd:
    ad = TextedAd()
    ad["Cmd"] = "/bin/true"
    return ad


def call(service: ContractService, core: BirdbathSchedd, body: str):
    envelope = ('<?xml version="1.0" encoding="UTF-8"?><SOAP-ENV:Envelope '
                'xmlns:SOAP-ENV="http://schemas.xmlsoap.org/soap/envelope/" xmlns:c="urn:condor"><SOAP-ENV:Body>'
                f"{body}</SOAP-ENV:Body></SOAP-ENV:Envelope>")
    context = RequestContext(ALICE, core, birdbath.job_ad_answers(service))
    answer = run(service.dispatch(envelope.encode(), context))  # (the local backend answers at once)
    return answer, etree.fromstring(answer.body)


def test_the_worked_example_adds_an_operation_with_the_wsdl_and_one_handler(tmp_path, core):
    handler = the_handler()
    assert list(handler) == ["countJobs"]
    service = ContractService(Contract.load(extended_wsdl(tmp_path)), {**birdbath.HANDLERS, **handler})
    assert list(service.contract.operations)[-1] == "countJobs"
    run(core.submit_transaction(ALICE, WholeTransaction([NewCluster([a_job(), a_job(), a_job()])])))
    answer, document = call(service, core, "<c:countJobs><constraint>ProcId &gt;= 1</constraint></c:countJobs>")
    assert answer.code == 200 and document.findtext(".//integer") == "2"
    assert document.findtext(".//status/code") == "SUCCESS"
    answer, document = call(service, core, "<c:countJobs/>")  # (no constraint: all of them)
    assert document.findtext(".//integer") == "3"


def test_the_new_operation_refuses_what_the_core_refuses(tmp_path, core):
    """A transaction nobody began is the core's refusal in the operation's answer (with its integer 0), and a wrongly
    typed parameter the codec's Client fault: the handler adds no checks of its own."""
    service = ContractService(Contract.load(extended_wsdl(tmp_path)), {**birdbath.HANDLERS, **the_handler()})
    answer, document = call(service, core, "<c:countJobs><transaction><id>4242</id><duration>60</duration>"
                                           "</transaction></c:countJobs>")
    assert answer.code == 200 and document.findtext(".//status/code") == "INVALIDTRANSACTION"
    assert document.findtext(".//integer") == "0"
    answer, document = call(service, core, "<c:countJobs><transaction><id>x</id></transaction></c:countJobs>")
    assert answer.code == 500 and document.findtext(".//faultcode").endswith("Client")


def test_either_half_alone_stops_the_service_at_start(tmp_path):
    with pytest.raises(ValueError, match="countJobs"):
        ContractService(Contract.load(extended_wsdl(tmp_path)), birdbath.HANDLERS)
    with pytest.raises(ValueError, match="countJobs"):
        ContractService(Contract.load(ROOT / "wsdl" / "condorSchedd.wsdl"),
                                 {**birdbath.HANDLERS, **the_handler()})
