"""Runs one job and reports how it ended: ``python launcher.py SPEC.json``, or many: ``python launcher.py --serve``.

The executor starts one server (``--serve``) and writes it a line per order: ``run SPEC`` (the path of a job's spec),
``signal NUMBER SPEC``, ``kill SPEC``.  The server hands each run to a launcher of its own: one that waits for its
next job, else one it forks (this module is already loaded: no interpreter starts per job, which took a hundred
milliseconds of every job's run; and a launcher that ran a job before has touched its pages already: a fork per job,
and its first touch of every page it shared with the server, were half of a trivial job's cost).  It answers
``started <pid>``, then ``ended <pid>`` once that launcher's run is over (or the launcher is gone).  A signal goes to
the launcher only while it runs the run the order names, so a late one never reaches its next job.  A waiting
launcher ends when told no more jobs come (after ``IDLE_SECONDS``, or with its server).  It does not need its server
during a run: if the gateway (and so its server) goes away, the launchers finish their jobs, write their results
(synced) and end.

The gateway starts this small process instead of the job itself, as HTCondor's schedd has a starter: it keeps the
job's every process (its family: ``family.py``, a cgroup or the launcher as their subreaper; the job's processes in
a process group of their own, named with the launcher's pid in the run's file once they exist: ``runfile.py``), and
appends the job's exit status and usage to the run's file even if the gateway is not running when the job ends.  A stop
signal sent to the launcher (the job's ``KillSig``) is passed on to every process of the job, and ``kill_grace``
seconds later whatever is left is killed; SIGTSTP freezes the whole job and SIGCONT thaws it.  When the job's own
process ends, whatever it left running is killed.  While it runs, its usage is written every
``starter_update_interval`` seconds, and a job over its memory under the hard policy is killed and held.

The launcher itself only touches the gateway's file of the run (its spec, to which it appends).  Everything the
job's ad names is handled by forked children that first become the job's owner (the spec's ``account``; none when
the gateway is not root): one checks the job's files, transfers its input, opens its streams and executes it; after
the run, another transfers its output.  They report to the launcher over a pipe, one JSON object a line: the
sandbox as the job found it (``snapshot``), a hold (``failure``: reason and code) or an ``exec_error``.  The
children fork, never exec Python: a switched process may not be able to read the interpreter.  A job with no account
to switch to (it runs as the launcher's own user) needs no such child: the launcher does the same checks itself and
starts the job with ``vfork`` + ``exec``, which costs a fraction of a fork of the interpreter.
"""

from __future__ import annotations

import contextlib
import enum
import gc
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

if not __package__:  # run as a script: import the package from its root (this directory's queue.py is no stdlib)
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from backends.local import runfile  # noqa: E402
from backends.local.family import (  # noqa: E402
    KILL_NOW,
    Control,
    Family,
    Monitor,
    become_subreaper,
    descendants,
    open_family,
    own_directories,
    reap_all,
)
from backends.local.owners import Account  # noqa: E402
from backends.local.parallel_launch import run_nodes  # noqa: E402
from backends.local.quickio import write_all  # noqa: E402
from backends.local.starter import STREAMS, BadJob, collect, open_stream, open_streams, prepare  # noqa: E402
from jobmodel.jobs import HoldCode  # noqa: E402
from jobmodel.stacklimit import restore_stack_limit  # noqa: E402

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
SUSPEND, CONTINUE = signal.SIGTSTP, signal.SIGCONT  # from the gateway: freeze and thaw the whole job
HEARD = (*FORWARDED, SUSPEND, CONTINUE, KILL_NOW)


class Hearing(enum.Enum):
    """What the gateway's signals do now (one handler hears them all, installed once: a launcher runs job after
    job, and swapping nine handlers three times a run was a tenth of a trivial job's launcher time)."""

    NOTHING = "dropped: no run, or its job is over (never SIG_IGN: an ignored signal stays ignored after exec)"
    KEPT = "kept until the job's first process exists, then passed on"
    THE_JOB = "passed on to the job"


_hearing = Hearing.NOTHING
_early: list[int] = []  # signals heard before the job existed, in order
_forwarded: list[int] = []  # signals passed on to the job: the gateway ended the run (its output stays behind)
_family: Family | None = None  # the job's processes (set by run)
NOT_STARTED = 127  # the exit code of a job whose program could not be started


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one job: its processes in a process group of their own (the launcher is not in it: it runs the next job
    after this one), its family kept, its end waited for; returns the run's result."""
    try:
        return _run(spec)
    finally:
        _disarm()


def _run(spec: dict[str, Any]) -> dict[str, Any]:
    global _family
    started = time.time()
    restore_stack_limit()  # the gateway's own is raised for its evaluations; the job gets the one it was started with
    _hear(Hearing.KEPT)  # signals that arrive before the job exists are passed on once it does
    control_dir = Path(spec["run_file"]).parent
    family = _family = open_family(Control.of(spec))
    monitor = Monitor(family, control_dir)

    def ready(group: int) -> None:
        _arm()
        _ready(spec["run_file"], group)

    account = Account.from_spec(spec["account"]) if spec.get("account") else None
    if "nodes" in spec:  # a parallel job: every node at once (parallel_launch.py)
        ended = run_nodes(spec, _Owner(account, family), lambda group: (ready(group), monitor.start()))
        return ended | _end_family(family, monitor, ended)
    if account is None:
        with family.starting():
            process, started_job = _start_here(spec)
        if process is not None:
            ready(process.pid)
        ended = _watched(process.pid if process is not None else None, monitor)
        if process is not None:
            process.returncode = ended["exit_code"]  # reaped: subprocess must never poll a pid no longer ours
    else:
        with family.starting():
            child, report = _as_owner(account, _start_job, spec, group=0)
        ready(child)
        started_job = _messages(report)  # until exec (or the child's end): the pipe closes on exec
        ended = _watched(child, monitor)
    ended |= _end_family(family, monitor, ended)
    setup_failure = started_job.get("failure")
    output_failure = None
    if spec["sandboxed"] and setup_failure is None and "exec_error" not in started_job and not _forwarded \
            and ended["memory_failure"] is None:
        output_failure = _transfer_output(spec, account, started_job.get("snapshot") or {})
    return ended | {"wall_seconds": time.time() - started, "exec_error": started_job.get("exec_error"),
                    "setup_failure": setup_failure, "output_failure": output_failure}


def _ready(run_file: str, group: int) -> None:
    """Say the job's process group and this launcher's pid: the gateway signals the job (through the launcher) only
    once the run's file says so, and kills what is left of the group when the run is over."""
    runfile.append(run_file, {runfile.STARTED: [group, os.getpid()], "at": time.time()})


def _disarm() -> None:
    """The run is over: the gateway's signals reach no job any more, and nothing of this run is kept for the next
    one (a signal that comes late is heard and dropped, never left to the job after)."""
    global _family
    _hear(Hearing.NOTHING)  # (first: a stop signal heard before would arm the grace timer again)
    signal.setitimer(signal.ITIMER_REAL, 0)
    _forwarded.clear()
    _early.clear()
    _family = None


def _hear(hearing: Hearing) -> None:
    """Set what the gateway's signals do from now on (the handler, the first time)."""
    global _hearing
    if signal.getsignal(KILL_NOW) is not _heard:
        for number in HEARD:
            signal.signal(number, _heard)
    _hearing = hearing


def _heard(number: int, _frame: object) -> None:
    if _hearing is Hearing.THE_JOB:
        _PASSED_ON[number](number)
    elif _hearing is Hearing.KEPT:
        _early.append(number)


def _end_family(family: Family, monitor: Monitor, ended: dict[str, Any]) -> dict[str, Any]:
    """The job's own process ended: end every process it left, reap them, and give the run's usage as the family's
    (what ``wait4`` saw of the job's own process is part of it)."""
    signal.setitimer(signal.ITIMER_REAL, 0)  # (a grace period still running is over)
    if family.frozen:
        family.thaw()
    family.kill()
    reap_all()
    last = monitor.stop()
    family.close()
    return {"user_cpu": max(ended["user_cpu"], last["user_cpu"]), "sys_cpu": max(ended["sys_cpu"], last["sys_cpu"]),
            "max_rss_kb": max(ended["max_rss_kb"], last["peak_rss_kb"]), "disk_kb": last["disk_kb"],
            "memory_failure": family.memory_failure}


def _watched(child: int | None, monitor: Monitor) -> dict[str, Any]:
    """:func:`_wait` for the job's process, the monitor watching it once it outlives the monitor's first check."""
    if child is not None:
        monitor.start(child)
    return _wait(child)


def _wait(child: int | None) -> dict[str, Any]:
    """How the job's process ended and what it used (``wait4``); a job that never started (None) "exited" 127, as
    the owner's side does when it cannot start it."""
    if child is None:
        return {"exit_code": NOT_STARTED, "signal": None, "user_cpu": 0.0, "sys_cpu": 0.0, "max_rss_kb": 0}
    while True:  # (the family's orphans, handed to a subreaper launcher, are reaped on the way)
        pid, status, usage = os.wait4(-1, 0)
        if pid == child:
            break
    return {"exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "user_cpu": usage.ru_utime, "sys_cpu": usage.ru_stime, "max_rss_kb": usage.ru_maxrss}


def _start_here(spec: dict[str, Any]) -> tuple[subprocess.Popen | None, dict[str, Any]]:
    """Start a job that runs as the launcher's own user (no account to switch to): the owner's side is this
    process, so the checks, the input transfer and the streams are done here, and the job is started with
    ``vfork`` + ``exec`` (``subprocess``) instead of a fork of this interpreter (a fork's page-table copy and
    copy-on-write faults were most of a trivial job's cost).  Returns the job's process (None: it never started;
    the caller reaps it with ``wait4`` and keeps the object until then, or subprocess would reap it when the object
    is collected) and what the owner's side reports (``_start_job``'s messages)."""
    report: dict[str, Any] = {}
    streams: list[int] = []
    try:
        report["snapshot"] = prepare(spec)
        _check_directory(spec["cwd"])
        streams = [open_stream(spec, *stream) for stream in STREAMS]
        return subprocess.Popen([spec["executable"], *spec["arguments"]], executable=spec["executable"],
                                cwd=spec["cwd"], env=spec["environment"], stdin=streams[0], stdout=streams[1],
                                stderr=streams[2], close_fds=True, restore_signals=False, process_group=0), report
    except BadJob as bad:
        report["failure"] = {"reason": bad.reason, "code": int(bad.code)}
    except OSError as exc:
        if exc.filename == spec["executable"] and "snapshot" in report:  # (the exec itself failed)
            report["exec_error"] = f"{exc.filename}: {exc.strerror}"
        else:
            report["failure"] = _starter_failure(exc)
    except Exception as exc:  # as the owner's side reports anything else
        report["failure"] = _starter_failure(exc)
    finally:
        for fd in streams:
            os.close(fd)
    return None, report


def _check_directory(path: str) -> None:
    """Fail as the owner's side's ``chdir`` into the job's directory would (the launcher stays where it is)."""
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.chdir(path)
        os.fchdir(here)
    finally:
        os.close(here)


def _starter_failure(exc: BaseException) -> dict[str, Any]:
    return {"reason": f"Error from starter: {exc}", "code": int(HoldCode.FAILED_TO_CREATE_PROCESS)}


def _arm() -> None:
    """Pass the gateway's signals on to the job from now on, those that came before it existed first."""
    _hear(Hearing.THE_JOB)
    while _early:
        number = _early.pop(0)
        _PASSED_ON[number](number)


class _Owner:
    """The owner's side of a parallel job's nodes (``parallel_launch.OwnerSide``)."""

    def __init__(self, account: Account | None, family: Family) -> None:
        self._account = account
        self._family = family
        self._group = 0  # the job's process group: the first node's

    def start(self, spec: dict[str, Any]) -> tuple[int, int]:
        with self._family.starting():
            child, report = _as_owner(self._account, _start_job, spec, group=self._group)
        self._group = self._group or child
        return child, report

    def messages(self, fd: int) -> dict[str, Any]:
        return _messages(fd)

    def transfer(self, spec: dict[str, Any], snapshot: dict[str, Any]) -> dict | None:
        return _transfer_output(spec, self._account, snapshot)

    def interrupted(self) -> bool:
        return bool(_forwarded)


def _as_owner(account: Account | None, work: Callable[..., None], *args: Any,
              group: int | None = None) -> tuple[int, int]:
    """Fork a child that becomes ``account`` and does ``work(report, *args)``; returns its pid and the read end of
    its report pipe.  A :class:`BadJob` in the child is reported as its ``failure``.  ``group``: the job's process
    group the child joins (0: a new one, the child's own; None: it stays in the launcher's)."""
    reading, writing = os.pipe()  # close-on-exec: a job that execs closes it
    child = os.fork()
    if child:
        os.close(writing)
        if group is not None:  # (as the child does: whichever comes first, the group exists before either goes on)
            with contextlib.suppress(OSError):
                os.setpgid(child, group or child)
        return child, reading
    status = 127  # pragma: no cover - the child leaves through os._exit
    try:
        os.close(reading)
        if group is not None:
            os.setpgid(0, group)
        for number in HEARD:
            signal.signal(number, signal.SIG_DFL)
        if account is not None:
            try:
                account.switch()
            except OSError as exc:
                raise BadJob(f"Error from starter: cannot run as the job's owner {account.name!r}: {exc.strerror}",
                             HoldCode.FAILED_TO_CREATE_PROCESS) from None
        work(writing, *args)
        status = 0
    except BadJob as bad:
        _say(writing, failure={"reason": bad.reason, "code": int(bad.code)})
    except BaseException as exc:  # anything else is still the starter's failure, not a crash of the launcher
        _say(writing, failure=_starter_failure(exc))
    finally:
        os._exit(status)


def _start_job(report: int, spec: dict[str, Any]) -> None:
    """In the job's process, as its owner: check and transfer its files, open its streams, execute it."""
    _say(report, snapshot=prepare(spec))
    os.chdir(spec["cwd"])
    open_streams(spec)
    try:
        os.execve(spec["executable"], [spec["executable"], *spec["arguments"]], spec["environment"])
    except OSError as exc:
        _say(report, exec_error=f"{exc.filename or spec['executable']}: {exc.strerror}")
        os._exit(NOT_STARTED)


def _collect(_report: int, spec: dict[str, Any], before: dict[str, Any]) -> None:
    """In a child, as the job's owner: copy the run's output back (a failure is reported as a hold)."""
    collect(spec, before)


def _transfer_output(spec: dict[str, Any], account: Account | None, before: dict[str, Any]) -> dict | None:
    """Copy the output of a sandboxed run back to Iwd as the job's owner; the hold it fails with, if it does."""
    child, report = _as_owner(account, _collect, spec, before)
    failure = _messages(report).get("failure")
    _, status = os.waitpid(child, 0)
    if failure is None and os.WIFSIGNALED(status):
        failure = {"reason": f"Transfer output files failure: interrupted by signal {os.WTERMSIG(status)}",
                   "code": int(HoldCode.TRANSFER_OUTPUT_ERROR)}
    return failure


def _say(fd: int, **message: Any) -> None:
    write_all(fd, json.dumps(message).encode() + b"\n")


def _messages(fd: int) -> dict[str, Any]:
    """Everything a child reported, until it closed its end."""
    with os.fdopen(fd, "rb") as stream:
        lines = stream.read().splitlines()
    found: dict[str, Any] = {}
    for line in lines:
        try:
            found.update(json.loads(line))
        except ValueError:
            continue
    return found


def _forward(number: int) -> None:
    """Pass a stop signal to every process of the job (thawed first, so that it hears it), and kill what is left
    of it when the grace period is over."""
    assert _family is not None
    if not _forwarded:
        signal.setitimer(signal.ITIMER_REAL, max(0.001, _family.control.kill_grace))
    _forwarded.append(number)
    if _family.frozen:
        _family.thaw()
    _family.signal(number)


def _grace_over(number: int) -> None:
    """Kill every process of the job now: the grace period is over, or the gateway shuts down fast."""
    assert _family is not None
    if not _forwarded:  # (the gateway ended the run: its output stays behind)
        _forwarded.append(number)
    _family.thaw()
    _family.kill()


def _suspend(_number: int) -> None:
    assert _family is not None
    if not _forwarded:  # (a job being stopped is not frozen again)
        _family.freeze()


def _continue(_number: int) -> None:
    assert _family is not None
    if _family.frozen:
        _family.thaw()


#: what each of the gateway's signals does to the job (KILL_NOW is also the grace period's timer)
_PASSED_ON: dict[int, Callable[[int], None]] = {**{number: _forward for number in FORWARDED}, SUSPEND: _suspend,
                                                CONTINUE: _continue, KILL_NOW: _grace_over}


def main(spec_path: str, server: int | None = None) -> int:
    """Run the job of this spec and write its result; ``server``: the pid of the launcher server this launcher
    serves (None: started on its own)."""
    if server is None:
        os.setsid()  # (a served launcher made its session when it was forked)
    os.chdir(Path(spec_path).parent)  # the execute directory (the gateway starts us without a working directory)
    try:
        spec = runfile.read(spec_path).spec
        if spec is None:
            raise ValueError(f"no launcher spec in {spec_path}")
        result = run(spec)
        runfile.append(spec["run_file"], {runfile.ENDED: result}, sync=not heard(server))
    finally:
        os.chdir("/")  # (the directory goes once the run is recorded; a launcher waiting for its next job holds none)
    return 0


def heard(server: int | None) -> bool:
    """Whether a gateway hears of the run's end as soon as this launcher says it ended: its server (the gateway's
    child) is still its parent.  The gateway then records the end in its queue, synced, before the run's file goes,
    so the file needs no sync of its own (it was a tenth of a trivial job's time); a machine that goes down before
    that runs the job again, as HTCondor runs again a job whose execute machine went down before the shadow heard of
    its end.  A launcher whose gateway is gone, or started on its own, syncs its result: it may be read only much
    later."""
    return server is not None and os.getppid() == server


# -- the server -------------------------------------------------------------------------------------------------
#: seconds a launcher waits for its next job before the server lets it go
IDLE_SECONDS = 60.0


class _Served:
    """A launcher the server forked, and the job it runs (None: it waits for one)."""

    def __init__(self, pid: int, channel: socket.socket) -> None:
        self.pid = pid
        self.channel = channel
        self.spec: str | None = None
        self.idle_since = time.monotonic()


class _Server:
    """Hands every job to a launcher, a waiting one first (forking one only when none waits: a fork, and the
    launcher's first touch of every page it shares with the server, were half of a trivial job's cost), passes the
    gateway's signals to the launcher of the job they name, and says when each run started and ended."""

    def __init__(self, wake: tuple[int, int]) -> None:
        self._wake = wake
        self._served: dict[int, _Served] = {}  # by pid
        self._waiting: list[_Served] = []  # the launchers waiting for a job, the last one done last

    def channels(self) -> dict[int, _Served]:
        return {served.channel.fileno(): served for served in self._served.values()}

    def order(self, line: str) -> None:
        """One line from the gateway: ``run SPEC``, ``signal NUMBER SPEC`` or ``kill SPEC``."""
        what, _, rest = line.partition(" ")
        if what == "run":
            _tell(f"started {self._run(rest)}")
        elif what == "signal":
            number, _, spec = rest.partition(" ")
            self._signal(spec, int(number), os.kill)
        elif what == "kill":  # (the launcher's group: it, and any child of its own; the job's is the gateway's to kill)
            self._signal(rest, signal.SIGKILL, os.killpg)

    def _run(self, spec: str) -> int:
        """The pid of the launcher now running ``spec`` (0: none could be had)."""
        for served in self._candidates():
            try:
                served.channel.sendall(f"{spec}\n".encode())
            except OSError:  # (it is gone: its end is reaped)
                continue
            served.spec = spec
            return served.pid
        return 0

    def _candidates(self) -> Iterator[_Served]:
        """The launchers waiting for a job, the last one done first, then a new one."""
        while self._waiting:
            yield self._waiting.pop()
        served = self._fork()
        if served is not None:
            yield served

    def _signal(self, spec: str, number: int, send: Callable[[int, int], None]) -> None:
        """Signal the launcher running ``spec`` only: a launcher that ran it and went on to another job never hears
        of the run before (the gateway may not have read its end yet)."""
        for served in self._served.values():
            if served.spec == spec:
                with contextlib.suppress(OSError):
                    send(served.pid, number)

    def heard(self, served: _Served) -> None:
        """A launcher said its run is over (or closed its end: it is gone, and reaped below)."""
        try:
            said = served.channel.recv(64)
        except OSError:
            said = b""
        if not said:
            return
        if served.spec is not None:
            served.spec = None
            served.idle_since = time.monotonic()
            self._waiting.append(served)
            _tell(f"ended {served.pid}")

    def reaped(self, pid: int) -> None:
        """A child of the server ended: a launcher (said ended if it was running a run), or a process of a run whose
        launcher died before it (the server is their subreaper: :meth:`end_orphans`)."""
        served = self._served.pop(pid, None)
        if served is None:
            return
        served.channel.close()
        if served in self._waiting:
            self._waiting.remove(served)
        if served.spec is not None:  # (it ended during a run: killed, or crashed; what it kept is the server's now)
            self.end_orphans()
            _tell(f"ended {pid}")

    def end_orphans(self) -> None:
        """Kill every process below the server that no living launcher keeps: what a launcher killed during its run
        (the executor's last resort) or crashed left of its job is handed to the server, its subreaper, and must not
        outlive the run, whatever session it made (the job's cgroup, where there is one, is killed by the gateway)."""
        launchers = frozenset(self._served)
        for _ in range(200):
            orphans = [pid for pid, _ in descendants(skip=launchers)]
            if not orphans:
                return
            for pid in orphans:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def retire(self) -> float | None:
        """Let go of the launchers that waited ``IDLE_SECONDS``; seconds until the next would (None: none waits)."""
        now = time.monotonic()
        for served in [served for served in self._waiting if now - served.idle_since >= IDLE_SECONDS]:
            self._waiting.remove(served)
            served.channel.shutdown(socket.SHUT_RDWR)  # (it reads the end of its jobs and exits; reaped as it does)
        return min((served.idle_since + IDLE_SECONDS - now for served in self._waiting), default=None)

    def close(self) -> None:
        """No more jobs: every launcher ends once its run, if it has one, is over."""
        for served in self._served.values():
            with contextlib.suppress(OSError):
                served.channel.shutdown(socket.SHUT_WR)

    def _fork(self) -> _Served | None:
        """A new launcher: a child of this server that runs the jobs it is sent, one after the other."""
        server = os.getpid()
        ours, theirs = socket.socketpair()
        try:
            pid = os.fork()
        except OSError:
            ours.close()
            theirs.close()
            return None
        if pid:
            theirs.close()
            served = self._served[pid] = _Served(pid, ours)
            return served
        status = 1  # pragma: no cover - the child leaves through os._exit
        try:
            signal.set_wakeup_fd(-1)
            for number in (signal.SIGCHLD, signal.SIGINT):
                signal.signal(number, signal.SIG_DFL)
            for fd in (*self._wake, *self.channels(), ours.fileno()):
                os.close(fd)
            null = os.open(os.devnull, os.O_RDWR)  # the server's pipes to the gateway are not the launcher's
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.close(null)
            status = _serve_jobs(theirs, server)
        finally:
            os._exit(status)


def _serve_jobs(channel: socket.socket, server: int) -> int:
    """A served launcher: run each job whose spec path comes on ``channel``, say ``done`` after each; end when the
    server says no more (or is gone)."""
    os.setsid()  # (the jobs' process groups are in this session; none is this launcher's)
    _hear(Hearing.NOTHING)
    with channel.makefile("rb") as specs:
        for line in specs:
            main(line.decode().rstrip("\n"), server)
            try:
                channel.sendall(b"done\n")
            except OSError:  # the server is gone: no job comes after this one (its result is synced)
                return 0
    return 0


def serve() -> int:
    """Run a launcher for every job the gateway names on stdin; say on stdout when each run started and ended.  Ends
    when stdin does (the gateway closed it, or is gone); the launchers finish their runs first, on their own."""
    wake_read, wake_write = os.pipe()
    for fd in (wake_read, wake_write):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_write)  # a SIGCHLD wakes the select below
    signal.signal(signal.SIGCHLD, lambda _number, _frame: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (a ^C to the gateway's terminal is the gateway's to handle)
    own_directories()  # (read once here: every launcher is forked in the server's cgroups)
    become_subreaper()  # (what a launcher that dies during a run leaves comes to the server: _Server.end_orphans)
    gc.freeze()  # a launcher's collections never walk the server's objects (nor copy their pages from it)
    server = _Server((wake_read, wake_write))
    pending = b""
    while True:
        channels = server.channels()
        ready, _, _ = select.select([0, wake_read, *channels], [], [], server.retire())
        if wake_read in ready:
            while _drained(wake_read):
                pass
        for fd in ready:
            if fd in channels:
                server.heard(channels[fd])
        _reap(server)
        if 0 not in ready:
            continue
        data = os.read(0, 65536)
        if not data:
            server.close()
            return 0
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            server.order(line.decode())


def _drained(fd: int) -> bool:
    try:
        return bool(os.read(fd, 4096))
    except BlockingIOError:
        return False


def _reap(server: _Server) -> None:
    """Reap the launchers that ended (saying so of those that ended during a run), and end what they left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        server.reaped(pid)


def _tell(line: str) -> None:
    write_all(1, f"{line}\n".encode())


if __name__ == "__main__":
    sys.exit(serve() if sys.argv[1] == "--serve" else main(sys.argv[1]))
