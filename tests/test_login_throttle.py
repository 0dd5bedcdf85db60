"""Password guessing slowed down (gateway.identity.throttle), through the real Identification and password file on
a fake clock: delayed failures, 429 during a penalty, per source and per user, reset on success, bounded memory."""

from __future__ import annotations

import base64

import bcrypt
import pytest
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.logger import capturedLogs

from gateway.config import ConfigError, GatewayConfig, check_limits
from gateway.identity.callers import Connection, Identification, Refusal
from gateway.identity.passwords import PasswordFile
from gateway.identity.throttle import ABANDONED_AFTER, LoginThrottle, ThrottleSettings


@pytest.fixture(scope="module")
def passwords() -> PasswordFile:
    return PasswordFile({user: bcrypt.hashpw(password.encode(), bcrypt.gensalt(4))
                         for user, password in {"alice": "wonderland", "bob": "builder"}.items()})


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def identification(passwords, clock) -> Identification:
    return Identification(None, passwords, throttle=LoginThrottle(clock, ThrottleSettings(1.0, 60.0, tracked=100)))


def login(identification: Identification, user: str, password: str, host: str = "192.0.2.7") -> list:
    """An attempt: a list that gets its answer (the caller or the Refusal) when it is made."""
    header = b"Basic " + base64.b64encode(f"{user}:{password}".encode())
    found: list = []
    attempt = Deferred.fromCoroutine(identification.caller(Connection(True, host, 40000, "192.0.2.1", 1985), header))
    attempt.addCallbacks(found.append, lambda failure: found.append(failure.trap(Refusal) and failure.value))
    return found


def outcome(attempt: list):
    """The caller's user, the refusal's (code, Retry-After), or None while the answer waits."""
    if not attempt:
        return None
    value = attempt[0]
    return (value.code, value.retry_after) if isinstance(value, Refusal) else value.user


def test_a_failures_answer_waits_its_penalty_which_doubles_up_to_the_maximum(identification, clock):
    for penalty in (1, 2, 4, 8, 16, 32, 60, 60):
        attempt = login(identification, "alice", "guess")
        clock.advance(penalty - 0.5)
        assert outcome(attempt) is None  # still waiting
        clock.advance(0.5)
        assert outcome(attempt) == (401, None)


def test_attempts_during_a_penalty_are_refused_unchecked_with_retry_after(identification, clock, passwords):
    first = login(identification, "alice", "guess")
    assert outcome(login(identification, "alice", "wonderland")) == (429, 1)  # even the right password
    clock.advance(1)
    assert outcome(first) == (401, None)
    second = login(identification, "alice", "guess2")  # the penalty is over: checked, and it fails again
    assert outcome(login(identification, "bob", "builder")) == (429, 2)  # the same source, another user
    assert outcome(login(identification, "alice", "x", host="198.51.100.9")) == (429, 2)  # the same user
    assert outcome(login(identification, "bob", "builder", host="198.51.100.9")) == "bob"  # neither
    clock.advance(2)
    assert outcome(second) == (401, None)


def test_a_check_whose_end_never_comes_stops_holding_its_user_and_source_back(identification, clock):
    """With worker processes the core's throttle hears how a check ended from the worker that made it; a worker
    that dies mid-check never says, and its user and source must not be refused for ever."""
    throttle = identification.throttle
    clock.advance(1000)
    assert outcome(login(identification, "alice", "guess")) is None  # a failure: both have a record now
    clock.advance(1)
    Deferred.fromCoroutine(throttle.begin("192.0.2.7", "alice"))  # a check begun; its worker dies: no end
    clock.advance(ABANDONED_AFTER - 1)
    assert outcome(login(identification, "alice", "wonderland")) == (429, 1)
    assert outcome(login(identification, "bob", "builder")) == (429, 1)  # (its source)
    clock.advance(1)
    assert outcome(login(identification, "alice", "wonderland")) == "alice"


def test_a_success_clears_the_source_and_the_user(identification, clock):
    for _ in range(3):
        login(identification, "alice", "guess")
        clock.advance(60)
    assert outcome(login(identification, "alice", "wonderland")) == "alice"
    attempt = login(identification, "alice", "guess")
    clock.advance(1)  # the first penalty again
    assert outcome(attempt) == (401, None)


def test_credentials_that_passed_before_are_not_held_up_by_a_guesser(identification, clock):
    assert outcome(login(identification, "alice", "wonderland", host="198.51.100.9")) == "alice"
    login(identification, "alice", "guess")  # someone guesses alice's password from elsewhere
    assert outcome(login(identification, "alice", "wonderland", host="198.51.100.9")) == "alice"
    clock.advance(1)


def test_records_are_forgotten_in_time_and_bounded_in_number(passwords, clock):
    throttle = LoginThrottle(clock, ThrottleSettings(1.0, 4.0, tracked=10))
    identification = Identification(None, passwords, throttle=throttle)
    for n in range(50):
        login(identification, f"user{n}", "guess", host=f"10.0.0.{n}")
    assert len(throttle.sources) == len(throttle.users) == 10
    clock.advance(4 * 10)
    attempt = login(identification, "user49", "guess", host="10.0.0.49")
    clock.advance(1)  # forgotten: the first penalty again, not the second
    assert outcome(attempt) == (401, None)


def test_ipv6_sources_are_throttled_by_their_64(identification, clock):
    login(identification, "alice", "guess", host="2001:db8:1:2::1")
    assert outcome(login(identification, "bob", "guess", host="2001:db8:1:2::99")) == (429, 1)
    clock.advance(1)


def test_each_failure_is_logged_with_its_user_and_source(identification, clock):
    with capturedLogs() as events:
        login(identification, "mallory" * 20, "guess", host="192.0.2.66")
        clock.advance(1)
    lines = [event["log_format"].format(**event) for event in events if event.get("log_namespace") == "birdbath.login"]
    assert len(lines) == 1 and "192.0.2.66" in lines[0] and "'mallorymallory" in lines[0] and "..." in lines[0]


def test_the_knobs_are_checked():
    with pytest.raises(ConfigError):
        check_limits(GatewayConfig(password_failure_delay=10, max_password_failure_delay=5))
    assert ThrottleSettings(0.5, 3.0).delay(1) == 0.5 and ThrottleSettings(0.5, 3.0).delay(10) == 3.0
