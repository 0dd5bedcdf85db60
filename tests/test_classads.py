"""ClassAd <-> ClassAdStruct conversion (gateway/core/adstruct.py) with the official ClassAd library."""

from __future__ import annotations

import classad2
import pytest

from gateway.core.adstruct import Attr, AttrType, BadAttribute, ad_to_struct, struct_to_ad
from jobmodel.classads import copy_ad, keep_printed, kept_text, matches, parse_constraint, printed


def typed(ad_text: str) -> dict[str, tuple[str, str]]:
    return {a.name: (a.type.value, a.value) for a in ad_to_struct(classad2.parseOne(ad_text), 1234)}


def test_synthetic_attributes_come_first_and_replace_real_ones():
    struct = ad_to_struct(classad2.parseOne('[MyType = "Other"; ServerTime = 1; A = 1]'), 99)
    assert [(a.name, a.value) for a in struct[:3]] == [("MyType", "Job"), ("TargetType", "Machine"),
                                                        ("ServerTime", "99")]
    assert [a.name for a in struct[3:]] == ["A"]


def test_literals_are_typed_and_formatted_like_the_original():
    attrs = typed('[S = "a \\"q\\""; I = 42; F = 0.5; B = false; E = x + 1; R = (Arch == "X86_64") && true]')
    assert attrs["S"] == ("STRING-ATTR", 'a "q"')
    assert attrs["I"] == ("INTEGER-ATTR", "42")
    assert attrs["F"] == ("FLOAT-ATTR", "0.500000")
    assert attrs["B"] == ("BOOLEAN-ATTR", "FALSE")
    assert attrs["E"] == ("EXPRESSION-ATTR", "x + 1")
    assert attrs["R"] == ("EXPRESSION-ATTR", '(Arch == "X86_64") && TRUE')  # §4.4's example: the old syntax


def test_undefined_error_lists_and_nested_ads_are_skipped():
    attrs = typed("[U = undefined; X = error; L = {1, 2}; N = [a = 1]; K = 1]")
    assert set(attrs) == {"MyType", "TargetType", "ServerTime", "K"}


def test_private_attributes_never_leave_the_server():
    attrs = typed('[ClaimId = "secret"; Capability = "c"; TransferKey = "k"; Owner = "me"]')
    assert "ClaimId" not in attrs and "Capability" not in attrs and "TransferKey" not in attrs
    assert attrs["Owner"] == ("STRING-ATTR", "me")


def test_client_strings_are_literals_and_everything_else_is_expression_text():
    ad = struct_to_ad([
        Attr("S", AttrType.STRING, 'has "quotes" and \\'),
        Attr("I", AttrType.INTEGER, "7"),
        Attr("B", AttrType.BOOLEAN, "TRUE"),
        Attr("X", AttrType.EXPRESSION, "I * 2"),
        Attr("U", AttrType.UNDEFINED, "UNDEFINED"),
        ("", AttrType.STRING, "skipped"),
        ("N", AttrType.STRING, None),
    ])
    assert ad["S"] == 'has "quotes" and \\'
    assert ad["I"] == 7 and ad["B"] is True and ad.eval("X") == 14
    assert ad["U"] is classad2.Value.Undefined and ad["N"] is classad2.Value.Undefined
    assert "" not in ad


def test_a_bad_expression_names_its_attribute():
    with pytest.raises(BadAttribute) as error:
        struct_to_ad([Attr("Requirements", AttrType.EXPRESSION, "((")])
    assert error.value.name == "Requirements"


@pytest.mark.parametrize("constraint, expected", [
    (None, True), ("", True), ("  ", True), ("A == 1", True), ("A == 2", False), ("Missing == 1", False),
    ("1/0", False), ("(((", False), ("A", True), ("A - 1", False), ('"string"', False),
])
def test_constraints(constraint, expected):
    assert matches(parse_constraint(constraint), classad2.parseOne("[A = 1]")) is expected


def test_a_stored_ads_text_is_printed_once_and_its_copies_are_its_own():
    """A store keeps the text it printed an ad with (the ad never changes again); a copy is made from that text, and
    changing the copy changes neither the ad nor the text kept."""
    ad = classad2.ClassAd('[Cmd = "/bin/true"; JobStatus = 1; Requirements = TARGET.Memory > 1]')
    text = keep_printed(ad)
    assert text == str(ad) and printed(ad) is text and kept_text(ad) is text
    copy = copy_ad(ad)
    copy["JobStatus"] = 2
    assert ad["JobStatus"] == 1 and printed(ad) == text and str(ad) == text
    assert str(copy) != text and kept_text(copy) is None  # (a copy keeps no text: it may still change)
