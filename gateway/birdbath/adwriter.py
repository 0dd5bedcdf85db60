"""ClassAd-heavy answers (job and machine ads) written straight to bytes, a ``ClassAdStruct`` item by item.

A queue of many thousand jobs is answered at about a microsecond per attribute, streamed when it is large.  The
envelope around the ads is cut once from the codec's own answer (an answer with an empty array, split where the
items go), so only the ``item`` elements are written here.  Job ads are written straight from their ClassAds
(:func:`own_items`, after the three synthetic items every answer starts with), and that text is kept between
queries by the job's revision, which its backend promises (``adtexts``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import classad2

from gateway.core.adstruct import Attr, AttrType, ad_to_struct, own_attributes
from gateway.soap.answer import SplitAnswer
from gateway.soap.xsd import SPECIAL, escape

from .adtexts import KeptTexts


def attribute_items(ad: Iterable[tuple[str, AttrType, str]]) -> str:
    """The ``item`` elements of an ad's attributes (``Attr``, or :func:`~gateway.core.adstruct.own_attributes`'s
    triples): the one writer of a ``ClassAdStruct`` item, each item's text up to its value kept by name and type."""
    parts: list[str] = []
    append, heads, special = parts.append, _HEADS, SPECIAL.search  # (locals: quicker)
    for name, type_, text in ad:
        append(heads.get((name, type_)) or _head(name, type_))
        append(escape(text) if special(text) else text)
        append("</value></item>")
    return "".join(parts)


#: (name, type) -> the text of an item up to its value; a bounded table (names are clients' words)
_HEADS: dict[tuple[str, AttrType], str] = {}
HEADS = 4096


def _head(name: str, type_: AttrType) -> str:
    head = _HEADS.get((name, type_))
    if head is None:
        if len(_HEADS) >= HEADS:
            _HEADS.clear()
        head = _HEADS[(name, type_)] = f"<item><name>{escape(name)}</name><type>{type_.value}</type><value>"
    return head


def own_items(ad: classad2.ClassAd) -> bytes:
    """The items of a job ad's own attributes (all but the three synthetic ones every answer starts with), straight
    from the ClassAd, without making an ``Attr`` of each."""
    return attribute_items(own_attributes(ad)).encode("utf-8")


#: what is sent first in every job ad of an answer at ``ServerTime`` (the last few kept: answers of one second share it)
@functools.lru_cache(maxsize=4)
def synthetic_items(server_time: int) -> bytes:
    return attribute_items(ad_to_struct(classad2.ClassAd(), server_time)).encode("utf-8")


#: about how many bytes of a streamed answer are written at once
CHUNK = 256 * 1024


def ad_item(ad: Sequence[Attr]) -> str:
    """One ad as an ``item`` of an array of ads."""
    return f"<item>{attribute_items(ad)}</item>"


def ad_items(ads: Iterable[Sequence[Attr]]) -> str:
    return "".join(ad_item(ad) for ad in ads)


@dataclass(frozen=True)
class AdAnswers:
    """Writers for the answers that carry job ads: ClassAds as a job query answers them at ``server_time``, each
    ad's own items through ``texts`` (kept by the job's revision)."""

    job_ads: SplitAnswer  # getJobAdsResponse, around classAdArray
    job_ad: SplitAnswer  # getJobAdResponse, around classAd
    texts: KeptTexts = field(default_factory=lambda: KeptTexts(own_items))

    def write_job_ads(self, ads: Iterable[classad2.ClassAd], server_time: int) -> bytes:
        return b"".join([self.job_ads.head, *self._items(ads, server_time), self.job_ads.tail])

    def stream_job_ads(self, ads: Iterable[classad2.ClassAd], server_time: int,
                       chunk: int = CHUNK) -> Iterator[bytes]:
        """The same bytes as :meth:`write_job_ads`, in pieces of about ``chunk`` bytes, each ad converted and
        written only when its piece is asked for: an answer of any size is never held whole."""
        yield self.job_ads.head
        parts: list[bytes] = []
        size = 0
        for item in self._items(ads, server_time):
            parts.append(item)
            size += len(item)
            if size >= chunk:
                yield b"".join(parts)
                parts, size = [], 0
        parts.append(self.job_ads.tail)
        yield b"".join(parts)

    def _items(self, ads: Iterable[classad2.ClassAd], server_time: int) -> Iterator[bytes]:
        synthetic, text = synthetic_items(server_time), self.texts.text
        for ad in ads:
            yield b"".join((b"<item>", synthetic, text(ad), b"</item>"))

    def write_job_ad(self, ad: classad2.ClassAd, server_time: int) -> bytes:
        return b"".join((self.job_ad.head, synthetic_items(server_time), self.texts.text(ad), self.job_ad.tail))
