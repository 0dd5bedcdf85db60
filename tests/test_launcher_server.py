"""The launcher server (``launcher.py --serve``): one process hands every job it is told to run to a launcher, one
waiting for its next job if there is one, else one it forks, and says when each run started and ended; each
launcher runs its job and writes its result as one started on its own does, and goes on if the server goes away.
Signals reach only the launcher still running the run they name.  Real processes on a real queue
(``tests/local_runs.py``)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backends.local import launcher, recovery
from backends.local.launchers import LAUNCHER
from backends.local.owners import Accounts
from backends.local.sandbox import ExecuteDir
from jobmodel.classads import evaluate
from tests.local_runs import make_world


def server() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-S", "-s", str(LAUNCHER), "--serve"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})


def ask(process: subprocess.Popen, world, key) -> None:
    order(process, f"run {ExecuteDir.of(world.execute, *key).run_file}")


def order(process: subprocess.Popen, line: str) -> None:
    process.stdin.write(f"{line}\n".encode())
    process.stdin.flush()


def said(process: subprocess.Popen) -> tuple[str, int]:
    what, pid = process.stdout.readline().decode().split()
    return what, int(pid)


def gone(pid: int) -> bool:
    """Whether ``pid`` has ended (it is not our child: its zombie, if any, is its parent's)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in "ZX"


def started_job(world, running=frozenset(), **attributes):
    """One job submitted and started by the scheduler (its spec written), on one free slot."""
    (key,) = world.submit(**attributes)
    assert world.start(free_cpus=1, running=running) == [key]
    return key


def finish(process: subprocess.Popen, world) -> None:
    """The server ends with its input (its launchers with their runs)."""
    process.stdin.close()
    assert process.wait(timeout=30) == 0
    world.queue.store.close()


def wait_until(condition, what: str) -> None:
    for _ in range(600):
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def test_the_server_forks_a_launcher_per_job_and_says_when_each_started_and_ended(tmp_path):
    world = make_world(tmp_path, Accounts([], switching=False))
    keys = world.submit(procs=2, Cmd="/bin/sh", Arguments="-c 'exit 7'", LeaveJobInQueue=True)
    assert sorted(world.start()) == keys
    process = server()
    for key in keys:
        ask(process, world, key)
    said = [process.stdout.readline().decode().split() for _ in range(4)]
    started = [int(pid) for what, pid in said if what == "started"]
    assert len(started) == 2 and all(started) and sorted(started) == sorted(
        int(pid) for what, pid in said if what == "ended")
    process.stdin.close()
    assert process.wait(timeout=30) == 0  # (the server ends with its input)
    for key in keys:
        world.scheduler.finish_job(key)
        assert evaluate(world.job(key), "ExitCode") == 7
    world.queue.store.close()


def test_a_launcher_runs_the_next_job_once_its_run_is_over_each_with_its_own_usage(tmp_path):
    world = make_world(tmp_path, Accounts([], switching=False))
    busy = started_job(world, Cmd="/bin/sh", Arguments="-c 'i=0; while [ $i -lt 60000 ]; do i=$((i+1)); done; exit 4'")
    process = server()
    ask(process, world, busy)
    started = said(process)
    assert started[0] == "started" and said(process) == ("ended", started[1])
    idle = started_job(world, Cmd="/bin/sh", Arguments="-c 'exit 5'")
    ask(process, world, idle)
    assert said(process) == started and said(process) == ("ended", started[1])  # (the same launcher)
    busy_result = ExecuteDir.of(world.execute, *busy).result()
    idle_result = ExecuteDir.of(world.execute, *idle).result()
    assert (busy_result["exit_code"], idle_result["exit_code"]) == (4, 5)
    # the second run's usage is its own, not the launcher's whole (the first loop's CPU is not counted twice)
    assert busy_result["user_cpu"] + busy_result["sys_cpu"] > 0.05
    assert idle_result["user_cpu"] + idle_result["sys_cpu"] < busy_result["user_cpu"] + busy_result["sys_cpu"] / 2
    process.stdin.close()
    assert process.wait(timeout=30) == 0
    wait_until(lambda: gone(started[1]), "the waiting launcher ends with its server")
    world.queue.store.close()


def test_a_signal_reaches_only_the_launcher_still_running_the_run_it_names(tmp_path):
    """A hold sent just as the run ended (the gateway had not read the end yet) never reaches the next job the same
    launcher runs; one naming that job stops it."""
    world = make_world(tmp_path, Accounts([], switching=False))
    first = started_job(world, Cmd="/bin/true")
    process = server()
    ask(process, world, first)
    pid = said(process)[1]
    assert said(process) == ("ended", pid)
    gate = tmp_path / "gate"
    second = started_job(world, Cmd="/bin/sh", Arguments=f"-c 'while [ ! -e {gate} ]; do sleep 0.05; done; exit 6'")
    ask(process, world, second)
    assert said(process) == ("started", pid)
    second_dir = ExecuteDir.of(world.execute, *second)
    wait_until(lambda: second_dir.pgid() is not None, "the second job started")
    order(process, f"signal {int(signal.SIGTERM)} {ExecuteDir.of(world.execute, *first).run_file}")
    order(process, f"kill {ExecuteDir.of(world.execute, *first).run_file}")
    gate.touch()
    assert said(process) == ("ended", pid)
    assert second_dir.result()["exit_code"] == 6  # (neither the late signal nor the late kill reached it)
    third = started_job(world, Cmd="/bin/sh", Arguments="-c 'sleep 60'")
    ask(process, world, third)
    assert said(process) == ("started", pid)
    third_dir = ExecuteDir.of(world.execute, *third)
    wait_until(lambda: third_dir.pgid() is not None, "the third job started")
    assert third_dir.started().launcher == pid and third_dir.pgid() != pid  # (the job's group is not the launcher's)
    order(process, f"signal {int(signal.SIGTERM)} {third_dir.run_file}")
    assert said(process) == ("ended", pid)
    assert third_dir.result()["signal"] == signal.SIGTERM
    finish(process, world)


def test_a_killed_launcher_is_said_ended_and_the_next_job_gets_another(tmp_path):
    world = make_world(tmp_path, Accounts([], switching=False))
    stuck = started_job(world, Cmd="/bin/sh", Arguments="-c 'sleep 60'")
    process = server()
    ask(process, world, stuck)
    pid = said(process)[1]
    directory = ExecuteDir.of(world.execute, *stuck)
    wait_until(lambda: directory.pgid() is not None, "the job started")
    order(process, f"kill {directory.run_file}")
    assert said(process) == ("ended", pid)
    assert directory.result() is None
    wait_until(lambda: not members(directory.pgid()), "the job is killed (its server was its launcher's subreaper)")
    after = started_job(world, Cmd="/bin/true", running={stuck})
    ask(process, world, after)
    what, other = said(process)
    assert what == "started" and other not in (0, pid) and said(process) == ("ended", other)
    finish(process, world)


def test_what_a_killed_launcher_kept_is_killed_by_its_server(tmp_path):
    """The executor's last resort kills a launcher during its run: the job's processes it kept as their subreaper
    (here a daemon that made its own session) are handed to the server, which kills them."""
    world = make_world(tmp_path, Accounts([], switching=False))
    token = f"daemon-{os.getpid()}-{time.monotonic_ns()}"
    key = started_job(world, Cmd="/bin/sh", Arguments=f"-c 'setsid sh -c \"sleep 300; : {token}\" & sleep 300'")
    process = server()
    ask(process, world, key)
    pid = said(process)[1]
    directory = ExecuteDir.of(world.execute, *key)
    wait_until(lambda: directory.pgid() is not None and holding(token), "the job and its daemon started")
    order(process, f"kill {directory.run_file}")
    assert said(process) == ("ended", pid)
    wait_until(lambda: not holding(token), "the daemon is killed")  # (and the job with it)
    finish(process, world)


def holding(token: str) -> list[int]:
    """The living processes whose command line holds ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes() and not gone(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_launcher_waiting_too_long_is_let_go():
    """(In the server's own process, on its clock: a waiting launcher is told no more jobs come, and is then
    reaped like any other.)"""
    served = launcher._Server((-1, -1))
    ours, theirs = socket.socketpair()
    waiting = launcher._Served(4242, ours)
    served._served[4242] = waiting
    served._waiting.append(waiting)
    waiting.idle_since = time.monotonic() - launcher.IDLE_SECONDS + 30
    assert 29 < served.retire() <= 30 and served._waiting == [waiting]
    waiting.idle_since -= 31
    assert served.retire() is None and served._waiting == []
    assert theirs.recv(16) == b""  # (the launcher reads that no more jobs come, and ends)
    served.reaped(4242)
    assert served._served == {}
    theirs.close()


def test_a_launcher_finishes_its_job_when_the_server_is_gone(tmp_path):
    world = make_world(tmp_path, Accounts([], switching=False))
    gate = tmp_path / "gate"
    (key,) = world.submit(Cmd="/bin/sh", Arguments=f"-c 'while [ ! -e {gate} ]; do sleep 0.05; done; exit 3'")
    assert world.start() == [key]
    process = server()
    ask(process, world, key)
    assert process.stdout.readline().decode().startswith("started ")
    process.kill()  # (as a gateway killed with SIGKILL takes its server with it)
    process.wait()
    gate.touch()
    directory = ExecuteDir.of(world.execute, *key)
    for _ in range(600):
        if directory.result() is not None:
            break
        subprocess.run(["sleep", "0.05"])
    assert directory.result()["exit_code"] == 3
    world.queue.store.close()


def test_recovery_kills_a_launcher_still_running_the_run_its_gateway_lost(tmp_path):
    """After a crash, the run's launcher (the job is not in its process group) goes with the job: it would write the
    run's end into the directory of the job's next run."""
    world = make_world(tmp_path, Accounts([], switching=False))
    (key,) = world.submit(Cmd="/bin/sh", Arguments="-c 'sleep 60'")
    assert world.start() == [key]
    process = server()
    ask(process, world, key)
    pid = said(process)[1]
    directory = ExecuteDir.of(world.execute, *key)
    wait_until(lambda: directory.pgid() is not None, "the job started")
    group = directory.pgid()
    process.kill()  # (as a gateway killed with SIGKILL takes its server with it)
    process.wait()
    recovery.kill_leftover(directory)
    wait_until(lambda: gone(pid), "the launcher is killed")
    wait_until(lambda: not any(gone(member) is False for member in members(group)), "the job is killed")
    assert directory.result() is None
    world.queue.store.close()


def members(group: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) == group:
                    found.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return found


def test_only_a_launcher_whose_server_is_its_parent_is_heard_at_once():
    """(Only one that is not heard syncs the run's file: a gateway that hears of the end records it, synced.)"""
    assert launcher.heard(os.getppid())
    assert not launcher.heard(None)  # started on its own (``python launcher.py SPEC``)
    assert not launcher.heard(os.getpid())  # its server is gone: it was handed to another parent
    assert not launcher.heard(0)


# -- a job that runs as the launcher's own user: started here, with vfork + exec -------------------------------
def both_ways(spec: dict) -> tuple[tuple, tuple]:
    """What starting ``spec``'s job reports, and how it ended, started by the launcher itself (``_start_here``, the
    path of a job that runs as the launcher's own user) and by a forked owner's side (``_as_owner``, the path of a
    job that runs as another account; here without a switch)."""
    process, here = launcher._start_here(spec)
    here_end = launcher._wait(process.pid if process is not None else None)
    if process is not None:
        process.returncode = here_end["exit_code"]
    child, report = launcher._as_owner(None, launcher._start_job, spec)
    forked = launcher._messages(report)
    forked_end = launcher._wait(child)
    return ((here, here_end["exit_code"], here_end["signal"]),
            (forked, forked_end["exit_code"], forked_end["signal"]))


@pytest.mark.parametrize("attributes", [
    {"Cmd": "/bin/sh", "Arguments": "-c 'echo out; echo err >&2; exit 7'", "Out": "out.txt", "Err": "err.txt"},
    {"Cmd": "/bin/sh", "Arguments": "-c 'kill -TERM $$'"},
    {"Cmd": "script.sh"},  # its interpreter does not exist: exec fails
    {"Cmd": "/bin/true", "Out": "no/such/directory/out.txt"},
    {"Cmd": "/bin/true", "In": "/no/such/input"},
    {"Cmd": "/bin/true", "Iwd": "/no/such/iwd"},
    {"Cmd": "/no/such/program"},
    {"Cmd": "/bin/sh", "Arguments": "-c 'test \"$GREETING\" = \"hello there\" && test \"$(pwd)\" = \"$EXPECTED\"'",
     "Environment": "GREETING='hello there'"},
])
def test_a_job_started_by_the_launcher_itself_reports_as_the_owners_side_does(tmp_path, attributes):
    world = make_world(tmp_path, Accounts([], switching=False))
    script = world.iwd / "script.sh"
    script.write_text("#!/no/such/interpreter\n")
    script.chmod(0o755)
    if "Environment" in attributes:
        attributes = attributes | {"Environment": f"{attributes['Environment']} EXPECTED={world.iwd}"}
    (key,) = world.submit(**attributes)
    assert world.start() == [key]
    spec = world.spec(key)
    here, forked = both_ways(spec)
    assert here == forked
    if "Out" in attributes and "no/such" not in attributes["Out"]:
        assert (world.iwd / "out.txt").read_text() == "out\n" and (world.iwd / "err.txt").read_text() == "err\n"
    world.queue.store.close()
