"""How condor_status prints the pool: the machine table and its totals by platform and state, the ``-schedd`` and
``-submitters`` tables (``-long`` and ``-af`` are condor_q's, in :mod:`.tables`)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Mapping

from . import tables
from .tables import Column, duration

Ad = Mapping[str, Any]

#: the machine states condor_status counts, in its order
STATES = ("Owner", "Claimed", "Unclaimed", "Matched", "Preempting", "Drained")


def _text(name: str) -> Callable[[Ad, float], str]:
    return lambda ad, now: str(ad.get(name, "") if ad.get(name) is not None else "")


def _number(name: str) -> Callable[[Ad, float], str]:
    return lambda ad, now: str(ad.get(name, 0) if isinstance(ad.get(name), (int, float)) else 0)


def _load(ad: Ad, now: float) -> str:
    value = ad.get("LoadAvg")
    return f"{float(value):.3f}" if isinstance(value, (int, float)) else "0.000"


def _activity_time(ad: Ad, now: float) -> str:
    """How long the slot has been in its activity: D+HH:MM:SS, as condor_status prints ActvtyTime."""
    since = ad.get("EnteredCurrentActivity")
    return duration(max(int(now - since), 0) if isinstance(since, (int, float)) and since else 0)


#: condor_status
MACHINES = (Column("Name", 30, _text("Name")), Column("OpSys", 10, _text("OpSys")), Column("Arch", 6, _text("Arch")),
            Column("State", 9, _text("State")), Column("Activity", 8, _text("Activity")),
            Column("LoadAv", 6, _load, right=True), Column("Mem", 6, _number("Memory"), right=True),
            Column("ActvtyTime", 0, _activity_time, right=True))
#: condor_status -schedd
SCHEDDS = (Column("Name", 30, _text("Name")), Column("Machine", 20, _text("Machine")),
           Column("RunningJobs", 11, _number("TotalRunningJobs"), right=True),
           Column("IdleJobs", 10, _number("TotalIdleJobs"), right=True),
           Column("HeldJobs", 10, _number("TotalHeldJobs"), right=True))
#: condor_status -submitters
SUBMITTERS = (Column("Name", 30, _text("Name")), Column("Machine", 20, _text("Machine")),
              Column("RunningJobs", 11, _number("RunningJobs"), right=True),
              Column("IdleJobs", 10, _number("IdleJobs"), right=True),
              Column("HeldJobs", 10, _number("HeldJobs"), right=True))


def table(columns: tuple[Column, ...], ads: Iterable[Ad], now: float | None = None) -> Iterator[str]:
    """condor_status's table: a header line, a blank line, a line per ad."""
    lines = tables.table(columns, ads, now)
    yield next(lines)
    yield ""
    yield from lines


def machine_totals(ads: Iterable[Ad]) -> Iterator[str]:
    """The summary under condor_status's machine table: slots per platform (Arch/OpSys) and state, then the
    total."""
    rows: dict[str, dict[str, int]] = {}
    for ad in ads:
        counts = rows.setdefault(f"{ad.get('Arch', '?')}/{ad.get('OpSys', '?')}", dict.fromkeys(STATES, 0))
        state = ad.get("State")
        if state in counts:
            counts[state] += 1
        counts["Total"] = counts.get("Total", 0) + 1
    total = {name: sum(row.get(name, 0) for row in rows.values()) for name in ("Total", *STATES)}
    header = ["Total", *STATES]
    yield " " * 20 + " ".join(f"{name:>10}" for name in header)
    for label, counts in sorted(rows.items()) + [("Total", total)]:
        yield ""
        yield f"{label:>20}" + " ".join(f"{counts.get(name, 0):>10}" for name in header)
