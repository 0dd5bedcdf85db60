"""The launcher's side of a parallel job: every node started at once, in the job's one process group, and ended
by the job's ``ParallelShutdownPolicy``.

Each node is a child of the launcher that becomes the job's owner and runs the node's plan (its own scratch
directory, streams and environment), exactly as a single job's process is run.  With ``WAIT_FOR_NODE0``
(HTCondor's default) the job ends when node 0 exits: the other nodes get SIGTERM and, after
:data:`NODE_KILL_GRACE` seconds, SIGKILL, as a parallel shadow shuts down the other starters; with
``WAIT_FOR_ALL`` the launcher waits for every node.  A node whose setup fails (its files, its input) ends the others
and holds the job, as a starter's failure does.  Every node that ran has its output transferred back (its own
``Out``/``Err`` and new files) when the job ends, also the nodes the shutdown policy ended, as each starter of a
parallel job transfers its node's output at its end; nothing comes back when the gateway ended the run (a hold, a
removal, a shut-down).

Imports the standard library only (it runs in the launcher, before any switch of user).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Protocol

WAIT_FOR_ALL = "WAIT_FOR_ALL"
#: seconds between the SIGTERM that ends the other nodes when node 0 exits and the SIGKILL
NODE_KILL_GRACE = 5.0


class OwnerSide(Protocol):
    """What the launcher does as the job's owner (``launcher.py`` implements it)."""

    def start(self, spec: dict[str, Any]) -> tuple[int, int]:
        """Fork a child that checks, transfers and executes one node; its pid and report pipe."""

    def messages(self, fd: int) -> dict[str, Any]:
        """Everything a child reported until it executed (or ended)."""

    def transfer(self, spec: dict[str, Any], snapshot: dict[str, Any]) -> dict[str, Any] | None:
        """Bring one node's output back; the hold it failed with, if any."""

    def interrupted(self) -> bool:
        """Whether the gateway ended the run (a signal was passed on to the job)."""


def run_nodes(spec: dict[str, Any], owner: OwnerSide, arm: Any) -> dict[str, Any]:
    """Run every node of ``spec["nodes"]``; ``arm(group)`` starts passing the gateway's signals on to the job (once the
    nodes exist, in the process group ``group``).  Returns the launcher's result: node 0's exit status as the job's,
    the usage of all nodes, and ``nodes``, how each ended (``exited``: by itself)."""
    started = time.time()
    nodes = spec["nodes"]
    children: dict[int, int] = {}  # pid -> node
    reports: list[int] = []
    for index, node in enumerate(nodes):
        pid, report = owner.start(node)
        children[pid] = index
        reports.append(report)
    group = next(iter(children))  # (the job's process group: node 0 made it, the others joined)
    arm(group)
    setups = [owner.messages(report) for report in reports]
    ended: dict[int, dict[str, Any]] = {}
    failure = next((setup["failure"] for setup in setups if setup.get("failure")), None)
    if failure is not None:  # one node cannot run: neither can the job
        _end_others(group)
        _kill_remaining(children, ended)
    _wait(children, ended, group, spec.get("shutdown_policy") == WAIT_FOR_ALL, stopping=failure is not None)
    if owner.interrupted():  # the gateway ended the run: no node ended by itself, no output comes back
        for node in ended.values():
            node["exited"] = False
    elif failure is None:
        for index, node in enumerate(nodes):
            if node["sandboxed"] and "exec_error" not in setups[index]:
                ended[index]["output_failure"] = owner.transfer(node, setups[index].get("snapshot") or {})
    return _result(started, [ended[index] for index in range(len(nodes))], setups, failure)


def _wait(children: dict[int, int], ended: dict[int, dict[str, Any]], group: int, wait_for_all: bool,
          stopping: bool) -> None:
    """Wait for the nodes; under ``WAIT_FOR_NODE0`` node 0's end ends the others (``stopping``: the launcher is
    ending them already)."""
    deadline = None  # when the nodes still running after a SIGTERM get SIGKILL
    while len(ended) < len(children):
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG if deadline is not None else 0)
        except ChildProcessError:
            break
        if pid == 0:  # (WNOHANG) none ended yet
            if time.monotonic() >= deadline:
                _kill_remaining(children, ended)
                deadline = None
            else:
                time.sleep(0.05)
            continue
        node = children.get(pid)
        if node is None:
            continue
        ended[node] = _ending(node, status, usage, exited=not stopping)
        if node == 0 and not wait_for_all and not stopping and len(ended) < len(children):
            stopping = True
            _end_others(group)
            deadline = time.monotonic() + NODE_KILL_GRACE


def _end_others(group: int) -> None:
    """SIGTERM to the job's whole process group (the nodes and what they started; the launcher is not in it)."""
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        pass


def _kill_remaining(children: dict[int, int], ended: dict[int, dict[str, Any]]) -> None:
    for pid, node in children.items():
        if node not in ended:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _ending(node: int, status: int, usage: Any, exited: bool) -> dict[str, Any]:
    return {"node": node, "exited": exited,
            "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "user_cpu": usage.ru_utime, "sys_cpu": usage.ru_stime, "max_rss_kb": usage.ru_maxrss}


def _result(started: float, ended: list[dict[str, Any]], setups: list[dict[str, Any]],
            failure: dict[str, Any] | None) -> dict[str, Any]:
    """The job's result: node 0's exit status (the parallel shadow's exit code is node 0's), everyone's usage."""
    first = ended[0] if ended else {"exit_code": None, "signal": int(signal.SIGKILL)}
    return {
        "exit_code": first["exit_code"], "signal": first["signal"],
        "user_cpu": sum(node["user_cpu"] for node in ended), "sys_cpu": sum(node["sys_cpu"] for node in ended),
        "max_rss_kb": max((node["max_rss_kb"] for node in ended), default=0),
        "wall_seconds": time.time() - started, "exec_error": setups[0].get("exec_error") if setups else None,
        "setup_failure": failure,
        "output_failure": next((node["output_failure"] for node in ended if node.get("output_failure")), None),
        "nodes": ended,
    }
