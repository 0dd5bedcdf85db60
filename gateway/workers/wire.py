"""The values that cross between a worker and the core, and their encoding: msgpack, with an extension type for each
kind of value of ours, and only the classes named here.

Nothing is pickled: a class is rebuilt only when it is in :data:`CLASSES` (its fields, in order, as its constructor
takes them), an enumeration only when it is in :data:`ENUMS`, an exception only when :data:`ERRORS` says how; a
ClassAd travels as its text and is parsed again.  Anything else raises :class:`Unencodable` where it is encoded,
so a value the core starts returning is caught by the first test that crosses with it, not misread on the other
side.  An exception the core raises that is not in :data:`ERRORS` arrives as :class:`RemoteFailure` (the
front end answers it as the internal error it is).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

import classad2
import msgpack

from backends.interface import (
    BackendError,
    BackendInfo,
    BackendUnavailable,
    FileInfo,
    InvalidState,
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
from gateway.core.schedd import JobAdStructs, TemplateResult
from gateway.core.status import BirdbathError, Status, StatusCode
from gateway.core.submissions import ApiError, ApiStatus, JobFile, JobRef, SubmissionInfo, SubmissionSettings
from gateway.core.transactions import Transaction, TransactionRef
from gateway.identity.peers import PeerOwner
from gateway.identity.throttle import Throttled
from gateway.monitoring.events import RequestTally
from gateway.monitoring.processes import WorkerFigures
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


# the extension type codes: a mark opening a list that stands for a value of ours, or a value whole
_TUPLE, _OBJECT, _ENUM, _ERROR, _CLASSAD, _EXPR, _PATH, _FROZENSET = range(1, 9)

#: the classes rebuilt from their fields (dataclasses and named tuples), by name
CLASSES: dict[str, type] = {cls.__name__: cls for cls in (
    Caller, TransactionRef, Status, Attr, JobAdStruct, JobAdStructs, TemplateResult, Inserted, FileInfo, BackendInfo,
    JobRef, SubmissionInfo, JobFile, Revision, SubmissionSettings, ExpressionLimits, ClusterDescription, Submitted, AwaitedInput,
    PeerOwner, WorkerFigures, RequestTally, Buckets)}
ENUMS: dict[str, type[enum.Enum]] = {cls.__name__: cls for cls in (
    Authentication, StatusCode, AttrType, ApiStatus, Universe, JobAction, AdType, Permission)}

#: exceptions: name -> (class, its arguments from an instance, the instance from them)
ERRORS: dict[str, tuple[type[BaseException], Callable[[Any], list[Any]], Callable[..., BaseException]]] = {
    "BirdbathError": (BirdbathError, lambda e: [e.status.code, e.status.message], BirdbathError),
    "ApiError": (ApiError, lambda e: [e.code, e.text], ApiError),
    "Throttled": (Throttled, lambda e: [e.retry_after], Throttled),
    **{cls.__name__: (cls, lambda e: [str(e)], cls) for cls in (
        BackendError, UnknownJob, InvalidState, BackendUnavailable, QueryFailed, BadAttribute, NotOwner, ValueError,
        PermissionError, KeyError, RemoteFailure, SubmitDescriptionError, InputNotAwaited)},
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
_AD_MARK = msgpack.ExtType(_CLASSAD, b"")
_SOURCE_MARK = msgpack.ExtType(_EXPR, b"source")


def _default(value: Any) -> Any:
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
    if isinstance(value, classad2.ClassAd):  # with the client's expression texts it keeps, and its revision
        return [_AD_MARK, repr(value), texts_record(value), revision(value)]
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
        return _default(converted(value))
    if isinstance(value, BaseException):
        name, arguments = error_fields(value)
        return [msgpack.ExtType(_ERROR, name.encode()), *arguments]
    raise Unencodable(f"a {kind.__module__}.{kind.__qualname__} cannot cross between the gateway's processes")


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
    (_CLASSAD, b""): _Mark(lambda fields: _ad(*fields)), (_EXPR, b"source"): _Mark(lambda fields: SourceExpr(fields[0])),
    **{(_OBJECT, name.encode()): _Mark(_object(name)) for name in CLASSES},
    **{(_ENUM, name.encode()): _Mark(_member(cls)) for name, cls in ENUMS.items()},
    **{(_ERROR, name.encode()): _Mark(lambda fields, make=make: make(*fields)) for name, (_, _, make) in ERRORS.items()},
}


def _ad(text: str, texts: str | None, stamped: Revision | None) -> classad2.ClassAd:
    ad = restored(text, texts)
    return ad if stamped is None else stamp(ad, stamped.key, stamped.number)


def _ext(code: int, data: bytes) -> Any:
    if code == _EXPR and data != b"source":
        return classad2.ExprTree(data.decode("utf-8"))
    if code == _PATH:
        return PurePath(data.decode("utf-8"))
    mark = _MARKS.get((code, data))
    if mark is None:
        raise Unencodable(f"unknown extension type {code} ({data[:40]!r})")
    return mark


def _list(items: list[Any]) -> Any:
    if items and type(items[0]) is _Mark:
        return items[0].build(items[1:])
    return items


#: the packer of every message (making one costs more than packing a small message); used on the reactor only
_PACKER = msgpack.Packer(default=_default, strict_types=True, use_bin_type=True)


def encode(value: Any) -> bytes:
    """One message's value as bytes (raises Unencodable for a value of a kind not listed here)."""
    return _PACKER.pack(value)


def decode(data: bytes) -> Any:
    """The value :func:`encode` made (raises ValueError, KeyError or Unencodable on anything else)."""
    return msgpack.unpackb(data, ext_hook=_ext, list_hook=_list, raw=False, strict_map_key=False)
