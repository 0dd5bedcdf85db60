"""The stack limit a gateway was started with, for the processes it starts for jobs.

The gateway raises its own limit for deep ClassAd evaluations (``gateway.stack``); a job must not inherit that.
Only the standard library here: the job launcher imports this without site-packages.
"""

from __future__ import annotations

import os
import resource

#: set by a gateway that raised its stack limit for deep evaluations: the limit it was started with, which the
#: processes it starts for jobs get back ("soft hard", bytes or -1 for unlimited)
ORIGINAL_STACK_LIMIT = "BIRDBATH_ORIGINAL_STACK_LIMIT"


def original_stack_limit() -> tuple[int, int] | None:
    """The stack limit the gateway was started with, when it raised its own (None: it did not)."""
    text = os.environ.get(ORIGINAL_STACK_LIMIT, "")
    try:
        soft, hard = (int(word) for word in text.split())
    except ValueError:
        return None
    return soft, hard


def restore_stack_limit() -> None:
    """In a process the gateway started (the job launcher): go back to the stack limit the gateway was started
    with, before anything of the job's starts."""
    original = original_stack_limit()
    if original is not None:
        resource.setrlimit(resource.RLIMIT_STACK, original)


def give_back_stack_limit(pid: int | None) -> None:
    """Give a process the gateway started for a job the stack limit the gateway was started with, from outside
    (a DAG script, which the gateway executes directly; the job launcher sets it itself, with
    :func:`restore_stack_limit`, before it starts anything)."""
    original = original_stack_limit()
    if original is not None and pid:
        try:
            resource.prlimit(pid, resource.RLIMIT_STACK, original)
        except (OSError, ValueError):  # it ended already
            pass
