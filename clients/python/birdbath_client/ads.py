"""Python values and ClassAds to and from Birdbath's ``ClassAdStruct`` (name, type, value) triples.

Types are chosen from the Python value: ``bool`` -> BOOLEAN-ATTR, ``int`` -> INTEGER-ATTR, ``float`` ->
FLOAT-ATTR, ``str`` -> STRING-ATTR, :class:`Expr` or a ``classad2.ExprTree`` -> EXPRESSION-ATTR.  Expressions stay
expressions in both directions: the text is kept, never replaced by its value.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping


class Expr(str):
    """ClassAd expression text, e.g. ``Expr('Memory > 1024')``; a plain ``str`` is a string literal."""

    def __repr__(self) -> str:
        return f"Expr({str.__repr__(self)})"


def _typed(value: Any) -> tuple[str, str] | None:
    if value is None:
        return None
    if isinstance(value, Expr):
        return "EXPRESSION-ATTR", str(value)
    if isinstance(value, bool):
        return "BOOLEAN-ATTR", "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return "INTEGER-ATTR", str(value)
    if isinstance(value, float):
        return "FLOAT-ATTR", repr(value)
    if isinstance(value, str):
        return "STRING-ATTR", value
    type_name = type(value).__name__
    if type_name == "ExprTree":  # classad2.ExprTree, without importing classad2 for plain dicts
        return "EXPRESSION-ATTR", str(value)
    raise TypeError(f"cannot send a {type_name} as a ClassAd attribute value: {value!r}")


#: what XML 1.0, and so a SOAP message, cannot carry (its Char production), even as a character reference
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def to_struct(ad: Mapping[str, Any]) -> dict:
    """A dict or a ``classad2.ClassAd`` as a ClassAdStruct (``{"item": [...]}``) for zeep.  A value with a
    character XML 1.0 cannot carry is a ValueError naming the attribute and the character."""
    items = []
    for name, value in ad.items():
        typed = _typed(value)
        if typed is None:
            continue
        found = _NOT_XML.search(typed[1])
        if found:
            raise ValueError(f"the value of {name} holds the character U+{ord(found.group()):04X}, which SOAP "
                             f"(XML 1.0) cannot carry to the gateway")
        items.append({"name": name, "type": typed[0], "value": typed[1]})
    return {"item": items}


_FROM_WIRE = {
    "INTEGER-ATTR": int,
    "FLOAT-ATTR": float,
    "BOOLEAN-ATTR": lambda text: text.strip().upper() == "TRUE",
    "STRING-ATTR": lambda text: text,
    "EXPRESSION-ATTR": Expr,
    "UNDEFINED-ATTR": lambda text: None,
    "ERROR-ATTR": Expr,
}


def from_struct(struct: Any) -> dict[str, Any]:
    """A ClassAdStruct answer (zeep object or list of items) as a dict of typed Python values."""
    items: Iterable[Any] = getattr(struct, "item", struct) or []
    ad: dict[str, Any] = {}
    for item in items:
        text = item.value if item.value is not None else ""  # zeep reads an empty string as None
        ad[item.name] = _FROM_WIRE.get(item.type, Expr)(text)
    return ad


#: the submission API's JSON form types values with QMF's codes; it sends booleans as expressions
_FROM_QMF = {1: int, 2: float, 3: lambda text: text, 0: lambda text: _BOOLEANS.get(text.strip().upper(), Expr(text))}
_BOOLEANS = {"TRUE": True, "FALSE": False}


def from_typed_map(ad: Mapping[str, Any]) -> dict[str, Any]:
    """A QMF typed map (``{"Cmd": {"TYPE": 3, "VALUE": "/bin/sleep"}}``, the submission API's JSON ads) as the
    same typed Python values :func:`from_struct` gives for a Birdbath ad, so callers need not care which API
    answered."""
    result: dict[str, Any] = {}
    for name, typed in ad.items():
        if isinstance(typed, Mapping) and "TYPE" in typed:
            result[name] = _FROM_QMF.get(typed["TYPE"], Expr)(str(typed.get("VALUE", "")))
        else:
            result[name] = typed
    return result


def parse_constraint(text: str):
    """A constraint as a ``classad2.ExprTree``; a syntax error is a ``ValueError`` naming the text."""
    import classad2

    try:
        return classad2.ExprTree(text)
    except Exception:  # classad2 raises its own ClassAdException
        raise ValueError(f"cannot parse the constraint {text!r}") from None


def to_classad(ad: Mapping[str, Any]):
    """A dict from :func:`from_struct` as a ``classad2.ClassAd`` (expressions parsed)."""
    import classad2

    result = classad2.ClassAd()
    for name, value in ad.items():
        if value is None:
            continue
        result[name] = classad2.ExprTree(value) if isinstance(value, Expr) else value
    return result
