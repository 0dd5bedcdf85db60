"""Nobody starves the gateway, end to end: real gateways, real sockets, real accounts.

- descriptor exhaustion: a gateway started with a low open files limit (``prlimit``), one local user (an account
  the test makes) opening far more idle connections than the limit; another user and root are still served;
- slow headers and slow bodies cut off at their deadlines;
- password guessing over TLS slowed down, a guess during a penalty answered 429 with Retry-After.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import socket
import threading
import time

import pytest
import requests

from gateway.testing import QUEUE_ONLY, GatewayProcess, TestPki
from tests.accounts import Accounts, UserAccount
from tests.test_logging import wait_for_line, wait_until

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = pytest.mark.gateway

#: the open files limit (soft and hard) of the gateways that must not run out
LOW_LIMIT = 256


@pytest.fixture
def users(accounts: Accounts) -> tuple[UserAccount, UserAccount]:
    """Two unprivileged accounts made for the test: one that opens too many connections, one that wants to be
    served."""
    return accounts.user(), accounts.user()


class LimitedGateway(GatewayProcess):
    """A gateway started with soft and hard open files limits of :data:`LOW_LIMIT`."""

    def command(self, port_files):
        return ["prlimit", f"--nofile={LOW_LIMIT}:{LOW_LIMIT}", "--", *super().command(port_files)]


@pytest.fixture
def limited(tmp_path):
    started = []

    def start(config: str = "") -> GatewayProcess:
        process = LimitedGateway(tmp_path / f"state{len(started)}", config + QUEUE_ONLY, tmp=tmp_path).start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


class Hog:
    """A child process running as ``account`` that opens ``count`` connections and keeps those the gateway keeps,
    until it is told to go (:meth:`release`)."""

    def __init__(self, account: UserAccount, port: int, count: int) -> None:
        results, self._results = os.pipe()
        self._release, release = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into pytest
            try:
                os.close(results)
                os.close(release)
                become(account)
                held = self._hold(port, count)
                os.write(self._results, b"%d\n" % len(held))
                os.read(self._release, 1)  # until the parent closes its end
                for connection in held:
                    connection.close()
            finally:
                os._exit(0)
        os.close(self._results)
        os.close(self._release)
        self._release_end = release
        with os.fdopen(results, "rb") as stream:
            self.kept = int(stream.readline() or b"-1")

    @staticmethod
    def _hold(port: int, count: int) -> list[socket.socket]:
        """The connections the gateway keeps (those it closes at once are closed here too)."""
        held = []
        for _ in range(count):
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=20))
            except OSError:
                pass
        time.sleep(3)  # the gateway accepts them all (and closes those over the limits) meanwhile
        readable, _, _ = select.select(held, [], [], 0)
        closed = set()
        for connection in readable:
            try:
                if connection.recv(1) == b"":
                    closed.add(connection)
            except OSError:
                closed.add(connection)
        for connection in closed:
            connection.close()
        return [connection for connection in held if connection not in closed]

    def release(self) -> None:
        os.close(self._release_end)
        os.waitpid(self.pid, 0)


def become(account: UserAccount) -> None:
    os.setgroups([])
    os.setgid(account.gid)
    os.setuid(account.uid)


def call_as(account: UserAccount | None, port: int, operation: str, **params) -> dict | str:
    """A JSON call by a child running as ``account`` (None: root, this process): the answer, or why none came."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            if account is not None:
                become(account)
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                connection.request("POST", f"/submission/json/{operation}", json.dumps(params),
                                   {"Content-Type": "application/json"})
                answer = connection.getresponse().read()
            except OSError as exc:
                answer = json.dumps(f"no answer: {exc!r}").encode()
            os.write(write, answer)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        answer = stream.read()
    os.waitpid(pid, 0)
    return json.loads(answer)


def served(answer: dict | str) -> bool:
    return isinstance(answer, dict) and answer["status"]["code"] == "OK"


def test_one_user_holding_too_many_connections_starves_nobody(users, limited):
    hogging, neighbour = users
    gateway = limited()
    hog = Hog(hogging, gateway.port, count=LOW_LIMIT + 50)  # more than the gateway could ever hold
    try:
        assert served(call_as(neighbour, gateway.port, "getSubmissions"))
        assert served(call_as(None, gateway.port, "getSubmissions"))
        assert 0 < hog.kept <= LOW_LIMIT // 8, hog.kept  # its share (an eighth of three quarters), no more
    finally:
        hog.release()
    wait_for_line(gateway.log, f"open files limited to {LOW_LIMIT}")
    refusals = [line for line in gateway.log().splitlines()
                if f"({hogging.name}) as they are accepted: holds max_connections_per_caller" in line]
    assert len(refusals) == 1, gateway.log()  # once for the burst, not once per connection


def test_the_last_connections_are_kept_for_root(users, limited):
    hogging, neighbour = users
    gateway = limited("[gateway]\nmax_connections_per_caller = 1000\n")  # one user may take all it can
    hog = Hog(hogging, gateway.port, count=LOW_LIMIT + 50)
    try:
        assert LOW_LIMIT // 2 < hog.kept < LOW_LIMIT * 3 // 4, hog.kept
        assert not served(call_as(neighbour, gateway.port, "getSubmissions"))
        assert served(call_as(None, gateway.port, "getSubmissions"))
    finally:
        hog.release()
    wait_until(lambda: served(call_as(neighbour, gateway.port, "getSubmissions")),  # its connections given back
               "the neighbour served once the hog let go")
    wait_for_line(gateway.log, "closing connections from uid", f"({neighbour.name}) as they are accepted",
                  "reserved_connections")


# -- deadlines -------------------------------------------------------------------------------------------------
DEADLINES = "[gateway]\nmax_header_seconds = 2\nmax_body_seconds = 3\n"


def trickle(port: int, first: bytes, pieces: list[bytes], every: float) -> tuple[bytes, float]:
    """Send ``first`` then a piece every ``every`` seconds while the connection stays open: what came back and how
    many seconds after ``first`` the gateway closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(first)
        started = time.monotonic()
        for piece in pieces:
            readable, _, _ = select.select([connection], [], [], every)
            if readable:
                break
            try:
                connection.sendall(piece)
            except OSError:
                break
        answer = b""
        while True:
            try:
                data = connection.recv(4096)
            except ConnectionResetError:
                break
            if not data:
                break
            answer += data
        return answer, time.monotonic() - started


def test_headers_sent_a_line_at_a_time_are_cut_off_at_the_deadline(start_gateway):
    gateway = start_gateway(DEADLINES)
    answer, took = trickle(gateway.port, b"POST /submission/json/getSubmissions HTTP/1.1\r\nHost: x\r\n",
                           [b"X-Slow-%d: 1\r\n" % n for n in range(60)], every=0.5)
    assert answer.startswith(b"HTTP/1.1 408 ") and b"max_header_seconds" in answer, answer
    assert took < 20  # without the deadline, the 60 lines would keep it open for 30 s
    wait_for_line(gateway.log, "closing the connection from 127.0.0.1", "max_header_seconds")


def test_a_body_sent_a_byte_at_a_time_is_cut_off_at_the_deadline(start_gateway):
    gateway = start_gateway(DEADLINES)
    answer, took = trickle(gateway.port, b"POST /submission/json/getSubmissions HTTP/1.1\r\nHost: x\r\n"
                                         b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
                           [b" "] * 60, every=0.5)
    assert answer.startswith(b"HTTP/1.1 408 ") and b"max_body_seconds" in answer, answer
    assert took < 20
    # a request that arrives in time is answered as before, on the same gateway
    answer, _ = trickle(gateway.port, b"POST /submission/json/getSubmissions HTTP/1.1\r\nHost: x\r\n"
                                      b"Connection: close\r\nContent-Length: 2\r\n\r\n{}", [], every=0)
    assert answer.startswith(b"HTTP/1.1 200 "), answer


# -- password guessing ----------------------------------------------------------------------------------------
def test_password_guesses_over_tls_are_slowed_down_and_refused_during_the_penalty(tmp_path):
    pki = TestPki(tmp_path / "pki")
    pki.passwords({"carol": "c4rol's secret"})
    config = pki.config(certificates=False, passwords=True,
                        extra="password_failure_delay = 2\nmax_password_failure_delay = 8\n")
    gateway = GatewayProcess(tmp_path / "state", config + QUEUE_ONLY, tmp=tmp_path, ssl=True, plain=False).start()
    try:
        url = gateway.https_url + "submission/json/getSubmissions"

        def attempt(password: str) -> requests.Response:
            return requests.post(url, json={}, auth=("carol", password), verify=str(pki.ca_file), timeout=60)

        answers: list[requests.Response] = []
        guess = threading.Thread(target=lambda: answers.append(attempt("guess 1")))
        guess.start()
        wait_for_line(gateway.log, "HTTP Basic login of 'carol' from 127.0.0.1 failed", "answered in 2 s")
        during = attempt("c4rol's secret")  # while the guess's answer waits: refused, its password not checked
        assert during.status_code == 429 and during.headers["Retry-After"] in ("1", "2"), during.text
        guess.join()
        assert answers[0].status_code == 401
        assert attempt("guess 2").status_code == 401  # answered when its penalty (4 s) ends: no 429 for a client
        assert attempt("c4rol's secret").status_code == 200  # that waits for its answers
        assert attempt("guess 3").status_code == 401  # the success started the count again
        wait_for_line(gateway.log, "HTTP Basic login of 'carol' from 127.0.0.1 failed", "answered in 2 s",
                      "(1 in a row")
        assert "(2 in a row from there, 2 for that user); answered in 4 s" in gateway.log()
    finally:
        gateway.stop()
