"""The backend's change number as the core publishes it to its workers (``gateway/workers/changenumber.py``): a
page of shared memory, written by the core, read by another process through the descriptor it was started with,
and read-only there."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gateway.workers.changenumber import PublishedNumber

READER = """
import sys
from gateway.workers.changenumber import PublishedNumber
number = PublishedNumber.attach(int(sys.argv[1]))
print(number.value, flush=True)
sys.stdin.readline()
print(number.value, flush=True)
try:
    number.publish(1)
except TypeError:
    print("read-only", flush=True)
"""


def test_another_process_reads_each_number_the_core_publishes_and_cannot_write_it():
    published = PublishedNumber.create()
    published.publish(41)
    reader = subprocess.Popen([sys.executable, "-c", READER, str(published.descriptor)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, pass_fds=(published.descriptor,))
    try:
        assert reader.stdout.readline().strip() == "41"
        published.publish(2 ** 40 + 7)  # (beyond 32 bits: one 64-bit word)
        reader.stdin.write("\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == str(2 ** 40 + 7)
        assert reader.stdout.readline().strip() == "read-only"
    finally:
        reader.stdin.close()
        assert reader.wait(timeout=30) == 0
    assert published.value == 2 ** 40 + 7


def test_a_descriptor_that_is_not_a_page_is_refused():
    read, write = os.pipe()
    os.close(write)
    with pytest.raises((OSError, ValueError)):
        PublishedNumber.attach(read)
    with pytest.raises(OSError):  # (attach closed it either way)
        os.fstat(read)
