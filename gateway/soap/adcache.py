"""The wire text of queued job ads, kept compressed between queries (``getJobAds``, ``getJobAd``).

Writing an ad's attributes costs ~1 us each (reading them out of classad2, typing, escaping); a large queue asked for
whole again and again costs that every time, while its ads rarely change.  The local backend keeps every queued ad
parsed and never mutates one (a change replaces the object), so the text written for an ad *object* stays right for
as long as that object lives.  Kept here:

- by the ad's ``id``, with a weak reference to the ad checked by identity: a changed job is a new object and is never
  answered from an old entry, and an entry goes when its ad does (the weak reference's callback drops it), so the
  table never outgrows the live queue;
- only from the second time an ad is written: the local store's ads live on and are written again, the htcondor
  backend's are fresh per query, leave only a marker that dies with the answer, and cost no compression;
- compressed with zlib against a preset dictionary (the text of an ad written earlier: the ads of one queue share most
  of their text), which makes a typical job's text ~50-100 bytes and costs ~5 us per ad to pack, ~1 us to unpack;
- within a byte budget: past it, further ads are written as if not kept.

Only the ad's own attributes are kept (what follows ``MyType``, ``TargetType`` and ``ServerTime``, which the writer
puts first per answer).  Entries are read and written with single dictionary or attribute operations (atomic under
the GIL) and nothing is converted under the lock, so the reactor and the query pool's threads may use one table.
"""

from __future__ import annotations

import threading
import weakref
import zlib
from collections import deque
from typing import Callable

import classad2

#: zlib's window (as a raw deflate stream: no header or checksum) and memory level, and the longest dictionary used:
#: small states are quick to set up per ad, and an ad of up to WINDOW - DICTIONARY bytes still reaches all of it
WINDOW_BITS, MEMORY_LEVEL, DICTIONARY = -14, 6, 8 * 1024
#: a dictionary serves at least this many ads before one that packs badly (to over RATIO of its text) replaces it
REFRESH, RATIO = 1000, 0.25
#: the packed texts kept, at most (bytes)
BUDGET = 256 * 2**20


class Dictionary:
    """A preset dictionary, with a compressor primed with it (copied per ad: cheaper than priming a new one)."""

    def __init__(self, sample: bytes) -> None:
        self.zdict = sample[-DICTIONARY:]
        self._primed = zlib.compressobj(1, zlib.DEFLATED, WINDOW_BITS, MEMORY_LEVEL, zdict=self.zdict)
        self.uses = 0

    def pack(self, text: bytes) -> bytes | None:
        """The packed text; None once retired (another thread may still hold this dictionary)."""
        primed = self._primed
        if primed is None:
            return None
        self.uses += 1
        compressor = primed.copy()
        return compressor.compress(text) + compressor.flush()

    def retire(self) -> None:
        """Only unpack from now on: its compressor (~100 KB, outside the budget) goes, while the texts packed with
        it, which keep it, may live as long as their jobs."""
        self._primed = None

    def unpack(self, packed: bytes) -> bytes:
        return zlib.decompressobj(WINDOW_BITS, zdict=self.zdict).decompress(packed)


class _Entry(weakref.ref):
    """An ad's entry: a weak reference to it, its key, and (from its second writing) its packed text."""

    __slots__ = ("key", "packed", "dictionary")

    def __new__(cls, ad: classad2.ClassAd, callback: Callable[["_Entry"], None], key: int) -> "_Entry":
        return super().__new__(cls, ad, callback)

    def __init__(self, ad: classad2.ClassAd, callback: Callable[["_Entry"], None], key: int) -> None:
        super().__init__(ad, callback)
        self.key = key
        #: the packed text, and the dictionary it was packed with: set once, the dictionary last (a reader that sees
        #: it sees the text)
        self.packed = b""
        self.dictionary: Dictionary | None = None


class WireTexts:
    """The kept texts; :meth:`text` is the only entry point."""

    def __init__(self, convert: Callable[[classad2.ClassAd], bytes], budget: int = BUDGET) -> None:
        self._convert = convert
        self.budget = budget
        self._entries: dict[int, _Entry] = {}
        self._dictionary: Dictionary | None = None
        self._lock = threading.Lock()  # the byte count (never held while converting, nor taken by callbacks)
        self.packed_bytes = 0
        self._freed: deque[int] = deque()  # sizes of the texts of ads that went (callbacks only append)

    def __len__(self) -> int:
        return len(self._entries)

    def text(self, ad: classad2.ClassAd) -> bytes:
        """``convert(ad)``, from the kept text when there is one."""
        key = id(ad)
        entry = self._entries.get(key)
        if entry is None or entry() is not ad:
            text = self._convert(ad)
            self._mark(ad, key)
            return text
        dictionary = entry.dictionary
        if dictionary is not None:
            return dictionary.unpack(entry.packed)
        text = self._convert(ad)
        self._keep(entry, text)
        return text

    def _mark(self, ad: classad2.ClassAd, key: int) -> None:
        """Remember that ``ad`` was written once (an ad that cannot be referred to weakly is never kept)."""
        try:
            entry = _Entry(ad, self._gone, key)
        except TypeError:
            return
        present = self._entries.setdefault(key, entry)
        if present is not entry and present() is None:
            self._entries[key] = entry  # a dead ad's entry whose callback has not run yet

    def _keep(self, entry: _Entry, text: bytes) -> None:
        if self._settled() >= self.budget:
            return
        dictionary = self._dictionary
        if dictionary is None:
            dictionary = self._dictionary = Dictionary(text)
        packed = dictionary.pack(text)
        if packed is None:
            return
        if len(packed) > RATIO * len(text) and dictionary.uses >= REFRESH:
            dictionary.retire()
            self._dictionary = Dictionary(text)  # this queue's ads have moved away from the old one
        with self._lock:
            if entry.dictionary is not None or self.packed_bytes + len(packed) > self.budget:
                return
            entry.packed = packed
            entry.dictionary = dictionary
            self.packed_bytes += len(packed)

    def _settled(self) -> int:
        """The bytes kept, once the texts of ads that went are taken off (their callbacks only note them, as they
        may run on any thread at any point, even inside this lock)."""
        with self._lock:
            while self._freed:
                self.packed_bytes -= self._freed.popleft()
            return self.packed_bytes

    def _gone(self, entry: _Entry) -> None:
        """The weak reference's callback (on whichever thread let go of the ad): drop its entry."""
        if self._entries.get(entry.key) is entry:
            self._entries.pop(entry.key, None)
        if entry.dictionary is not None:
            self._freed.append(len(entry.packed))
