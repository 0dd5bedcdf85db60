"""The password file (``password_file``) that HTTP Basic over TLS is checked against.

One ``user:hash`` line per user, the format ``htpasswd -B`` writes, so the usual tool makes and changes it::

    htpasswd -B -c /etc/birdbath/passwords alice       # -c creates the file; omit it to add or change a user
    python3 -c 'import bcrypt, getpass; print("bob:" + bcrypt.hashpw(getpass.getpass().encode(),
                bcrypt.gensalt()).decode())' >> /etc/birdbath/passwords

Only bcrypt hashes (``$2a$``, ``$2b$``, ``$2y$``) are accepted: salted and slow by design, checked with the
maintained ``bcrypt`` library.  Blank lines and lines starting with ``#`` are skipped; any other line that is not
``user:bcrypt-hash`` refuses the whole file, as does a user named twice.  A user may be ``user@domain``; its jobs'
owner is the part before ``@``.

A check costs what the hash's cost factor says (milliseconds to a quarter second), so it runs off the reactor
thread, and :class:`RememberedPasswords` spares repeating it for a client that sends the same credentials on every
request (legacy stacks open a connection per call).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections import OrderedDict
from pathlib import Path
from typing import Callable

import bcrypt

from .textfile import read_text

_BCRYPT = re.compile(r"\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}")


#: bcrypt reads this many bytes of a password; htpasswd -B and the C library ignore the rest, the Python library
#: refuses longer ones, so both the check and birdbath-passwd cut them where the others do
BCRYPT_LENGTH = 72


def bcrypt_input(password: str) -> bytes:
    """The bytes of ``password`` bcrypt hashes (UTF-8, at most :data:`BCRYPT_LENGTH`)."""
    return password.encode("utf-8")[:BCRYPT_LENGTH]


class PasswordFileError(ValueError):
    """The password file cannot be read or has a line that is not ``user:bcrypt-hash``."""


class PasswordFile:
    """The users of one password file and their hashes."""

    def __init__(self, hashes: dict[str, bytes]) -> None:
        self.hashes = hashes
        # an unknown user costs a check too (against another user's hash), so that the answer's timing does not
        # tell which users exist
        self._unknown = next(iter(hashes.values()), None) or bcrypt.hashpw(b"", bcrypt.gensalt(4))

    @classmethod
    def load(cls, path: Path) -> "PasswordFile":
        return cls.parse(read_text(path, "the password file", PasswordFileError), str(path))

    @classmethod
    def parse(cls, text: str, source: str = "the password file") -> "PasswordFile":
        hashes: dict[str, bytes] = {}
        for number, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            where = f"{source} line {number}"
            user, colon, hashed = line.partition(":")
            if not colon or not user or any(c.isspace() for c in user):
                raise PasswordFileError(f"{where}: expected user:hash")
            if not _BCRYPT.fullmatch(hashed):
                raise PasswordFileError(f"{where}: the hash of {user!r} is not a bcrypt hash ($2b$...); "
                                        f"make it with htpasswd -B")
            if user in hashes:
                raise PasswordFileError(f"{where}: {user!r} is named twice")
            hashes[user] = hashed.encode()
        return cls(hashes)

    def check(self, user: str, password: str) -> bool:
        """Whether ``password`` is ``user``'s (slow: run it off the reactor thread)."""
        hashed = self.hashes.get(user)
        matches = bcrypt.checkpw(bcrypt_input(password), hashed or self._unknown)
        return hashed is not None and matches


class RememberedPasswords:
    """Credentials that passed a check recently, so that a client repeating them is not checked again at once.

    Kept as keyed hashes (a random key of this process), never as the passwords; an entry is forgotten after
    ``lifetime`` seconds, or when more than ``size`` entries are newer."""

    def __init__(self, lifetime: float = 300.0, size: int = 1024, clock: Callable[[], float] = time.monotonic) -> None:
        self._key = secrets.token_bytes(32)
        self._lifetime = lifetime
        self._size = size
        self._clock = clock
        self._entries: OrderedDict[bytes, float] = OrderedDict()

    def _digest(self, user: str, password: str) -> bytes:
        return hmac.new(self._key, f"{user}\0{password}".encode("utf-8"), hashlib.sha256).digest()

    def __contains__(self, credentials: tuple[str, str]) -> bool:
        digest = self._digest(*credentials)
        expires = self._entries.get(digest)
        if expires is None:
            return False
        if expires <= self._clock():
            del self._entries[digest]
            return False
        return True

    def remember(self, user: str, password: str) -> None:
        digest = self._digest(user, password)
        self._entries[digest] = self._clock() + self._lifetime
        self._entries.move_to_end(digest)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
