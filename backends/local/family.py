"""A job's process family, as HTCondor's starter keeps it: every process the job starts is tracked, whatever session
it makes or however it forks, so that the job can be stopped, suspended, measured and held to its memory request.

The launcher keeps the family.  Where the gateway found cgroups (``cgroups.py``: it runs as root, ``base_cgroup``
is set) the family is the job's cgroup (:class:`CgroupFamily`): the launcher steps into it while it starts the job,
so everything the job starts is born inside.  Elsewhere the launcher is a child subreaper (``PR_SET_CHILD_SUBREAPER``)
and the family is every process below it (:class:`ReaperFamily`): a process whose parent ends is handed to the
launcher instead of to init, so a double fork or a ``setsid`` does not get it out.

While the job runs, a :class:`Monitor` thread samples the family's usage into ``usage.json`` (beside the spec) every
``starter_update_interval`` seconds (the gateway puts it in the job's ad) and checks its memory every second: a job
over ``request_memory`` under the ``hard`` policy is killed, and held as HTCondor's starter holds it.

What the launcher is told (:class:`Control`, in the launcher's spec) is written by the scheduler.  Only the
standard library here: the launcher imports this module without site-packages.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import math
import os
import resource
import select
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backends.local import cgroups, runfile
from backends.local.cgroups import JobCgroup, MemoryPolicy, Usage

USAGE_FILE = "usage.json"
#: HTCondor's CONDOR_HOLD_CODE::JobOutOfResources
OUT_OF_RESOURCES = 34
#: seconds between the monitor's memory checks (usage is written every ``update_interval``)
MEMORY_CHECK = 1.0
#: the signal that tells a launcher to kill its job at once (the end of the grace period: a fast shut-down)
KILL_NOW = signal.SIGALRM
PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class Control:
    """How the launcher keeps one job under control (the ``control`` of its spec)."""

    memory_mb: int | None  # request_memory (None: none asked)
    policy: str  # cgroup_memory_limit_policy
    cpus: int
    update_interval: float  # starter_update_interval
    kill_grace: float  # seconds between the job's kill signal and SIGKILL
    cgroup: dict | None = None  # the job's cgroup (JobCgroup.spec()); None: the launcher is a subreaper
    disk: list[str] = field(default_factory=list)  # the directories whose size is the job's DiskUsage

    def as_spec(self) -> dict[str, Any]:
        """What a spec holds of it (:meth:`of` reads it back): its fields as they are (``asdict`` copied every
        nested value of the cgroup's, for each job's start)."""
        return dict(vars(self))

    @classmethod
    def of(cls, spec: dict[str, Any]) -> Control | None:
        """The control a spec holds (a job's, a DAG script's; None: none, or not one)."""
        try:
            return cls(**spec["control"])
        except (KeyError, TypeError):
            return None

    @classmethod
    def read(cls, control_dir: Path) -> Control | None:
        """The control of the run whose file is in ``control_dir`` (None: none there)."""
        return cls.of(runfile.read(control_dir / runfile.NAME).spec or {})


@dataclass(frozen=True)
class ControlConfig:
    """The gateway's knobs for keeping jobs under control, and the cgroups it found at start (None: none)."""

    policy: str = MemoryPolicy.HARD
    update_interval: float = 300.0
    kill_grace: float = 10.0
    hierarchy: cgroups.Hierarchy | None = None

    def for_job(self, execute_dir: Path, memory_mb: int | None, cpus: int, disk: list[Path]) -> Control:
        cgroup = self.hierarchy.job(cgroups.job_name(str(execute_dir))).spec() if self.hierarchy else None
        return Control(memory_mb, self.policy, cpus, self.update_interval, self.kill_grace, cgroup,
                       [str(path) for path in disk])

    def for_process(self, name: str) -> Control:
        """How a process the gateway starts for a job's sake but outside any job (a DAG's PRE or POST script) is
        kept: every process it starts tracked, in a cgroup of its own named ``name`` where there are cgroups, and
        not limited (HTCondor does not limit DAGMan's scripts)."""
        cgroup = self.hierarchy.job(name).spec() if self.hierarchy else None
        return Control(None, MemoryPolicy.NONE, 1, self.update_interval, self.kill_grace, cgroup)


class Family:
    """Every process of one job (never the launcher itself)."""

    #: set when the job was killed for its memory: the hold's reason and code
    memory_failure: dict | None = None

    def __init__(self, control: Control) -> None:
        self.control = control
        self.frozen = False

    @contextlib.contextmanager
    def starting(self) -> Iterator[None]:
        """While the launcher starts the job's processes (they are the family's from birth)."""
        yield

    def pids(self) -> list[int]:
        raise NotImplementedError

    def signal(self, number: int) -> None:
        cgroups.signal_each(self.pids(), number)

    def freeze(self) -> None:
        self.frozen = True

    def thaw(self) -> None:
        self.frozen = False

    def kill(self) -> None:
        """SIGKILL every process of the family until none is left."""
        raise NotImplementedError

    def usage(self) -> Usage:
        raise NotImplementedError

    def out_of_memory(self, usage: Usage) -> bool:
        """Whether the job went over its memory under the hard policy (the kernel's OOM kill, where it enforces the
        limit; else a resident size over the request)."""
        limit = self.control.memory_mb
        return bool(limit) and self.control.policy == MemoryPolicy.HARD and usage.rss > limit * cgroups.MEBIBYTE

    def memory_reason(self, peak: int) -> str:
        return (f"Error from starter: Job has gone over memory limit of {self.control.memory_mb} megabytes. "
                f"Peak usage: {math.ceil(peak / cgroups.MEBIBYTE)} megabytes.  "
                "Consider resubmitting with a higher request_memory.")

    def close(self) -> None:
        """The run is over (the family is dead)."""


class CgroupFamily(Family):
    def __init__(self, control: Control, cgroup: JobCgroup) -> None:
        super().__init__(control)
        self.cgroup = cgroup
        cgroup.create(control.memory_mb, control.policy, control.cpus)

    @contextlib.contextmanager
    def starting(self) -> Iterator[None]:
        own = own_directories()
        home = {name: own[name] for name in self.cgroup.hierarchies() if name in own}
        self.cgroup.enter()
        try:
            yield
        finally:  # the launcher itself is never frozen, killed or counted with the job (back in the hierarchies it
            # left only)
            for name, directory in home.items():
                with contextlib.suppress(OSError):
                    cgroups.move_self(directory, name)

    def pids(self) -> list[int]:
        return [pid for pid in self.cgroup.pids() if pid != os.getpid()]

    def freeze(self) -> None:
        self.cgroup.freeze()
        super().freeze()

    def thaw(self) -> None:
        self.cgroup.thaw()
        super().thaw()

    def kill(self) -> None:
        self.cgroup.kill()

    def usage(self) -> Usage:
        return self.cgroup.usage()

    def out_of_memory(self, usage: Usage) -> bool:
        if self.cgroup.limits_memory():
            return self.control.policy == MemoryPolicy.HARD and self.cgroup.oom_kills() > 0
        return super().out_of_memory(usage)

    def memory_reason(self, peak: int) -> str:
        if not self.cgroup.limits_memory():
            return super().memory_reason(peak)
        return (f"Error from starter: Job has gone over cgroup memory limit of {self.control.memory_mb} megabytes. "
                f"Peak usage: {math.ceil(peak / cgroups.MEBIBYTE)} megabytes.  "
                "Consider resubmitting with a higher request_memory.")

    def close(self) -> None:
        self.cgroup.remove()


class ReaperFamily(Family):
    """The launcher's descendants; the launcher is their subreaper.  Only the launcher's main thread reaps (it
    waits for the job's status), so the dead here are zombies until it does, and are left out."""

    def __init__(self, control: Control) -> None:
        super().__init__(control)
        #: what the launcher's reaped children had used before this job (a launcher runs one job after another)
        self._before = resource.getrusage(resource.RUSAGE_CHILDREN)
        become_subreaper()

    def pids(self) -> list[int]:
        return [pid for pid, _ in descendants()]

    def freeze(self) -> None:
        """SIGSTOP every process, again until no running one is left (one may fork meanwhile)."""
        for _ in range(50):
            running = [pid for pid, state in descendants() if state not in "Tt"]
            if not running:
                break
            cgroups.signal_each(running, signal.SIGSTOP)
            time.sleep(0.005)
        super().freeze()

    def thaw(self) -> None:
        self.signal(signal.SIGCONT)
        super().thaw()

    def kill(self) -> None:
        for _ in range(200):
            pids = self.pids()
            if not pids:
                return
            cgroups.signal_each(pids, signal.SIGKILL)
            time.sleep(0.005)

    def usage(self) -> Usage:
        rss = user = system = 0.0
        page, hertz = os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_CLK_TCK")
        for pid, _ in descendants():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                rss += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
            except (OSError, ValueError, IndexError):
                continue
            user += int(fields[11]) / hertz
            system += int(fields[12]) / hertz
        reaped = resource.getrusage(resource.RUSAGE_CHILDREN)  # (the family's dead, which the launcher reaped)
        return Usage(int(rss), int(rss), user + reaped.ru_utime - self._before.ru_utime,
                     system + reaped.ru_stime - self._before.ru_stime)


def become_subreaper() -> None:
    """Have this process's orphaned descendants handed to it rather than to init (``PR_SET_CHILD_SUBREAPER``)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(error)}")


def open_family(control: Control | None) -> Family:
    """The family of the job the launcher is about to start: its cgroup when it has one, else the launcher's
    descendants (also when the cgroup cannot be made: the job is tracked all the same, and not limited)."""
    control = control or Control(None, MemoryPolicy.NONE, 1, 300.0, 10.0)
    if control.cgroup is not None:
        try:
            return CgroupFamily(control, JobCgroup.from_spec(control.cgroup))
        except OSError:
            pass
    return ReaperFamily(control)


@functools.cache
def own_directories() -> dict[str, Path]:
    """The directories of this process's cgroups by hierarchy (a v1 controller, ``""`` for v2).  Read once per
    process: the launcher server reads them before it forks any launcher, which are born in the same cgroups."""
    mounts, own = cgroups._mounts(), cgroups._own_cgroups()
    return {name: point / own[name].lstrip("/") for name, point in mounts.items() if name in own}


def descendants(skip: frozenset[int] = frozenset()) -> list[tuple[int, str]]:
    """The living (not zombie) processes below this one, but for those in ``skip`` and theirs: (pid, state).  Read
    from every process's ``/proc`` entry only when this one has a child: a subreaper's descendants all have an
    ancestor among its children (an orphan is handed to it), so a launcher whose job's processes are gone and reaped
    scans nothing (a scan of a busy machine's /proc took milliseconds, several times at every job's end)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return []
    root = os.getpid()
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            state, parent = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError):
            continue
        children.setdefault(int(parent), []).append((int(entry.name), state))
    found: list[tuple[int, str]] = []
    stack = [root]
    while stack:
        for pid, state in children.get(stack.pop(), []):
            if pid in skip:  # (and what is below it)
                continue
            stack.append(pid)
            if state not in "ZX":
                found.append((pid, state))
    return found


def disk_usage(directories: list[str]) -> int:
    """KiB the files under these directories take (links are not followed)."""
    total = 0
    for top in directories:
        for folder, _, names in os.walk(top):
            for name in names:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(folder, name)).st_size
    return (total + 1023) // 1024


class Monitor:
    """The launcher's thread that watches a running job: its memory every second, its usage written every
    ``update_interval`` seconds (``usage.json`` beside the spec), until :meth:`stop`, which returns the last sample."""

    def __init__(self, family: Family, control_dir: Path) -> None:
        self._family = family
        self._path = control_dir / USAGE_FILE
        self._stopped = threading.Event()
        self._peak = 0
        self._thread = threading.Thread(target=self._run, name="job monitor", daemon=True)

    def start(self, job: int | None = None) -> None:
        """Watch the job from now on; given the pid of its process, only once it outlives the first check, waited for
        here (a job that ends before never needs the thread, whose start and join were a third of a trivial job's
        launcher)."""
        if job is not None and not _outlives(job, self._first_check()):
            return
        self._thread.start()

    def _first_check(self) -> float:
        return min(MEMORY_CHECK, max(0.05, self._family.control.update_interval))

    def stop(self) -> dict[str, Any]:
        """The last sample, once the job has ended (and whether its end was its memory's: the kernel's OOM kill of
        the job's own process may come before the thread's next look)."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()
        usage = self._family.usage()
        sample = self.sample(usage)
        if self._family.memory_failure is None:
            self._over_memory(usage)
        return sample

    def sample(self, usage: Usage | None = None) -> dict[str, Any]:
        usage = usage or self._family.usage()
        self._peak = max(self._peak, usage.peak, usage.rss)
        return {"rss_kb": usage.rss // 1024, "peak_rss_kb": self._peak // 1024, "user_cpu": usage.user_cpu,
                "sys_cpu": usage.sys_cpu, "disk_kb": disk_usage(self._family.control.disk), "time": time.time()}

    def _run(self) -> None:
        """Check the job's memory every second and write its usage every interval, from the first check on (the
        thread starts when the first check is due)."""
        interval = max(0.05, self._family.control.update_interval)
        written = -math.inf  # (the first sample is written at the first check)
        while not self._stopped.is_set():
            if self._over_memory(self._family.usage()):
                self._family.thaw()
                self._family.kill()
                return
            if time.monotonic() - written >= interval:
                written = time.monotonic()
                self._write(self.sample())
            self._stopped.wait(self._first_check())

    def _over_memory(self, usage: Usage) -> bool:
        """Whether the job went over its memory (its hold's reason and code are then the family's)."""
        self._peak = max(self._peak, usage.peak, usage.rss)
        if not self._family.out_of_memory(usage):
            return False
        self._family.memory_failure = {"reason": self._family.memory_reason(self._peak), "code": OUT_OF_RESOURCES}
        return True

    def _write(self, sample: dict[str, Any]) -> None:
        temporary = self._path.with_suffix(".tmp")
        with contextlib.suppress(OSError):
            temporary.write_text(json.dumps(sample))
            os.replace(temporary, self._path)


def _outlives(pid: int, seconds: float) -> bool:
    """Whether the process ``pid`` (a child of ours, not reaped meanwhile) is still running ``seconds`` from now:
    waited for on its pidfd, which is readable once it has ended (the caller reaps it; signals handled meanwhile do
    not cut the wait short)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return not poller.poll(seconds * 1000)
    finally:
        os.close(fd)


def read_usage(control_dir: Path) -> dict[str, Any] | None:
    """The latest usage the launcher wrote for a running job (None: none yet)."""
    try:
        return json.loads((control_dir / USAGE_FILE).read_text())
    except (OSError, ValueError):
        return None


def end_leftovers(control_dir: Path) -> None:
    """Kill whatever is left in a job's cgroup and remove it (its launcher is gone: killed, or the gateway
    restarted).  A job without a cgroup has nothing here (its process group is killed by the caller)."""
    end_cgroup(Control.read(control_dir))


def end_cgroup(control: Control | None) -> None:
    """Kill whatever is left in the cgroup of a family whose keeper is gone, and remove it (no cgroup: nothing)."""
    if control is None or control.cgroup is None:
        return
    cgroup = JobCgroup.from_spec(control.cgroup)
    if any(directory.exists() for directory in cgroup.directories()):
        cgroup.kill()
        cgroup.remove()


def reap_all() -> None:
    """Reap every child left, once the family is dead (a subreaper's orphans are its zombies until reaped)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.005)
