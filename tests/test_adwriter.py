"""The fast job-ad writer produces exactly the bytes spyne's serialiser would."""

from __future__ import annotations

import classad2
import pytest

from gateway.core.adstruct import ad_to_struct
from gateway.soap import models as m
from gateway.soap.adwriter import SplitAnswer
from gateway.soap.application import schedd_application
from gateway.soap.dispatch import SoapDispatcher
from gateway.soap.schedd import struct

AD_TEXTS = [
    "[]",
    '[Cmd = "/bin/echo"; Args = "a & b < c > d \\"q\\" \'s\'"; Empty = ""; N = 3; F = 1.25; B = true]',
    '[Unicode = "héllo wörld € 😀"; Req = (Arch == "X86_64") && (Memory >= 1024); CR = "line\\r\\nnext\\ttab"]',
    '[Control = "bell\\x07 and nul-free"; Big = 123456789012; Neg = -5; E = ifThenElse(x, "a", "b")]',
]


@pytest.fixture(scope="module")
def dispatcher() -> SoapDispatcher:
    return SoapDispatcher(schedd_application())


@pytest.fixture(scope="module")
def answers(dispatcher):
    return dispatcher.ad_answers()


def ok() -> m.Status:
    return m.Status(code="SUCCESS", message="Success")


def structs() -> list:
    return [ad_to_struct(classad2.parseOne(text), 1_700_000_000) for text in AD_TEXTS]


def test_job_ads_are_byte_identical(dispatcher, answers):
    ads = structs()
    by_spyne = dispatcher.render("getJobAds", m.ClassAdStructArrayAndStatus(
        status=ok(), classAdArray=[struct(ad) for ad in ads]))
    assert answers.write_job_ads(ads) == by_spyne


@pytest.mark.parametrize("index", range(len(AD_TEXTS)))
def test_a_job_ad_is_byte_identical(dispatcher, answers, index):
    ad = structs()[index]
    by_spyne = dispatcher.render("getJobAd", m.ClassAdStructAndStatus(status=ok(), classAd=struct(ad)))
    assert answers.write_job_ad(ad) == by_spyne


def test_no_ads_is_an_empty_array_element(answers):
    assert b"<classAdArray></classAdArray>" in answers.write_job_ads([])


def test_characters_xml_cannot_carry_are_replaced_not_fatal(answers):
    from gateway.core.adstruct import Attr, AttrType

    body = answers.write_job_ad([Attr("Odd", AttrType.STRING, "a\x01b")])
    assert "a\ufffdb".encode() in body


def test_splitting_needs_exactly_one_empty_element():
    with pytest.raises(ValueError):
        SplitAnswer.around(b"<a><x/><x/></a>", "x")
