"""The values that cross between a worker and the core, and their encoding: msgpack, with an extension type for each
kind of value of ours, and only the classes named here.

Nothing is pickled: a class is rebuilt only when it is in :data:`CLASSES` (its fields, in order, as its constructor
takes them), an enumeration only when it is in :data:`ENUMS`, an exception only when :data:`ERRORS` says how; a
ClassAd travels as its text and is parsed again.  Anything else raises :class:`Unencodable` where it is encoded,
so a value the core starts returning is caught by the first test that crosses with it, not misread on the other
side.  An exception the core raises that is not in :data:`ERRORS` arrives as :class:`RemoteFailure` (the
front end answers it as the internal error it is).

A job ad stamped with its revision (``backends.interface.Revision``: one number is one content of that job's ad)
crosses whole once, then as a reference for as long as the job keeps that revision, as HPACK's dynamic table does
for headers: the ``repr`` of an ad (in the core) and its parsing (in a worker) cost more than anything else of a
getJobAd or of a getJobAds poll of an unchanged queue.  Each end of a link has one :class:`Codec`, which holds the
table of the ads it sent and the one of the ads it received (see there).
"""

from __future__ import annotations

import dataclasses
import enum
from collections import OrderedDict
from collections.abc import Callable
from pathlib import PurePath
from typing import Any, TypeVar

import classad2
import msgpack

from backends.interface import (
    ActionChange,
    AttributeChange,
    BackendError,
    BackendInfo,
    BackendUnavailable,
    FileInfo,
    InvalidState,
    JobKey,
    QueryFailed,
    Revision,
    UnknownJob,
    revision,
    stamp,
)
from gateway.core.adstruct import Attr, AttrType, BadAttribute, JobAdStruct
from gateway.core.auth import Authentication, Caller, NotOwner, Permission
from gateway.core.collector import Inserted
from gateway.core.described import AwaitedInput, InputNotAwaited, Submitted
from gateway.core.schedd import JobAdStructs, TemplateResult, ViewAnswer
from gateway.core.status import BirdbathError, Status, StatusCode
from gateway.core.submissions import ApiError, ApiStatus, JobFile, JobRef, SubmissionInfo, SubmissionSettings
from gateway.core.transactions import (
    AdRules,
    Committed,
    InputFile,
    NewCluster,
    Transaction,
    TransactionRef,
    WholeTransaction,
)
from gateway.identity.peers import PeerOwner
from gateway.identity.throttle import Throttled
from gateway.monitoring.events import RequestTally
from gateway.monitoring.processes import WorkerFigures
from jobmodel.dagman import DagDescription
from jobmodel.expressions import ExpressionLimits
from jobmodel.exprtext import SourceExpr, restored, texts_record
from jobmodel.figures import Buckets
from jobmodel.jobs import JobAction, Universe
from jobmodel.pool import AdType
from jobmodel.submitfile import ClusterDescription, SubmitDescriptionError


class Unencodable(TypeError):
    """A value of a kind that may not cross between the processes."""


class RemoteFailure(RuntimeError):
    """An exception raised in the core of a kind the front ends do not handle: its type and text."""


class MessageTooLarge(ValueError):
    """A message larger than the link carries (``link.MAX_MESSAGE``): not sent, the call it answers fails with this."""


class UnknownAd(ValueError):
    """A reference to a job ad the receiving end does not hold (at that revision): the two ends' tables differ,
    which the protocol never lets happen, so the message cannot be read and the link is closed."""


#: the job ads each end of a link remembers per direction (both ends the same number: see :class:`Codec`).  It bounds
#: what a worker holds: a parsed job ad takes some 6 to 13 KB (~9 KB measured for a fresh job template's 66
#: attributes, ~13 KB with 40 more), so a full table is ~60-130 MB of a worker, and two workers' tables stay well
#: within the core's own size at 100,000 queued jobs (~760 MB).  It covers what polling monitors ask for again and
#: again (a cluster, an owner's or a state's jobs, a 1 % constraint over a large queue); a queue polled whole beyond
#: that many jobs evicts each ad before it is asked for again, and crosses whole, as without the table.  The core's
#: table of sent ads is ~150 bytes an entry.
AD_TABLE_CAPACITY = 10_000


# the extension type codes: a mark opening a list that stands for a value of ours, or a value whole
_TUPLE, _OBJECT, _ENUM, _ERROR, _CLASSAD, _EXPR, _PATH, _FROZENSET, _CLASSAD_REF = range(1, 10)

#: the classes rebuilt from their fields (dataclasses and named tuples), by name
CLASSES: dict[str, type] = {cls.__name__: cls for cls in (
    Caller, TransactionRef, Status, Attr, JobAdStruct, JobAdStructs, TemplateResult, Inserted, FileInfo, BackendInfo,
    JobRef, SubmissionInfo, JobFile, Revision, SubmissionSettings, ExpressionLimits, ClusterDescription, Submitted, AwaitedInput,
    PeerOwner, WorkerFigures, RequestTally, Buckets, ViewAnswer, WholeTransaction, NewCluster, InputFile,
    DagDescription, Committed, AttributeChange, ActionChange)}
ENUMS: dict[str, type[enum.Enum]] = {cls.__name__: cls for cls in (
    Authentication, StatusCode, AttrType, ApiStatus, Universe, JobAction, AdType, Permission, AdRules)}

#: exceptions: name -> (class, its arguments from an instance, the instance from them)
ERRORS: dict[str, tuple[type[BaseException], Callable[[Any], list[Any]], Callable[..., BaseException]]] = {
    "BirdbathError": (BirdbathError, lambda e: [e.status.code, e.status.message], BirdbathError),
    "ApiError": (ApiError, lambda e: [e.code, e.text], ApiError),
    "Throttled": (Throttled, lambda e: [e.retry_after], Throttled),
    **{cls.__name__: (cls, lambda e: [str(e)], cls) for cls in (
        BackendError, UnknownJob, InvalidState, BackendUnavailable, QueryFailed, BadAttribute, NotOwner, ValueError,
        PermissionError, KeyError, RemoteFailure, SubmitDescriptionError, InputNotAwaited, MessageTooLarge)},
}
_ERROR_NAMES = {cls: name for name, (cls, _, _) in ERRORS.items()}


def _transaction(txn: Transaction) -> TransactionRef:
    """A transaction crosses as what a client sees of it: its id and duration (its state stays in the core)."""
    return TransactionRef(txn.id, txn.duration)


#: classes that cross as another: the core's object -> what the front end gets (its fields read the same way)
_AS: dict[type, Callable[[Any], Any]] = {Transaction: _transaction}

# A value of ours is written as a list whose first member is its mark (an extension value naming its kind and class),
# the rest its fields: msgpack packs the fields itself, calling _default again for those of ours, so that a message
# is packed in one pass; reading, the list hook rebuilds each such list, innermost first.
_TUPLE_MARK = msgpack.ExtType(_TUPLE, b"")
#: each class: its mark and its fields as its constructor takes them (None: a named tuple, its members in order)
_CLASS_MARKS: dict[type, tuple[msgpack.ExtType, tuple[str, ...] | None]] = {
    cls: (msgpack.ExtType(_OBJECT, name.encode()),
          tuple(f.name for f in dataclasses.fields(cls) if f.init) if dataclasses.is_dataclass(cls) else None)
    for name, cls in CLASSES.items()}
_ENUM_MARKS = {cls: msgpack.ExtType(_ENUM, name.encode()) for name, cls in ENUMS.items()}
_AD_MARK = msgpack.ExtType(_CLASSAD, b"")  # [_AD_MARK, text, texts record, revision or None]
_AD_REF_MARK = msgpack.ExtType(_CLASSAD_REF, b"")  # [_AD_REF_MARK, cluster, proc, revision number]
_SOURCE_MARK = msgpack.ExtType(_EXPR, b"source")


def error_fields(error: BaseException) -> tuple[str, list[Any]]:
    """An exception as its name and arguments; one of a kind not in :data:`ERRORS` as a RemoteFailure naming it."""
    name = _ERROR_NAMES.get(type(error))
    if name is not None:
        return name, ERRORS[name][1](error)
    return "RemoteFailure", [f"{type(error).__name__}: {error}"]


class _Mark:
    """A mark read back: what the rest of its list is."""

    __slots__ = ("build",)

    def __init__(self, build: Callable[[list[Any]], Any]) -> None:
        self.build = build


def _member(cls: type[enum.Enum]) -> Callable[[list[Any]], enum.Enum]:
    """An enumeration's member from its value (a look-up, cheaper than calling the class; KeyError for another)."""
    members = {member.value: member for member in cls.__members__.values()}
    return lambda fields: members[fields[0]]


def _object(name: str) -> Callable[[list[Any]], Any]:
    cls = CLASSES[name]
    return lambda fields: cls(*fields)


_MARKS: dict[tuple[int, bytes], _Mark] = {
    (_TUPLE, b""): _Mark(tuple), (_FROZENSET, b""): _Mark(frozenset),
    (_EXPR, b"source"): _Mark(lambda fields: SourceExpr(fields[0])),
    **{(_OBJECT, name.encode()): _Mark(_object(name)) for name in CLASSES},
    **{(_ENUM, name.encode()): _Mark(_member(cls)) for name, cls in ENUMS.items()},
    **{(_ERROR, name.encode()): _Mark(lambda fields, make=make: make(*fields)) for name, (_, _, make) in ERRORS.items()},
}


def _list(items: list[Any]) -> Any:
    if items and type(items[0]) is _Mark:
        return items[0].build(items[1:])
    return items


_V = TypeVar("_V")


class AdTable(OrderedDict[JobKey, _V]):
    """Job key -> what one end keeps of that job's ad, at most ``capacity`` entries, the least recently used first
    out.  Both ends of a direction make the same calls in the same order, so their tables hold the same keys."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity

    def put(self, key: JobKey, value: _V) -> None:
        """Enter or replace ``key``'s entry as the most recently used; the least recently used goes beyond capacity."""
        self[key] = value
        self.move_to_end(key)
        if len(self) > self.capacity:
            self.popitem(last=False)

    def use(self, key: JobKey) -> _V:
        """``key``'s entry, now the most recently used (KeyError when absent)."""
        self.move_to_end(key)
        return self[key]


class Codec:
    """One end of a link's encoding: what it sends (:meth:`encode`) and what it hears (:meth:`decode`), with a table
    of the job ads it sent (job key -> the revision number sent whole) and one of those it received (job key -> the
    ClassAd decoded, stamped), for one message after the other on an ordered link.

    An ad with a revision whose job is in the sent table at that number crosses as a reference (its key and number),
    any other stamped ad whole, entering the table; an ad without a revision always whole and never kept.  Sent whole
    or by reference, the job's entry becomes the most recently used, in the table of sent ads as the message is
    packed and in the other end's table of received ads as it is read, in the same order (ads are never nested in
    ads, so the packer's order is the reader's): the two tables hold the same jobs at the same numbers, and a
    reference reads back, without parsing, the very ClassAd object read earlier.  Those objects are shared between
    the answers that hold them, as a backend's own ads are between its readers: nothing changes an ad it was
    answered (a change is a new ad with a new revision).

    A message that fails to encode half-way (:class:`Unencodable`, or msgpack's own errors) is not sent, but some of
    its ads may already have changed the sent table.  Undoing that exactly is not cheap (a move to the end of an
    ordered table cannot be undone in place), and staging the changes until the message is packed would have to
    foresee which entries the message's own ads evict; such a failure is a bug of ours, met once in a while at most.
    So the table of sent ads is then emptied, and the link tells the other end to empty its table of received ads
    (``FORGET``, sent before anything else): from there both start again empty, and the next ads cross whole.
    """

    def __init__(self, capacity: int = AD_TABLE_CAPACITY) -> None:
        self.sent: AdTable[int] = AdTable(capacity)
        self.received: AdTable[classad2.ClassAd] = AdTable(capacity)
        # one packer for every message (making one costs more than packing a small message); used on the reactor
        self._packer = msgpack.Packer(default=self._default, strict_types=True, use_bin_type=True)
        self._marks = {**_MARKS, (_CLASSAD, b""): _Mark(self._whole_ad), (_CLASSAD_REF, b""): _Mark(self._known_ad)}

    def encode(self, value: Any) -> bytes:
        """One message's value as bytes.  Raises Unencodable for a value of a kind not listed here (msgpack's errors
        for one it refuses): the table of sent ads is then empty, and the other end must empty its table of received
        ads before it reads anything more from this end (see the class)."""
        try:
            return self._packer.pack(value)
        except Exception:
            self.sent.clear()
            raise

    def held(self, key: JobKey) -> classad2.ClassAd | None:
        """The job's ad this end last received, stamped, for a read of this process's own: the table's order is
        left as it is (only the link's messages move it, the same way at both ends)."""
        return self.received.get(key)

    def unsent(self) -> None:
        """The message just encoded is not sent after all (the link refused its size): its ads entered the table of
        sent ones, so the table is emptied, as for a message that failed to encode (the link sends FORGET)."""
        self.sent.clear()

    def forget(self) -> None:
        """The other end emptied its table of sent ads (a message failed to encode there): empty ours of received
        ones, before reading what it sent after."""
        self.received.clear()

    def decode(self, data: bytes | memoryview) -> Any:
        """The value the other end's :meth:`encode` made (raises ValueError, KeyError or Unencodable on anything
        else; :class:`UnknownAd`, a ValueError, for a reference to an ad this end does not hold)."""
        return msgpack.unpackb(data, ext_hook=self._ext, list_hook=_list, raw=False, strict_map_key=False)

    def _default(self, value: Any) -> Any:
        kind = type(value)
        if kind is tuple:
            return [_TUPLE_MARK, *value]
        marked = _CLASS_MARKS.get(kind)
        if marked is not None:
            mark, names = marked
            return [mark, *value] if names is None else [mark, *[getattr(value, name) for name in names]]
        mark = _ENUM_MARKS.get(kind)
        if mark is not None:
            return [mark, value.value]
        if isinstance(value, classad2.ClassAd):
            return self._ad_fields(value)
        if isinstance(value, SourceExpr):
            return [_SOURCE_MARK, value.text]
        if isinstance(value, classad2.ExprTree):
            return msgpack.ExtType(_EXPR, str(value).encode("utf-8"))
        if isinstance(value, PurePath):
            return msgpack.ExtType(_PATH, str(value).encode("utf-8"))
        if kind is frozenset or kind is set:
            return [msgpack.ExtType(_FROZENSET, b""), *value]
        converted = _AS.get(kind)
        if converted is not None:
            return self._default(converted(value))
        if isinstance(value, BaseException):
            name, arguments = error_fields(value)
            return [msgpack.ExtType(_ERROR, name.encode()), *arguments]
        raise Unencodable(f"a {kind.__module__}.{kind.__qualname__} cannot cross between the gateway's processes")

    def _ad_fields(self, ad: classad2.ClassAd) -> list[Any]:
        """An ad as a reference when the other end holds it at its revision, else whole (with the client's
        expression texts it keeps, and its revision), entering the table of sent ads when it has a revision."""
        stamped = revision(ad)
        if stamped is not None:
            key, number = stamped
            if self.sent.get(key) == number:
                self.sent.use(key)
                return [_AD_REF_MARK, *key, number]
            self.sent.put(key, number)
        return [_AD_MARK, repr(ad), texts_record(ad), stamped]

    def _whole_ad(self, fields: list[Any]) -> classad2.ClassAd:
        text, texts, stamped = fields
        ad = restored(text, texts)
        if stamped is not None:
            self.received.put(stamped.key, stamp(ad, stamped.key, stamped.number))
        return ad

    def _known_ad(self, fields: list[Any]) -> classad2.ClassAd:
        *key_fields, number = fields
        key = tuple(key_fields)
        ad = self.received.get(key)
        held = None if ad is None else revision(ad)
        if held is None or held.number != number:
            raise UnknownAd(f"a reference to the ad of job {key} at revision {number}, which this end does not hold"
                            f" ({'none' if held is None else f'it holds revision {held.number}'})")
        self.received.use(key)
        return ad

    def _ext(self, code: int, data: bytes) -> Any:
        if code == _EXPR and data != b"source":
            return classad2.ExprTree(data.decode("utf-8"))
        if code == _PATH:
            return PurePath(data.decode("utf-8"))
        mark = self._marks.get((code, data))
        if mark is None:
            raise Unencodable(f"unknown extension type {code} ({data[:40]!r})")
        return mark
