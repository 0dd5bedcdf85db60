"""HTCondor user logs (the job's ``UserLog``/``Log`` file): the event text ``htcondor2.JobEventLog`` reads.

The file is a path the job's ad names, so it is opened with its owner's rights (``open_regular_as``), as a shadow does:
a job can only log where its owner could write, never where only the gateway can."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

import classad2

from .owners import Account, open_regular_as

#: append, create, and never be made the gateway's terminal (open_regular_as refuses a FIFO or device unblocked)
OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOCTTY | os.O_CLOEXEC

SEPARATOR = "...\n"


def log_path(ad: classad2.ClassAd) -> Path | None:
    """The job's user log, relative paths taken from ``Iwd``; ``None`` when it has none."""
    for name in ("UserLog", "Log"):
        value = ad.eval(name) if name in ad else None
        if isinstance(value, str) and value:
            path = Path(value)
            if not path.is_absolute():
                iwd = ad.eval("Iwd") if "Iwd" in ad else None
                if not isinstance(iwd, str):
                    return None
                path = Path(iwd) / path
            return path
    return None


def _usage(seconds: float) -> str:
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days} {hours:02d}:{minutes:02d}:{secs:02d}"


def _lock(fd: int, tries: int = 20, pause: float = 0.025) -> None:
    """Take the log's lock as other writers do, but never wait long for it: the file is its owner's, who could hold
    the lock for ever.  Without the lock the event is still one ``O_APPEND`` write, so it stays whole."""
    for _ in range(tries):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            time.sleep(pause)


class UserLog:
    """Appends events to a job's user log (several jobs may share one file: each event is one locked write), opened
    as ``account`` (None: as the gateway's user).  Only a regular file is written to; anything else is an OSError."""

    def __init__(self, path: Path, cluster: int, proc: int, clock=time.time, account: Account | None = None) -> None:
        self.path = path
        self._cluster, self._proc = cluster, proc
        self._clock = clock
        self._account = account

    def _write(self, number: int, headline: str, *lines: str, subproc: int = 0) -> None:
        """One event; ``subproc`` is the node of a parallel job that a node event is about (0 for the job)."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self._clock()))
        job = f"({self._cluster:03d}.{self._proc:03d}.{subproc:03d})"
        text = f"{number:03d} {job} {stamp} {headline}\n" + "".join(f"\t{line}\n" for line in lines) + SEPARATOR
        fd = open_regular_as(self._account, self.path, OPEN_FLAGS, 0o644)
        try:
            _lock(fd)
            os.write(fd, text.encode("utf-8"))
        finally:
            os.close(fd)

    def submitted(self, host: str) -> None:
        self._write(0, f"Job submitted from host: {host}")

    def executing(self, host: str) -> None:
        self._write(1, f"Job executing on host: {host}")

    def terminated(self, exit_code: int | None, signal: int | None, user_cpu: float, sys_cpu: float,
                   total_user_cpu: float, total_sys_cpu: float) -> None:
        self._write(5, "Job terminated.", *_termination(exit_code, signal, user_cpu, sys_cpu, total_user_cpu,
                                                          total_sys_cpu, "Job"))

    def image_size(self, image_kb: int, memory_mb: int, rss_kb: int) -> None:
        """The job's memory as its latest usage update found it (written when it changed)."""
        self._write(6, f"Image size of job updated: {image_kb}", f"{memory_mb}  -  MemoryUsage of job (MB)",
                    f"{rss_kb}  -  ResidentSetSize of job (KB)")

    def node_executing(self, node: int, host: str) -> None:
        """A node of a parallel job started (as a parallel shadow logs each of its resources)."""
        self._write(14, f"Node {node} executing on host: {host}", subproc=node)

    def node_terminated(self, node: int, exit_code: int | None, signal: int | None, user_cpu: float,
                        sys_cpu: float) -> None:
        """A node of a parallel job ended by itself (nodes the shutdown policy killed have no such event)."""
        self._write(15, f"Node {node} terminated.", *_termination(exit_code, signal, user_cpu, sys_cpu, user_cpu,
                                                                  sys_cpu, "Node"), subproc=node)

    def generic(self, text: str) -> None:
        """A job's own line (``condor_chirp ulog``): a generic event, its text cut to 128 bytes as HTCondor's is."""
        self._write(8, text.encode("utf-8")[:127].decode("utf-8", "ignore"))

    def held(self, reason: str, code: int, subcode: int = 0) -> None:
        self._write(12, "Job was held.", reason, f"Code {code} Subcode {subcode}")

    def released(self, reason: str) -> None:
        self._write(13, "Job was released.", reason)

    def aborted(self, reason: str) -> None:
        self._write(9, "Job was aborted.", reason)

    def shadow_exception(self, message: str) -> None:
        self._write(7, "Shadow exception!", message, "0  -  Run Bytes Sent By Job", "0  -  Run Bytes Received By Job")


def _termination(exit_code: int | None, signal: int | None, user_cpu: float, sys_cpu: float, total_user_cpu: float,
                 total_sys_cpu: float, who: str) -> list[str]:
    """The body of a terminated event (``who``: "Job" or "Node", in its byte counts)."""
    if signal is None:
        status = [f"(1) Normal termination (return value {exit_code})"]
    else:
        status = [f"(0) Abnormal termination (signal {signal})", "(0) No core file"]
    return [*status,
            f"\tUsr {_usage(user_cpu)}, Sys {_usage(sys_cpu)}  -  Run Remote Usage",
            f"\tUsr {_usage(0)}, Sys {_usage(0)}  -  Run Local Usage",
            f"\tUsr {_usage(total_user_cpu)}, Sys {_usage(total_sys_cpu)}  -  Total Remote Usage",
            f"\tUsr {_usage(0)}, Sys {_usage(0)}  -  Total Local Usage",
            f"0  -  Run Bytes Sent By {who}", f"0  -  Run Bytes Received By {who}",
            f"0  -  Total Bytes Sent By {who}", f"0  -  Total Bytes Received By {who}"]
