"""The XML Schema types of the Birdbath contracts, each reading its own element and writing its own content.

A contract (``contract.Contract``) is built from its shipped WSDL as a table of these types.  Reading follows the
rules the gateway has always applied (``lenient`` says which of them go beyond the WSDL, as gSOAP did): children
are matched by local name whatever their namespace, unknown children and comments are skipped, a member sent twice
is a fault, ``xsi:nil`` (with any value but the empty one) is a null, ``xsi:type`` is ignored.  The nulls of a request
are found once, by one XPath over its operation element (:func:`read_element`), and handed down as a set of
elements: asking every element for the attribute cost more than the rest of reading it; and most requests have none,
which their bytes show without the XPath.  A value that cannot be read is a
:class:`WireFault`, answered as a Client fault naming the value.  Writing gives an element's content as text, in
gSOAP's shape (every child unqualified); ``None`` means an empty element (``<name/>``), and a null member of a
structure is left out, as gSOAP 2.7 left out NULL pointers.
"""

from __future__ import annotations

import base64
import datetime
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence

from lxml import etree

XSI = "http://www.w3.org/2001/XMLSchema-instance"
NIL = f"{{{XSI}}}nil"
#: the elements of a tree that say ``xsi:nil`` with a value (an empty one is no null, as the gateway always read it)
_NILLED = etree.XPath("descendant-or-self::*[@xsi:nil != '']", namespaces={"xsi": XSI})

#: the elements of one request that are null (lxml gives an element the same proxy object for as long as one is
#: referenced, and this set references them, so membership is identity)
Nilled = frozenset

#: characters XML 1.0 cannot carry at all; they become U+FFFD rather than break the whole answer
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
#: what :func:`escape` changes: most names and values have none of it, and are written as they are
SPECIAL = re.compile("[&<>\r\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    return NOT_XML.sub("\ufffd", text)


def escape(text: str) -> str:
    """Element text as lxml writes it (``&``, ``<``, ``>`` and carriage returns escaped), characters XML cannot
    carry as U+FFFD."""
    if not SPECIAL.search(text):
        return text
    return (xml_text(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\r", "&#13;"))


def element(name: str, content: str | None, attributes: str = "") -> str:
    """``<name>content</name>``; no content at all (not even empty text) is ``<name/>``; ``attributes``: the
    opening tag's (:func:`attribute_text`)."""
    return f"<{name}{attributes}/>" if content is None else f"<{name}{attributes}>{content}</{name}>"


def attribute_text(names: tuple[str, ...], value: Mapping[str, Any]) -> str:
    """`` name="value"`` for each of ``names`` that ``value`` holds (not None), in that order, quoted."""
    return "".join(f' {name}="{escape(str(text)).replace(chr(34), "&quot;")}"' for name in names
                   if (text := value.get(name)) is not None)


class WireFault(Exception):
    """A request that cannot be read: answered with a SOAP fault (``code`` Client or Server) saying why."""

    def __init__(self, message: str, code: str = "Client") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        #: the operation whose parameters could not be read, once it is known (for the request log)
        self.operation: str | None = None


def invalid(value: Any) -> WireFault:
    return WireFault(f"The value {value!r} could not be validated.")


class WireType(Protocol):
    """One schema type: how an element of it is read and how a value of it is written."""

    name: str

    def read(self, element: etree._Element, nilled: Nilled) -> Any:
        """The value of an element that is not nil (a comment reads as an element with no content); ``nilled``: the
        request's null elements, for a type with members."""

    def write(self, value: Any) -> str | None:
        """The content of an element holding ``value`` (not None)."""


def read_element(kind: WireType, element: etree._Element, source: bytes | None = None) -> Any:
    """The value of ``element`` (itself not null) and everything in it, read as ``kind``.  ``source``: the bytes of
    the document, when at hand: in an encoding that writes ASCII as ASCII, a document without the bytes ``nil``
    has no ``xsi:nil`` (the name of an attribute is never escaped) and is not searched for one."""
    if source is not None and b"nil" not in source and _ascii_compatible(element):
        return kind.read(element, frozenset())
    return kind.read(element, frozenset(_NILLED(element)))


#: encodings that write every ASCII character as its ASCII byte (lxml's names for them, as the document declared them)
_ASCII_COMPATIBLE = frozenset({"UTF-8", "US-ASCII", "ASCII", "ISO-8859-1", "LATIN1", "LATIN-1"})


def _ascii_compatible(element: etree._Element) -> bool:
    return (element.getroottree().docinfo.encoding or "UTF-8").upper() in _ASCII_COMPATIBLE


@dataclass(frozen=True)
class Int:
    """``xsd:int`` or ``xsd:long``: Python's ``int()`` of the text (so white space around it, a sign and ``_``
    between digits pass), at most ``characters`` long, within the type's range; no text is a null."""

    name: str
    bits: int
    #: the longest text read (the digits of -2 ** bits: the smallest value has a sign) and the range of values
    characters: int = field(init=False)
    values: range = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "characters", len(str(-(2 ** self.bits))))
        object.__setattr__(self, "values", range(-(2 ** (self.bits - 1)), 2 ** (self.bits - 1)))

    def read(self, element: etree._Element, nilled: Nilled) -> int | None:
        text = element.text
        if text is None:
            return None
        if len(text) > self.characters:
            raise invalid(text)
        try:
            value = int(text)
        except ValueError:
            raise WireFault(f"Could not cast {text!r} to integer") from None
        if value not in self.values:
            raise invalid(value)
        return value

    def write(self, value: int) -> str:
        return str(value)


@dataclass(frozen=True)
class Boolean:
    """``xsd:boolean``: ``true`` or ``1`` in any case is true, any other text false, no text a null."""

    name: str = "boolean"

    def read(self, element: etree._Element, nilled: Nilled) -> bool | None:
        text = element.text
        return None if text is None else text.lower() in ("true", "1")

    def write(self, value: bool) -> str:
        return "true" if value else "false"


@dataclass(frozen=True)
class String:
    """``xsd:string`` (and types restricting it without an enumeration): the element's own text, up to its first
    child or comment; no text is the empty string."""

    name: str = "string"

    def read(self, element: etree._Element, nilled: Nilled) -> str:
        return element.text or ""

    def write(self, value: str) -> str:
        return escape(value)


@dataclass(frozen=True)
class Base64Binary:
    """``xsd:base64Binary``: read as its text, which the operation decodes (a client's bad data is then a status,
    not a fault: ``base64data.decode``); written from bytes."""

    name: str = "base64Binary"

    def read(self, element: etree._Element, nilled: Nilled) -> str:
        return element.text or ""

    def write(self, value: bytes) -> str:
        return base64.b64encode(value).decode("ascii")


@dataclass(frozen=True)
class Enumeration:
    """A string restricted to ``values``: the text exactly, or one of ``aliases`` (white space around it ignored)
    standing for a value; anything else (no text too) is a fault."""

    name: str
    values: frozenset[str]
    aliases: Mapping[str, str] = field(default_factory=dict)

    def read(self, element: etree._Element, nilled: Nilled) -> str:
        text = element.text
        if text is not None:
            text = self.aliases.get(text.strip(), text)
        if text not in self.values:
            raise invalid(text)
        return text

    def write(self, value: Any) -> str:
        return escape(str(getattr(value, "value", value)))


@dataclass(frozen=True)
class Double:
    """``xsd:double``, written as Python writes a float (Aviary's answers only)."""

    name: str = "double"

    def read(self, element: etree._Element, nilled: Nilled) -> float | None:
        text = element.text
        if text is None:
            return None
        try:
            return float(text)
        except ValueError:
            raise invalid(text) from None

    def write(self, value: float) -> str:
        return repr(float(value))


@dataclass(frozen=True)
class DateTime:
    """``xsd:dateTime``, written from seconds since the epoch as UTC (Aviary's job summaries); read as its text."""

    name: str = "dateTime"

    def read(self, element: etree._Element, nilled: Nilled) -> str:
        return element.text or ""

    def write(self, value: int) -> str:
        return datetime.datetime.fromtimestamp(int(value), datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: the tags a structure remembers, at most
TAGS = 256


@dataclass(eq=False)
class Struct:
    """A complex type with a sequence of members, read as a dict of the members present and written from a mapping
    in the sequence's order (null members left out).  ``members`` is filled once every type is known (a type may
    hold itself: ``Status.next``).  A member in ``repeated`` (``maxOccurs="unbounded"`` beside other members, as
    Aviary's schemas have them) is read as the list of its elements and written as one element per value; the
    XML attributes named in ``attributes`` are read as their text (absent: left out), and written from the members
    of the value that bear their names."""

    name: str
    members: dict[str, WireType] = field(default_factory=dict)
    repeated: set[str] = field(default_factory=set)
    attributes: tuple[str, ...] = ()
    #: each child's tag as met (qualified or not) -> its member's name and type (None: not a member); bounded, as
    #: tags are the clients' words
    _tags: dict[str, tuple[str, WireType | None]] = field(default_factory=dict, repr=False)
    #: the members whose type has XML attributes -> those attributes' names (found at the first write, once every
    #: member is known)
    _attributed: dict[str, tuple[str, ...]] | None = field(default=None, repr=False)

    def read(self, element: etree._Element, nilled: Nilled) -> dict[str, Any]:
        values: dict[str, Any] = {}
        repeated = self.repeated
        tags = self._tags
        twice: set[str] | None = None
        for child in element:
            tag = child.tag
            found = tags.get(tag)
            if found is None:
                if type(tag) is not str:
                    continue  # a comment (the parser drops processing instructions)
                found = self._member(tag)
            key, kind = found
            if kind is None:
                continue
            value = None if child in nilled else kind.read(child, nilled)
            if key in repeated:
                values.setdefault(key, []).append(value)
                continue
            if key in values:
                twice = (twice or set()) | {key}
            values[key] = value
        if twice:  # (after every value is read: a value that cannot be read is the fault to answer first)
            key = next(key for key in self.members if key in twice)
            raise WireFault(f"{key!r} member does not respect frequency constraints.")
        for name in self.attributes:
            text = element.get(name)
            if text is not None:
                values[name] = text
        return values

    def _member(self, tag: str) -> tuple[str, WireType | None]:
        """The member a child's tag names (by its local name, whatever its namespace), remembered."""
        key = tag.rpartition("}")[2]
        if len(self._tags) >= TAGS:
            self._tags.clear()
        found = self._tags[tag] = key, self.members.get(key)
        return found

    def write(self, value: Mapping[str, Any]) -> str | None:
        repeated = self.repeated
        attributed = self._attributed
        if attributed is None:
            attributed = self._attributed = {name: kind.attributes for name, kind in self.members.items()
                                             if isinstance(kind, Struct) and kind.attributes}
        if attributed:
            return self._write_attributed(value, attributed)
        parts = [element(name, kind.write(member)) if name not in repeated
                 else "".join(element(name, kind.write(item)) for item in member)
                 for name, kind in self.members.items() if (member := value.get(name)) is not None]
        return "".join(parts) or None

    def _write_attributed(self, value: Mapping[str, Any], attributed: dict[str, tuple[str, ...]]) -> str | None:
        """:meth:`write` for a structure some of whose members carry XML attributes."""
        parts = []
        for name, kind in self.members.items():
            member = value.get(name)
            if member is None:
                continue
            names = attributed.get(name, ())
            for item in (member if name in self.repeated else (member,)):
                parts.append(element(name, kind.write(item), attribute_text(names, item) if names else ""))
        return "".join(parts) or None


@dataclass(eq=False)
class Array:
    """A sequence of one repeated member (``item``): every child is an item whatever its name, a comment an empty
    one; written as one ``item`` per value."""

    name: str
    item: str
    member: WireType

    def read(self, element: etree._Element, nilled: Nilled) -> list[Any]:
        member = self.member
        return [None if child in nilled else member.read(child, nilled) for child in element]

    def write(self, values: Sequence[Any]) -> str | None:
        member, item = self.member, self.item
        return "".join(element(item, member.write(value)) for value in values) or None


#: the XML Schema types the contracts use, by their ``xsd:`` name
BUILTIN: dict[str, WireType] = {"int": Int("int", 32), "long": Int("long", 64), "boolean": Boolean(),
                                "string": String(), "base64Binary": Base64Binary(),
                                # Aviary's: xsd:integer read as a long, as Axis2/C's ADB code did
                                "integer": Int("integer", 64), "double": Double(), "dateTime": DateTime(),
                                "anyURI": String("anyURI")}
