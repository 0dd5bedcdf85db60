"""ClassAd-heavy answers written straight to bytes, byte-identical to what spyne would produce.

spyne spends ~0.1 ms per ClassAd attribute serialising; a queue of a few thousand jobs would take seconds.  The
envelope around the ads is taken once from spyne itself (an answer with an empty array, split where the items go),
so only the ``item`` elements are written here.  ``bench/soap_answers.py`` measures the difference and
``tests/test_adwriter.py`` proves the bytes identical.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

from gateway.core.adstruct import Attr

#: characters XML 1.0 cannot carry at all; they become U+FFFD rather than break the whole answer
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    return NOT_XML.sub("\ufffd", text)


#: what _escape changes: most names and values have none of it, and are written as they are
_SPECIAL = re.compile("[&<>\r\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def escape(text: str) -> str:
    """Element text as lxml writes it (``&``, ``<``, ``>`` and carriage returns escaped), characters XML cannot
    carry as U+FFFD."""
    if not _SPECIAL.search(text):
        return text
    return (xml_text(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\r", "&#13;"))


def attribute_items(ad: Sequence[Attr]) -> str:
    return "".join(f"<item><name>{escape(a.name)}</name><type>{a.type.value}</type>"
                   f"<value>{escape(a.value)}</value></item>" for a in ad)


#: about how many bytes of a streamed answer are written at once
CHUNK = 256 * 1024


def ad_item(ad: Sequence[Attr]) -> str:
    """One ad as an ``item`` of an array of ads."""
    return f"<item>{attribute_items(ad)}</item>"


def ad_items(ads: Iterable[Sequence[Attr]]) -> str:
    return "".join(ad_item(ad) for ad in ads)


@dataclass(frozen=True)
class SplitAnswer:
    """A serialised answer cut where an (empty) array element was: ``head`` + items + ``tail``."""

    head: bytes
    tail: bytes

    @classmethod
    def around(cls, document: bytes, element: str) -> "SplitAnswer":
        for empty in (f"<{element}/>".encode(), f"<{element}></{element}>".encode()):
            if document.count(empty) == 1:
                head, tail = document.split(empty)
                return cls(head + f"<{element}>".encode(), f"</{element}>".encode() + tail)
        raise ValueError(f"no single empty <{element}> in {document[:200]!r}")

    def fill(self, items: str) -> bytes:
        return b"".join((self.head, items.encode("utf-8"), self.tail))


@dataclass(frozen=True)
class AdAnswers:
    """Writers for the answers that carry job ads."""

    job_ads: SplitAnswer  # getJobAdsResponse, around classAdArray
    job_ad: SplitAnswer  # getJobAdResponse, around classAd

    def write_job_ads(self, ads: Iterable[Sequence[Attr]]) -> bytes:
        return self.job_ads.fill(ad_items(ads))

    def stream_job_ads(self, ads: Iterable[Sequence[Attr]], chunk: int = CHUNK) -> Iterator[bytes]:
        """The same bytes as :meth:`write_job_ads`, in pieces of about ``chunk`` bytes, each ad converted and
        written only when its piece is asked for: an answer of any size is never held whole."""
        yield self.job_ads.head
        parts: list[str] = []
        size = 0
        for ad in ads:
            text = ad_item(ad)
            parts.append(text)
            size += len(text)
            if size >= chunk:
                yield "".join(parts).encode("utf-8")
                parts, size = [], 0
        yield "".join(parts).encode("utf-8") + self.job_ads.tail

    def write_job_ad(self, ad: Sequence[Attr]) -> bytes:
        return self.job_ad.fill(attribute_items(ad))
