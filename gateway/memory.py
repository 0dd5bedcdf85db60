"""The gateway's memory: HTCondor's configuration loaded before the ClassAd library is used in earnest, a full
garbage collection on request (SIGUSR1), with the process's memory before and after in the log, and the C heap's
free memory given back to the system when there is much of it.

Python collects cyclic garbage only as allocations go on, so an idle gateway may hold garbage a busy one would have
freed; an operator (or ``bench/load.py``) who wants to know what the gateway really keeps sends SIGUSR1 and reads
the log line.

glibc's allocator keeps the memory a large answer used once it is freed (a worker that carried a getJobAds of
100,000 jobs stayed at 722 MiB, of which 532 were free), for the process's later use; the gateway's processes look
at their heap every :data:`TRIM_INTERVAL` seconds and give back (``malloc_trim``) what is free beyond
:data:`TRIM_ABOVE_MIB`, as SIGUSR1's collection does too.
"""

from __future__ import annotations

import ctypes
import gc
import signal
import time
from pathlib import Path
from typing import Any, Callable

from twisted.internet.task import LoopingCall
from twisted.logger import Logger

log = Logger()


def resident_mib() -> float | None:
    """This process's resident set (VmRSS) in MiB, where /proc says it."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


class _MallInfo(ctypes.Structure):
    """glibc's ``struct mallinfo2``."""

    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def malloc_mib() -> tuple[float, float] | None:
    """The C heap (glibc's ``mallinfo2``): MiB in use, and MiB free but kept by the allocator (None elsewhere).  The
    resident set does not shrink when a large queue has come and gone, as the freed memory stays in the heap for
    later use; these two tell such memory from memory still held."""
    try:
        info = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    info.restype = _MallInfo
    figures = info()
    return (figures.uordblks + figures.hblkhd) / 2**20, figures.fordblks / 2**20


#: how often each process of the gateway looks at its C heap's free memory (s), and how much it may keep (MiB)
TRIM_INTERVAL = 30.0
TRIM_ABOVE_MIB = 64.0


def give_back() -> bool:
    """Return the C heap's free memory to the system (glibc's ``malloc_trim``); False where there is no such call."""
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return False
    trim(0)
    return True


class HeapTrimmer:
    """Every ``interval`` seconds, gives back the C heap's free memory when more than ``above`` MiB of it is kept
    (``heap``: MiB in use and MiB free, as :func:`malloc_mib` says them; ``trim``: :func:`give_back`)."""

    def __init__(self, clock: Any, interval: float = TRIM_INTERVAL, above: float = TRIM_ABOVE_MIB,
                 heap: Callable[[], tuple[float, float] | None] = malloc_mib,
                 trim: Callable[[], bool] = give_back) -> None:
        self._heap, self._trim, self.above = heap, trim, above
        self._loop = LoopingCall(self.check)
        self._loop.clock = clock
        self.interval = interval

    def start(self) -> None:
        self._loop.start(self.interval, now=False)

    def stop(self) -> None:
        if self._loop.running:
            self._loop.stop()

    def check(self) -> None:
        figures = self._heap()
        if figures is not None and figures[1] > self.above and self._trim():
            log.debug("gave back the C heap's free memory: {free:.1f} MiB free before, {after} after",
                      free=figures[1], after=_mib((self._heap() or (None, None))[1]))


def collect() -> None:
    """Run a full collection, give back the C heap's free memory, and log what it found, the resident memory before
    and after, and the C heap."""
    before, started = resident_mib(), time.perf_counter()
    found = gc.collect()
    give_back()
    heap = malloc_mib()
    log.info("full garbage collection (SIGUSR1): {found} unreachable objects in {ms:.1f} ms, {tracked} objects "
             "tracked; resident memory {before} -> {after} MiB; C heap {in_use} MiB in use, {free} MiB free",
             found=found, ms=(time.perf_counter() - started) * 1000, tracked=len(gc.get_objects()),
             before=_mib(before), after=_mib(resident_mib()), in_use=_mib(heap and heap[0]),
             free=_mib(heap and heap[1]))


def _mib(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def keep_no_debug_lines() -> None:
    """Load HTCondor's configuration (``CONDOR_CONFIG``; /dev/null for the gateway) by importing its bindings.

    Until the configuration is loaded, HTCondor's debug log keeps every line in memory, and classad2 writes one each
    time it frees a ClassAd or an ExprTree (``_handle_dealloc``): about 140 bytes a time for the life of the process,
    most of the gateway's growth under load (htcondor 24.0 and 25.14 alike).  Once it is loaded, nothing is kept."""
    import htcondor2  # noqa: F401


def install(reactor: Any) -> HeapTrimmer:
    """Load HTCondor's configuration (:func:`keep_no_debug_lines`); collect on SIGUSR1, in the reactor thread (a
    signal handler only schedules the work); give back the C heap's free memory now and then (the trimmer started)."""
    keep_no_debug_lines()
    signal.signal(signal.SIGUSR1, lambda number, frame: reactor.callFromThread(collect))
    trimmer = HeapTrimmer(reactor)
    trimmer.start()
    return trimmer
