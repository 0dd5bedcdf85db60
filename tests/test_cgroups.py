"""Job cgroups on this machine's real kernel: the v1 controllers (what ``detect`` picks on this v1/v2 hybrid) and
the unified v2 hierarchy (its freezer and kill, which need no controller).  A process put in a job's cgroup before it
forks keeps every descendant there, ``setsid`` or not; freezing stops them all, killing ends them all.  Also the
knobs the gateway checks at start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from backends.local import cgroups
from backends.local.backend import LocalBackend
from backends.local.cgroups import JobCgroup, MemoryPolicy

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root makes cgroups")
UNIFIED = Path("/sys/fs/cgroup/unified")
ROOT = Path(__file__).resolve().parents[1]


def state(pid: int) -> str:
    """A process's state letter in /proc."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def living(pids: list[int]) -> list[int]:
    found = []
    for pid in pids:
        try:
            if state(pid) not in "ZX":
                found.append(pid)
        except OSError:
            continue
    return found


def wait_until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition stayed false"
        time.sleep(0.01)


def exercise(cgroup: JobCgroup) -> None:
    """Put a shell in the cgroup, let it start a setsid daemon, then freeze, thaw, measure, kill and remove."""
    shell = subprocess.Popen(["/bin/sh", "-c", "read go; setsid sleep 301 & exec sleep 300"], stdin=subprocess.PIPE,
                             preexec_fn=cgroup.enter)  # (the child, alone in its process, enters before it execs)
    try:  # (a failure leaves nothing running behind it either)
        shell.stdin.write(b"go\n")
        shell.stdin.flush()
        wait_until(lambda: len(cgroup.pids()) == 2)  # the shell (now sleep 300) and its setsid daemon
        daemon = next(pid for pid in cgroup.pids() if pid != shell.pid)
        wait_until(lambda: os.getsid(daemon) != os.getsid(shell.pid))  # out of the job's session, in its cgroup
        cgroup.freeze()
        assert cgroup.is_frozen()  # (every task of it stopped: the kernel says so once they all are)
        cgroup.thaw()
        assert not cgroup.is_frozen()
        usage = cgroup.usage()
        assert usage.user_cpu >= 0 and usage.sys_cpu >= 0
        pids = cgroup.pids()
        cgroup.kill()
        assert cgroup.pids() == []
        shell.wait(timeout=5)
        wait_until(lambda: living(pids) == [])  # (the daemon was init's to reap)
        cgroup.remove()
        assert not any(directory.exists() for directory in cgroup.directories())
    finally:
        cgroup.thaw()
        cgroup.kill()
        cgroup.remove()
        shell.kill()
        shell.wait()


@pytest.fixture
def v1():
    hierarchy = cgroups.detect(f"birdbath-test-{uuid.uuid4().hex[:8]}")
    assert isinstance(hierarchy, cgroups.V1Hierarchy), "this machine has v1 memory and freezer controllers"
    yield hierarchy
    hierarchy.close()
    assert not any(directory.exists() for directory in hierarchy.directories())


def test_v1_job_cgroup_holds_every_process(v1):
    cgroup = v1.job(cgroups.job_name("/var/lib/birdbath/execute/dir_1.0"))
    assert cgroup.paths["freezer"].name == "var_lib_birdbath_execute_dir_1.0"
    assert sorted(cgroup.paths) == ["cpu", "cpuacct", "freezer", "memory"]  # (pids would set nothing)
    cgroup.create(64, MemoryPolicy.HARD, 2)
    assert int((cgroup.paths["memory"] / "memory.limit_in_bytes").read_text()) == 64 << 20
    assert int((cgroup.paths["cpu"] / "cpu.shares").read_text()) == 2048
    exercise(JobCgroup.from_spec(cgroup.spec()))  # (as the launcher makes it again from its spec)


def test_v1_kill_of_a_cgroup_its_launcher_removes_meanwhile_is_done(v1, monkeypatch):
    """A restart's recovery kills what is left in a job's cgroup while the job's launcher may be ending and removing
    it: the cgroup found with processes is gone when it is frozen (the race CI met, ENODEV from a dying cgroup)."""
    cgroup = v1.job(cgroups.job_name(f"/tmp/birdbath-test/{uuid.uuid4().hex[:8]}"))
    cgroup.create(None, MemoryPolicy.NONE, 1)
    monkeypatch.setattr(type(cgroup), "pids", lambda self: [os.getpid()])  # seen with a process in it, then:
    cgroup.remove()
    cgroup.kill()  # nothing left to kill, no error
    assert not any(directory.exists() for directory in cgroup.directories())


@pytest.mark.parametrize("policy", [MemoryPolicy.SOFT, MemoryPolicy.NONE])
def test_v1_soft_and_no_memory_policies(v1, policy):
    cgroup = v1.job(f"policy-{policy}")
    cgroup.create(64, policy, 1)
    try:
        hard = int((cgroup.paths["memory"] / "memory.limit_in_bytes").read_text())
        soft = int((cgroup.paths["memory"] / "memory.soft_limit_in_bytes").read_text())
        assert hard > 1 << 40  # no hard limit
        assert (soft == 64 << 20) == (policy == MemoryPolicy.SOFT)
    finally:
        cgroup.remove()


@pytest.mark.skipif(not (UNIFIED / "cgroup.procs").exists(), reason="no cgroup v2 hierarchy mounted")
def test_v2_job_cgroup_holds_every_process():
    hierarchy = cgroups.v2_hierarchy(UNIFIED, "/", f"birdbath-test-{uuid.uuid4().hex[:8]}")
    try:
        cgroup = hierarchy.job("dir_2.0")
        cgroup.create(None, MemoryPolicy.HARD, 1)
        exercise(cgroup)
    finally:
        hierarchy.close()
    assert not hierarchy.base.exists()


def test_an_empty_base_cgroup_switches_cgroups_off():
    assert cgroups.detect("") is None


@pytest.mark.parametrize("options, words", [
    ({"cgroup_memory_limit_policy": "strict"}, "cgroup_memory_limit_policy must be one of hard, soft, none"),
    ({"starter_update_interval": 0}, "starter_update_interval must be a number of seconds > 0"),
    ({"starter_update_interval": "often"}, "starter_update_interval must be a number of seconds > 0"),
    ({"base_cgroup": "../escape"}, "base_cgroup must be a cgroup name"),
])
def test_bad_knobs_stop_the_start_with_a_clear_error(tmp_path, options, words):
    with pytest.raises(ValueError, match=words):
        LocalBackend(tmp_path / "state", **options)


def test_v1_enter_moves_the_calling_thread_and_what_it_starts_only(v1):
    """(What lets the launcher enter without the kernel's global lock: it names itself, one thread.)"""
    cgroup = v1.job("enter-self")
    cgroup.create(None, MemoryPolicy.NONE, 1)
    code = f"""
import json, os, subprocess, threading
from pathlib import Path
from backends.local import cgroups
cgroup = cgroups.JobCgroup.from_spec({cgroup.spec()!r})
other = threading.Thread(target=threading.Event().wait, args=(60,), daemon=True)
other.start()
cgroup.enter()
child = subprocess.Popen(["sleep", "60"])
tasks = [int(tid) for tid in (cgroup.paths["freezer"] / "tasks").read_text().split()]
print(json.dumps({{"tasks": sorted(tasks), "me": threading.get_native_id(), "other": other.native_id,
                  "child": child.pid}}))
child.kill()
child.wait()
"""
    try:
        done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60,
                              cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        found = json.loads(done.stdout)
        assert found["tasks"] == sorted([found["me"], found["child"]])  # not the process's other thread
    finally:
        cgroup.kill()
        cgroup.remove()
