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


def shell_stack_limit() -> str:
    """Shell commands (ending with ``&&``) that give the shell the stack limit the gateway was started with, for a
    process the gateway starts through ``/bin/sh`` (a DAG script): the script then has it before it starts.  Empty
    when the gateway did not raise its own."""
    original = original_stack_limit()
    if original is None:
        return ""
    soft, hard = (("unlimited" if value == resource.RLIM_INFINITY else str(value // 1024)) for value in original)
    return f"ulimit -S -s {soft} && ulimit -H -s {hard} && "
