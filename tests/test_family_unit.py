"""The launcher's side of a job's family, piece by piece (``family.py``): the monitor's thread is started only for a
job that outlives the monitor's first check, a subreaper with no child reads nothing of ``/proc`` (and one with
children still finds every descendant), and a launcher that starts a job in its cgroup comes back to its own
cgroups in the hierarchies it left.  Real processes; what the whole job sees is in test_job_control.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from backends.local import cgroups, family
from backends.local.cgroups import MemoryPolicy, Usage
from backends.local.family import Control, Family, Monitor

ROOT = Path(__file__).resolve().parents[1]


class Steady(Family):
    """A family whose usage is always the same, counting how often it was read."""

    def __init__(self, control: Control) -> None:
        super().__init__(control)
        self.reads = 0

    def usage(self) -> Usage:
        self.reads += 1
        return Usage(rss=1 << 20, peak=2 << 20, user_cpu=0.5, sys_cpu=0.25)


def control(update_interval: float = 300.0, memory_mb: int | None = None) -> Control:
    return Control(memory_mb, MemoryPolicy.HARD, 1, update_interval, 10.0)


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition stayed false"
        time.sleep(0.01)


def test_a_job_that_ends_before_the_first_check_never_starts_the_monitors_thread(tmp_path):
    job = subprocess.Popen(["/bin/true"])
    steady = Steady(control(update_interval=0.2))
    monitor = Monitor(steady, tmp_path)
    monitor.start(job.pid)  # (returns once the job has ended: it was waited for on its pidfd, not reaped)
    assert job.wait() == 0
    assert monitor._thread.ident is None  # never started
    sample = monitor.stop()
    assert (sample["rss_kb"], sample["peak_rss_kb"], sample["user_cpu"]) == (1024, 2048, 0.5)
    assert steady.reads == 1  # the last sample and the last memory check share one reading
    assert not (tmp_path / family.USAGE_FILE).exists()


def test_a_job_that_outlives_the_first_check_is_watched_and_its_usage_written(tmp_path):
    job = subprocess.Popen(["/bin/sleep", "60"])
    try:
        monitor = Monitor(Steady(control(update_interval=0.05)), tmp_path)
        monitor.start(job.pid)
        assert monitor._thread.is_alive()
        wait_for(lambda: family.read_usage(tmp_path) is not None)
        assert family.read_usage(tmp_path)["peak_rss_kb"] == 2048
    finally:
        job.kill()
        job.wait()
    monitor.stop()
    assert not monitor._thread.is_alive()


class Greedy(Steady):
    """A family over a 1 MiB request (it uses 2), whose kill ends the job's process."""

    def __init__(self, job: subprocess.Popen) -> None:
        super().__init__(Control(1, MemoryPolicy.HARD, 1, 0.05, 10.0))
        self.job = job
        self.killed = False

    def usage(self) -> Usage:
        return Usage(rss=2 << 20, peak=2 << 20, user_cpu=0.0, sys_cpu=0.0)

    def kill(self) -> None:
        self.killed = True
        self.job.kill()


def test_a_job_over_its_memory_after_the_first_check_is_killed_by_the_monitor(tmp_path):
    job = subprocess.Popen(["/bin/sleep", "60"])
    greedy = Greedy(job)
    try:
        monitor = Monitor(greedy, tmp_path)
        monitor.start(job.pid)
        job.wait(timeout=60)
    finally:
        job.kill()
        job.wait()
    monitor.stop()
    assert greedy.killed
    assert greedy.memory_failure["code"] == family.OUT_OF_RESOURCES


def test_watching_a_process_that_is_gone_starts_nothing(tmp_path):
    job = subprocess.Popen(["/bin/true"])
    job.wait()  # reaped: its pid names no process of ours any more
    monitor = Monitor(Steady(control(update_interval=0.05)), tmp_path)
    monitor.start(job.pid)
    assert monitor._thread.ident is None
    monitor.stop()


def test_without_a_pid_the_monitor_watches_at_once(tmp_path):
    """(A parallel job's nodes: no one process to wait for.)"""
    monitor = Monitor(Steady(control(update_interval=0.05)), tmp_path)
    monitor.start()
    try:
        wait_for(lambda: family.read_usage(tmp_path) is not None)
    finally:
        monitor.stop()


def run_python(code: str) -> dict:
    """Run ``code`` in a fresh interpreter (whatever it does to its own process stays there); what it printed, as
    JSON."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False, cwd=ROOT, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_subreaper_without_children_has_no_descendants_and_one_with_them_finds_every_one():
    found = run_python("""
        import json, os, subprocess, time
        from backends.local import family
        alone = family.descendants()
        family.ReaperFamily(family.Control(None, "none", 1, 300.0, 10.0))  # (this process is their subreaper now)
        shell = subprocess.Popen(["/bin/sh", "-c", "setsid sleep 60 & sleep 60 & wait"])
        deadline = time.monotonic() + 30
        while len(family.descendants()) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        with_children = len(family.descendants())
        shell.kill()  # its children are handed to this process, the subreaper
        shell.wait()
        orphans = len(family.descendants())
        for pid, _ in family.descendants():
            os.kill(pid, 9)
        family.reap_all()
        print(json.dumps({"alone": alone, "with_children": with_children, "orphans": orphans,
                          "after": family.descendants()}))
    """)
    assert found == {"alone": [], "with_children": 3, "orphans": 2, "after": []}


@pytest.mark.skipif(os.geteuid() != 0, reason="only root makes cgroups")
def test_a_launcher_comes_back_to_its_own_cgroups_after_starting_the_job_in_its_own():
    base = f"birdbath-test-{uuid.uuid4().hex[:8]}"
    found = run_python(f"""
        import json, subprocess
        from pathlib import Path
        from backends.local import cgroups, family
        hierarchy = cgroups.detect({base!r})
        before = Path("/proc/self/cgroup").read_text()
        job_cgroup = hierarchy.job("dir_3.0")
        keeper = family.CgroupFamily(family.Control(64, "hard", 1, 300.0, 10.0), job_cgroup)
        with keeper.starting():
            job = subprocess.Popen(["/bin/sleep", "60"])
        inside = keeper.pids() == [job.pid]
        after = Path("/proc/self/cgroup").read_text()
        keeper.kill()
        job.wait()
        keeper.close()
        hierarchy.close()
        print(json.dumps({{"inside": inside, "back": before == after,
                          "hierarchies": sorted(job_cgroup.hierarchies()),
                          "own": sorted(family.own_directories())}}))
    """)
    assert found["inside"] and found["back"]
    assert set(found["hierarchies"]) <= set(found["own"])


def test_each_version_names_the_hierarchies_its_cgroup_is_in(tmp_path):
    v1 = cgroups.CgroupV1({"memory": tmp_path / "m", "freezer": tmp_path / "f"})
    assert v1.hierarchies() == ["memory", "freezer"]
    assert cgroups.CgroupV2(tmp_path / "job", True, False).hierarchies() == [""]
