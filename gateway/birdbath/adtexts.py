"""The wire text of job ads, kept between queries by the revision their backend gives them (``getJobAds``,
``getJobAd``).

Writing an ad's attributes costs a microsecond or more each (reading them out of classad2, typing, escaping); a
large queue asked for whole again and again costs that every time, while its ads rarely change.  Every backend
stamps each whole job ad it answers with a :class:`~backends.interface.Revision` (the job's key and a number that
stands for one content of its ad: the backend contract, ``backends/contract.py``, checks it for every kind of
change), so the text written for a job at one revision is right for as long as the job keeps it.  Kept here:

- per job key, with the revision number it was written at: a job answered at another number is written again and
  its entry replaced, so a changed job is never answered from an old text, and the table holds one text per job;
- only from the second time a job is written at one revision (the first leaves a marker): a job asked for once, or
  changing between queries, costs no compression;
- compressed with zlib against a preset dictionary (the text of a job written earlier: the ads of one queue share
  most of their text), which makes a typical job's text ~50-100 bytes, ~5 us per ad to pack, ~1 us to unpack;
- within a byte budget (texts and markers, with an estimate of each entry's own cost).  When a new entry would go
  past it, the entries not used since the last sweep go (jobs that left the queue, or no longer asked for); a sweep
  comes at most once per as many look-ups as there are entries, and until one frees room new jobs are written
  without being kept, while the kept ones stay useful;
- and the texts unpacked last are kept unpacked too, within a smaller budget of their own (:data:`UNPACKED`): a
  monitor polls the same jobs again and again, and unpacking each of them every time was a quarter of a polling
  worker's CPU (py-spy, a 1 % constraint over 10,000 jobs).  When that budget is full, new texts are not kept
  unpacked, and every :data:`UNPACKED_SECONDS` the unpacked ones are all dropped, to be kept again as they are asked
  for: a set of jobs polled again and again that is larger than the budget keeps what fits of it (dropping one to
  keep the next would unpack every one of them at every poll, and cost more than keeping none), and pollers that
  move on to other jobs have them kept within that time.  No order is kept per look-up.

Only the ad's own attributes are kept (what follows ``MyType``, ``TargetType`` and ``ServerTime``, which the writer
puts first per answer).  Entries are read and replaced with single dictionary operations (atomic under the GIL) and
the byte count changes under a lock never held while converting, so the reactor and the query pool's threads may
share one table.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable
from typing import NamedTuple

import classad2

from backends.interface import JobKey, revision

#: zlib's window (as a raw deflate stream: no header or checksum) and memory level, and the longest dictionary used:
#: small states are quick to copy per ad (an 8 KiB window and memory level 4 pack a typical job's text in ~80 % of
#: the time of 16 KiB and 6, to the same size), and an ad of up to 8 KiB - DICTIONARY still reaches all of it
WINDOW_BITS, MEMORY_LEVEL, DICTIONARY = -13, 4, 4 * 1024
#: a dictionary serves at least this many ads before one that packs badly (to over RATIO of its text) replaces it
REFRESH, RATIO = 1000, 0.25
#: the bytes kept, at most, by default (about 400,000 jobs of a typical queue)
BUDGET = 128 * 2**20
#: what an entry costs besides its packed text: the entry, its key's tuple and ints, the bytes object's header, its
#: slots in the table and in the used set (the gateway's resident memory grew by ~285 bytes a job, packed text of
#: ~50 bytes included, once bench/job_ads_scale.py's queue was kept)
ENTRY_COST = 240
#: the bytes of unpacked texts kept, at most, by default (some 10,000 jobs of a typical queue: what pollers ask for
#: again and again), and what each costs besides its text (its tuple, the bytes object's header, its table slot)
UNPACKED, UNPACKED_COST = 16 * 2**20, 120
#: how often the unpacked texts are all dropped (s): what pollers ask for is kept again by their next poll
UNPACKED_SECONDS = 60.0


class Dictionary:
    """A preset dictionary, with a compressor and a decompressor primed with it (copied per ad: cheaper than priming
    new ones)."""

    def __init__(self, sample: bytes) -> None:
        zdict = sample[-DICTIONARY:]
        self._primed: zlib._Compress | None = zlib.compressobj(1, zlib.DEFLATED, WINDOW_BITS, MEMORY_LEVEL,
                                                               zdict=zdict)
        self._inflate = zlib.decompressobj(WINDOW_BITS, zdict=zdict)
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
        it keep it (and its decompressor) for as long as they are kept."""
        self._primed = None

    def unpack(self, packed: bytes) -> bytes:
        return self._inflate.copy().decompress(packed)


class _Entry(NamedTuple):
    """A job's text at revision ``number``: ``packed`` with ``dictionary``, or (written once so far) neither."""

    number: int
    packed: bytes = b""
    dictionary: Dictionary | None = None

    @property
    def cost(self) -> int:
        return ENTRY_COST + len(self.packed)


class KeptTexts:
    """The kept texts; :meth:`text` is the only entry point."""

    def __init__(self, convert: Callable[[classad2.ClassAd], bytes], budget: int = BUDGET,
                 unpacked_budget: int = UNPACKED, clock: Callable[[], float] = time.monotonic) -> None:
        self._convert = convert
        self.budget = budget
        self.unpacked_budget = unpacked_budget
        self._entries: dict[JobKey, _Entry] = {}
        #: job key -> (revision number, text) of the texts unpacked last, what they cost, and when they all go
        self._unpacked: dict[JobKey, tuple[int, bytes]] = {}
        self.unpacked_bytes = 0
        self._clock = clock
        self._unpacked_until = clock() + UNPACKED_SECONDS
        #: the jobs whose entry was used (made or answered from) since the last sweep
        self._used: set[JobKey] = set()
        self._lookups = 0  # since the last sweep
        self._dictionary: Dictionary | None = None
        self._lock = threading.Lock()  # the byte count and sweeps (never held while converting)
        self.kept_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def jobs(self) -> set[JobKey]:
        """The jobs with an entry (a text or a marker)."""
        return set(self._entries)

    def entries_cost(self) -> int:
        """The bytes the entries cost, counted anew (:attr:`kept_bytes` keeps the count as they change)."""
        return sum(entry.cost for entry in list(self._entries.values()))

    def text(self, ad: classad2.ClassAd) -> bytes:
        """``convert(ad)``, from the kept text of the job at the ad's revision when there is one."""
        stamp = revision(ad)
        if stamp is None:
            return self._convert(ad)
        key, number = stamp
        self._lookups += 1
        entry = self._entries.get(key)
        if entry is not None and entry.number == number:
            self._used.add(key)
            if entry.dictionary is not None:
                return self._unpacked_text(key, entry)
            text = self._convert(ad)
            self._keep(key, entry, self._packed(number, text))
            return text
        text = self._convert(ad)
        self._keep(key, entry, _Entry(number))
        return text

    def _unpacked_text(self, key: JobKey, entry: _Entry) -> bytes:
        """The packed entry's text: kept unpacked from the last time, or unpacked now and kept so."""
        unpacked = self._unpacked.get(key)
        if unpacked is not None and unpacked[0] == entry.number:
            return unpacked[1]
        text = entry.dictionary.unpack(entry.packed)  # type: ignore[union-attr]
        with self._lock:
            now = self._clock()
            if now >= self._unpacked_until:
                self._unpacked, self.unpacked_bytes, self._unpacked_until = {}, 0, now + UNPACKED_SECONDS
            replaced = self._unpacked.get(key)
            growth = len(text) - len(replaced[1]) if replaced is not None else UNPACKED_COST + len(text)
            if self.unpacked_bytes + growth <= self.unpacked_budget:
                self._unpacked[key] = (entry.number, text)
                self.unpacked_bytes += growth
        return text

    def unpacked_cost(self) -> int:
        """The bytes the unpacked texts cost, counted anew (:attr:`unpacked_bytes` keeps the count as they change)."""
        return sum(UNPACKED_COST + len(text) for _, text in list(self._unpacked.values()))

    def _packed(self, number: int, text: bytes) -> _Entry | None:
        dictionary = self._dictionary
        if dictionary is None:
            dictionary = self._dictionary = Dictionary(text)
        packed = dictionary.pack(text)
        if packed is None:
            return None
        if len(packed) > RATIO * len(text) and dictionary.uses >= REFRESH:
            dictionary.retire()
            self._dictionary = Dictionary(text)  # this queue's ads have moved away from the old one
        return _Entry(number, packed, dictionary)

    def _keep(self, key: JobKey, old: _Entry | None, new: _Entry | None) -> None:
        """Replace ``key``'s entry ``old`` (None: it had none) with ``new``, if the budget allows; an entry another
        thread replaced meanwhile stays."""
        if new is None:
            return
        with self._lock:
            if self._entries.get(key) is not old:
                return
            growth = new.cost - (old.cost if old is not None else 0)
            if self.kept_bytes + growth > self.budget and growth > 0:
                self._sweep()
                if self._entries.get(key) is not old or self.kept_bytes + growth > self.budget:
                    return
            self._entries[key] = new
            self._used.add(key)
            self.kept_bytes += growth

    def _sweep(self) -> None:
        """Under the lock, when the budget is reached: drop the entries not used since the last sweep, once at least
        as many look-ups as there are entries were made since (so a table that stays full costs no sweep per job)."""
        if self._lookups < len(self._entries):
            return
        used = self._used
        for key, entry in list(self._entries.items()):
            if key not in used:
                del self._entries[key]
                self.kept_bytes -= entry.cost
        self._used = set()
        self._lookups = 0
