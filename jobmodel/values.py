"""Checking attribute names and values from clients for what the ClassAd library would silently change.

The library reads an integer literal wider than 64 bits as 0, a real literal beyond the double range as infinity,
``0x10`` as 0, and ``nan`` or ``inf`` as references to attributes of those names (so UNDEFINED); and it stores an
attribute of any name, spaces and all, that no expression can refer to.  A client that sends such a value or name
meant something else, so it is refused with a message that says what is wrong, before the library sees it.
"""

from __future__ import annotations

import math
import re

from .expressions import TOKEN, ExpressionLimits
from .exprtext import SourceExpr

#: the words ClassAd reserves, which cannot name an attribute
RESERVED_WORDS = frozenset({"error", "false", "is", "isnt", "parent", "true", "undefined"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

INT64_MAX = 2**63 - 1

_OPERAND_ENDS = ("quoted", "name", "number", "close")
#: what any literal the library would change contains (19 digits, a 3-digit exponent, a 0x prefix): text without it
#: needs no tokenizing
_SUSPECT = re.compile(r"[0-9]{19}|[eE][-+]?[0-9]{3}|0[xX]")
_NOT_A_NUMBER = re.compile(r"[-+]?(?:nan|inf|infinity)\Z", re.IGNORECASE)


class BadValue(ValueError):
    """A client's attribute value or name the ClassAd library would not keep as sent (the message says why)."""


def check_attribute_name(name: str) -> None:
    """Raise BadValue unless ``name`` is a ClassAd identifier that is not a reserved word."""
    if name.lower() in RESERVED_WORDS:
        raise BadValue(f"{name!r} is a reserved ClassAd keyword, not an attribute name")
    if not _IDENTIFIER.match(name):
        raise BadValue(f"{name!r} is not a ClassAd attribute name: use letters, digits and underscores, "
                       f"not starting with a digit")


def check_literals(text: str, numeric: bool = False) -> None:
    """Raise BadValue when ``text`` holds a number literal the library would change: an integer beyond 64 bits,
    a real beyond the double range, or digits run into letters (``0x10``); with ``numeric`` (a value typed as a
    number), also when it is NaN or infinity spelled out, which the library would read as an attribute name."""
    if numeric and _NOT_A_NUMBER.match(text.strip()):
        raise BadValue(f"{text.strip()!r} is not a finite number (ClassAd has no literal for it)")
    if not _SUSPECT.search(text):
        return
    after_operand, negated_at = False, -1  # negated_at: where a number right after a unary minus would start
    for token in TOKEN.finditer(text):
        kind = "number" if token.lastgroup == "glued" else token.lastgroup
        if kind == "number":
            _check_number(token.group("number"), token.group("glued"), token.start() == negated_at)
        negated_at = token.end() if kind == "minus" and not after_operand else -1
        after_operand = kind in _OPERAND_ENDS


def _check_number(number: str, glued: str, negated: bool) -> None:
    if glued:
        raise BadValue(f"{excerpt(number + glued)} is not a ClassAd number")
    if any(mark in number for mark in ".eE"):
        if math.isinf(float(number)):
            raise BadValue(f"{excerpt(number)} is beyond the range of a ClassAd real")
    elif len(number.lstrip("0")) > len(str(INT64_MAX)) or int(number) > INT64_MAX + (1 if negated else 0):
        raise BadValue(f"{excerpt(number)} is beyond the range of a ClassAd integer (64 bits)")


def excerpt(text: str, most: int = 100) -> str:
    """Client text quoted as a refusal shows it: whole when short, else its start and how long it is (a message
    must not echo 64 KiB back)."""
    return repr(text) if len(text) <= most else f"{text[:most]!r}... ({len(text)} characters)"


def parse_expression(text: str, limits: ExpressionLimits, what: str = "the expression",
                     numeric: bool = False) -> SourceExpr:
    """Client expression text, checked against ``limits`` and for literals the library would change, then parsed
    (keeping the text, to be given back as sent: ``jobmodel.exprtext``).

    Raises ExpressionRefused or BadValue (both ValueErrors) with the reason, and classad2.ClassAdException when the
    library cannot parse it."""
    limits.check(text, what)
    check_literals(text, numeric)
    return SourceExpr(text)
