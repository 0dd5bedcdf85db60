"""Keeps a DAG's PRE or POST script as a launcher keeps a job: ``python keeper.py SETUP -- COMMAND...``.

Every process the script starts is one family (``family.py``: a cgroup of the script's own where the gateway has
cgroups, else this process as their subreaper), so that none outlives the script, whatever session it makes or
however it forks: when the script ends, what it left running is killed; when the DAG runner stops it (the DAG is
removed or held, the gateway shuts down) it sends this process SIGTERM and the whole family is killed; and if the
gateway itself dies, the kernel says so to this process (``PR_SET_PDEATHSIG``), which does the same.

``SETUP`` is JSON: ``control`` (the family's :class:`~backends.local.family.Control`) and ``account`` (whose the
script is: the child switches to it before it executes the command; None: this process's own user).  The keeper
exits with the script's status (128 + n for a signal, as a shell reports it).

Only the standard library: started without site-packages, as the launcher is.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from pathlib import Path

if not __package__:  # run as a script: import the package from its root
    sys.path[0] = str(Path(__file__).resolve().parents[3])

from backends.local.family import Control, Family, open_family, reap_all
from backends.local.owners import Account

#: what ends the script's family (the DAG runner sends SIGTERM; the parent's death is told as SIGTERM too)
STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
PR_SET_PDEATHSIG = 1
#: the status of a command that could not be executed, as a shell's
NOT_STARTED = 127


def keep(setup: dict, command: list[str]) -> int:
    """Run ``command`` in a family of its own until it ends or is stopped; its status."""
    stops: list[int] = []  # a stop that comes before the family exists is acted on once it does
    for number in STOPS:
        signal.signal(number, lambda received, _frame: stops.append(received))
    parent = os.getppid()
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the gateway died before it could tell us
        stops.append(signal.SIGTERM)
    family = open_family(Control.of(setup))
    account = Account.from_spec(setup["account"]) if setup.get("account") else None
    with family.starting():
        child = os.fork()
        if child == 0:  # pragma: no cover - the child leaves through exec or os._exit
            try:
                for number in STOPS:
                    signal.signal(number, signal.SIG_DFL)
                if account is not None:
                    account.switch()
                os.execv(command[0], command)
            finally:
                os._exit(NOT_STARTED)

    def stop(_number: int, _frame: object) -> None:
        _end(family)

    for number in STOPS:
        signal.signal(number, stop)
    if stops:
        _end(family)
    while True:  # (the family's orphans, handed to a subreaper keeper, are reaped on the way)
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            break
    _end(family)  # what the script left running
    reap_all()
    family.close()
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _end(family: Family) -> None:
    """Kill every process of the family (thawed first, so that none is left frozen with a pending kill)."""
    family.thaw()
    family.kill()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: keeper.py SETUP -- COMMAND...", file=sys.stderr)
        return 2
    return keep(json.loads(argv[1]), argv[3:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
