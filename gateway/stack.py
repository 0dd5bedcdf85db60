"""Giving the gateway's main thread a stack deep enough for the job ads it evaluates.

The reactor thread evaluates job attributes too (a DAG job's command and arguments, a template's input files), and
the ClassAd library recurses once per level of an expression and per attribute reference (``jobmodel.expressions``).
Threads get their stack size when they start (``gateway.core.threads``), but the main thread's is fixed by
``RLIMIT_STACK`` when the program is executed: so a gateway whose limit is too low raises it and executes itself
again, once, before it has created or bound anything.  The limit it was started with is kept in the environment
(``ORIGINAL_STACK_LIMIT``), and the processes it starts for jobs get it back.
"""

from __future__ import annotations

import os
import resource
import sys

from twisted.logger import Logger

from jobmodel.stacklimit import ORIGINAL_STACK_LIMIT


def ensure_main_stack(needed: int) -> str | None:
    """Execute the gateway again with a soft stack limit of at least ``needed`` bytes, when it is lower and the hard
    limit allows it; returns (when it does not re-execute) why the stack stays smaller, or None."""
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if target <= soft or ORIGINAL_STACK_LIMIT in os.environ:
        return (f"the stack limit is {soft} bytes and cannot be raised to {needed} (hard limit {hard}): "
                f"very deep job ads may crash the gateway; raise the hard limit (ulimit -Hs)")
    os.environ[ORIGINAL_STACK_LIMIT] = f"{soft} {hard}"
    resource.setrlimit(resource.RLIMIT_STACK, (target, hard))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    return None  # pragma: no cover - execv does not return


def log_stack_warning(warning: str) -> None:
    Logger().warn("{warning}", warning=warning)
