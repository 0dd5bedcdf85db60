"""The gateway keeps no memory for the ClassAd objects it has freed: HTCondor's debug log, until its configuration is
loaded, keeps in memory a line for every classad2 object freed (gateway.memory.keep_no_debug_lines loads it)."""

from __future__ import annotations

import subprocess
import sys

from tests.test_startup import ENV, ROOT

MEASURE = """
import ctypes, sys
import classad2
from gateway import memory

class MallInfo(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo
if sys.argv[1] == "configured":
    memory.keep_no_debug_lines()
before = libc.mallinfo2().uordblks
ad = classad2.ClassAd("[A = 1; E = A + 1]")
for _ in range(50000):
    classad2.ClassAd(), ad.lookup("E"), ad.eval("E")
print(libc.mallinfo2().uordblks - before)
"""


def kept_bytes(how: str) -> int:
    """Bytes malloc still holds after 150,000 classad2 objects were made and freed (glibc's mallinfo2)."""
    done = subprocess.run([sys.executable, "-c", MEASURE, how], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=120, check=True)
    return int(done.stdout.split()[-1])


def test_htcondors_debug_log_keeps_a_line_per_freed_classad_object_until_configured():
    assert kept_bytes("unconfigured") > 10 << 20, "classad2 no longer leaves lines behind: drop keep_no_debug_lines"
    assert kept_bytes("configured") < 1 << 20


def test_the_heap_is_given_back_when_much_of_it_is_free():
    """Every interval, a process whose C heap keeps more free memory than the threshold gives it back; one that keeps
    less does not pay for a trim."""
    from twisted.internet.task import Clock

    from gateway.memory import HeapTrimmer

    clock, free, trims = Clock(), [10.0], []

    def trim() -> bool:
        trims.append(clock.seconds())
        free[0] = 1.0
        return True

    trimmer = HeapTrimmer(clock, interval=30, above=64, heap=lambda: (100.0, free[0]), trim=trim)
    trimmer.start()
    clock.advance(30)
    assert trims == []
    free[0] = 500.0  # a large answer came and went
    clock.advance(29)
    assert trims == []
    clock.advance(1)
    assert trims == [60]
    clock.advance(30)
    assert trims == [60]
    trimmer.stop()


def test_giving_back_the_heap_returns_freed_memory_to_the_system():
    """A real malloc_trim after a large allocation is freed: the process's resident set shrinks."""
    done = subprocess.run([sys.executable, "-c", GIVE_BACK], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=120, check=True)
    before, after = map(float, done.stdout.split())
    assert after < before - 50, (before, after)


GIVE_BACK = """
import classad2
from gateway import memory
memory.keep_no_debug_lines()
keep = [classad2.ClassAd({"A": n, "B": "x" * 200}) for n in range(200000)]
small = keep[::1000]
del keep
before = memory.resident_mib()
memory.give_back()
print(before, memory.resident_mib())
"""
