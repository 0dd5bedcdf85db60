"""Evaluating a client's constraint over many ads in a forked worker, as HTCondor's schedd answers queries from
forked children (``SCHEDD_QUERY_WORKERS``).

The ClassAd library holds the GIL while it evaluates, and one evaluation of a catastrophic ``regexp`` takes a tenth
of a second: in the gateway's process a few such queries would stall every other request, and no thread can be
stopped half-way.  A forked child sees the ads as they were at the fork (copy-on-write, no copying), evaluates the
constraint, and sends back the positions of the ads that match; the parent waits on a pipe, not on the GIL.  A child
that outlives the query's budget is killed, and one that crashes (a constraint too deep for its stack) takes nothing
else down: either way the query fails with :class:`~backends.interface.QueryFailed`.

A fork is not free (a few milliseconds of the whole process's time for a gateway of 100 MB, and as much again in
copy-on-write faults after it), and most clients ask something cheap: ``ClusterId == 12 && JobStatus == 2``.  A
constraint that calls no function and reads only attributes whose values the schedd itself sets as literals
(:data:`SCHEDD_LITERALS`) costs microseconds per ad and cannot recurse: it is evaluated in the query's own thread, a
batch of ads at a time, with its budget checked between batches.
"""

from __future__ import annotations

import itertools
import os
import re
import select
import signal
import struct
import time
from typing import Iterable, Sequence

import classad2

from backends.interface import QueryFailed
from jobmodel.classads import matches

#: attributes whose value in a job ad is always a literal the schedd sets itself (ids, owner, state, times): a
#: reference to one cannot lead into an expression a client wrote
SCHEDD_LITERALS = frozenset({"clusterid", "procid", "jobstatus", "owner", "user", "qdate", "enteredcurrentstatus",
                             "globaljobid"})
#: the longest constraint evaluated in the query's thread (the cost of one evaluation grows with its length)
SIMPLE_LENGTH = 512
#: ads evaluated in the query's thread between two checks of its budget
BATCH = 256
#: the tokens of a simple constraint: blanks, quoted strings, names (MY. allowed), decimal numbers, operators and
#: round brackets; no lists, records or ternaries
_SIMPLE_TOKEN = re.compile(r"""\s+|"(?:[^"\\]|\\.)*"|(?:MY\.)?[A-Za-z_][A-Za-z0-9_]*"""
                           r"""|[0-9]+(?:\.[0-9]+)?(?:E[-+]?[0-9]+)?|=\?=|=!=|==|!=|<=|>=|&&|\|\||[-+*/%<>!()]""",
                           re.IGNORECASE)
#: the names a simple constraint may use
_SIMPLE_NAMES = SCHEDD_LITERALS | {"true", "false", "undefined", "error", "is", "isnt"}

_INDEX = struct.Struct("=I")
#: what a child writes after the last position: without it, the child did not finish (it died or was killed)
_DONE = b"done"


def filtered(ads: Iterable[classad2.ClassAd], constraint: classad2.ExprTree | None,
             budget: float | None) -> list[classad2.ClassAd]:
    """The ads for which ``constraint`` is true.  The gateway's own constraints (no ``budget``) are evaluated in this
    thread; a client's (with a ``budget``) here in batches when it is simple (:func:`is_simple`), else in a forked
    worker."""
    if constraint is None:
        return list(ads)
    if budget is None:
        return [ad for ad in ads if matches(constraint, ad)]
    if is_simple(constraint):
        return in_batches(ads, constraint, budget)
    ads = list(ads)  # (the worker answers with positions)
    return [ads[position] for position in matching(ads, constraint, budget)]


def is_simple(constraint: classad2.ExprTree) -> bool:
    """Whether ``constraint`` can be evaluated here: short, no function calls, lists or records, and no attribute but
    :data:`SCHEDD_LITERALS` (so nothing a client wrote into an ad is evaluated on the way)."""
    text = str(constraint)
    if len(text) > SIMPLE_LENGTH:
        return False
    position, after_name = 0, False
    for token in _SIMPLE_TOKEN.finditer(text):
        if token.start() != position:
            return False  # a character no simple constraint has
        position = token.end()
        word = token.group()
        if word.isspace():
            continue
        if word == "(" and after_name:
            return False  # a function call
        after_name = word[0].isalpha() or word[0] == "_"
        if after_name and word.lower().removeprefix("my.") not in _SIMPLE_NAMES:
            return False
    return position == len(text)


def in_batches(ads: Iterable[classad2.ClassAd], constraint: classad2.ExprTree,
               budget: float) -> list[classad2.ClassAd]:
    """The ads for which a simple constraint is true, evaluated here, :data:`BATCH` ads between checks of the
    budget (read as they come: the queue is never copied whole)."""
    deadline = time.monotonic() + budget
    found: list[classad2.ClassAd] = []
    remaining = iter(ads)
    batch = list(itertools.islice(remaining, BATCH))
    while batch:
        found += [ad for ad in batch if matches(constraint, ad)]
        batch = list(itertools.islice(remaining, BATCH))
        if batch and time.monotonic() > deadline:
            raise over_budget(budget)
    return found


def over_budget(budget: float) -> QueryFailed:
    return QueryFailed(f"the query did not finish within its budget of {budget:g} s (max_query_seconds); "
                       f"narrow the constraint")


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
            raise over_budget(budget)
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
