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
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence

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


class Attr(NamedTuple):
    """One ``ClassAdStructAttr`` (a named tuple: made for every attribute of every ad converted, it costs half of
    what a frozen dataclass does)."""

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
    out.extend(map(Attr._make, own_attributes(ad)))
    return out


@dataclass(frozen=True)
class JobAdStruct(Sequence[Attr]):
    """A job ad's ``ClassAdStruct`` at ``server_time``, converted when it is read.  Job queries answer these; the SOAP
    writer writes the ad's text from ``ad`` and ``server_time`` themselves (``gateway.birdbath.adwriter``)."""

    ad: classad2.ClassAd
    server_time: int

    def struct(self) -> list[Attr]:
        return ad_to_struct(self.ad, self.server_time)

    def __len__(self) -> int:
        return len(self.struct())

    def __getitem__(self, index: int) -> Attr:  # type: ignore[override]
        return self.struct()[index]

    def __iter__(self) -> Iterator[Attr]:
        return iter(self.struct())


#: an ad's own attributes that are not written: the synthetic ones (written first, per answer) and the private ones
LEFT_OUT = frozenset(SYNTHETIC_FIRST) | PRIVATE_ATTRIBUTES

#: the wire's type and text of a literal, by its exact Python type (what classad2 gives for most attributes: one
#: lookup instead of a chain of tests, for writers of many ads)
LITERALS: dict[type, tuple[AttrType, Callable[[Any], str]]] = {
    str: (AttrType.STRING, str),
    int: (AttrType.INTEGER, "%d".__mod__),
    float: (AttrType.FLOAT, "%f".__mod__),
    bool: (AttrType.BOOLEAN, {True: "TRUE", False: "FALSE"}.__getitem__),
}


def wire_value(ad: classad2.ClassAd, name: str, value: object) -> tuple[AttrType, str] | None:
    """The type and text of the value of ``ad``'s attribute ``name`` on the wire (None: not representable); an
    expression as the client sent it, else in the old ClassAd syntax (``jobmodel.exprtext``)."""
    literal = LITERALS.get(type(value))
    if literal is not None:
        return literal[0], literal[1](value)
    if isinstance(value, classad2.ExprTree):
        return AttrType.EXPRESSION, expression_text(ad, name, value)
    if isinstance(value, classad2.Value):
        return None  # undefined and error literals (an IntEnum)
    for kind in (str, bool, int, float):  # (bool before int, as bool is an int)
        if isinstance(value, kind):
            return LITERALS[kind][0], LITERALS[kind][1](value)
    return None  # lists and nested ads are not representable


def own_attributes(ad: classad2.ClassAd) -> Iterator[tuple[str, AttrType, str]]:
    """The name, wire type and text of each of a job ad's own attributes that the wire carries (all but the synthetic
    and private ones, and those :func:`wire_value` cannot represent): the one typing of an ad for the wire, which
    :func:`ad_to_struct` and the SOAP ad writer (``gateway.birdbath.adwriter``) share.  Literals are typed by one
    lookup (this loop is the cost per attribute of every job ad written)."""
    literals = LITERALS  # (a local: quicker)
    for name, value in ad.items():
        if name in LEFT_OUT:
            continue
        literal = literals.get(type(value))
        if literal is not None:
            yield name, literal[0], literal[1](value)
        elif (typed := wire_value(ad, name, value)) is not None:
            yield name, typed[0], typed[1]


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
    """BadAttribute unless ``name`` is a ClassAd identifier (no spaces, no reserved word); the first names that pass
    are remembered (clients send the same few dozen with every job)."""
    if name in _GOOD_NAMES:
        return
    try:
        check_attribute_name(name)
    except ValueError as exc:
        raise BadAttribute(name, str(exc)) from None
    if len(_GOOD_NAMES) < GOOD_NAMES:
        _GOOD_NAMES.add(name)


#: how many attribute names :func:`check_name` remembers as good
GOOD_NAMES = 4096
_GOOD_NAMES: set[str] = set()


def attribute_value(name: str, type_: AttrType | None, value: str | None,
                    limits: ExpressionLimits = ExpressionLimits()) -> str | classad2.ExprTree:
    """STRING values are literals; any other type is ClassAd expression text (a NULL value is UNDEFINED), checked
    against ``limits`` and for literals the library would change before it is parsed.

    For ads being built: the expression of a short text is parsed once and the same object given again (clients
    send the same few texts with every job, and checking and parsing them was most of a submit's ad).  Sharing it
    is safe because assigning an expression into a ClassAd copies it; text that fails is checked again each time."""
    if value is None or type_ is AttrType.STRING or len(value) > SHARED_TEXT:
        return _parsed_value(name, type_, value, limits)
    key = (value, type_ in NUMERIC, limits)
    parsed = _SHARED.get(key)
    if parsed is None:
        parsed = _parsed_value(name, type_, value, limits)
        if len(_SHARED) >= SHARED_VALUES:
            _SHARED.clear()  # a client sending ever new texts: start again rather than keep them all
        _SHARED[key] = parsed
    return parsed


#: the longest text, and the most texts, whose parsed expressions :func:`attribute_value` keeps
SHARED_TEXT = 512
SHARED_VALUES = 4096
_SHARED: dict[tuple[str, bool, ExpressionLimits], str | classad2.ExprTree] = {}


def _parsed_value(name: str, type_: AttrType | None, value: str | None,
                  limits: ExpressionLimits) -> str | classad2.ExprTree:
    """:func:`attribute_value`'s value, parsed anew (an expression of its own, for a caller that keeps it)."""
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
    parsed = _parsed_value(name, type_, value, limits)
    if type_ not in _LITERALS:
        return parsed
    kinds, called = _LITERALS[type_]
    literal = literal_value(parsed)
    if not isinstance(literal, kinds) or isinstance(literal, bool) != (type_ is AttrType.BOOLEAN):
        raise BadAttribute(name, f"{excerpt(value)} is not a ClassAd {called}")
    return float(literal) if type_ is AttrType.FLOAT else literal
