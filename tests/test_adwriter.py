"""Job-ad answers written by ``adwriter`` straight from the ClassAds: valid against the published WSDL's schema,
carrying each attribute as ``ad_to_struct`` converts it (escaped where XML needs it), inside the envelope the
condorSchedd codec writes; streamed in pieces with the same bytes."""

from __future__ import annotations

import classad2
import pytest
from lxml import etree

from gateway.birdbath.adwriter import own_items
from gateway.birdbath.schedd import job_ad_answers, schedd_service
from gateway.core.adstruct import AttrType, ad_to_struct, struct_to_ad
from gateway.soap.answer import SplitAnswer
from tests.wire import assert_valid, body_element

NOW = 1_700_000_000
AD_TEXTS = [
    "[]",
    '[Cmd = "/bin/echo"; Args = "a & b < c > d \\"q\\" \'s\' ]]>"; Empty = ""; N = 3; F = 1.25; B = true; '
    'Off = false; Neg = -7; Big = 123456789012345; Tiny = 0.000001; Huge = 1e300]',
    '[Unicode = "héllo wörld € 😀"; Req = (Arch == "X86_64") && (Memory >= 1024); CR = "line\\r\\nnext\\ttab"]',
    '[Control = "tab\\t quote \\" end"; U = undefined; Er = error; L = {1, 2}; Nested = [a = 1]; '
    'E = ifThenElse(x, "a", "b"); Same = a =?= b; Real = 1.0E3 * x; Bell = "\\x07"]',
    '[MyType = "Other"; TargetType = "Nothing"; ServerTime = 5; ClaimId = "secret"; Capability = "x"; '
    'TransferKey = "k"; Owner = "alice"]',
]
#: what clients send (by type): kept expression texts, odd spacing, literals of every type, characters to escape
CLIENT_ATTRIBUTES = {
    "EXPRESSION": {"Requirements": '(VMType  =?=  "csvm")&&(Arch=="X86_64")', "Rank": "Memory * 1.0E3",
                   "Plain": "a + b", "Same": "a =?= b"},
    "STRING": {"Control": "bell\x07 and \x1f", "Weird": "<&>\r\n\x01\ufffe"},
    "INTEGER": {"Count": "42"}, "FLOAT": {"Share": "0.5"}, "BOOLEAN": {"Flag": "TRUE"},
    "UNDEFINED": {"Nothing": "UNDEFINED"},
}


@pytest.fixture(scope="module")
def answers():
    return job_ad_answers(schedd_service())


def all_ads() -> list[classad2.ClassAd]:
    client = struct_to_ad([(name, AttrType[kind], value) for kind, values in CLIENT_ATTRIBUTES.items()
                           for name, value in values.items()])
    assert client.texts  # (the ad really keeps client texts)
    return [classad2.parseOne(text) for text in AD_TEXTS] + [client]


def items(element: etree._Element) -> list[tuple[str, str, str]]:
    return [(item.findtext("name"), item.findtext("type"), item.findtext("value") or "") for item in element]


def expected(ad: classad2.ClassAd, server_time: int = NOW) -> list[tuple[str, str, str]]:
    """What ``ad_to_struct`` makes of the ad, as XML carries it (characters it cannot carry as U+FFFD)."""
    unfit = str.maketrans({c: "\ufffd" for c in "\x01\x07\x1f\ufffe"})
    return [(a.name, a.type.value, a.value.translate(unfit)) for a in ad_to_struct(ad, server_time)]


def test_job_ads_carry_every_attribute_and_are_valid(answers):
    ads = all_ads()
    wrapper = body_element(answers.write_job_ads(ads, NOW))
    assert wrapper.tag == "{urn:condor}getJobAdsResponse"
    assert_valid(wrapper)
    assert wrapper.findtext("response/status/code") == "SUCCESS"
    assert [items(ad) for ad in wrapper.find("response/classAdArray")] == [expected(ad) for ad in ads]


@pytest.mark.parametrize("index", range(len(AD_TEXTS) + 1))
def test_a_job_ad_carries_every_attribute_and_is_valid(answers, index):
    ad = all_ads()[index]
    wrapper = body_element(answers.write_job_ad(ad, 7))
    assert wrapper.tag == "{urn:condor}getJobAdResponse"
    assert_valid(wrapper)
    assert items(wrapper.find("response/classAd")) == expected(ad, 7)


def test_a_streamed_answer_has_the_bytes_of_the_whole_one(answers):
    ads = all_ads() * 3
    whole = answers.write_job_ads(ads, NOW)
    pieces = list(answers.stream_job_ads(ads, NOW, 100))
    assert b"".join(pieces) == whole
    assert len(pieces) == len(ads) + 2  # the head, one piece per ad (each over 100 bytes), the tail


def test_server_time_is_each_answers_own(answers):
    ad = classad2.parseOne("[A = 1]")
    for now in (5, 6, 5):
        assert b"<name>ServerTime</name><type>INTEGER-ATTR</type><value>%d</value>" % now in \
            answers.write_job_ad(ad, now)


def test_a_changed_ad_is_answered_changed(answers):
    ad = classad2.parseOne("[A = 1]")
    assert b"<value>1</value>" in answers.write_job_ads([ad], NOW)
    ad["A"] = 2  # an ad without a revision (a projection, a copy) is written anew at every answer
    assert b"<value>2</value>" in answers.write_job_ads([ad], NOW)


def test_own_items_leave_out_what_every_answer_starts_with():
    ad = classad2.parseOne('[MyType = "Machine"; ServerTime = 1; TargetType = "Job"; ClaimId = "x"; A = 1]')
    assert own_items(ad) == b"<item><name>A</name><type>INTEGER-ATTR</type><value>1</value></item>"


def test_a_carriage_return_survives_the_trip(answers):
    body = answers.write_job_ad(classad2.parseOne('[CR = "a\\r\\nb"]'), NOW)
    assert b"a&#13;\nb" in body
    assert [i.findtext("value") for i in body_element(body).find("response/classAd")][-1] == "a\r\nb"


def test_no_ads_is_an_empty_array_element(answers):
    assert b"<classAdArray></classAdArray>" in answers.write_job_ads([], NOW)


def test_splitting_needs_exactly_one_empty_element():
    with pytest.raises(ValueError):
        SplitAnswer.around(b"<a><x/><x/></a>", "x")
