"""Binary data a client sends as base64 text (``sendFile``, the submission API's ``send``).

spyne decodes an ``xsd:base64Binary`` parameter while it reads the request, and text that is not base64 then fails
inside spyne, outside any operation: a fault, or an HTTP 500.  A client's bad data is the client's mistake, which
the protocols answer with a status.  So these parameters are read as :class:`Base64Text`, a string that keeps the
schema type ``xsd:base64Binary`` (the WSDLs do not change), and the operation decodes it with :func:`decode`.
"""

from __future__ import annotations

import base64
import binascii
import re

from spyne import Unicode
from spyne.const.xml import NS_XSD

_WHITESPACE = re.compile(r"[ \t\r\n]+")


class Base64Text(Unicode):
    """An ``xsd:base64Binary`` parameter read as its text (decoded by the operation, see :func:`decode`)."""

    __type_name__ = "base64Binary"
    __namespace__ = NS_XSD


def decode(text: str | None) -> bytes:
    """The bytes of base64 ``text`` (None or empty: no bytes); ValueError saying why when it is not base64.

    Strict, unlike spyne's decoder, which drops characters outside the alphabet: text with other characters or
    wrong padding is refused, not turned into other bytes.  White space, which XML Schema allows in
    base64Binary, is ignored."""
    if not text:
        return b""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        pass  # perhaps white space (line breaks every 76 characters, as MIME writes it)
    try:
        return base64.b64decode(_WHITESPACE.sub("", text), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"the data is not base64 ({exc})") from None
