"""Slowing password guessing down: HTTP Basic failures (and invalid bearer tokens) counted per source and per user
name (a token's claimed subject).

Each failure starts a penalty for its source (the client's address, or its IPv6 /64) and for the user name it
tried: ``password_failure_delay`` seconds after the first failure in a row, twice that after the second, and so
on up to ``max_password_failure_delay``.  The failed attempt's own answer (401) is sent only when its penalty
ends, so a client that tries again after each answer (every HTTP library does, sequentially) is simply slowed
down.  An attempt made while its source or user is in a penalty, or while an earlier attempt of theirs is being
checked, is answered at once with ``429 Too Many Requests`` and ``Retry-After``, its password not looked at: it
costs no check and holds no connection open, and clients that honour ``Retry-After`` wait the right time.  An
attempt whose check never ends (its worker process died) stops counting after :data:`ABANDONED_AFTER` seconds.
A success clears both records; a record is forgotten ``FORGET_AFTER_PENALTIES`` longest penalties after its last
failure, and at most ``tracked`` records of each kind are kept (the least recently failed go first).

Credentials that passed recently (:class:`~gateway.identity.passwords.RememberedPasswords`) are not checked
again, so a user whose name is being guessed keeps working with a client that already logged in.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any

from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import deferLater
from twisted.logger import Logger

from gateway.connections import host_key

log = Logger(namespace="birdbath.login")

#: a record's failures are forgotten this many longest penalties after its last one
FORGET_AFTER_PENALTIES = 10
#: seconds after which an attempt still being checked counts as abandoned: with worker processes, the worker checking
#: it may die before it says how the check ended, and its user and source must not wait for that for ever (a
#: password or token check takes well under a second)
ABANDONED_AFTER = 60.0


@dataclass(frozen=True)
class ThrottleSettings:
    first_delay: float = 1.0
    max_delay: float = 60.0
    tracked: int = 10000

    def delay(self, failures: int) -> float:
        """The penalty after ``failures`` failures in a row (1, 2, 4 ... seconds by default, then the maximum)."""
        if failures < 1:
            return 0.0
        return min(self.first_delay * 2.0 ** min(failures - 1, 62), self.max_delay)


class Throttled(Exception):
    """An attempt refused unchecked: its source or its user is in a penalty, or has an attempt being checked."""

    def __init__(self, retry_after: float) -> None:
        self.retry_after = max(1, math.ceil(retry_after))
        super().__init__(f"Too many failed logins from this address or for this user: try again in "
                         f"{self.retry_after} s")


@dataclass
class _Record:
    failures: int = 0
    until: float = 0.0  # the end of the current penalty
    last: float = 0.0  # the last failure
    checked_since: float | None = None  # an attempt being checked, since then

    def checking(self, now: float) -> bool:
        """Whether an attempt is being checked (one begun :data:`ABANDONED_AFTER` ago or more is not any more)."""
        return self.checked_since is not None and now - self.checked_since < ABANDONED_AFTER


class _Records:
    """Failure records of one kind (sources or users), at most ``size`` of them."""

    def __init__(self, size: int, forget_after: float) -> None:
        self._size = size
        self._forget_after = forget_after
        self._records: OrderedDict[Hashable, _Record] = OrderedDict()

    def get(self, key: Hashable, now: float) -> _Record | None:
        record = self._records.get(key)
        if record is not None and not record.checking(now) and now - record.last >= self._forget_after:
            del self._records[key]
            return None
        return record

    def failed(self, key: Hashable, now: float, settings: ThrottleSettings) -> _Record:
        record = self.get(key, now) or _Record()
        record.failures += 1
        record.last = now
        record.until = now + settings.delay(record.failures)
        record.checked_since = None
        self._records[key] = record
        self._records.move_to_end(key)
        while len(self._records) > self._size:
            self._records.popitem(last=False)
        return record

    def peek(self, key: Hashable) -> _Record | None:
        """The record of ``key`` as it stands (none forgotten)."""
        return self._records.get(key)

    def clear(self, key: Hashable) -> None:
        self._records.pop(key, None)

    def __len__(self) -> int:
        return len(self._records)


class LoginThrottle:
    """Penalties for failed HTTP Basic logins, on ``clock`` (the reactor; a twisted ``Clock`` in tests)."""

    def __init__(self, clock: IReactorTime, settings: ThrottleSettings = ThrottleSettings()) -> None:
        self._clock = clock
        self.settings = settings
        forget_after = settings.max_delay * FORGET_AFTER_PENALTIES
        self.sources = _Records(settings.tracked, forget_after)
        self.users = _Records(settings.tracked, forget_after)

    async def begin(self, host: str, user: str) -> None:
        """An attempt of ``user`` from ``host`` is about to be checked: raises :class:`Throttled` while a penalty
        stands or another attempt of theirs is being checked; else marks theirs as being checked, until
        :meth:`end`."""
        source, name = host_key(host), _user_key(user)
        now = self._clock.seconds()
        records = [found for found in (self.sources.get(source, now), self.users.get(name, now)) if found]
        if any(record.checking(now) or record.until > now for record in records):
            raise Throttled(max([record.until - now for record in records] + [self.settings.first_delay]))
        for record in records:  # who failed before is checked one attempt at a time
            record.checked_since = now

    async def end(self, host: str, user: str, matched: bool | None, kind: str = "HTTP Basic login") -> None:
        """The outcome of the attempt :meth:`begin` let through (None: the check itself failed): a success clears
        both records; a failure is recorded, logged, and this returns when its penalty ends."""
        source, name = host_key(host), _user_key(user)
        for record in (self.sources.peek(source), self.users.peek(name)):
            if record is not None:
                record.checked_since = None
        if matched is None:
            return
        if matched:
            self.sources.clear(source)
            self.users.clear(name)
            return
        now = self._clock.seconds()
        by_source = self.sources.failed(source, now, self.settings)
        by_user = self.users.failed(name, now, self.settings)
        wait = max(by_source.until, by_user.until) - now
        log.warn("{kind} of {user} from {source} failed ({source_failures} in a row from there, "
                 "{user_failures} for that user); answered in {wait:g} s", kind=kind, user=_shown(user), source=source,
                 source_failures=by_source.failures, user_failures=by_user.failures, wait=wait)
        await deferLater(self._clock, wait)


async def check(throttle: LoginThrottle, host: str, user: str, verify: Callable[..., Awaitable[bool]], *args: Any,
                kind: str = "HTTP Basic login") -> bool:
    """``await verify(*args)``, the password (or bearer token, ``kind``) check of ``user`` from ``host``, unless a
    penalty stands (raises :class:`Throttled`); a failure is answered when its penalty ends.  ``throttle`` is the
    gateway's one :class:`LoginThrottle`, in this process or, with worker processes, the core's (reached by its
    two calls, so that the counts are the whole gateway's)."""
    await throttle.begin(host, user)
    matched: bool | None = None
    try:
        matched = bool(await verify(*args))
    finally:
        await throttle.end(host, user, matched, kind)
    return matched


def _user_key(user: str) -> bytes:
    """A user name as a record's key: a digest, so that long invented names cost no more memory than short ones."""
    return hashlib.blake2b(user.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _shown(user: str) -> str:
    """A user name for the log: quoted, and cut short if a client sent a long one."""
    return repr(user if len(user) <= 64 else user[:64] + "...")
