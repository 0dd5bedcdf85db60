"""ClassAd <-> Birdbath ``ClassAdStruct`` conversion, exactly as HTCondor's ``soap_helpers.cpp`` did it.

A ``ClassAdStruct`` is a list of (name, type, value) triples.  Server to client: ``MyType``, ``TargetType`` and
``ServerTime`` come first, literals are typed, any other expression is sent as its text (the client's own, else
classad2's unparse in the old syntax the originals printed: ``jobmodel.exprtext``), lists,
nested ads, undefined and error literals are skipped, and private attributes never leave the server.
Client to server: STRING values become string literals, every other type is parsed as expression text, once it
is within the expression limits and holds no literal the library would change (``jobmodel.values``); names must be
ClassAd identifiers.  That is Birdbath's lenient rule, which legacy clients rely on; the submission API's is strict
(:func:`typed_value`): a value must parse as the type it is sent with.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable, Iterator

import classad2

from jobmodel.classads import literal_value
from jobmodel.expressions import ExpressionLimits
from jobmodel.exprtext import TextedAd, expression_text
from jobmodel.jobs import PRIVATE_ATTRIBUTES
from jobmodel.values import check_attribute_name, excerpt, parse_expression


class AttrType(str, enum.Enum):
    """``condor:ClassAdAttrType``; ``code`` is the C value (an ASCII letter) that gSOAP also accepted on input."""

    INTEGER = "INTEGER-ATTR"
    FLOAT = "FLOAT-ATTR"
    STRING = "STRING-ATTR"
    EXPRESSION = "EXPRESSION-ATTR"
    BOOLEAN = "BOOLEAN-ATTR"
    UNDEFINED = "UNDEFINED-ATTR"
    ERROR = "ERROR-ATTR"

    @property
    def code(self) -> int:
        return _ATTR_TYPE_CODES[self]


_ATTR_TYPE_CODES = {
    AttrType.INTEGER: 110,
    AttrType.FLOAT: 102,
    AttrType.STRING: 115,
    AttrType.EXPRESSION: 120,
    AttrType.BOOLEAN: 98,
    AttrType.UNDEFINED: 117,
    AttrType.ERROR: 101,
}


@dataclass(frozen=True)
class Attr:
    """One ``ClassAdStructAttr``."""

    name: str
    type: AttrType
    value: str


class BadAttribute(ValueError):
    """A client-supplied attribute that cannot become part of a ClassAd (names the attribute)."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"attribute {name!r}: {reason}")
        self.name = name
        self.reason = reason


SYNTHETIC_FIRST = ("MyType", "TargetType", "ServerTime")


def ad_to_struct(ad: classad2.ClassAd, server_time: int, my_type: str = "Job",
                 target_type: str = "Machine") -> list[Attr]:
    """Convert a job ad for the wire (``convert_ad_to_adStruct``)."""
    out = [
        Attr("MyType", AttrType.STRING, my_type),
        Attr("TargetType", AttrType.STRING, target_type),
        Attr("ServerTime", AttrType.INTEGER, str(server_time)),
    ]
    out.extend(_typed_attributes(ad))
    return out


def _typed_attributes(ad: classad2.ClassAd) -> Iterator[Attr]:
    for name, value in ad.items():
        if name in SYNTHETIC_FIRST or name in PRIVATE_ATTRIBUTES:
            continue
        attr = typed_attribute(ad, name, value)
        if attr is not None:
            yield attr


def typed_attribute(ad: classad2.ClassAd, name: str, value: object) -> Attr | None:
    """One attribute of ``ad`` for the wire (None: not representable); an expression as the client sent it, else
    in the old ClassAd syntax (``jobmodel.exprtext``)."""
    if isinstance(value, classad2.Value):
        return None  # undefined and error literals (an IntEnum, so test before int)
    if isinstance(value, str):
        return Attr(name, AttrType.STRING, value)
    if isinstance(value, bool):
        return Attr(name, AttrType.BOOLEAN, "TRUE" if value else "FALSE")
    if isinstance(value, int):
        return Attr(name, AttrType.INTEGER, "%d" % value)
    if isinstance(value, float):
        return Attr(name, AttrType.FLOAT, "%f" % value)
    if isinstance(value, classad2.ExprTree):
        return Attr(name, AttrType.EXPRESSION, expression_text(ad, name, value))
    return None  # undefined/error literals, lists and nested ads are not representable


#: the types whose values must be numbers (NaN and infinity, which ClassAd cannot write, are refused)
NUMERIC = frozenset({AttrType.INTEGER, AttrType.FLOAT})


def struct_to_ad(attrs: Iterable[Attr | tuple[str | None, AttrType | None, str | None]],
                 limits: ExpressionLimits = ExpressionLimits()) -> classad2.ClassAd:
    """Build a ClassAd from client triples (``convert_adStruct_to_ad``), naming the attribute that fails."""
    ad = TextedAd()
    for name, value in struct_to_values(attrs, limits):
        ad[name] = value
    return ad


def struct_to_values(attrs: Iterable[Attr | tuple[str | None, AttrType | None, str | None]],
                     limits: ExpressionLimits = ExpressionLimits()) -> Iterator[tuple[str, str | classad2.ExprTree]]:
    """Yield (name, value) pairs ready to assign into a ClassAd, in the client's order (a NULL name is skipped,
    as the original did)."""
    for attr in attrs:
        name, type_, value = (attr.name, attr.type, attr.value) if isinstance(attr, Attr) else attr
        if not name:
            continue
        check_name(name)
        yield name, attribute_value(name, type_, value, limits)


def check_name(name: str) -> None:
    """BadAttribute unless ``name`` is a ClassAd identifier (no spaces, no reserved word)."""
    try:
        check_attribute_name(name)
    except ValueError as exc:
        raise BadAttribute(name, str(exc)) from None


def attribute_value(name: str, type_: AttrType | None, value: str | None,
                    limits: ExpressionLimits = ExpressionLimits()) -> str | classad2.ExprTree:
    """STRING values are literals; any other type is ClassAd expression text (a NULL value is UNDEFINED), checked
    against ``limits`` and for literals the library would change before it is parsed."""
    if value is None:
        return classad2.ExprTree("UNDEFINED")
    if type_ is AttrType.STRING:
        return value
    try:
        return parse_expression(value, limits, "its value", numeric=type_ in NUMERIC)
    except ValueError as exc:
        raise BadAttribute(name, str(exc)) from None
    except classad2.ClassAdException:
        raise BadAttribute(name, f"cannot parse {excerpt(value)} as a ClassAd expression") from None


#: the literals a strictly typed value must parse into (a boolean is not a number here, though Python says so), and
#: what ClassAd calls them
_LITERALS: dict[AttrType, tuple[tuple[type, ...], str]] = {
    AttrType.INTEGER: ((int,), "integer"), AttrType.FLOAT: ((int, float), "real (or integer)"),
    AttrType.BOOLEAN: ((bool,), "boolean (true or false)")}


def typed_value(name: str, type_: AttrType, value: str,
                limits: ExpressionLimits = ExpressionLimits()) -> str | int | float | bool | classad2.ExprTree:
    """A value that must be what its type says (the submission API's rule, as QMF refused what it could not parse):
    STRING is a string whatever it looks like; EXPRESSION any expression that parses; INTEGER, FLOAT and BOOLEAN
    must parse as a ClassAd literal of that kind (``7`` as FLOAT is the real 7.0).  BadAttribute otherwise: nothing
    is stored retyped."""
    if type_ is AttrType.STRING:
        return value
    parsed = attribute_value(name, type_, value, limits)
    if type_ not in _LITERALS:
        return parsed
    kinds, called = _LITERALS[type_]
    literal = literal_value(parsed)
    if not isinstance(literal, kinds) or isinstance(literal, bool) != (type_ is AttrType.BOOLEAN):
        raise BadAttribute(name, f"{excerpt(value)} is not a ClassAd {called}")
    return float(literal) if type_ is AttrType.FLOAT else literal
