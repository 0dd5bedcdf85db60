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

Such a constraint's value for a job depends on nothing but the values of the literals it reads, and a queue has far
fewer distinct values than jobs (ten jobs share a cluster, thousands an owner or a state).  Jobs kept grouped by
the value of one literal (:class:`~backends.literals.LiteralIndex`: the local store's, and a worker's view of the
jobs) let a constraint reading only that literal be evaluated once per value (:func:`true_values`), by classad2 as
always, on an ad holding that value alone: polling monitors (``Owner == "alice"``, ``ClusterId == 12``,
``JobStatus == 2``) then cost the gateway work in proportion to the values, not to the queue.
"""

from __future__ import annotations

import itertools
import os
import re
import select
import signal
import struct
import time
from typing import Any, Hashable, Iterable, Sequence, TypeVar

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
    return literals_read(constraint) is not None


def literals_read(constraint: classad2.ExprTree) -> frozenset[str] | None:
    """The :data:`SCHEDD_LITERALS` (lower case) a simple constraint reads; None for one that is not simple."""
    text = str(constraint)
    if len(text) > SIMPLE_LENGTH:
        return None
    position, after_name = 0, False
    names: set[str] = set()
    for token in _SIMPLE_TOKEN.finditer(text):
        if token.start() != position:
            return None  # a character no simple constraint has
        position = token.end()
        word = token.group()
        if word.isspace():
            continue
        if word == "(" and after_name:
            return None  # a function call
        after_name = word[0].isalpha() or word[0] == "_"
        if after_name:
            name = word.lower().removeprefix("my.")
            if name not in _SIMPLE_NAMES:
                return None
            if name in SCHEDD_LITERALS:
                names.add(name)
    return frozenset(names) if position == len(text) else None


#: a job that has no value for the literal: evaluated as an ad without the attribute (undefined, as in the job's)
MISSING = object()


def true_values(constraint: classad2.ExprTree, name: str, values: Iterable[tuple[Hashable, Any]],
                budget: float | None) -> list[Hashable]:
    """The keys of the ``(key, value)`` pairs whose value of attribute ``name`` (a Python literal, or
    :data:`MISSING`) makes ``constraint`` true, ``constraint`` being a simple one that reads ``name`` alone
    (:func:`literals_read`): evaluated by classad2 on one ad holding only that value, so a job with the value gets
    the answer its own ad would give.  The budget is checked between batches, as :func:`in_batches` does."""
    deadline = None if budget is None else time.monotonic() + budget
    alone = classad2.ClassAd()
    found: list[Hashable] = []
    for count, (key, value) in enumerate(values, 1):
        if value is MISSING:
            if name in alone:
                del alone[name]
        else:
            alone[name] = value
        if matches(constraint, alone):
            found.append(key)
        if deadline is not None and count % BATCH == 0 and time.monotonic() > deadline:
            raise over_budget(budget)
    return found


def in_batches(ads: Iterable[classad2.ClassAd], constraint: classad2.ExprTree,
               budget: float) -> list[classad2.ClassAd]:
    """The ads for which a simple constraint is true, evaluated here, :data:`BATCH` ads between checks of the
    budget (read as they come: the queue is never copied whole)."""
    return true_keys(((ad, ad) for ad in ads), constraint, budget)


_K = TypeVar("_K")


def true_keys(pairs: Iterable[tuple[_K, classad2.ClassAd]], constraint: classad2.ExprTree,
              budget: float) -> list[_K]:
    """The keys of the ``(key, ad)`` pairs whose ad a simple constraint is true for, as :func:`in_batches`
    evaluates them (a worker's view of the jobs keeps them by job key)."""
    deadline = time.monotonic() + budget
    found: list[_K] = []
    remaining = iter(pairs)
    batch = list(itertools.islice(remaining, BATCH))
    while batch:
        found += [key for key, ad in batch if matches(constraint, ad)]
        batch = list(itertools.islice(remaining, BATCH))
        if batch and time.monotonic() > deadline:
            raise over_budget(budget)
    return found


#: the literals a worker process's view of a job holds (``gateway/workers/jobview.py``), in the order they cross
VIEW_LITERALS = tuple(sorted(SCHEDD_LITERALS))
#: the Python types classad2 gives ClassAd literals (anything else an ad holds in a literal's place, an expression a
#: client set or a list, is evaluated on its job's own ad: a view crosses it as its expression, the groups by value
#: of ``backends.literals`` keep it apart)
LITERAL_TYPES = (bool, int, float, str)


def literal_values(ad: classad2.ClassAd) -> list[Any]:
    """A job's :data:`VIEW_LITERALS`, in order: each a literal, None when the ad has no such attribute, or the
    expression the ad holds in its place."""
    values: list[Any] = []
    for name in VIEW_LITERALS:
        value = ad.get(name)
        if value is not None and type(value) not in LITERAL_TYPES:
            value = ad.lookup(name)
        values.append(value)
    return values


def literals_ad(values: Sequence[Any]) -> classad2.ClassAd | None:
    """The ad a view holds for a job whose :func:`literal_values` these are: a simple constraint evaluates on it as
    on the job's whole ad (it reads nothing else).  None when one of them is not a literal: such a job is evaluated
    on its own ad only."""
    ad = classad2.ClassAd()
    for name, value in zip(VIEW_LITERALS, values):
        if value is None:
            continue
        if type(value) not in LITERAL_TYPES:
            return None
        ad[name] = value
    return ad


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
