"""ClassAds as JSON, in HTCondor's own JSON form (``condor_q -json``): literals as JSON values, any other expression
as the string ``"/Expr(<text>)/"``; to and from the core's typed attributes (:class:`~gateway.core.adstruct.Attr`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import classad2

from gateway.core.adstruct import Attr, AttrType, ad_to_struct

from .problems import Problem

EXPR_PREFIX, EXPR_SUFFIX = "/Expr(", ")/"

def attrs_to_json(attrs: Iterable[Attr], projection: frozenset[str] | None = None) -> dict[str, Any]:
    """One ad as a JSON object, only the attributes named in ``projection`` (case-insensitively) when it is given."""
    result: dict[str, Any] = {}
    for name, type_, text in attrs:
        if projection is not None and name.lower() not in projection:
            continue
        result[name] = _json_value(type_, text)
    return result


def ad_to_json(ad: classad2.ClassAd, now: int, projection: frozenset[str] | None = None) -> dict[str, Any]:
    return attrs_to_json(ad_to_struct(ad, now), projection)


def _json_value(type_: AttrType, text: str) -> Any:
    if type_ is AttrType.INTEGER:
        return int(text)
    if type_ is AttrType.FLOAT:
        return float(text)
    if type_ is AttrType.BOOLEAN:
        return text == "TRUE"
    if type_ is AttrType.STRING:
        return text
    return f"{EXPR_PREFIX}{text}{EXPR_SUFFIX}"


def json_to_attrs(ad: Any) -> list[Attr]:
    """A JSON object as typed attributes for the core (which checks names and values); a problem for what JSON
    cannot say as a ClassAd value (lists, objects, null)."""
    if not isinstance(ad, dict):
        raise Problem(400, "the ad must be a JSON object of attribute names and values")
    return [Attr(name, *json_value_type(name, value)) for name, value in ad.items()]


def json_value_type(name: str, value: Any) -> tuple[AttrType, str]:
    """A JSON value's ClassAd type and text: ``"/Expr(...)/"`` is an expression, any other string a string."""
    if isinstance(value, bool):
        return AttrType.BOOLEAN, "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return AttrType.INTEGER, str(value)
    if isinstance(value, float) and math.isfinite(value):
        return AttrType.FLOAT, repr(value)
    if isinstance(value, str):
        if value.startswith(EXPR_PREFIX) and value.endswith(EXPR_SUFFIX) and len(value) >= 8:
            return AttrType.EXPRESSION, value[len(EXPR_PREFIX):-len(EXPR_SUFFIX)]
        return AttrType.STRING, value
    raise Problem(400, f"attribute {name!r}: a ClassAd value is a number, a boolean, a string or \"/Expr(...)/\", "
                       f"not {type(value).__name__}")
