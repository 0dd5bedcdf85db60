"""ClassAd-heavy answers written straight to bytes, byte-identical to what spyne would produce.

spyne spends ~0.1 ms per ClassAd attribute serialising; a queue of a few thousand jobs would take seconds.  The
envelope around the ads is taken once from spyne itself (an answer with an empty array, split where the items go),
so only the ``item`` elements are written here.  ``bench/soap_answers.py`` measures the difference and
``tests/test_adwriter.py`` proves the bytes identical.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from gateway.core.adstruct import Attr

#: characters XML 1.0 cannot carry at all; they become U+FFFD rather than break the whole answer
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _escape(text: str) -> str:
    return (xml_text(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\r", "&#13;"))


def attribute_items(ad: Sequence[Attr]) -> str:
    return "".join(f"<item><name>{_escape(a.name)}</name><type>{a.type.value}</type>"
                   f"<value>{_escape(a.value)}</value></item>" for a in ad)


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
        return self.job_ads.fill("".join(f"<item>{attribute_items(ad)}</item>" for ad in ads))

    def write_job_ad(self, ad: Sequence[Attr]) -> bytes:
        return self.job_ad.fill(attribute_items(ad))
