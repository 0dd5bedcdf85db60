"""The gateway's log: where it goes (``--log-file``/``log_file``), how much (``--log-level``/``log_level``), and
what it says about jobs (their life cycle, crash recovery) and about failed requests (the reason of a FAIL).

Every wait polls the log with a deadline; a line is looked for only after what must have logged it happened.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import zeep

from backends.local.sandbox import ExecuteDir
from tests.birdbath import submit_job
from tests.test_startup import ENV, PROMPTLY, ROOT, gateway_command

OWNER = getpass.getuser()  # the gateway runs as this test's user, whose name anonymous submissions get
RUNS_JOBS = "[backends.local]\nslots = 2\nkill_grace = 1.0\n"


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.05)


def wait_for_line(read: Callable[[], str], *parts: str, timeout: float = 30.0) -> str:
    """The first log line containing every one of ``parts``, once it has been written."""
    found: list[str] = []

    def written() -> bool:
        found[:] = [line for line in read().splitlines() if all(part in line for part in parts)]
        return bool(found)

    wait_until(written, f"a log line with {parts}\n{read()}", timeout)
    return found[0]


def schedd_of(gateway) -> zeep.proxy.ServiceProxy:
    return zeep.Client(gateway.url + "condorSchedd.wsdl").service


@contextmanager
def serving(tmp: Path, *flags: str | Path) -> Iterator[tuple[int, Path]]:
    """The gateway started with these flags; yields its port and the file its stdout and stderr go to."""
    port_file, output = tmp / "port", tmp / "output"
    with open(output, "wb") as stream:
        process = subprocess.Popen(gateway_command("--port", "auto", "--port-file", port_file, *flags), cwd=ROOT,
                                   env=ENV, stdout=stream, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: port_file.exists() and port_file.read_text().strip() or process.poll() is not None,
                   "the gateway to serve", PROMPTLY)  # (its workers' start included, if it has any)
        assert process.poll() is None, output.read_text()
        yield int(port_file.read_text()), output
    finally:
        process.terminate()
        process.wait(timeout=30)


def refused_for_its_size(port: int) -> bytes:
    """A POST declaring a body over max_request_bytes: refused at once, with a warning in the log."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n\r\n")
        return connection.recv(100)


def test_log_file_and_log_level_flags(tmp_path):
    log = tmp_path / "gateway.log"
    (tmp_path / "gateway.toml").write_text("[gateway]\nmax_request_bytes = 1000\n")
    with serving(tmp_path, "--state-dir", tmp_path / "state", "--config", tmp_path / "gateway.toml",
                 "--log-file", log, "--log-level", "warn") as (port, output):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/condorSchedd.wsdl", timeout=30) as response:
            assert response.status == 200  # an info line ("GET ... (WSDL)") if info were logged, written before this
        assert b" 413 " in refused_for_its_size(port)
        line = wait_for_line(log.read_text, "refused request from 127.0.0.1", "max_request_bytes")
    assert "#warn]" in line
    text = log.read_text()
    assert "WSDL" not in text and "listening on" not in text and "#info]" not in text
    assert "refused request" not in output.read_text()  # the log went to the file, not to stderr


#: Twisted's notes of its machinery, which opened the log (before the gateway's first line) and closed it
TWISTED_NOTES = re.compile(r"starting on|Port \S+ Closed\)|Starting factory|Stopping factory")


@pytest.mark.parametrize("workers", [0, 2])
def test_the_log_opens_with_the_gateways_own_lines_and_names_each_lines_process_when_there_are_several(
        tmp_path, workers):
    with serving(tmp_path, "--state-dir", tmp_path / "state", "--workers", str(workers)) as (port, output):
        if workers:
            for index in range(workers):
                wait_for_line(output.read_text, f"worker {index} (pid", "serving")
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30).close()
        wait_for_line(output.read_text, "GET /healthz")
    wait_until(lambda: "Main loop terminated" in output.read_text(), "the gateway to stop")
    lines = output.read_text().splitlines()
    assert not [line for line in lines if TWISTED_NOTES.search(line)], lines
    assert re.match(r"\S+ (\[core\] )?\[(birdbath|gateway|backends)\.", lines[0]), lines
    named = [re.match(r"\S+ \[(core|worker \d+)\] \[", line) for line in lines]
    if workers:
        assert all(named), [line for line, name in zip(lines, named) if not name]
        stopped = {name.group(1) for name, line in zip(named, lines) if "Main loop terminated" in line}
        assert stopped == {"core", "worker 0", "worker 1"}, lines
    else:
        assert not any(named), lines


def test_twisteds_notes_of_its_machinery_are_left_out_and_other_events_kept():
    from twisted.logger import LogLevel, PredicateResult

    from gateway.logging import chatter

    def legacy(text: str) -> dict:
        return {"log_namespace": "log_legacy", "log_format": "{log_text}", "log_text": text, "log_system": "-"}

    for event in (legacy("HandOffFactory (ConnectionGuard) starting on 1984"),
                  legacy("HandOffFactory (ConnectionGuard) starting on '/srv/state/birdbath.sock'"),
                  legacy("(TCP Port 1984 Closed)"), legacy("(UNIX Port /srv/state/birdbath.sock Closed)"),
                  legacy("(UDP Port 9618 Closed)"), legacy("(Port '/x' Closed)"),
                  {"log_namespace": "twisted.web.server.Site", "log_format": "Starting factory {factory!r}"},
                  {"log_namespace": "pika.Factory", "log_format": "Stopping factory {factory!r}"}):
        assert chatter(event) is PredicateResult.no, event
    for event in (legacy("job 12.0 starting on a slot, then more"), legacy("Port 1984 Closed"),
                  {"log_namespace": "gateway.app", "log_format": "listening on {port}", "port": 1984},
                  {"log_namespace": "gateway.app", "log_format": "x starting on 1984", "log_level": LogLevel.info},
                  {"log_namespace": "log_legacy", "log_format": "{log_text}"}, {}):
        assert chatter(event) is PredicateResult.maybe, event


def test_each_line_names_its_process_after_its_time_once_named():
    from twisted.logger import LogLevel

    from gateway.logging import line_of, log_time, name_process

    event = {"log_namespace": "gateway.app", "log_level": LogLevel.info, "log_time": 1700000000.25,
             "log_format": "hello {who}", "who": "you"}
    unnamed = line_of(event)
    try:
        name_process("worker 3")
        named = line_of(event)
        assert log_time(None).endswith(" [worker 3]")
        name_process(None)
        assert line_of(event) == unnamed
    finally:
        name_process(None)
    time_part, rest = unnamed.split(" ", 1)
    assert named == f"{time_part} [worker 3] {rest}" and rest == "[gateway.app#info] hello you\n"


def test_log_settings_in_the_configuration_file(start_gateway, tmp_path):
    log = tmp_path / "configured.log"
    gateway = start_gateway(f'[gateway]\nlog_file = "{log}"\nlog_level = "debug"\n')
    wait_for_line(log.read_text, "listening on", gateway.url)
    assert "listening on" not in gateway.log()


def test_a_jobs_life_is_logged_with_its_fields(start_gateway, tmp_path):
    gateway = start_gateway(RUNS_JOBS)
    schedd = schedd_of(gateway)
    cluster, proc = submit_job(schedd, Cmd="/bin/sh", Arguments="-c 'exit 3'", Iwd=str(tmp_path))
    job = f"job {cluster}.{proc}"
    wait_for_line(gateway.log, f"{job} completed")  # the last of its lines
    lines = gateway.log().splitlines()
    order = [next(number for number, line in enumerate(lines) if part in line) for part in (
        f"{job} submitted by {OWNER}: /bin/sh", f"{job} of {OWNER} started", f"{job} ended with exit code 3",
        f"{job} completed")]
    assert order == sorted(order)

    cluster, proc = submit_job(schedd, Cmd="/bin/sh", Arguments="-c 'kill -9 $$'", Iwd=str(tmp_path))
    wait_for_line(gateway.log, f"job {cluster}.{proc} ended by signal 9")

    cluster, proc = submit_job(schedd, Cmd="/bin/sleep", Arguments="60", Iwd=str(tmp_path))
    job = f"job {cluster}.{proc}"
    wait_for_line(gateway.log, f"{job} of {OWNER} started")
    assert schedd.holdJob(None, cluster, proc, "held for the log test", False, False, False).code == "SUCCESS"
    wait_for_line(gateway.log, f"{job} held: held for the log test")
    wait_for_line(gateway.log, f"{job} stopped, as it was held")
    assert schedd.releaseJob(None, cluster, proc, "released for the log test", False, False).code == "SUCCESS"
    wait_for_line(gateway.log, f"{job} released: released for the log test")
    assert schedd.removeJob(None, cluster, proc, "removed for the log test", False).code == "SUCCESS"
    wait_for_line(gateway.log, f"{job} removed: removed for the log test")


def test_a_fail_status_is_logged_with_its_reason(gateway, schedd):
    answer = schedd.holdJob(None, 987654, 0, "no such job", False, False, False)
    assert answer.code == "FAIL" and answer.message
    line = wait_for_line(gateway.log, "holdJob from 127.0.0.1: FAIL in")
    assert line.endswith(f" ms ({OWNER} by socket): {answer.message}")

    request = urllib.request.Request(gateway.url + "submission/json/getJobAd", json.dumps({"id": "x.y"}).encode())
    with urllib.request.urlopen(request, timeout=30) as response:
        status = json.load(response)["status"]
    assert status["code"] == "FAIL"
    line = wait_for_line(gateway.log, "getJobAd from 127.0.0.1: FAIL in", "x.y")
    assert line.endswith(f" ms ({OWNER} by socket): {status['text']}")


def test_recovery_after_a_crash_is_logged(start_gateway, tmp_path):
    """One job is cut off by the crash (requeued), the other ends while no gateway runs (recorded as finished)."""
    gateway = start_gateway(RUNS_JOBS)
    schedd = schedd_of(gateway)
    # (the jobs run in their Iwd: no file transfer)
    cut = submit_job(schedd, Cmd="/bin/sh", Arguments="-c 'touch cut; sleep 60'", Iwd=str(tmp_path))
    ends = submit_job(schedd, Cmd="/bin/sh", Arguments="-c 'touch ends; while [ ! -e go ]; do sleep 0.05; done; exit 5'",
                      Iwd=str(tmp_path))
    wait_until(lambda: (tmp_path / "cut").exists() and (tmp_path / "ends").exists(), "both jobs to run")
    gateway.kill()
    (tmp_path / "go").touch()
    execute = gateway.state_dir / "execute"
    wait_until(lambda: ExecuteDir.of(execute, *ends).result() is not None, "the launcher to record the exit")
    gateway.start()
    cut_job, ended_job = (f"job {cluster}.{proc}" for cluster, proc in (cut, ends))
    wait_for_line(gateway.log, f"recovery: {cut_job} was cut off by the restart; requeued")
    wait_for_line(gateway.log, f"{cut_job} interrupted: The gateway restarted while the job was running")
    wait_for_line(gateway.log, f"recovery: {ended_job} finished while the gateway was down; recorded as finished")
    wait_for_line(gateway.log, f"{ended_job} ended with exit code 5")


def test_sigusr1_runs_a_full_collection_and_logs_the_memory(gateway, schedd):
    """SIGUSR1 is a request, not an end: the gateway collects, says so with its resident memory, and serves on."""
    assert gateway.process is not None
    before = gateway.log().count("full garbage collection (SIGUSR1)")
    gateway.process.send_signal(signal.SIGUSR1)
    wait_until(lambda: gateway.log().count("full garbage collection (SIGUSR1)") > before, "the collection's line")
    line = [line for line in gateway.log().splitlines() if "full garbage collection (SIGUSR1)" in line][-1]
    assert re.search(r"unreachable objects in [\d.]+ ms, \d+ objects tracked; resident memory [\d.]+ -> [\d.]+ MiB; "
                     r"C heap [\d.]+ MiB in use, [\d.]+ MiB free$", line), line
    assert gateway.process.poll() is None
    assert schedd.getVersionString().status.code == "SUCCESS"


def test_the_log_is_written_in_order_by_its_own_thread_and_a_stuck_file_never_holds_up_the_caller():
    """A pipe nobody reads yet stands for a disk that does not answer: the writes return at once, and once the pipe
    is read every line is there, in order."""
    from gateway.logging import BackgroundWriter

    read_end, write_end = os.pipe()
    stream = os.fdopen(write_end, "w")
    writer = BackgroundWriter(stream)
    lines = [f"line {number:06d} {'x' * 100}\n" for number in range(2000)]  # 220 KB: more than a pipe holds
    started = time.monotonic()
    for line in lines:
        writer.write(line)
        writer.flush()
    assert time.monotonic() - started < 1
    expected = "".join(lines).encode()
    received = b""
    with os.fdopen(read_end, "rb", buffering=0) as pipe:
        while len(received) < len(expected):
            received += pipe.read(1 << 16)
        writer.close()
        stream.close()
        assert pipe.read() == b""
    assert received == expected


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")

    def __format__(self, spec: str) -> str:
        raise RuntimeError("no text")


def test_the_log_lines_are_twisteds_classic_lines_and_an_event_without_text_writes_none():
    """Events are written by twisted's own formatter; a request's record for in-process observers (no format: the
    access log writes its line) makes no line, unless it carries a failure."""
    from twisted.logger import LogLevel, formatEventAsClassicLogText
    from twisted.python.failure import Failure

    from gateway.logging import line_of

    try:
        1 / 0  # noqa: B018 - a real failure to format
    except ZeroDivisionError:
        failure = Failure()
    base = {"log_namespace": "birdbath.request", "log_level": LogLevel.info, "log_time": 1700000000.75}
    for extra in ({"log_format": "{a!r} {b:>4}", "a": "x\n", "b": 3}, {"log_format": "failed", "log_failure": failure},
                  {"log_format": "{bad}", "bad": Unprintable()}, {"log_failure": failure}):
        event = {**base, **extra}
        assert line_of(event) == formatEventAsClassicLogText(event), event
    assert line_of({**base, "operation": "submit", "outcome": "OK", "ms": 1.0}) is None
    assert line_of({**base, "log_format": None}) is None


def test_the_access_log_writes_what_the_level_admits_and_nothing_before_logging_begins():
    import io

    from twisted.logger import LogLevel

    from gateway.logging import AccessLog, KnownLevels

    quiet = AccessLog()
    quiet.write("dropped\n")  # nowhere to write yet: as events before logging begins
    for level, written in ((LogLevel.info, "a line\n"), (LogLevel.debug, "a line\n"), (LogLevel.warn, "")):
        stream, access = io.StringIO(), AccessLog()
        access.start(stream, KnownLevels(level))
        access.write("a line\n")
        access.close()
        assert stream.getvalue() == written, level
    stream, access = io.StringIO(), AccessLog()
    predicate = KnownLevels(LogLevel.warn)
    access.start(stream, predicate)
    predicate.setLogLevelForNamespace("birdbath.request", LogLevel.info)  # the request lines alone, at info
    access.write("admitted\n")
    assert stream.getvalue() == "admitted\n"


def test_every_request_is_one_line_of_the_access_log(gateway):
    """Operations by their name and outcome, other requests by method, path and HTTP status; each once."""
    token = os.urandom(4).hex()  # the gateway serves the whole module: its paths are this test's alone
    with urllib.request.urlopen(gateway.url + f"condorSchedd.wsdl?n={token}", timeout=30) as response:
        assert response.status == 200
    with urllib.request.urlopen(gateway.url + f"healthz?n={token}", timeout=30) as response:
        assert response.status == 200
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(gateway.url + f"no/such/{token}", timeout=30)
    request = urllib.request.Request(gateway.url + "submission/json/getSubmissions", b"{}")
    with urllib.request.urlopen(request, timeout=30) as response:
        assert json.load(response)["status"]["code"] == "OK"
    bad = urllib.request.Request(gateway.url + "submission/json/getSubmissions", b"{nope")
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(bad, timeout=30)
    expected = [f"GET /condorSchedd.wsdl?n={token} from 127.0.0.1: 200 in",
                f"GET /healthz?n={token} from 127.0.0.1: 200 in", f"GET /no/such/{token} from 127.0.0.1: 404 in",
                "getSubmissions from 127.0.0.1: OK in",
                "getSubmissions from 127.0.0.1: FAIL in"]
    for part in expected:
        line = wait_for_line(gateway.log, part)
        assert "[birdbath.request#info]" in line and f"({OWNER} by socket)" in line, line
    assert wait_for_line(gateway.log, expected[-1]).split(f"({OWNER} by socket): ")[1].startswith("Bad request:")
    log = gateway.log()
    assert all(log.count(part) == 1 for part in expected[:3]), log


def test_the_level_filter_remembers_levels_as_twisteds_works_them_out():
    from twisted.logger import LogLevel, LogLevelFilterPredicate

    from gateway.logging import KnownLevels

    ours, twisteds = KnownLevels(LogLevel.warn), LogLevelFilterPredicate(LogLevel.warn)
    events = [{"log_level": level, "log_namespace": namespace}
              for level in (LogLevel.debug, LogLevel.info, LogLevel.warn, LogLevel.error, None)
              for namespace in ("birdbath.request", "birdbath", "birdbath.request.x", "other", "", None)]
    for change in (lambda p: None, lambda p: p.setLogLevelForNamespace("birdbath", LogLevel.debug),
                   lambda p: p.setLogLevelForNamespace("birdbath.request", LogLevel.error), lambda p: p.clearLogLevels()):
        change(ours)
        change(twisteds)
        for event in events * 2:
            assert ours(event) == twisteds(event), event
