"""Runs one job and reports how it ended: ``python -m backends.local.launcher SPEC.json``.

The gateway starts this small process instead of the job itself so that the job gets its own session (the whole
process group can be signalled or killed), and so that its resource usage (``wait4``) and exit status are written
atomically to the result file even if the gateway is not running when the job ends.  Signals sent to the launcher
are passed on to the job's process group.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def _open(path: str, flags: int) -> int:
    return os.open(path, flags, 0o644)


def run(spec: dict) -> dict:
    started = time.time()
    os.setsid()
    early: list[int] = []  # signals that arrive before the job exists are replayed once it does
    for number in FORWARDED:
        signal.signal(number, lambda received, _frame: early.append(received))
    with open(spec["pgid_file"] + ".tmp", "w") as stream:  # the gateway signals us only once this exists
        stream.write(str(os.getpgrp()))
    os.replace(spec["pgid_file"] + ".tmp", spec["pgid_file"])
    failure_read, failure_write = os.pipe()  # close-on-exec: EOF means exec succeeded
    child = os.fork()
    if child == 0:  # the job
        os.close(failure_read)
        try:
            for number in FORWARDED:
                signal.signal(number, signal.SIG_DFL)
            os.chdir(spec["cwd"])
            for fd, path, flags in ((0, spec["stdin"], os.O_RDONLY),
                                    (1, spec["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                    (2, spec["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
                opened = _open(path, flags)
                os.dup2(opened, fd)
                os.close(opened)
            os.execve(spec["executable"], [spec["executable"], *spec["arguments"]], spec["environment"])
        except OSError as exc:
            os.write(failure_write, f"{exc.filename or spec['executable']}: {exc.strerror}".encode())
            os._exit(127)
    os.close(failure_write)
    for number in FORWARDED:
        signal.signal(number, _forward)
    for number in early:
        _forward(number, None)
    with os.fdopen(failure_read, "rb") as stream:
        exec_error = stream.read().decode(errors="replace") or None
    while True:
        try:
            _, status, usage = os.wait4(child, 0)
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for clarity
            continue
    return {
        "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "user_cpu": usage.ru_utime, "sys_cpu": usage.ru_stime, "max_rss_kb": usage.ru_maxrss,
        "wall_seconds": time.time() - started, "exec_error": exec_error,
    }


def _forward(number: int, _frame: object) -> None:
    """Pass a signal to the job's whole process group, ignoring it here while it is sent to ourselves too."""
    handler = signal.signal(number, signal.SIG_IGN)
    try:
        os.killpg(os.getpgrp(), number)
    except ProcessLookupError:
        pass
    finally:
        signal.signal(number, handler)


def main(spec_path: str) -> int:
    with open(spec_path) as stream:
        spec = json.load(stream)
    result = run(spec)
    temporary = spec["result_file"] + ".tmp"
    with open(temporary, "w") as stream:
        json.dump(result, stream)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(temporary, spec["result_file"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
