"""How condor_q and condor_history print jobs: their per-job tables (the default, ``-hold``, ``-run``, the
history's), ``-long`` and ``-af``, built from shared columns so ``q`` and ``history`` print alike."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

from .ads import Expr
from .jobs import JobStatus, quote

Ad = Mapping[str, Any]


@dataclass(frozen=True)
class Column:
    header: str
    width: int  # the last column of a table is not padded
    text: Callable[[Ad, float], str]  # (ad, now) -> cell
    right: bool = False

    def cell(self, text: str) -> str:
        return text.rjust(self.width) if self.right else text.ljust(self.width)


def _date(name: str) -> Callable[[Ad, float], str]:
    """A time attribute as condor_q prints it (month/day hour:minute), "???" when the ad has none."""
    def text(ad: Ad, now: float) -> str:
        value = ad.get(name)
        return time.strftime("%m/%d %H:%M", time.localtime(value)) if isinstance(value, int) and value else "???"
    return text


def _run_time(ad: Ad, now: float) -> str:
    """Accumulated wall-clock time, plus the current run's for a running job: D+HH:MM:SS."""
    run = float(ad.get("RemoteWallClockTime") or 0.0)
    if JobStatus.of(ad) is JobStatus.RUNNING:
        run += now - float(ad.get("JobCurrentStartDate") or now)
    return duration(run)


def duration(seconds: float) -> str:
    """D+HH:MM:SS, as condor_q and condor_status print times."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{days}+{hours:02d}:{minutes:02d}:{seconds:02d}"


def _command(ad: Ad, now: float) -> str:
    """condor_q's CMD: the job's description in parentheses when it has one (``JobDescription``), else the
    executable's name and the arguments.  A DAGMan job's arguments name the DAG's files relative to its Iwd, as
    condor_submit_dag writes them when run beside the DAG ("-Lockfile diamond.dag.lock ... -Dag diamond.dag")."""
    description = ad.get("MATCH_EXP_JobDescription") or ad.get("JobDescription")
    if isinstance(description, str) and description:
        return f"({description})"
    arguments = str(ad.get("Arguments", ad.get("Args")) or "")
    if is_dagman(ad) and isinstance(ad.get("Iwd"), str):
        prefix = ad["Iwd"].rstrip("/") + "/"
        arguments = " ".join(word.removeprefix(prefix) for word in arguments.split(" "))
    return " ".join(part for part in (os.path.basename(str(ad.get("Cmd") or "")), arguments) if part)


def is_dagman(ad: Ad) -> bool:
    """The DAGMan job of a DAG (scheduler universe, condor_dagman)."""
    return ad.get("JobUniverse") == 7 and str(ad.get("Cmd", "")).endswith("condor_dagman")


def _attribute(name: str) -> Callable[[Ad, float], str]:
    return lambda ad, now: str(ad.get(name) or "")


ID = Column("ID", 10, lambda ad, now: f"{ad.get('ClusterId')}.{ad.get('ProcId')}")
OWNER = Column("OWNER", 14, _attribute("Owner"))
SUBMITTED = Column("SUBMITTED", 11, _date("QDate"))
RUN_TIME = Column("RUN_TIME", 12, _run_time, right=True)
STATE = Column("ST", 2, lambda ad, now: getattr(JobStatus.of(ad), "letter", "?"))
PRIORITY = Column("PRI", 3, lambda ad, now: str(ad.get("JobPrio", 0)))
SIZE = Column("SIZE", 7, lambda ad, now: f"{float(ad.get('ImageSize') or 0) / 1024:.1f}")
COMMAND = Column("CMD", 0, _command)

#: condor_q -nobatch (per job, as condor_q printed before 8.5 and as here by default)
QUEUE = (ID, OWNER, SUBMITTED, RUN_TIME, STATE, PRIORITY, SIZE, COMMAND)
#: condor_q -hold
HELD = (ID, OWNER, Column("HELD_SINCE", 11, _date("EnteredCurrentStatus")),
        Column("HOLD_REASON", 0, _attribute("HoldReason")))
#: condor_q -run
RUNNING = (ID, OWNER, SUBMITTED, RUN_TIME, Column("HOST(S)", 0, _attribute("RemoteHost")))
#: condor_history
HISTORY = (ID, OWNER, SUBMITTED, RUN_TIME, STATE, Column("COMPLETED", 11, _date("CompletionDate")), COMMAND)

#: the order condor_q's totals line counts states in
TOTALS = (JobStatus.COMPLETED, JobStatus.REMOVED, JobStatus.IDLE, JobStatus.RUNNING, JobStatus.HELD,
          JobStatus.SUSPENDED)


def table(columns: tuple[Column, ...], ads: Iterable[Ad], now: float | None = None) -> Iterator[str]:
    """A header line, then a line per ad."""
    now = time.time() if now is None else now
    yield " ".join(column.cell(column.header) for column in columns).rstrip()
    for ad in ads:
        yield " ".join(column.cell(column.text(ad, now)) for column in columns).rstrip()


def totals(ads: list[Ad]) -> str:
    """condor_q's closing line: "3 jobs; 0 completed, 0 removed, 2 idle, 1 running, 0 held, 0 suspended"."""
    counts = {status: sum(1 for ad in ads if JobStatus.of(ad) is status) for status in TOTALS}
    return f"{len(ads)} jobs; " + ", ".join(f"{counts[s]} {s.label.lower()}" for s in TOTALS)


def long_form(ad: Ad) -> str:
    """``-long``: the ad as ``Name = value`` lines in ClassAd syntax."""
    return "\n".join(f"{name} = {classad_text(value)}" for name, value in ad.items())


def autoformat(ad: Ad, names: list[str], options: str = "") -> str:
    """``-af``: the values, space-separated, strings without quotes, missing ones as ``undefined``; ``options`` are
    condor_q's ``-af:`` letters: ``j`` the job id first, ``l`` ``Name = value``, ``n`` a line per value, ``r`` values
    in ClassAd syntax (strings quoted), ``t`` tabs between values (``h``, the header, is :func:`autoformat_header`)."""
    text = classad_text if "r" in options else _plain_text
    cells = [f"{name} = {text(ad.get(name))}" if "l" in options else text(ad.get(name)) for name in names]
    if "j" in options:
        cells.insert(0, f"{ad.get('ClusterId')}.{ad.get('ProcId')}")
    return ("\n" if "n" in options else "\t" if "t" in options else " ").join(cells)


def autoformat_header(names: list[str], options: str) -> str:
    """``-af:h``'s first line: the attribute names (and ``ID`` with ``j``), separated as the values are."""
    return ("\t" if "t" in options else " ").join((["ID"] if "j" in options else []) + names)


def printf(ad: Ad, formats: list[tuple[str, str]]) -> str:
    """``-format FMT ATTR`` (repeatable): each value through its printf format (``%d``, ``%s``, ``%f``, ``%v``
    any value, C escapes such as ``\\n``), no newline added, as condor_q does; a missing attribute prints
    ``undefined``."""
    out = []
    for fmt, name in formats:
        value, spec = ad.get(name), c_escapes(fmt).replace("%v", "%s")
        try:
            out.append(spec % (_plain_text(value) if value is None or "%s" in spec else value))
        except (TypeError, ValueError):  # a number format for a value that is none: its text instead
            out.append(re.sub(r"%[-+ #0-9.]*[dif]", "%s", spec) % _plain_text(value))
    return "".join(out)


#: C's escapes in a format, as condor_q's -format reads them ("%d\\n" from the shell ends the line)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "\\": "\\", "'": "'",
            '"': '"', "?": "?"}
_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|[0-7]{1,3}|.)", re.DOTALL)


def c_escapes(text: str) -> str:
    """``text`` with C's backslash escapes replaced (``\\n``, ``\\t``, ``\\\\``, ``\\x41``, ``\\101``); an unknown one stays
    as it is."""
    def replace(found: re.Match[str]) -> str:
        code = found.group(1)
        if code[0] == "x":
            return chr(int(code[1:], 16))
        if code[0] in "01234567":
            return chr(int(code, 8))
        return _ESCAPES.get(code, found.group(0))
    return _ESCAPE.sub(replace, text)


def classad_text(value: Any) -> str:
    if isinstance(value, Expr):
        return str(value)
    if isinstance(value, str):
        return quote(value)
    return _plain_text(value)


def _plain_text(value: Any) -> str:
    if value is None:
        return "undefined"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
