"""A Birdbath service's contract, read from the WSDL it publishes (``wsdl/``): its operations, each with its
parameters and its answer, as :mod:`~gateway.soap.xsd` types that read and write themselves.

The table is made from the very file clients get, once at start-up, so the wire cannot drift from the published
contract; the leniencies beyond it come from :mod:`~gateway.soap.lenient`.  The schema may be in the WSDL or in
files it imports beside it (Aviary's ``aviary-job.xsd`` and ``aviary-common.xsd``); an operation is named by its
request element (Birdbath's are the operations' names; Aviary's ``SubmitJob`` serves its ``submitJob``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from . import lenient
from .xsd import BUILTIN, Array, Enumeration, String, Struct, WireType

WSDL = "http://schemas.xmlsoap.org/wsdl/"
XSD = "http://www.w3.org/2001/XMLSchema"


@dataclass(frozen=True)
class Operation:
    """One operation: its request element (a structure of its parameters) and its answer element.  A handler
    answers the value of the answer element's one member ``answer_name`` (Birdbath), or with ``answer_name`` None
    the answer element's whole content (Aviary: a status beside the results)."""

    name: str
    parameters: Struct
    answer_name: str | None
    answer: WireType
    #: the answer element's name (``<name>Response``)
    response: str


@dataclass(frozen=True)
class Contract:
    """A service's name, the namespace of its operations' elements and its operations (in the WSDL's order)."""

    service: str
    namespace: str
    operations: dict[str, Operation]

    @classmethod
    def load(cls, path: Path, whole_answers: bool = False) -> Contract:
        """The contract of the WSDL at ``path``; ``whole_answers``: handlers answer the answer element's content
        (see :class:`Operation`)."""
        root = _parse(path)
        service = root.get("name")
        types = _Types(_schemas(root.find(f"{{{WSDL}}}types"), path.parent),
                       lenient.READ_AS_TEXT.get(service, frozenset()))
        elements = {message.get("name"): _local(message.find(f"{{{WSDL}}}part").get("element"))
                    for message in root.iter(f"{{{WSDL}}}message")}
        operations = {}
        for operation in root.find(f"{{{WSDL}}}portType").iter(f"{{{WSDL}}}operation"):
            request_name = elements[_local(operation.find(f"{{{WSDL}}}input").get("message"))]
            response_name = elements[_local(operation.find(f"{{{WSDL}}}output").get("message"))]
            request, answer = types.element(request_name), types.element(response_name)
            if whole_answers:
                operations[request_name] = Operation(request_name, request, None, answer, response_name)
            else:
                ((answer_name, answer_type),) = answer.members.items()
                operations[request_name] = Operation(request_name, request, answer_name, answer_type, response_name)
        return cls(service, types.namespace, operations)


def _parse(path: Path) -> etree._Element:
    return etree.parse(str(path), etree.XMLParser(resolve_entities=False, no_network=True)).getroot()


def _schemas(types: etree._Element, directory: Path) -> list[etree._Element]:
    """The WSDL's schemas and those they import from files beside it (each once)."""
    found: list[etree._Element] = []
    pending = list(types.iter(f"{{{XSD}}}schema"))
    seen: set[str] = set()
    while pending:
        schema = pending.pop(0)
        found.append(schema)
        for imported in schema.findall(f"{{{XSD}}}import"):
            location = imported.get("schemaLocation")
            if location and location not in seen:
                seen.add(location)
                pending.append(_parse(directory / Path(location).name))
    return found


def _local(qname: str) -> str:
    return qname.rpartition(":")[2]


class _Types:
    """The schemas' named types and elements, made on first use (a structure before its members, so that a type
    may refer to itself).  Names are unique across the schemas of a contract (checked)."""

    def __init__(self, schemas: list[etree._Element], as_text: frozenset[str]) -> None:
        self._schema: dict[tuple[str, str], etree._Element] = {}
        self._namespaces: dict[str, str] = {}
        for schema in schemas:
            for node in schema:
                if not isinstance(node.tag, str) or node.get("name") is None:
                    continue
                key = (etree.QName(node).localname, node.get("name"))
                if key in self._schema:
                    raise ValueError(f"{key[0]} {key[1]} is defined twice")
                self._schema[key] = node
                self._namespaces[key[1]] = schema.get("targetNamespace")
        self._as_text = as_text
        self._made: dict[str, WireType] = {}
        #: the namespace of the operations' elements (the last element's asked for: they share one)
        self.namespace = ""

    def named(self, qname: str, node: etree._Element) -> WireType:
        prefix, _, name = qname.rpartition(":")
        if node.nsmap.get(prefix or None) == XSD:
            return BUILTIN[name]
        made = self._made.get(name)
        if made is None:
            simple = self._schema.get(("simpleType", name))
            made = self._simple(name, simple) if simple is not None else self._complex(name)
        return made

    def element(self, name: str) -> Struct:
        """An operation's element: its own complex type, or a named one (Aviary's ``HoldJob``, a ``ControlJob``)."""
        self.namespace = self._namespaces[name]
        node = self._schema[("element", name)]
        if node.get("type") is not None:
            named = self.named(node.get("type"), node)
            assert isinstance(named, Struct), f"element {name} is not a structure"
            return named
        return self._fill(Struct(name), node.find(f"{{{XSD}}}complexType"))

    def _simple(self, name: str, node: etree._Element) -> WireType:
        values = frozenset(value.get("value") for value in node.iter(f"{{{XSD}}}enumeration"))
        if not values or name in self._as_text:
            made: WireType = String(name)
        else:
            made = Enumeration(name, values | lenient.EXTRA_VALUES.get(name, frozenset()),
                               lenient.ENUM_ALIASES.get(name, {}))
        self._made[name] = made
        return made

    def _complex(self, name: str) -> WireType:
        node = self._schema[("complexType", name)]
        members = node.findall(f"{{{XSD}}}sequence/{{{XSD}}}element")
        if len(members) == 1 and members[0].get("maxOccurs") == "unbounded":
            array = Array(name, members[0].get("name"), String())
            self._made[name] = array
            array.member = self.named(members[0].get("type"), members[0])
            return array
        struct = self._made[name] = Struct(name)
        return self._fill(struct, node)

    def _fill(self, struct: Struct, node: etree._Element) -> Struct:
        for member in node.findall(f"{{{XSD}}}sequence/{{{XSD}}}element"):
            struct.members[member.get("name")] = self.named(member.get("type"), member)
            if member.get("maxOccurs") == "unbounded":
                struct.repeated.add(member.get("name"))
        struct.attributes = tuple(attribute.get("name") for attribute in node.findall(f"{{{XSD}}}attribute"))
        return struct
