"""Apache Qpid's C++ broker (``qpidd``) and Python 2.7 QMF consoles, for the tests of the QMF front end.

The broker is found through ``BIRDBATH_QPIDD`` (an unpacked qpidd install tree: ``sbin/qpidd`` and, beside it,
``lib/qpid/daemon/amqp.so`` for AMQP 1.0) or ``qpidd`` on PATH; a test without one is skipped saying so.  It runs in
the foreground on its own port and data directory, with AMQP 0-10 and 1.0 on that port and QMF management on.

The consoles are what MRG's users ran: PyPI's ``qpid-python`` and ``qpid-qmf`` on Python 2.7 (their releases do not
run on Python 3), found through ``BIRDBATH_PYTHON2`` or ``python2.7`` on PATH, installed once into a cache directory
(``~/.cache/birdbath-tests``) with pip's ``--target`` (Python 2.7 has no venv module; the directory goes on the
console's PYTHONPATH and nowhere else).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

CONSOLE_PACKAGES = ("qpid-python==1.36.0.post1", "qpid-qmf==0.28", "qpid-tools==1.36.0.post1")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "birdbath-tests"


def free_port() -> int:
    """A port free on 127.0.0.1 now (the broker binds it at once; a clash makes its start fail, saying so)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def qpidd() -> tuple[Path, Path | None] | None:
    """The broker's program and its AMQP 1.0 module (None: the installed broker loads its own modules)."""
    root = os.environ.get("BIRDBATH_QPIDD")
    if root:
        program = Path(root) / "sbin" / "qpidd"
        return (program, Path(root) / "lib" / "qpid" / "daemon" / "amqp.so") if program.exists() else None
    found = shutil.which("qpidd")
    return (Path(found), None) if found else None


def missing_broker() -> str:
    return "no Qpid broker: set BIRDBATH_QPIDD to an unpacked qpidd tree (.ci/run does) or put qpidd on PATH"


class QpidBroker:
    """``start()``, ``stop()``, ``restart()`` (same port); ``port`` is its AMQP port on 127.0.0.1.  With ``auth``,
    clients log in (SASL PLAIN or ANONYMOUS) and a message's user_id must be its sender's login."""

    def __init__(self, directory: Path, *, auth: bool = False, acl: str | None = None,
                 options: tuple[str, ...] = ()) -> None:
        found = qpidd()
        if found is None:
            raise RuntimeError(missing_broker())
        self.program, self.module = found
        self.directory = directory
        (directory / "data").mkdir(parents=True, exist_ok=True)
        self.auth = auth
        self.acl = acl
        self.options = options  # more qpidd options
        self.port = free_port()
        self.log_path = directory / "qpidd.log"
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        command = [str(self.program), "--port", str(self.port), "--interface", "127.0.0.1",
                   "--auth", "yes" if self.auth else "no", "--data-dir", str(self.directory / "data"),
                   "--log-to-file", str(self.log_path), "--log-to-stderr", "no", "--pid-dir", str(self.directory),
                   "--tcp-nodelay"]
        if self.module is not None:
            command += ["--no-module-dir", "--load-module", str(self.module)]
        command += list(self.options)
        if self.acl is not None:
            (self.directory / "data" / "broker.acl").write_text(self.acl)
            command += ["--acl-file", "broker.acl"]
        return command

    def start(self, timeout: float = 30) -> QpidBroker:
        self.process = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.process.poll() is not None:
                raise RuntimeError(f"qpidd exited with {self.process.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"qpidd did not start:\n{self.log()}")
            time.sleep(0.1)
        return self

    def _ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as connection:
                connection.sendall(b"AMQP\x01\x01\x00\x0a")
                return bool(connection.recv(8))
        except OSError:
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self) -> QpidBroker:
        self.stop()
        return self.start()

    def url(self, user: str | None = None, password: str | None = None) -> str:
        login = f"{user}/{password}@" if user else ""
        return f"amqp://{login}127.0.0.1:{self.port}"


def python2() -> str | None:
    return os.environ.get("BIRDBATH_PYTHON2") or shutil.which("python2.7")


def console_packages(python: str) -> Path:
    """The directory holding PyPI's Python 2 QMF console packages for ``python``, installed the first time (under a
    lock: test processes running side by side install it once)."""
    target = CACHE / "py27-qmf"
    marker = target / ".installed"
    wanted = " ".join(CONSOLE_PACKAGES)
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "py27-qmf.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and marker.read_text() == wanted:
            return target
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target",
                        str(target), *CONSOLE_PACKAGES], check=True, capture_output=True, timeout=600)
        marker.write_text(wanted)
    return target
