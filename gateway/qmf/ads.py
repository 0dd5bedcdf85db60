"""Job ads as QMF maps, in both eras' encodings, to and from the core's typed attributes.

- ``com.redhat.grid`` (HTCondor's plugins): native values, and the names of the expressions listed in the side map
  ``"!!descriptors"`` as ``com.redhat.grid.Expression``.  Unlike the plugins, a boolean is a ClassAd boolean (they
  made it a string) and an expression keeps its text on output (they sent a number-valued one's value).
- ``mrg.grid`` (the 2009 prototype): ``{"Attr": {"TYPE": 0..3, "VALUE": text}}`` with QMF's type codes.

A value the encoding cannot carry is refused naming the attribute (:class:`BadAd`), never skipped silently.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from gateway.core.adstruct import Attr, AttrType
from gateway.core.submissions import API_TYPES, FROM_QMF, QMF_CODES, TYPE_NAMES

DESCRIPTORS = "!!descriptors"
EXPRESSION = "com.redhat.grid.Expression"
#: the most attributes one ad may carry (a job ad has a few hundred at most)
MAX_ATTRIBUTES = 2048


class BadAd(ValueError):
    """A map that is not a job ad in the method's encoding (says which attribute and why)."""


def text_value(name: str, value: Any) -> str:
    """A string value as text: AMQP strings, or binary that is UTF-8 (a Python 2 console sends a non-ASCII str so)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise BadAd(f"attribute {name}: binary value that is not UTF-8 text") from None
    raise BadAd(f"attribute {name}: expected text, got {type(value).__name__}")


def _entries(ad: Any, what: str) -> Mapping[Any, Any]:
    if not isinstance(ad, Mapping):
        raise BadAd(f"{what} must be a map, not {type(ad).__name__}")
    if len(ad) > MAX_ATTRIBUTES:
        raise BadAd(f"{what} has {len(ad)} attributes, more than {MAX_ATTRIBUTES}")
    for key in ad:
        if not isinstance(key, str):
            raise BadAd(f"{what}: attribute names must be text, not {type(key).__name__}")
    return ad


def from_grid(ad: Any) -> list[Attr]:
    """A ``com.redhat.grid`` ad (``SubmitJob``'s ``Ad``)."""
    entries = _entries(ad, "Ad")
    descriptors = entries.get(DESCRIPTORS, {})
    if not isinstance(descriptors, Mapping):
        raise BadAd(f"{DESCRIPTORS} must be a map of attribute names to {EXPRESSION}")
    expressions = {name for name, kind in descriptors.items() if kind == EXPRESSION}
    attrs = []
    for name, value in entries.items():
        if name == DESCRIPTORS:
            continue
        if name in expressions:
            attrs.append(Attr(name, AttrType.EXPRESSION, text_value(name, value)))
        elif isinstance(value, bool):
            attrs.append(Attr(name, AttrType.BOOLEAN, "TRUE" if value else "FALSE"))
        elif isinstance(value, int):
            attrs.append(Attr(name, AttrType.INTEGER, str(int(value))))
        elif isinstance(value, float):
            attrs.append(Attr(name, AttrType.FLOAT, repr(float(value))))
        elif isinstance(value, uuid.UUID):
            attrs.append(Attr(name, AttrType.STRING, str(value)))
        else:
            attrs.append(Attr(name, AttrType.STRING, text_value(name, value)))
    return attrs


def from_typed(ad: Any) -> list[Attr]:
    """An ``mrg.grid`` ad: every value a ``{"TYPE": code, "VALUE": text}`` map (a number as VALUE is its text)."""
    attrs = []
    for name, item in _entries(ad, "Ad").items():
        if not isinstance(item, Mapping) or "TYPE" not in item or "VALUE" not in item:
            raise BadAd(f"attribute {name}: expected {{\"TYPE\": 0-3, \"VALUE\": text}}")
        code, value = item["TYPE"], item["VALUE"]
        kind = FROM_QMF.get(code) if isinstance(code, int) and not isinstance(code, bool) else None
        if kind is None:
            raise BadAd(f"attribute {name}: TYPE {code!r} is not 0 (expression), 1 (integer), 2 (float) or "
                        f"3 (string)")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        attrs.append(Attr(name, API_TYPES[kind], text_value(name, value)))
    return attrs


def to_grid(attrs: list[Attr]) -> dict[str, Any]:
    """A job ad for ``GetJobAd``: integers, reals and strings native, everything else expression text."""
    ad: dict[str, Any] = {}
    expressions: dict[str, str] = {}
    for attr in attrs:
        if attr.type is AttrType.INTEGER:
            ad[attr.name] = int(attr.value)
        elif attr.type is AttrType.FLOAT:
            ad[attr.name] = float(attr.value)
        elif attr.type is AttrType.STRING:
            ad[attr.name] = attr.value
        else:
            ad[attr.name] = attr.value
            expressions[attr.name] = EXPRESSION
    if expressions:
        ad[DESCRIPTORS] = expressions
    return ad


def to_typed(attrs: list[Attr]) -> dict[str, Any]:
    """A job ad for ``mrg.grid``'s ``GetAd``: every value typed by its QMF code, as text."""
    return {attr.name: {"TYPE": QMF_CODES.get(TYPE_NAMES.get(attr.type, "EXPR"), 0), "VALUE": attr.value}
            for attr in attrs}
