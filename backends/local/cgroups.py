"""Control groups for jobs, as HTCondor's starter uses them: one cgroup per job under ``base_cgroup``, holding every
process the job starts (whatever sessions they make or however they fork), so that the whole job can be frozen,
killed, measured and limited.

Both kernel interfaces are handled: cgroup v1 (one hierarchy per controller: ``memory``, ``freezer``,
``cpu``, ``cpuacct``) and cgroup v2 (one unified hierarchy; freezing and killing are the kernel's own there, the
controllers are used when the hierarchy gives them).  :func:`detect` picks, at the gateway's start, what the machine
offers: v2 when ``/sys/fs/cgroup`` is the unified hierarchy, else v1 when its ``memory`` and ``freezer`` controllers
are mounted (a v1/v2 hybrid uses v1, as HTCondor does), else nothing (the launcher then tracks the job as a
subreaper: ``family.py``).  Job cgroups are made below the cgroup the gateway runs in, so a gateway started inside
a limited cgroup keeps its jobs inside that limit.

Only the standard library: the launcher imports this module without site-packages.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from .quickio import read_text, write_text

#: the v1 controllers a job's cgroup is made in: what the launcher limits, freezes, tracks and measures with (not
#: ``pids``, which sets nothing here: each hierarchy is a directory made, entered, left and removed for every job)
V1_CONTROLLERS = ("memory", "freezer", "cpu", "cpuacct")
MEBIBYTE = 1024 * 1024
#: HTCondor's cpu weight per requested core (cgroup v1 ``cpu.shares``; v2 ``cpu.weight`` is this divided by 10)
SHARES_PER_CPU = 1024


class MemoryPolicy:
    """``cgroup_memory_limit_policy``: ``hard`` (the kernel never lets the job use more than ``request_memory``),
    ``soft`` (it may, while the machine has memory to spare), ``none`` (no limit)."""

    HARD = "hard"
    SOFT = "soft"
    NONE = "none"
    ALL = (HARD, SOFT, NONE)


@dataclass(frozen=True)
class Usage:
    """What a job's processes use now: resident memory and its peak (bytes), CPU seconds."""

    rss: int
    peak: int
    user_cpu: float
    sys_cpu: float


def _read(path: Path) -> str:
    return read_text(path)


#: what a cgroup's files answer once it is removed (ENOENT), or while the kernel removes it (ENODEV)
GONE = (errno.ENOENT, errno.ENODEV)


def _write(path: Path, text: str) -> None:
    write_text(path, text)


def _fields(path: Path) -> dict[str, int]:
    """A ``key value`` file (``memory.stat``, ``cpu.stat``, ``memory.events``, ``memory.oom_control``)."""
    found: dict[str, int] = {}
    try:
        for line in _read(path).splitlines():
            key, _, value = line.partition(" ")
            if value.strip().lstrip("-").isdigit():
                found[key] = int(value)
    except OSError:
        pass
    return found


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup in each hierarchy (``/proc/self/cgroup``): controller (or ``""`` for v2) -> path."""
    own: dict[str, str] = {}
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


def _mounts() -> dict[str, Path]:
    """Where each cgroup hierarchy is mounted (``/proc/self/mountinfo``): a v1 controller, or ``""`` for v2."""
    found: dict[str, Path] = {}
    for line in _read(Path("/proc/self/mountinfo")).splitlines():
        before, _, after = line.partition(" - ")
        fstype, _source, options = (after.split() + ["", "", ""])[:3]
        point = Path(before.split()[4].replace("\\040", " "))
        if fstype == "cgroup2":
            found.setdefault("", point)
        elif fstype == "cgroup":
            for option in options.split(","):
                if option in V1_CONTROLLERS:
                    found.setdefault(option, point)
    return found


def job_name(execute_dir: str) -> str:
    """A job's cgroup name: its execute directory, ``/`` made ``_`` (as HTCondor names a slot's cgroup after its
    execute directory), unique on the machine; a long one ends with its hash."""
    name = execute_dir.strip("/").replace("/", "_")
    if len(name) > 200:
        name = f"{name[:160]}_{abs(hash(name)):x}"
    return name


class Hierarchy:
    """Where this machine's job cgroups go (the gateway's side); :meth:`job` gives one job's :class:`JobCgroup`."""

    version: int

    def job(self, name: str) -> JobCgroup:
        raise NotImplementedError

    def directories(self) -> list[Path]:
        raise NotImplementedError

    def close(self) -> None:
        """Remove the directories job cgroups went in, if no job's is left (another gateway may share them)."""
        for directory in self.directories():
            try:
                directory.rmdir()
            except OSError:
                pass


class JobCgroup:
    """One job's cgroup: made before the job starts, the job's processes put in it, then frozen, signalled, killed,
    measured and removed.  ``spec()`` is what the launcher gets (``from_spec`` makes it again there)."""

    def spec(self) -> dict:
        raise NotImplementedError

    @staticmethod
    def from_spec(spec: dict) -> JobCgroup:
        if spec["version"] == 2:
            return CgroupV2(Path(spec["path"]), bool(spec.get("memory")), bool(spec.get("cpu")))
        return CgroupV1({name: Path(path) for name, path in spec["paths"].items()})

    # what each version implements
    def hierarchies(self) -> list[str]:
        """The hierarchies it is made in: v1 controllers, or ``""`` for v2 (as ``_mounts`` names them)."""
        raise NotImplementedError

    def create(self, memory_mb: int | None, policy: str, cpus: int) -> None:
        raise NotImplementedError

    def limits_memory(self) -> bool:
        """Whether the kernel enforces a memory limit here (else the launcher polls the usage)."""
        raise NotImplementedError

    def enter(self) -> None:
        """Move the calling thread in: what it starts from then on is born in the job's cgroup (the launcher, alone
        in its process then, enters before it starts the job and goes back to its own cgroups after)."""
        raise NotImplementedError

    def pids(self) -> list[int]:
        raise NotImplementedError

    def freeze(self) -> None:
        raise NotImplementedError

    def thaw(self) -> None:
        raise NotImplementedError

    def is_frozen(self) -> bool:
        raise NotImplementedError

    def usage(self) -> Usage:
        raise NotImplementedError

    def oom_kills(self) -> int:
        raise NotImplementedError

    def directories(self) -> list[Path]:
        raise NotImplementedError

    # the same for both
    def signal(self, number: int) -> None:
        signal_each(self.pids(), number)

    def kill(self) -> None:
        """SIGKILL every process of the job until none is left: frozen first, so none can fork meanwhile.  A cgroup
        removed meanwhile (its launcher ended and removed it: the kernel answers ENODEV while it goes, ENOENT after)
        held nothing more to kill."""
        try:
            self._kill_all()
        except OSError as exc:
            if exc.errno not in GONE:
                raise

    def _kill_all(self) -> None:
        for _ in range(200):
            pids = self.pids()
            if not pids:
                return
            self.freeze()
            try:
                signal_each(self.pids(), signal.SIGKILL)
            finally:
                self.thaw()
            time.sleep(0.01)

    def remove(self) -> None:
        """Remove the job's cgroup (once empty; the kernel may take a moment to let an emptied v1 memory cgroup go)."""
        for directory in self.directories():
            for _ in range(50):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        break
                    time.sleep(0.02)


def signal_each(pids: list[int], number: int) -> None:
    """Signal these processes (those that are gone meanwhile, or no longer ours, are passed over)."""
    for pid in pids:
        try:
            os.kill(pid, number)
        except (ProcessLookupError, PermissionError):
            pass


def move_self(directory: Path, hierarchy: str) -> None:
    """Move the calling thread into the cgroup ``directory`` of ``hierarchy`` (a v1 controller, ``""`` for v2).  In
    v1 a thread that names itself (``0`` in ``tasks``) is moved without the kernel's global lock on every process's
    cgroups, whose taking waits for its readers to sync (milliseconds, longer on a loaded machine: most of what a
    launcher's start of a trivial job waited for); a caller alone in its process moves its process so.  v2 moves the
    whole process (``cgroup.procs``)."""
    if hierarchy:
        _write(directory / "tasks", "0")
    else:
        _write(directory / "cgroup.procs", str(os.getpid()))


def _pids_in(path: Path) -> list[int]:
    try:
        return [int(line) for line in _read(path / "cgroup.procs").split()]
    except (OSError, ValueError):
        return []


def _wait_for(condition, timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)


class CgroupV1(JobCgroup):
    def __init__(self, paths: dict[str, Path]) -> None:
        self.paths = paths

    def spec(self) -> dict:
        return {"version": 1, "paths": {name: str(path) for name, path in self.paths.items()}}

    def hierarchies(self) -> list[str]:
        return list(self.paths)

    def _tracking(self) -> Path:
        return self.paths.get("freezer") or next(iter(self.paths.values()))

    def create(self, memory_mb: int | None, policy: str, cpus: int) -> None:
        for path in self.paths.values():
            path.mkdir(parents=True, exist_ok=True)
        memory = self.paths.get("memory")
        if memory is not None and memory_mb and policy != MemoryPolicy.NONE:
            limit = str(memory_mb * MEBIBYTE)
            if policy == MemoryPolicy.HARD:
                _write(memory / "memory.limit_in_bytes", limit)
                if (memory / "memory.memsw.limit_in_bytes").exists():  # no swapping past it either
                    _write(memory / "memory.memsw.limit_in_bytes", limit)
            else:
                _write(memory / "memory.soft_limit_in_bytes", limit)
        if "cpu" in self.paths:
            _write(self.paths["cpu"] / "cpu.shares", str(SHARES_PER_CPU * max(1, cpus)))

    def limits_memory(self) -> bool:
        return "memory" in self.paths

    def enter(self) -> None:
        for controller, path in self.paths.items():
            move_self(path, controller)

    def pids(self) -> list[int]:
        return _pids_in(self._tracking())

    def freeze(self) -> None:
        freezer = self.paths.get("freezer")
        if freezer is None:
            self.signal(signal.SIGSTOP)
            return
        _write(freezer / "freezer.state", "FROZEN")
        _wait_for(self.is_frozen)

    def is_frozen(self) -> bool:
        freezer = self.paths.get("freezer")
        return freezer is not None and _read(freezer / "freezer.state").strip() == "FROZEN"

    def thaw(self) -> None:
        freezer = self.paths.get("freezer")
        if freezer is None:
            self.signal(signal.SIGCONT)
            return
        try:
            _write(freezer / "freezer.state", "THAWED")
        except FileNotFoundError:
            pass

    def usage(self) -> Usage:
        memory = _fields(self.paths["memory"] / "memory.stat") if "memory" in self.paths else {}
        rss = memory.get("total_rss", memory.get("rss", 0)) + memory.get("total_mapped_file", 0)
        try:
            peak = int(_read(self.paths["memory"] / "memory.max_usage_in_bytes"))
        except (KeyError, OSError, ValueError):
            peak = rss
        ticks = _fields(self.paths["cpuacct"] / "cpuacct.stat") if "cpuacct" in self.paths else {}
        hertz = os.sysconf("SC_CLK_TCK")
        return Usage(rss, max(peak, rss), ticks.get("user", 0) / hertz, ticks.get("system", 0) / hertz)

    def oom_kills(self) -> int:
        if "memory" not in self.paths:
            return 0
        return _fields(self.paths["memory"] / "memory.oom_control").get("oom_kill", 0)

    def directories(self) -> list[Path]:
        return list(self.paths.values())


class CgroupV2(JobCgroup):
    def __init__(self, path: Path, memory: bool, cpu: bool) -> None:
        self.path = path
        self.memory = memory  # the memory controller is enabled for it
        self.cpu = cpu

    def hierarchies(self) -> list[str]:
        return [""]

    def spec(self) -> dict:
        return {"version": 2, "path": str(self.path), "memory": self.memory, "cpu": self.cpu}

    def create(self, memory_mb: int | None, policy: str, cpus: int) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        if self.memory and memory_mb and policy != MemoryPolicy.NONE:
            _write(self.path / ("memory.max" if policy == MemoryPolicy.HARD else "memory.high"),
                   str(memory_mb * MEBIBYTE))
            if policy == MemoryPolicy.HARD and (self.path / "memory.swap.max").exists():
                _write(self.path / "memory.swap.max", "0")
        if self.cpu:
            _write(self.path / "cpu.weight", str(min(10000, SHARES_PER_CPU * max(1, cpus) // 10)))

    def limits_memory(self) -> bool:
        return self.memory

    def enter(self) -> None:
        move_self(self.path, "")

    def pids(self) -> list[int]:
        return _pids_in(self.path)

    def freeze(self) -> None:
        _write(self.path / "cgroup.freeze", "1")
        _wait_for(self.is_frozen)

    def is_frozen(self) -> bool:
        return _fields(self.path / "cgroup.events").get("frozen") == 1

    def thaw(self) -> None:
        try:
            _write(self.path / "cgroup.freeze", "0")
        except FileNotFoundError:
            pass

    def _kill_all(self) -> None:
        if (self.path / "cgroup.kill").exists():  # the kernel kills the whole cgroup at once (Linux 5.14)
            for _ in range(200):
                if not self.pids():
                    return
                _write(self.path / "cgroup.kill", "1")
                time.sleep(0.01)
        super()._kill_all()

    def usage(self) -> Usage:
        memory = _fields(self.path / "memory.stat") if self.memory else {}
        rss = memory.get("anon", 0) + memory.get("file_mapped", 0)
        try:
            peak = int(_read(self.path / "memory.peak"))
        except (OSError, ValueError):
            peak = rss
        cpu = _fields(self.path / "cpu.stat")  # (there without the cpu controller)
        return Usage(rss, max(peak, rss), cpu.get("user_usec", 0) / 1e6, cpu.get("system_usec", 0) / 1e6)

    def oom_kills(self) -> int:
        return _fields(self.path / "memory.events").get("oom_kill", 0) if self.memory else 0

    def directories(self) -> list[Path]:
        return [self.path]


class V1Hierarchy(Hierarchy):
    version = 1

    def __init__(self, bases: dict[str, Path]) -> None:
        self.bases = bases  # controller -> the directory job cgroups are made in

    def job(self, name: str) -> CgroupV1:
        return CgroupV1({controller: base / name for controller, base in self.bases.items()})

    def directories(self) -> list[Path]:
        return list(self.bases.values())

    def __repr__(self) -> str:
        return f"cgroup v1 ({', '.join(sorted(self.bases))}) under {self.bases.get('freezer')}"


class V2Hierarchy(Hierarchy):
    version = 2

    def __init__(self, base: Path) -> None:
        self.base = base
        enabled = set(_read(base / "cgroup.subtree_control").split()) if (base / "cgroup.subtree_control").exists() \
            else set()
        self.memory = "memory" in enabled
        self.cpu = "cpu" in enabled

    def job(self, name: str) -> CgroupV2:
        return CgroupV2(self.base / name, self.memory, self.cpu)

    def directories(self) -> list[Path]:
        return [self.base]

    def __repr__(self) -> str:
        controllers = [name for name, on in (("memory", self.memory), ("cpu", self.cpu)) if on]
        return f"cgroup v2 ({', '.join(controllers) or 'no controllers'}) under {self.base}"


def v2_hierarchy(mount: Path, own: str, base: str) -> V2Hierarchy:
    """The directory under ``mount`` (a cgroup2 hierarchy) where job cgroups go: ``base`` below this process's own
    cgroup, with the controllers that cgroup may hand down enabled for its children (those it cannot are left out)."""
    directory = mount / own.lstrip("/") / base
    directory.mkdir(parents=True, exist_ok=True)
    available = set(_read(directory / "cgroup.controllers").split())
    for controller in ("memory", "cpu", "pids") if available else ():
        if controller in available:
            try:
                _write(directory / "cgroup.subtree_control", f"+{controller}")
            except OSError:
                pass
    return V2Hierarchy(directory)


def detect(base: str) -> Hierarchy | None:
    """What this machine gives a gateway for its jobs' cgroups (None: nothing, and the launcher is a subreaper): a
    ``base`` that is empty switches cgroups off (HTCondor's ``BASE_CGROUP`` does the same); only root may make them."""
    if not base or os.geteuid() != 0:
        return None
    try:
        mounts, own = _mounts(), _own_cgroups()
        if "" in mounts and mounts[""] == Path("/sys/fs/cgroup"):
            return v2_hierarchy(mounts[""], own.get("", "/"), base)
        if "memory" in mounts and "freezer" in mounts:
            bases = {name: mounts[name] / own.get(name, "/").lstrip("/") / base
                     for name in V1_CONTROLLERS if name in mounts}
            for directory in bases.values():
                directory.mkdir(parents=True, exist_ok=True)
            return V1Hierarchy(bases)
    except OSError:
        return None
    return None
