"""Evaluating a client's constraint over many ads in a forked worker, as HTCondor's schedd answers queries from
forked children (``SCHEDD_QUERY_WORKERS``).

The ClassAd library holds the GIL while it evaluates, and one evaluation of a catastrophic ``regexp`` takes a tenth
of a second: in the gateway's process a few such queries would stall every other request, and no thread can be
stopped half-way.  A forked child sees the ads as they were at the fork (copy-on-write, no copying), evaluates the
constraint, and sends back the positions of the ads that match; the parent waits on a pipe, not on the GIL.  A child
that outlives the query's budget is killed, and one that crashes (a constraint too deep for its stack) takes nothing
else down: either way the query fails with :class:`~backends.interface.QueryFailed`.
"""

from __future__ import annotations

import os
import select
import signal
import struct
import time
from typing import Sequence

import classad2

from backends.interface import QueryFailed
from jobmodel.classads import matches

_INDEX = struct.Struct("=I")
#: how a child says it finished: the count of positions it sent, after them
_DONE = b"done"


def filtered(ads: list[classad2.ClassAd], constraint: classad2.ExprTree | None,
             budget: float | None) -> list[classad2.ClassAd]:
    """The ads for which ``constraint`` is true: a client's constraint (one with a ``budget``) in a forked worker,
    the gateway's own (``ClusterId == 12``) in this thread."""
    if constraint is None:
        return ads
    if budget is None:
        return [ad for ad in ads if matches(constraint, ad)]
    return [ads[position] for position in matching(ads, constraint, budget)]


def matching(ads: Sequence[classad2.ClassAd], constraint: classad2.ExprTree, budget: float) -> list[int]:
    """The positions in ``ads`` of the ads for which ``constraint`` is true, found in a forked child within
    ``budget`` seconds; raises QueryFailed when the child runs out of time or dies."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: evaluate, write, and leave without running anything of the parent's
        os.close(read_end)
        _child(ads, constraint, write_end)
    os.close(write_end)
    try:
        data = _read_all(read_end, time.monotonic() + budget, pid, budget)
    finally:
        os.close(read_end)
    return _positions(data, pid)


def _child(ads: Sequence[classad2.ClassAd], constraint: classad2.ExprTree, out: int) -> None:
    status = 1
    try:
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(number, signal.SIG_DFL)  # the parent's handlers would run its shutdown here
        signal.set_wakeup_fd(-1)  # and signals must not wake the parent's reactor
        chunk = bytearray()
        for position, ad in enumerate(ads):
            if matches(constraint, ad):
                chunk += _INDEX.pack(position)
                if len(chunk) >= 65536:
                    _write(out, bytes(chunk))
                    chunk.clear()
        _write(out, bytes(chunk) + _DONE)
        status = 0
    finally:
        os._exit(status)


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_all(fd: int, deadline: float, pid: int, budget: float) -> bytes:
    """Everything the child writes until it closes the pipe; kill it at the deadline."""
    chunks: list[bytes] = []
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(left * 1000):
            _kill(pid)
            raise QueryFailed(f"the query did not finish within its budget of {budget:g} s (max_query_seconds); "
                              f"narrow the constraint")
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


def _positions(data: bytes, pid: int) -> list[int]:
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) or not data.endswith(_DONE):
        how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit status {os.WEXITSTATUS(status)}"
        raise QueryFailed(f"the constraint could not be evaluated: its query worker died ({how})")
    body = data[:-len(_DONE)]
    return [position for (position,) in _INDEX.iter_unpack(body)]
