"""A Birdbath service's contract, read from the WSDL it publishes (``wsdl/``): its operations, each with its
parameters and its answer, as :mod:`~gateway.soap.xsd` types that read and write themselves.

The table is made from the very file clients get, once at start-up, so the wire cannot drift from the published
contract; the leniencies beyond it come from :mod:`~gateway.soap.lenient`.
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
    """One operation: its request element (a structure of its parameters) and its answer's one member."""

    name: str
    parameters: Struct
    answer_name: str
    answer: WireType


@dataclass(frozen=True)
class Contract:
    """A service's name, namespace and operations (in the WSDL's order)."""

    service: str
    namespace: str
    operations: dict[str, Operation]

    @classmethod
    def load(cls, path: Path) -> Contract:
        root = etree.parse(str(path), etree.XMLParser(resolve_entities=False, no_network=True)).getroot()
        service = root.get("name")
        namespace = root.get("targetNamespace")
        types = _Types(root.find(f"{{{WSDL}}}types/{{{XSD}}}schema"), lenient.READ_AS_TEXT.get(service, frozenset()))
        elements = {message.get("name"): _local(message.find(f"{{{WSDL}}}part").get("element"))
                    for message in root.iter(f"{{{WSDL}}}message")}
        operations = {}
        for operation in root.find(f"{{{WSDL}}}portType").iter(f"{{{WSDL}}}operation"):
            name = operation.get("name")
            request = types.element(elements[_local(operation.find(f"{{{WSDL}}}input").get("message"))])
            answer = types.element(elements[_local(operation.find(f"{{{WSDL}}}output").get("message"))])
            ((answer_name, answer_type),) = answer.members.items()
            operations[name] = Operation(name, request, answer_name, answer_type)
        return cls(service, namespace, operations)


def _local(qname: str) -> str:
    return qname.rpartition(":")[2]


class _Types:
    """The schema's named types and elements, made on first use (a structure before its members, so that a type
    may refer to itself)."""

    def __init__(self, schema: etree._Element, as_text: frozenset[str]) -> None:
        self._schema = {(etree.QName(node).localname, node.get("name")): node for node in schema
                        if isinstance(node.tag, str)}
        self._as_text = as_text
        self._made: dict[str, WireType] = {}

    def named(self, qname: str) -> WireType:
        prefix, _, name = qname.rpartition(":")
        if prefix == "xsd":
            return BUILTIN[name]
        made = self._made.get(name)
        if made is None:
            simple = self._schema.get(("simpleType", name))
            made = self._simple(name, simple) if simple is not None else self._complex(name)
        return made

    def element(self, name: str) -> Struct:
        return self._fill(Struct(name), self._schema[("element", name)].find(f"{{{XSD}}}complexType"))

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
            array.member = self.named(members[0].get("type"))
            return array
        struct = self._made[name] = Struct(name)
        return self._fill(struct, node)

    def _fill(self, struct: Struct, node: etree._Element) -> Struct:
        for member in node.findall(f"{{{XSD}}}sequence/{{{XSD}}}element"):
            struct.members[member.get("name")] = self.named(member.get("type"))
        return struct
