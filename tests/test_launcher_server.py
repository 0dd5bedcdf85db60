"""The launcher server (``launcher.py --serve``): one process forks the launcher of every spec path it reads and says
when each started and ended; each launcher runs its job and writes its result as one started on its own does, and
goes on if the server goes away.  Real processes on a real queue (``tests/local_runs.py``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from backends.local import launcher
from backends.local.launchers import LAUNCHER
from backends.local.owners import Accounts
from backends.local.sandbox import ExecuteDir
from jobmodel.classads import evaluate
from tests.local_runs import make_world


def server() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-S", "-s", str(LAUNCHER), "--serve"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})


def ask(process: subprocess.Popen, world, key) -> None:
    process.stdin.write(f"{ExecuteDir.of(world.execute, *key).spec_file}\n".encode())
    process.stdin.flush()


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


def test_only_a_launcher_whose_server_is_its_parent_is_heard_at_once():
    """(Only one that is not heard syncs its result file: a gateway that hears of the end records it, synced.)"""
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
