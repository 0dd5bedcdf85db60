"""The launcher server (``launcher.py --serve``): one process forks the launcher of every spec path it reads and says
when each started and ended; each launcher runs its job and writes its result as one started on its own does, and
goes on if the server goes away.  Real processes on a real queue (``tests/local_runs.py``)."""

from __future__ import annotations

import os
import subprocess
import sys

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
