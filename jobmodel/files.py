"""Small file operations every spool and staging area needs: plain names only, writes at offsets, MD5."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def is_plain_name(name: str) -> bool:
    """A file name with no directory part (what clients may name in a spool)."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name


def write_at(path: Path, offset: int, data: bytes, create: bool = False) -> int:
    """Write all of ``data`` at ``offset`` (pwrite may write less than asked); returns the file's size."""
    fd = os.open(path, os.O_WRONLY | (os.O_CREAT if create else 0), 0o600)
    try:
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, offset)
            view, offset = view[written:], offset + written
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def md5_of(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
