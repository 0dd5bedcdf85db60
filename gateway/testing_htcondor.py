"""A personal HTCondor pool for tests: real daemons (condor_master, collector, negotiator, schedd, startd) from an
HTCondor install, on loopback only, with their own ``LOCAL_DIR`` and a collector on a port the collector chose.

The install is a ``RELEASE_DIR`` (``bin``, ``sbin``, ``lib``, ``libexec``) named by ``BIRDBATH_HTCONDOR``, else the
one ``condor_master`` on ``PATH`` belongs to; :func:`find_release` says why there is none, which is what the tests
that need one print when they skip.

Run as root with no ``condor`` account, the daemons' condor identity is root (``CONDOR_IDS = 0.0``).  A schedd never
accepts a job owned by root, so the schedd maps root's FS identity to ``nobody`` (``SCHEDD.CERTIFICATE_MAPFILE``):
a root gateway's jobs that name no other owner run as ``nobody``.  A gateway queues its callers' jobs under their
names (``Owner`` = the caller), which a schedd allows only with ``QUEUE_ALL_USERS_TRUSTED``: a queue super user
may change the owner only through ``SetEffectiveOwner``, which HTCondor's Python bindings do not offer.
DAEMON-level commands need authentication, as in HTCondor's recommended security since 9.0; FS authentication is
enough on one machine."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

RELEASE_VARIABLE = "BIRDBATH_HTCONDOR"

#: the knobs that make a quick, loopback-only pool of one machine (a personal condor)
_BASE_CONFIG = """\
RELEASE_DIR = {release}
LOCAL_DIR = {local}
LOCAL_CONFIG_FILE =
LOCAL_CONFIG_DIR =
CONDOR_IDS = 0.0
CONDOR_HOST = 127.0.0.1
COLLECTOR_HOST = $(CONDOR_HOST):0
COLLECTOR_ADDRESS_FILE = $(LOG)/.collector_address
DAEMON_LIST = {daemons}
NETWORK_INTERFACE = 127.0.0.1
BIND_ALL_INTERFACES = False
ENABLE_IPV6 = False
USE_SHARED_PORT = False
UID_DOMAIN = localhost.localdomain
FILESYSTEM_DOMAIN = localhost.localdomain
SEC_DEFAULT_AUTHENTICATION_METHODS = FS
SEC_CLIENT_AUTHENTICATION_METHODS = FS
SEC_DEFAULT_AUTHENTICATION = REQUIRED
SEC_DEFAULT_ENCRYPTION = REQUIRED
SEC_DEFAULT_INTEGRITY = REQUIRED
SEC_READ_AUTHENTICATION = OPTIONAL
SEC_CLIENT_AUTHENTICATION = OPTIONAL
ALLOW_READ = *
ALLOW_WRITE = *
ALLOW_DAEMON = root@* condor@*
ALLOW_NEGOTIATOR = root@* condor@*
ALLOW_ADMINISTRATOR = root@* condor@*
QUEUE_SUPER_USERS = root, condor, nobody
QUEUE_ALL_USERS_TRUSTED = True
SCHEDD.CERTIFICATE_MAPFILE = $(LOCAL_DIR)/schedd_mapfile
CONDOR_Q_ONLY_MY_JOBS = False
BASE_CGROUP =
use POLICY : ALWAYS_RUN_JOBS
RUNBENCHMARKS = 0
NUM_CPUS = 4
SCHEDD_INTERVAL = 2
NEGOTIATOR_INTERVAL = 1
NEGOTIATOR_CYCLE_DELAY = 1
NEGOTIATOR_MIN_INTERVAL = 1
UPDATE_INTERVAL = 2
MASTER_UPDATE_INTERVAL = 2
STARTER_UPDATE_INTERVAL = 2
SHADOW_QUEUE_UPDATE_INTERVAL = 2
STARTD_CRON_JOBLIST =
STARTD_DETECT_GPUS =
DAGMAN_AVOID_SLASH_TMP = False
DAGMAN_USER_LOG_SCAN_INTERVAL = 1
JOB_START_DELAY = 0
"""

#: the daemons of a whole pool on one host
POOL_DAEMONS = ("MASTER", "COLLECTOR", "NEGOTIATOR", "SCHEDD", "STARTD")


def find_release(environ: Mapping[str, str] | None = None) -> tuple[Path | None, str]:
    """The HTCondor install to test against, or ``None`` and the reason there is none."""
    environ = os.environ if environ is None else environ
    named = environ.get(RELEASE_VARIABLE)
    if named:
        release = Path(named)
        if not (release / "sbin" / "condor_master").is_file():
            return None, f"{RELEASE_VARIABLE}={named} holds no sbin/condor_master"
        return release, ""
    master = shutil.which("condor_master", path=environ.get("PATH"))
    if master:
        return Path(master).resolve().parent.parent, ""
    return None, (f"no HTCondor install: set {RELEASE_VARIABLE} to a RELEASE_DIR (bin, sbin, lib) "
                  "or put condor_master on PATH")


class PersonalPool:
    """``start()``, ``stop()``; ``config`` is the ``CONDOR_CONFIG`` file, :meth:`environment` what a process that
    talks to the pool needs (the bindings, the command-line tools, a gateway with the htcondor backend)."""

    def __init__(self, release: Path, directory: Path, *, daemons: tuple[str, ...] = POOL_DAEMONS,
                 extra_config: str = "", collector: str | None = None, launcher: tuple[str, ...] = ()) -> None:
        """``collector``: the pool's central manager (``HOST:PORT``) when this is another host of it (with its
        network knobs in ``extra_config``); ``launcher``: what starts the master there (``ip netns exec NAME``)."""
        self.release = release
        self.directory = directory
        self.local = directory / "local"
        self.config = directory / "condor_config"
        self._daemons = daemons
        self._extra = extra_config + (f"\nCOLLECTOR_HOST = {collector}\n" if collector else "")
        self._collector = collector
        self._launcher = launcher
        self._write_config()

    def _write_config(self) -> None:
        for sub in ("log", "execute", "run", "lock"):
            (self.local / sub).mkdir(parents=True, exist_ok=True)
        (self.local / "spool").mkdir(mode=0o1777, exist_ok=True)
        os.chmod(self.local / "spool", 0o1777)
        os.chmod(self.local / "execute", 0o755)
        (self.local / "schedd_mapfile").write_text("FS ^root$ nobody\nFS (.*) \\1\n")
        self.config.write_text(_BASE_CONFIG.format(release=self.release, local=self.local,
                                                   daemons=", ".join(self._daemons)) + self._extra + "\n")

    def add_config(self, text: str) -> None:
        """Appends knobs; a running pool takes them at ``condor_reconfig``."""
        with self.config.open("a") as config:
            config.write(text.rstrip("\n") + "\n")

    @property
    def log(self) -> Path:
        return self.local / "log"

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        environ = dict(os.environ if base is None else base)
        environ["CONDOR_CONFIG"] = str(self.config)
        environ["PATH"] = f"{self.release / 'bin'}:{self.release / 'sbin'}:{environ.get('PATH', '/usr/bin:/bin')}"
        environ.pop("_CONDOR_COLLECTOR_HOST", None)
        return environ

    def tool(self, name: str, *args: str, check: bool = True, timeout: float = 60) -> str:
        """Runs one of the install's command-line tools against this pool and returns what it printed."""
        program = self.release / "bin" / name
        if not program.exists():
            program = self.release / "sbin" / name  # condor_on, condor_off, condor_restart, condor_reconfig
        done = subprocess.run([str(program), *args], env=self.environment(),
                              capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise RuntimeError(f"{name} {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    @property
    def collector(self) -> str:
        """The collector's address as it wrote it (``<127.0.0.1:PORT?...>``)."""
        return (self.log / ".collector_address").read_text().splitlines()[0].strip()

    @property
    def collector_host(self) -> str:
        """``127.0.0.1:PORT``, the form a ``COLLECTOR_HOST`` or ``[backends.htcondor] collector`` takes."""
        return self._collector or self.collector.strip("<>").split("?")[0]

    def start(self, *, slots: int = 1, schedds: int = 1, timeout: float = 90) -> None:
        """Starts condor_master and waits until the collector lists this many schedds and slots."""
        subprocess.run([*self._launcher, str(self.release / "sbin" / "condor_master"), "-pidfile",
                        str(self.local / "run" / "master.pid")], env=self.environment(), check=True, timeout=30)
        self.wait(lambda: self.count("-schedd") >= schedds and self.count("-startd") >= slots,
                  timeout, f"{schedds} schedd(s) and {slots} slot(s) in the collector")

    def count(self, kind: str) -> int:
        """How many ads of a kind (``-schedd``, ``-startd``) the collector holds; -1 before it has an address."""
        if not self._collector and not (self.log / ".collector_address").exists():
            return -1  # no collector yet: not even "none"
        done = subprocess.run([str(self.release / "bin" / "condor_status"), kind, "-af", "Name"], check=False,
                              env=self.environment(), capture_output=True, text=True, timeout=30)
        return len(done.stdout.split()) if done.returncode == 0 else 0

    def wait(self, condition: Callable[[], bool], timeout: float, what: str | Callable[[], str]) -> None:
        """Polls a condition of the real daemons (which run on their own clocks, not the tests'); ``what`` says
        what was waited for (a function: what to say, asked only on a timeout)."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                said = what() if callable(what) else what
                raise TimeoutError(f"the HTCondor pool in {self.directory} did not show {said} within {timeout:.0f} s;"
                                   f" logs in {self.log}")
            time.sleep(0.5)

    def master_pid(self) -> int | None:
        try:
            return int((self.local / "run" / "master.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self, timeout: float = 30) -> None:
        """``condor_off -master`` (the daemons stop their jobs and exit), then the master's pid if it lingers."""
        pid = self.master_pid()
        if pid is None:
            return
        subprocess.run([str(self.release / "sbin" / "condor_off"), "-master", "-fast"], env=self.environment(),
                       capture_output=True, timeout=30)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.2)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
