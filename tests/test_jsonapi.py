"""The submission API's JSON form (gateway/submission/jsonapi.py) read from the SOAP form's declaration: the same
operations, the same parameters in the same order, the answers' shapes; and its readers and writers on their own.
(Every operation over HTTP: tests/test_submission_api.py; hostile bodies: tests/test_hostile_input.py.)"""

from __future__ import annotations

import json

import pytest
from lxml import etree

from gateway.soap.wsdl import wsdl_path
from gateway.submission.jsonapi import (
    BadRequest,
    JsonApi,
    integer_reader,
    parse,
    read_ad,
    read_job_id,
    writer_for,
)
from gateway.submission.service import OPERATIONS, Attribute, DataResult, IdResult, JobAd, Status

WSDL = "http://schemas.xmlsoap.org/wsdl/"
XSD = "http://www.w3.org/2001/XMLSchema"


def test_the_operations_and_their_parameters_are_the_published_wsdls():
    """What the JSON form reads is what the SOAP form's WSDL (which spyne generates) declares, in its order."""
    tree = etree.parse(str(wsdl_path("submission.wsdl")))
    declared = {}
    for operation in tree.getroot().iterfind(f"{{{WSDL}}}portType/{{{WSDL}}}operation"):
        element = tree.getroot().find(f".//{{{XSD}}}complexType[@name='{operation.get('name')}']")
        declared[operation.get("name")] = [child.get("name") for child in element.iter(f"{{{XSD}}}element")]
    api = JsonApi()
    assert list(api.operations) == list(OPERATIONS) and set(api.operations) == set(declared)
    for name, operation in api.operations.items():
        assert [parameter for parameter, _ in operation.parameters] == declared[name], name


@pytest.mark.parametrize("body, words", [
    (b"{", "Expecting"), (b"\xff\xfe\x00", "decode"), (b"[" * 40 + b"]" * 40, "nests more than 32"),
    (b"[" * 100_000 + b"]" * 100_000, "nests"), (b'{"a": "\\udc00"}', "not Unicode"), (b'{"\\ud800": 1}', "Unicode"),
])
def test_a_body_that_is_not_json_text_is_a_bad_request(body, words):
    with pytest.raises(BadRequest, match=words):
        parse(body)


def test_no_body_is_no_parameters():
    assert parse(b"") == {}


def test_integers_are_json_integers_within_their_schema_types_bounds():
    read = integer_reader(-2**31, 2**31 - 1)
    assert read("n", 2**31 - 1) == 2**31 - 1 and read("n", -2**31) == -2**31 and read("n", None) is None
    for wrong in (2**31, -2**31 - 1, True, 1.0, "1", [1]):
        with pytest.raises(BadRequest, match="parameter n: expected an integer"):
            read("n", wrong)


def test_a_job_id_is_its_text_or_an_aviary_job_id():
    assert read_job_id("id", "1.0") == "1.0" and read_job_id("id", {"job": "2.1", "pool": "p"}) == "2.1"
    assert read_job_id("id", {"pool": "p"}).startswith("JobID without a job")  # for the operation to refuse
    with pytest.raises(BadRequest):
        read_job_id("id", 1.0)


def test_a_typed_map_native_values_and_codes_outside_the_set():
    ad = read_ad("ad", {"S": {"TYPE": 3, "VALUE": "x"}, "I": 7, "F": 0.5, "B": False, "T": "t", "N": None,
                        "X": {"TYPE": 9, "VALUE": "?"}, "Y": {"TYPE": True}})
    assert [(a.name, a.type, a.value) for a in ad] == [
        ("S", "STRING", "x"), ("I", "INTEGER", "7"), ("F", "FLOAT", "0.5"), ("B", "BOOLEAN", "FALSE"),
        ("T", "STRING", "t"), ("X", "TYPE 9", "?"), ("Y", "TYPE true", "")]
    for wrong in ({"A": [1]}, {"A": {"VALUE": "x"}}):
        with pytest.raises(BadRequest, match="attribute A: a JSON"):
            read_ad("ad", wrong)


def test_answers_are_written_as_their_declaration_says():
    ok = Status(code="OK", text="OK")
    assert writer_for(IdResult)(IdResult(status=ok)) == {"status": {"code": "OK", "text": "OK"}}  # no id: left out
    assert writer_for(DataResult)(DataResult(status=ok, data=[b"\x00\xff"]))["data"] == "AP8="
    ad = [Attribute(name="A", type="BOOLEAN", value="TRUE"), Attribute(name="B", type="FLOAT", value="1.5")]
    assert writer_for(JobAd)(ad) == {"A": {"TYPE": 0, "VALUE": "TRUE"}, "B": {"TYPE": 2, "VALUE": "1.5"}}
    assert json.dumps(writer_for(JobAd)([])) == "{}"  # an empty ad is an empty map (spyne wrote [])
