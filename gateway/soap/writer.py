"""condorSchedd answers written straight to bytes from the answer models, byte-identical to spyne's serialiser.

spyne builds an lxml tree for every answer, walks it again to drop the namespace of every descendant (gSOAP's
shape, ``protocol.GsoapSoap11.serialize``) and then serialises it: most of a small operation's time.  The answers
of condorSchedd are small, fixed shapes (``models``), so :class:`AnswerWriter` writes them from the same models'
``_type_info`` (field order, names and types) into the envelope spyne itself produced for each operation at
start-up (:class:`~gateway.soap.adwriter.SplitAnswer`).  Leaf values are turned into text by spyne's own protocol
(``to_unicode``), so numbers, enums and base64 read exactly as before; only the element syntax is written here, as
lxml writes it.  Anything outside those shapes (``None`` inside an array, text XML cannot carry) raises
:class:`Unwritable`, and the caller lets spyne serialise that answer.  ``tests/test_schedd_wire.py`` proves the
bytes identical for every operation.
"""

from __future__ import annotations

from typing import Any, Callable

from spyne.model.binary import ByteArray
from spyne.model.complex import Array, ComplexModelBase
from spyne.model.primitive import Unicode

from . import adwriter
from .adwriter import NOT_XML, SplitAnswer


class Unwritable(ValueError):
    """An answer outside the shapes this writer knows: spyne's serialiser must write it."""


def escape(text: str) -> str:
    """Element text as lxml writes it; text XML cannot carry is spyne's to refuse (lxml raises on it)."""
    if NOT_XML.search(text):
        raise Unwritable("text XML cannot carry")
    return adwriter.escape(text)


def element(name: str, content: str | None) -> str:
    """``<name>content</name>``; no content at all (not even empty text) is lxml's ``<name/>``."""
    return f"<{name}/>" if content is None else f"<{name}>{content}</{name}>"


#: writes a value of one model class as an element's content (None: an empty element)
Content = Callable[[Any], "str | None"]


class AnswerWriter:
    """The answers of one spyne application's operations, written from their models.

    ``render(operation, answer)`` is spyne's serialisation of an answer (``SoapDispatcher.render``): it is used once
    per operation at start-up, for the envelope, and never per request."""

    def __init__(self, protocol: Any, out_types: dict[str, type], render: Callable[[str, Any], bytes]) -> None:
        self._protocol = protocol
        self._contents: dict[type, Content] = {}
        self._answers = {operation: (SplitAnswer.around(render(operation, model()), "response"),
                                     self._content(model)) for operation, model in out_types.items()}

    def write(self, operation: str, answer: Any) -> bytes:
        """The answer's document; :class:`Unwritable` when spyne must write it."""
        envelope, content = self._answers[operation]
        members = content(answer)
        if members is None:  # an answer with no members at all is spyne's <response/>
            raise Unwritable("an empty answer")
        return envelope.fill(members)

    # -- one writer per model class, made once ----------------------------------------------------------------
    def _content(self, cls: type) -> Content:
        writer = self._contents.get(cls)
        if writer is None:
            writer = self._contents[cls] = self._make_content(cls)
        return writer

    def _make_content(self, cls: type) -> Content:
        if issubclass(cls, Array):
            return self._array_content(cls)
        if issubclass(cls, ComplexModelBase):
            return self._complex_content(cls)
        if issubclass(cls, ByteArray):
            protocol = self._protocol
            return lambda value: escape(protocol.to_unicode(cls, value, protocol.binary_encoding))
        if issubclass(cls, Unicode):
            return lambda value: escape(value if type(value) is str else self._protocol.to_unicode(cls, value))
        return lambda value: escape(self._protocol.to_unicode(cls, value))

    def _complex_content(self, cls: type) -> Content:
        fields = [(name, self._content(member)) for name, member in cls.get_flat_type_info(cls).items()]

        def content(value: Any) -> str | None:
            parts = []
            for name, write in fields:
                member = getattr(value, name, None)
                if member is not None:  # output fields are not nillable: None is left out, as spyne does
                    parts.append(element(name, write(member)))
            return "".join(parts) or None

        return content

    def _array_content(self, cls: type) -> Content:
        ((name, member),) = cls._type_info.items()
        write = self._content(member)

        def content(values: Any) -> str | None:
            parts = []
            for value in values:
                if value is None:
                    raise Unwritable("None in an array")  # spyne writes xsi:nil there
                parts.append(element(name, write(value)))
            return "".join(parts) or None

        return content
