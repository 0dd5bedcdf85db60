"""jobmodel.values: the client names and values refused before the ClassAd library sees them, because it would
silently change them (an integer beyond 64 bits read as 0, ``nan`` read as an attribute reference) or could not
refer to them (an attribute name with a space); and the adstruct conversion that applies them with the limits."""

from __future__ import annotations

import classad2
import pytest

from gateway.core.adstruct import Attr, AttrType, BadAttribute, attribute_value, struct_to_ad
from jobmodel.expressions import ExpressionLimits, ExpressionRefused
from jobmodel.values import BadValue, check_attribute_name, check_literals, excerpt, parse_expression


@pytest.mark.parametrize("text", [
    "9223372036854775807", "-9223372036854775808", "1 + -9223372036854775808", "1.7976931348623157e308", "5e-324",
    "1e-400", ".5e3", "3.e5", "a1 + b2", "x.y", '"1e999 and 99999999999999999999 in a string"',
    "'odd name 99999999999999999999' + 1", 'strcat("0x10")', "Memory > 1024 && Disk < 10",
])
def test_literals_the_library_keeps_pass(text):
    check_literals(text, numeric=True)


@pytest.mark.parametrize("text, words", [
    ("9223372036854775808", "64 bits"), (str(2**80), "64 bits"), ("5 - 9223372036854775808", "64 bits"),
    ("- 9223372036854775808", "64 bits"), ("-(9223372036854775808)", "64 bits"),
    ("1" * 5000, "5000 characters"), ("1e400", "range of a ClassAd real"), ("-1e309", "range of a ClassAd real"),
    ("0x10", "'0x10' is not a ClassAd number"), ("0X1f + 1", "not a ClassAd number"),
])
def test_literals_the_library_would_change_are_refused(text, words):
    with pytest.raises(BadValue, match=words):
        check_literals(text)


@pytest.mark.parametrize("text", ["nan", "NaN", " inf", "-Infinity", "+inf"])
def test_nan_and_infinity_are_refused_as_numbers_but_are_names_in_expressions(text):
    with pytest.raises(BadValue, match="not a finite number"):
        check_literals(text, numeric=True)
    check_literals(text)  # in an expression, ``nan`` is an attribute reference


@pytest.mark.parametrize("name", ["Cmd", "_private", "A1_b2", "x" * 200])
def test_identifiers_are_attribute_names(name):
    check_attribute_name(name)


@pytest.mark.parametrize("name, words", [
    ("", "not a ClassAd attribute name"), ("User ", "not a ClassAd attribute name"), ("a b", "not"),
    ("1st", "not starting with a digit"), ("a-b", "not"), ("a.b", "not"), ("caf\u00e9", "not"), ("x\n", "not"),
    ("true", "reserved"), ("UNDEFINED", "reserved"), ("isnt", "reserved"),
])
def test_other_names_are_refused(name, words):
    with pytest.raises(BadValue, match=words):
        check_attribute_name(name)


def test_parse_expression_checks_the_limits_then_the_literals_then_parses():
    limits = ExpressionLimits(max_length=100, max_depth=10)
    assert str(parse_expression("Memory > 2", limits)) == "Memory > 2"
    with pytest.raises(ExpressionRefused, match="max_expression_length"):
        parse_expression("x" * 101, limits)
    with pytest.raises(ExpressionRefused, match="max_expression_depth"):
        parse_expression("!" * 20 + "true", limits)
    with pytest.raises(BadValue, match="64 bits"):
        parse_expression("99999999999999999999", limits)


def test_excerpt_quotes_short_text_whole_and_long_text_by_its_start():
    assert excerpt("abc") == "'abc'"
    assert excerpt("x" * 500, 10) == "'xxxxxxxxxx'... (500 characters)"


# -- the conversion of client attributes (gateway.core.adstruct) ---------------------------------------------------
def test_client_values_are_checked_against_the_limits_naming_the_attribute():
    limits = ExpressionLimits(max_length=50, max_depth=5)
    assert str(attribute_value("Rank", AttrType.EXPRESSION, "Memory * 2", limits)) == "Memory * 2"
    assert attribute_value("Note", AttrType.STRING, "!" * 500, limits) == "!" * 500  # a string is never parsed
    with pytest.raises(BadAttribute, match="'Rank'.*max_expression_depth"):
        attribute_value("Rank", AttrType.EXPRESSION, "!" * 10 + "true", limits)
    with pytest.raises(BadAttribute, match="'Count'.*not a finite number"):
        attribute_value("Count", AttrType.FLOAT, "nan", limits)


def test_an_unparsable_value_is_quoted_shortly():
    with pytest.raises(BadAttribute) as error:
        attribute_value("Requirements", AttrType.EXPRESSION, "(a" * 200 + "+")
    assert "(401 characters)" in str(error.value) and len(str(error.value)) < 300


def test_struct_to_ad_refuses_names_that_are_not_identifiers_and_skips_null_ones():
    assert dict(struct_to_ad([Attr("A", AttrType.INTEGER, "1"), (None, AttrType.INTEGER, "2")])) == {"A": 1}
    with pytest.raises(BadAttribute, match="'my attr'"):
        struct_to_ad([Attr("my attr", AttrType.INTEGER, "1")])


# -- short texts parsed once, shared by the ads they are assigned to ----------------------------------------------
SHARED_CASES = [
    (AttrType.EXPRESSION, "TARGET.Memory >= RequestMemory"), (AttrType.EXPRESSION, "a =?= b"),
    (AttrType.EXPRESSION, "x==1"), (AttrType.EXPRESSION, "true"), (AttrType.INTEGER, "128"), (AttrType.INTEGER, " -7 "), (AttrType.FLOAT, "1.5e3"),
    (AttrType.BOOLEAN, "FALSE"), (AttrType.UNDEFINED, "UNDEFINED"), (AttrType.EXPRESSION, "nan"),
]


@pytest.mark.parametrize("type_, text", SHARED_CASES)
def test_a_shared_value_makes_the_ads_a_fresh_parse_does(type_, text):
    from jobmodel.exprtext import TextedAd, expression_text
    first = attribute_value("A", type_, text)
    assert attribute_value("A", type_, text) is first  # parsed once
    fresh, shared_ads = TextedAd(), [TextedAd(), TextedAd()]
    fresh["A"] = parse_expression(text, ExpressionLimits(), numeric=type_ in (AttrType.INTEGER, AttrType.FLOAT))
    for ad in shared_ads:
        ad["A"] = attribute_value("A", type_, text)
    for ad in shared_ads:
        assert repr(ad["A"]) == repr(fresh["A"]) and ad.texts == fresh.texts
        if isinstance(ad["A"], classad2.ExprTree):
            assert expression_text(ad, "A", ad["A"]) == expression_text(fresh, "A", fresh["A"])
    del shared_ads[0]  # an ad's copy is its own: dropping one ad leaves the others' intact
    assert repr(shared_ads[0]["A"]) == repr(fresh["A"])


@pytest.mark.parametrize("type_, text, refusal", [
    (AttrType.EXPRESSION, "((", "cannot parse"), (AttrType.INTEGER, "99999999999999999999", "64 bits"),
    (AttrType.FLOAT, "nan", "not a finite number"), (AttrType.EXPRESSION, "!" * 20 + "x", "max_expression_depth"),
])
def test_refused_text_is_refused_every_time_with_the_same_reason(type_, text, refusal):
    limits = ExpressionLimits(max_depth=10)
    reasons = []
    for _ in range(2):
        with pytest.raises(BadAttribute, match=refusal) as error:
            attribute_value("A", type_, text, limits)
        reasons.append(str(error.value))
    assert reasons[0] == reasons[1]


def test_a_shared_value_is_shared_only_under_the_same_limits_and_numeric_rule():
    deep = "!!!!!!x"
    assert attribute_value("A", AttrType.EXPRESSION, deep).text == deep  # shared under the default limits
    with pytest.raises(BadAttribute, match="max_expression_depth"):
        attribute_value("A", AttrType.EXPRESSION, deep, ExpressionLimits(max_depth=3))
    assert attribute_value("A", AttrType.EXPRESSION, "inf").text == "inf"  # an attribute reference
    with pytest.raises(BadAttribute, match="not a finite number"):
        attribute_value("A", AttrType.FLOAT, "inf")


def test_long_texts_are_parsed_anew_and_the_shared_ones_are_bounded(monkeypatch):
    from gateway.core import adstruct
    long_text = "1 + " * (adstruct.SHARED_TEXT // 4) + "1"
    assert attribute_value("A", AttrType.EXPRESSION, long_text) is not attribute_value("A", AttrType.EXPRESSION,
                                                                                       long_text)
    monkeypatch.setattr(adstruct, "SHARED_VALUES", 3)
    monkeypatch.setattr(adstruct, "_SHARED", {})
    for number in range(10):
        attribute_value("A", AttrType.INTEGER, str(number))
        assert len(adstruct._SHARED) <= 3


def test_good_names_are_remembered_and_bad_ones_refused_every_time(monkeypatch):
    from gateway.core import adstruct
    monkeypatch.setattr(adstruct, "GOOD_NAMES", 2)
    monkeypatch.setattr(adstruct, "_GOOD_NAMES", set())
    for name in ("A", "B", "C", "A"):
        adstruct.check_name(name)
    assert adstruct._GOOD_NAMES == {"A", "B"}
    for _ in range(2):
        with pytest.raises(BadAttribute, match="reserved"):
            adstruct.check_name("true")
        with pytest.raises(BadAttribute, match="not a ClassAd attribute name"):
            adstruct.check_name("my attr")
