"""Dedicated scheduling of parallel jobs on the local backend's slots: all nodes or none, and no starvation.

A parallel job takes ``RequestCpus`` slots for each of its nodes, all at once: it starts only when that many are
free, and all its nodes start together (one launch, ``parallel.py``).  Jobs start in priority order (``idle.py``);
when a parallel job's turn comes and its slots are not free, the slots are kept for it: no job ranked after it
starts on a slot until it has started (jobs that take no slot, scheduler and local universe, still do).  So a wide
job waits only for runs that are already going to end, never behind narrow jobs that keep arriving — the way
HTCondor's dedicated scheduler keeps the machines it claimed for a parallel job instead of giving them back.  No
backfill: the backend cannot know that a narrow job would end in time.  A job wider than this machine's slots
(``Cpus`` of its machine ad), or whose ``Requirements`` the machine does not meet, can never start: it stays idle,
as an unmatched job does, and keeps nothing.
"""

from __future__ import annotations

import classad2

from jobmodel.classads import evaluate

from . import parallel


def slots_needed(ad: classad2.ClassAd, per_node: int) -> int:
    """The slots a job takes while it runs: ``per_node`` (its ``RequestCpus``) for each of its nodes."""
    return per_node * parallel.node_count(ad) if parallel.is_parallel(ad) else per_node


def keeps_slots(ad: classad2.ClassAd, cpus: int, machine: classad2.ClassAd) -> bool:
    """Whether an idle job that matches the machine but did not fit its free slots keeps them from the jobs ranked
    after it: a parallel job that this machine can hold."""
    total = evaluate(machine, "Cpus", 0)
    return parallel.is_parallel(ad) and isinstance(total, int) and 0 < cpus <= total
