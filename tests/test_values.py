"""jobmodel.values: the client names and values refused before the ClassAd library sees them, because it would
silently change them (an integer beyond 64 bits read as 0, ``nan`` read as an attribute reference) or could not
refer to them (an attribute name with a space); and the adstruct conversion that applies them with the limits."""

from __future__ import annotations

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
