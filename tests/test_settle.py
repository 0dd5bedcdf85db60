"""The one async currency where the front ends meet the transport (gateway/maybe.py): a coroutine, driven once by
``settle``, answered at once when it finishes without waiting, and the handler tables' one runner
(gateway/soap/table.py): a standard's refusal is the operation's answer, anything else is not swallowed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from gateway.maybe import settle
from gateway.soap.table import Entry, Standard
from tests.synchronous import run


class Outcome:
    def __init__(self) -> None:
        self.done: list[Any] = []
        self.failed: list[Failure] = []

    def settle(self, coroutine: Any) -> None:
        settle(coroutine, self.done.append, self.failed.append)


async def at_once(value: Any) -> Any:
    return value


async def waits(deferred: Deferred) -> Any:
    return await deferred + 1


async def raises(after: Deferred | None = None) -> Any:
    if after is not None:
        await after
    raise ValueError("broken")


def test_a_coroutine_that_does_not_wait_is_answered_at_once():
    outcome = Outcome()
    outcome.settle(at_once(41))
    assert outcome.done == [41] and not outcome.failed


def test_a_coroutine_that_waits_is_answered_when_it_finishes():
    outcome, later = Outcome(), Deferred()
    outcome.settle(waits(later))
    assert not outcome.done
    later.callback(41)
    assert outcome.done == [42] and not outcome.failed


@pytest.mark.parametrize("waiting", [False, True])
def test_a_coroutine_that_raises_is_failed_whether_it_waited_or_not(waiting):
    outcome, later = Outcome(), Deferred()
    outcome.settle(raises(later if waiting else None))
    if waiting:
        assert not outcome.failed
        later.callback(None)
    assert not outcome.done and outcome.failed[0].check(ValueError)


def test_what_done_raises_is_not_the_coroutines_failure():
    failed: list[Failure] = []

    def done(value: Any) -> None:
        raise RuntimeError("a bug in the answer's writer")

    with pytest.raises(RuntimeError):
        settle(at_once(1), done, failed.append)
    assert not failed


# -- the handler tables' runner ---------------------------------------------------------------------------------
class Refused(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


STANDARD: Standard[Refused] = Standard(Refused, lambda refusal: refusal.code,
                                       lambda refusal: {"code": refusal.code}, "OK", lambda: {"code": "OK"})


@dataclass
class Context:
    status: Any = None


async def core_call(context: Context, p: Any) -> int:
    if p.get("refuse"):
        raise Refused("NOTFOUND")
    if p.get("bug"):
        raise KeyError("bug")
    return p["n"] * 2


ENTRY = Entry(STANDARD, core_call, lambda ok, result: {"status": ok, "n": result},
              lambda status, p: {"status": status, "asked": p.get("n")})


def test_an_entry_answers_the_core_calls_result_and_records_success():
    context = Context()
    assert run(ENTRY(context, {"n": 21})) == {"status": {"code": "OK"}, "n": 42}
    assert context.status == "OK"


def test_a_refusal_is_the_entrys_failure_answer_and_recorded():
    context = Context()
    assert run(ENTRY(context, {"n": 3, "refuse": True})) == {"status": {"code": "NOTFOUND"}, "asked": 3}
    assert context.status == "NOTFOUND"


def test_anything_else_the_call_raises_is_not_an_answer():
    """(the codec makes it a Server fault, logged)"""
    context = Context()
    with pytest.raises(KeyError):
        run(ENTRY(context, {"n": 1, "bug": True}))
    assert context.status is None
