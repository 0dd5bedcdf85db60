"""Job-ad answers written by ``adwriter``: valid against the published WSDL's schema, carrying each attribute's name,
type and text exactly (escaped where XML needs it), inside the envelope the condorSchedd codec writes."""

from __future__ import annotations

import classad2
import pytest
from lxml import etree

from gateway.core.adstruct import Attr, AttrType, ad_to_struct
from gateway.soap.adwriter import SplitAnswer
from gateway.soap.schedd import job_ad_answers, schedd_service
from tests.wire import assert_valid, body_element

AD_TEXTS = [
    "[]",
    '[Cmd = "/bin/echo"; Args = "a & b < c > d \\"q\\" \'s\'"; Empty = ""; N = 3; F = 1.25; B = true]',
    '[Unicode = "héllo wörld € 😀"; Req = (Arch == "X86_64") && (Memory >= 1024); CR = "line\\r\\nnext\\ttab"]',
    '[Control = "bell\\x07 and nul-free"; Big = 123456789012; Neg = -5; E = ifThenElse(x, "a", "b")]',
]


@pytest.fixture(scope="module")
def answers():
    return job_ad_answers(schedd_service())


def structs() -> list:
    return [ad_to_struct(classad2.parseOne(text), 1_700_000_000) for text in AD_TEXTS]


def items(element: etree._Element) -> list[tuple[str, str, str]]:
    return [(item.findtext("name"), item.findtext("type"), item.findtext("value") or "") for item in element]


def expected(ad: list[Attr]) -> list[tuple[str, str, str]]:
    return [(a.name, a.type.value, a.value.replace("\x07", "\ufffd")) for a in ad]


def test_job_ads_carry_every_attribute_and_are_valid(answers):
    ads = structs()
    wrapper = body_element(answers.write_job_ads(ads))
    assert wrapper.tag == "{urn:condor}getJobAdsResponse"
    assert_valid(wrapper)
    assert wrapper.findtext("response/status/code") == "SUCCESS"
    assert [items(ad) for ad in wrapper.find("response/classAdArray")] == [expected(ad) for ad in ads]


@pytest.mark.parametrize("index", range(len(AD_TEXTS)))
def test_a_job_ad_carries_every_attribute_and_is_valid(answers, index):
    ad = structs()[index]
    wrapper = body_element(answers.write_job_ad(ad))
    assert wrapper.tag == "{urn:condor}getJobAdResponse"
    assert_valid(wrapper)
    assert items(wrapper.find("response/classAd")) == expected(ad)


def test_a_carriage_return_survives_the_trip(answers):
    body = answers.write_job_ad([Attr("CR", AttrType.STRING, "a\r\nb")])
    assert b"a&#13;\nb" in body and body_element(body).findtext("response/classAd/item/value") == "a\r\nb"


def test_no_ads_is_an_empty_array_element(answers):
    assert b"<classAdArray></classAdArray>" in answers.write_job_ads([])


def test_characters_xml_cannot_carry_are_replaced_not_fatal(answers):
    body = answers.write_job_ad([Attr("Odd", AttrType.STRING, "a\x01b")])
    assert "a\ufffdb".encode() in body


def test_splitting_needs_exactly_one_empty_element():
    with pytest.raises(ValueError):
        SplitAnswer.around(b"<a><x/><x/></a>", "x")
