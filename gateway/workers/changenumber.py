"""The backend's change number as the core publishes it to its workers: one page of shared memory (a ``memfd``,
passed to each worker at its start), which the core writes as each write is counted and the workers map read-only.

A worker whose view of the jobs (``gateway/workers/jobview.py``) is at the number it reads here knows that nothing
changed since: it answers getJobAd and getJobAds from its view and the ads it holds, without crossing to the core.
The number is one aligned 64-bit word, copied whole on each side (an aligned 8-byte copy, one access on x86-64 and
aarch64).  The core writes a write's number before any of its ads is readable and again once it is counted, before
the write returns, so before any client can hear that write is done: a client that committed on one worker and reads
on another is never answered from a view older than its commit, and no view is current while a write is
half-applied.
"""

from __future__ import annotations

import mmap
import os


class PublishedNumber:
    """The page and the one number in it (0 until the core first publishes)."""

    def __init__(self, page: mmap.mmap, descriptor: int | None) -> None:
        self._page = page
        self._cells = memoryview(page).cast("Q")
        #: the memfd (the core's, to pass to the workers it starts); None in a worker, which closed its copy
        self.descriptor = descriptor

    @classmethod
    def create(cls) -> PublishedNumber:
        """The core's: a new page, written here."""
        descriptor = os.memfd_create("birdbath-change-number", os.MFD_CLOEXEC)
        os.ftruncate(descriptor, mmap.PAGESIZE)
        return cls(mmap.mmap(descriptor, mmap.PAGESIZE), descriptor)

    @classmethod
    def attach(cls, descriptor: int) -> PublishedNumber:
        """A worker's: the core's page from the descriptor it was started with, mapped read-only."""
        try:
            return cls(mmap.mmap(descriptor, mmap.PAGESIZE, prot=mmap.PROT_READ), None)
        finally:
            os.close(descriptor)

    def publish(self, number: int) -> None:
        self._cells[0] = number

    @property
    def value(self) -> int:
        return self._cells[0]
