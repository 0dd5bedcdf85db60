"""Random and adversarial input at a running gateway: whatever arrives, it answers in the protocol's terms (a status,
or a fault for SOAP it cannot read, or 400 for JSON it cannot read) and stays up.  Generated with hypothesis; the
gateway is one real process for the module, with jobs in its queue so that constraints are evaluated."""

from __future__ import annotations

import json
from xml.sax.saxutils import escape

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.submission.service import OPERATIONS
from tests.birdbath import begin, new_job, submit_job
from tests.conftest import zeep_client
from tests.test_http import assert_alive, envelope
from tests.wire import body_element, post

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

#: text XML 1.0 can carry (no control characters but tab, newline and carriage return; no surrogates)
XML_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufffe\uffff")
                   | st.sampled_from("\t\n\r"), max_size=200)
#: ClassAd-looking text, shaped to reach the library's corners: deep chains, regexps, odd literals, references
CLASSAD_TEXT = st.one_of(
    XML_TEXT,
    st.builds(lambda op, n, end: op * n + end, st.sampled_from(["!", "-", "~", "(", "{", "[a=", "+"]),
              st.integers(0, 5000), st.sampled_from(["true", "1", "", ")", "A"])),
    st.builds(lambda n: "+".join(["1"] * n), st.integers(1, 3000)),
    st.builds(lambda pattern, subject: f"regexp({json.dumps(pattern)}, {json.dumps(subject)})",
              st.sampled_from(["(a+)+$", "(a|aa)*b", "[", "(?<=x)", ".*" * 20]), st.text("a!", max_size=40)),
    st.sampled_from(["9" * 400, "1e999", "-1e999", "NaN", "inf", "2147483648 * 4294967296 * 4294967296",
                     "error", "undefined", "'\\'", '"\\', "ClusterId =?= ClusterId.Parent.Parent",
                     "[a = b; b = a].a", "ifThenElse(true, A, B)", "eval(\"eval(x)\")", "x = 1"]),
)


def _json_values() -> st.SearchStrategy:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(allow_nan=True),
                        XML_TEXT)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=12)


@pytest.fixture(scope="module")
def queued(gateway):
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    return [submit_job(schedd, Cmd="/bin/true", Tag=f"job{n}") for n in range(3)]


def _answer_status(answer: bytes) -> str:
    """The status code of a Birdbath answer (gSOAP-shaped: unqualified elements below the wrapper)."""
    return body_element(answer).findtext(".//code") or ""


@FUZZ
@given(constraint=CLASSAD_TEXT)
def test_any_constraint_gets_a_status(gateway, queued, constraint):
    inner = f"<c:getJobAds><constraint>{escape(constraint)}</constraint></c:getJobAds>"
    status, _, answer = post(gateway.port, envelope(inner))
    assert status == 200, answer[:500]
    assert _answer_status(answer) in ("SUCCESS", "FAIL")


@FUZZ
@given(value=CLASSAD_TEXT, name=st.one_of(st.sampled_from(["Note", "Requirements", "A B", "", "User ", "true"]),
                                          XML_TEXT), kind=st.sampled_from(["EXPRESSION-ATTR", "INTEGER-ATTR",
                                                                           "FLOAT-ATTR", "BOOLEAN-ATTR"]))
def test_any_attribute_value_gets_a_status(gateway, schedd, value, name, kind):
    """Birdbath submit with one attribute of any name, type and text, in a transaction that is then aborted."""
    txn = begin(schedd)
    cluster, proc = new_job(schedd, txn)
    try:
        inner = (f"<c:submit><transaction><id>{txn.id}</id><duration>{txn.duration}</duration></transaction>"
                 f"<clusterId>{cluster}</clusterId><jobId>{proc}</jobId><jobAd>"
                 f"<item><name>{escape(name)}</name><type>{kind}</type><value>{escape(value)}</value></item>"
                 f"</jobAd></c:submit>")
        status, _, answer = post(gateway.port, envelope(inner))
        assert status == 200, answer[:500]
        assert _answer_status(answer) in ("SUCCESS", "FAIL")
    finally:
        schedd.abortTransaction(txn)


@FUZZ
@given(operation=st.sampled_from(OPERATIONS), parameters=_json_values())
def test_any_json_body_gets_a_status_or_a_bad_request(gateway, queued, operation, parameters):
    body = json.dumps(parameters).encode()
    status, _, answer = post(gateway.port, body, ["POST /submission/json/" + operation + " HTTP/1.1",
                                                  "Content-Type: application/json"])
    assert status in (200, 400), answer[:500]
    assert json.loads(answer)["status"]["code"] in ("OK", "FAIL", "NO_MATCH", "INVALID_OFFSET", "UNIMPLEMENTED",
                                                     "UNAVAILABLE")


@FUZZ
@given(body=st.one_of(st.binary(max_size=300), XML_TEXT.map(str.encode),
                      st.builds(lambda n: b"<a>" * n + b"</a>" * n, st.integers(0, 20000))))
def test_any_body_gets_an_answer_and_the_gateway_stays_up(gateway, body):
    status, _, answer = post(gateway.port, body)
    assert status in (200, 500) and body_element(answer) is not None


def test_still_up_afterwards(gateway, queued):
    assert_alive(gateway)
