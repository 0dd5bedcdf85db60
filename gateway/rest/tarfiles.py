"""Tar archives in and out of a job's spool: the input a client uploads, checked before any of it is used, and the
output written as a tar stream one piece at a time.

An uploaded archive may hold only regular files with plain names (a leading ``./`` is allowed, and the ``.``
directory entry is skipped): a link of any kind, a device, a directory, an absolute path or one with ``..`` is
refused, as is an archive whose files add up to more than the gateway takes in one request (max_request_bytes).
Plain and gzip-compressed archives are read.

An upload is checked and read on a thread pool (:func:`checked_upload`, :func:`uploaded_files`; the gateway's is the
reactor's), never on the reactor itself: a large or compressed upload takes a while to read, and every other client waits meanwhile
when the reactor does it.
"""

from __future__ import annotations

import tarfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any, TypeVar

from jobmodel.files import transfer_name_problem

from .problems import Problem

BLOCK = tarfile.BLOCKSIZE
CHUNK = 1 << 20  # bytes sent to the spool, or read from it, at a time

T = TypeVar("T")
#: runs a blocking call on a thread off the reactor: offload(function, *args) is awaited for its result
Offload = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class Member:
    name: str
    size: int


def checked_members(stream: IO[bytes], limit: int) -> list[Member]:
    """The files an uploaded archive holds, read from its headers; a problem for anything that is not a plain file
    with a plain name, or for more than ``limit`` bytes of files in all."""
    members, total = [], 0
    try:
        with tarfile.open(fileobj=stream, mode="r|*") as archive:
            for info in archive:
                name = _name(info)
                if name is None:
                    continue
                total += info.size
                if total > limit:
                    raise Problem(413, f"the archive's files hold more than the gateway's limit of {limit} bytes "
                                       f"(max_request_bytes)")
                if any(member.name == name for member in members):
                    raise Problem(400, f"the archive holds {name!r} twice")
                members.append(Member(name, info.size))
    except tarfile.TarError as exc:
        raise Problem(400, f"the body is not a tar archive (plain or gzip): {exc}") from None
    except EOFError:
        raise Problem(400, "the tar archive is cut short") from None
    return members


def _name(info: tarfile.TarInfo) -> str | None:
    """A member's file name in the spool (None: the ``.`` directory, skipped), or a problem."""
    raw = info.name
    name = raw.removeprefix("./")
    if info.isdir() and name.strip("/") in ("", "."):
        return None
    if raw.startswith("/") or ".." in raw.split("/"):
        raise Problem(400, f"the archive's member {raw!r} is not a plain file name (absolute or with ..)")
    if info.issym() or info.islnk():
        raise Problem(400, f"the archive's member {raw!r} is a link: only regular files are taken")
    if not info.isfile():
        raise Problem(400, f"the archive's member {raw!r} is not a regular file (a job's spool holds only files)")
    problem = transfer_name_problem(name)
    if problem is not None:
        raise Problem(400, f"the archive's member {raw!r}: {problem}")
    return name


def file_chunks(stream: IO[bytes]) -> Iterator[tuple[Member, Iterator[bytes]]]:
    """Each file of an archive :func:`checked_members` accepted, with its bytes a chunk at a time (read the chunks
    of one file before asking for the next)."""
    with tarfile.open(fileobj=stream, mode="r|*") as archive:
        for info in archive:
            if not info.isfile():
                continue
            source = archive.extractfile(info)
            assert source is not None
            name = info.name.removeprefix("./")
            yield Member(name, info.size), iter(lambda source=source: source.read(CHUNK), b"")


async def checked_upload(offload: Offload, stream: IO[bytes], limit: int) -> list[Member]:
    """:func:`checked_members` of an uploaded archive, read from its start off the reactor."""
    stream.seek(0)
    members: list[Member] = await offload(checked_members, stream, limit)
    return members


async def uploaded_files(offload: Offload, stream: IO[bytes]) -> AsyncIterator[tuple[Member, AsyncIterator[bytes]]]:
    """:func:`file_chunks` of an uploaded (checked) archive from its start, each header and chunk read off the
    reactor (read the chunks of one file before asking for the next)."""
    stream.seek(0)
    async for member, chunks in _offloaded(offload, file_chunks(stream)):
        yield member, _offloaded(offload, chunks)


async def _offloaded(offload: Offload, items: Iterator[T]) -> AsyncIterator[T]:
    """The items of a blocking iterator, each taken off the reactor (one at a time, so never two threads at once)."""
    end = object()
    while (item := await offload(next, items, end)) is not end:
        yield item


def header(name: str, size: int, mtime: int) -> bytes:
    """The header block(s) of one file of an output archive."""
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, mtime, 0o644
    return info.tobuf(format=tarfile.PAX_FORMAT)


def padding(size: int) -> bytes:
    """The zeros that fill a file's last block."""
    return b"\0" * (-size % BLOCK)


END = b"\0" * (2 * BLOCK)
