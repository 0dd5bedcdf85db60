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
    UnknownJob,
)
from gateway.core.adstruct import Attr, AttrType, BadAttribute, JobAdStruct
from gateway.core.auth import Authentication, Caller, NotOwner
from gateway.core.collector import Inserted
from gateway.core.schedd import JobAdStructs, TemplateResult
from gateway.core.status import BirdbathError, Status, StatusCode
from gateway.core.submissions import ApiError, ApiStatus, JobFile, JobRef, SubmissionInfo, SubmissionSettings
from gateway.core.transactions import Transaction, TransactionRef
from jobmodel.expressions import ExpressionLimits
from jobmodel.jobs import JobAction, Universe
from jobmodel.pool import AdType


class Unencodable(TypeError):
    """A value of a kind that may not cross between the processes."""


class RemoteFailure(RuntimeError):
    """An exception raised in the core of a kind the front ends do not handle: its type and text."""


# the extension type codes
_TUPLE, _OBJECT, _ENUM, _CLASSAD, _ERROR, _PATH, _FROZENSET, _EXPR = range(1, 9)

#: the classes rebuilt from their fields (dataclasses and named tuples), by name
CLASSES: dict[str, type] = {cls.__name__: cls for cls in (
    Caller, TransactionRef, Status, Attr, JobAdStruct, JobAdStructs, TemplateResult, Inserted, FileInfo, BackendInfo, JobRef,
    SubmissionInfo, JobFile, SubmissionSettings, ExpressionLimits)}
ENUMS: dict[str, type[enum.Enum]] = {cls.__name__: cls for cls in (
    Authentication, StatusCode, AttrType, ApiStatus, Universe, JobAction, AdType)}

#: exceptions: name -> (class, its arguments from an instance, the instance from them)
ERRORS: dict[str, tuple[type[BaseException], Callable[[Any], list[Any]], Callable[..., BaseException]]] = {
    "BirdbathError": (BirdbathError, lambda e: [e.status.code, e.status.message], BirdbathError),
    "ApiError": (ApiError, lambda e: [e.code, e.text], ApiError),
    **{cls.__name__: (cls, lambda e: [str(e)], cls) for cls in (
        BackendError, UnknownJob, InvalidState, BackendUnavailable, QueryFailed, BadAttribute, NotOwner, ValueError,
        PermissionError, KeyError, RemoteFailure)},
}
_ERROR_NAMES = {cls: name for name, (cls, _, _) in ERRORS.items()}


def _transaction(txn: Transaction) -> TransactionRef:
    """A transaction crosses as what a client sees of it: its id and duration (its state stays in the core)."""
    return TransactionRef(txn.id, txn.duration)


#: classes that cross as another: the core's object -> what the front end gets (its fields read the same way)
_AS: dict[type, Callable[[Any], Any]] = {Transaction: _transaction}


def _default(value: Any) -> msgpack.ExtType:
    kind = type(value)
    if kind is tuple:
        return msgpack.ExtType(_TUPLE, _pack(list(value)))
    name = kind.__name__
    if isinstance(value, enum.Enum) and ENUMS.get(name) is kind:
        return msgpack.ExtType(_ENUM, _pack([name, value.value]))
    if CLASSES.get(name) is kind:
        fields = ([getattr(value, f.name) for f in dataclasses.fields(value) if f.init]
                  if dataclasses.is_dataclass(value) else list(value))
        return msgpack.ExtType(_OBJECT, _pack([name, fields]))
    if isinstance(value, classad2.ClassAd):
        return msgpack.ExtType(_CLASSAD, repr(value).encode("utf-8"))
    if isinstance(value, classad2.ExprTree):
        return msgpack.ExtType(_EXPR, str(value).encode("utf-8"))
    if isinstance(value, PurePath):
        return msgpack.ExtType(_PATH, str(value).encode("utf-8"))
    if kind is frozenset or kind is set:
        return msgpack.ExtType(_FROZENSET, _pack(list(value)))
    converted = _AS.get(kind)
    if converted is not None:
        return _default(converted(value))
    if isinstance(value, BaseException):
        return msgpack.ExtType(_ERROR, _pack(error_fields(value)))
    raise Unencodable(f"a {kind.__module__}.{kind.__qualname__} cannot cross between the gateway's processes")


def error_fields(error: BaseException) -> list[Any]:
    """An exception as [name, arguments]; one of a kind not in :data:`ERRORS` as a RemoteFailure naming it."""
    for cls in type(error).__mro__:
        name = _ERROR_NAMES.get(cls)  # type: ignore[call-overload]
        if name is not None and cls is type(error):
            return [name, ERRORS[name][1](error)]
    return ["RemoteFailure", [f"{type(error).__name__}: {error}"]]


def _ext(code: int, data: bytes) -> Any:
    if code == _TUPLE:
        return tuple(_unpack(data))
    if code == _OBJECT:
        name, fields = _unpack(data)
        return CLASSES[name](*fields)
    if code == _ENUM:
        name, value = _unpack(data)
        return ENUMS[name](value)
    if code == _CLASSAD:
        return classad2.ClassAd(data.decode("utf-8"))
    if code == _EXPR:
        return classad2.ExprTree(data.decode("utf-8"))
    if code == _PATH:
        return PurePath(data.decode("utf-8"))
    if code == _FROZENSET:
        return frozenset(_unpack(data))
    if code == _ERROR:
        name, arguments = _unpack(data)
        return ERRORS[name][2](*arguments)
    raise Unencodable(f"unknown extension type {code}")


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, default=_default, strict_types=True, use_bin_type=True)


def _unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=_ext, raw=False, strict_map_key=False)


def encode(value: Any) -> bytes:
    """One message's value as bytes (raises Unencodable for a value of a kind not listed here)."""
    return _pack(value)


def decode(data: bytes) -> Any:
    """The value :func:`encode` made (raises ValueError, KeyError or Unencodable on anything else)."""
    return _unpack(data)
