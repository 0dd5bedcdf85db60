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
