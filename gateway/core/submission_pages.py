"""Pages of submission ids, as Aviary's query server paged them (``GetSubmissionID``): a walk by name, or with a scan
mode a walk by each submission's oldest QDate, from an offset, ``size`` at a time, with the count of what remains.

The original's model (its ``AviaryQueryServiceSkeleton::getSubmissionID``):

- *By name* (no mode): the page starts *at* the offset's name (at the first submission of the offset's owner from
  there on, when it gives one); an unknown name is an empty page.
- *AFTER*: oldest first, the submissions after the offset's QDate.
- *BEFORE*: newest first, the submissions up to the offset's QDate, the offset itself skipped; nothing unless that
  QDate is positive.
- ``remaining`` counts the submissions the walk has not reached.

Where the original went wrong the page does what it meant (README, "Aviary's job and query services"): submissions
of one QDate are ordered by name, the name the original used to step over the offset, so a walk from an offset
with a name resumes right after it (the original passed over the offset's QDate-mates going AFTER and went back to
the newest of them going BEFORE, so a client paging through submissions of one second looped for ever); a size
below 1 is an empty page (its BEFORE scan answered one); a scan without an offset starts at the oldest (AFTER) or
the newest (BEFORE) submission (it read an uninitialised QDate, then crashed on the missing offset).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from .submissions import SubmissionInfo


class ScanMode(enum.Enum):
    """Aviary's ``ScanMode``: which way a QDate walk goes from its offset."""

    AFTER = "AFTER"
    BEFORE = "BEFORE"


@dataclass(frozen=True)
class PageOffset:
    """Where a page starts: Aviary's ``SubmissionID`` as the client sent it (a missing QDate is 0, as Axis2 read it)."""

    name: str | None = None
    owner: str | None = None
    qdate: int = 0


@dataclass(frozen=True)
class Page:
    submissions: list[SubmissionInfo]
    remaining: int


def submission_page(found: Sequence[SubmissionInfo], size: int, mode: ScanMode | None,
                    offset: PageOffset | None) -> Page:
    """One page of ``found`` (the submissions the caller may see, in any order)."""
    walk = _by_name(found, offset) if mode is None else _by_qdate(found, mode, offset)
    page = walk[:max(size, 0)]
    return Page(page, len(walk) - len(page))


def _by_name(found: Sequence[SubmissionInfo], offset: PageOffset | None) -> list[SubmissionInfo]:
    ordered = sorted(found, key=lambda info: info.name)
    if offset is None:
        return ordered
    start = next((index for index, info in enumerate(ordered) if info.name == (offset.name or "")), len(ordered))
    if offset.owner:
        while start < len(ordered) and ordered[start].owner != offset.owner:
            start += 1
    return ordered[start:]


def _by_qdate(found: Sequence[SubmissionInfo], mode: ScanMode, offset: PageOffset | None) -> list[SubmissionInfo]:
    ordered = sorted(found, key=_position)
    if mode is ScanMode.AFTER:
        if offset is None:
            return ordered
        if offset.name:
            return [info for info in ordered if _position(info) > (offset.qdate, offset.name)]
        return [info for info in ordered if info.qdate > offset.qdate]
    ordered.reverse()
    if offset is None:
        return ordered
    if offset.qdate <= 0:
        return []
    if offset.name:
        return [info for info in ordered if _position(info) < (offset.qdate, offset.name)]
    return [info for info in ordered if info.qdate <= offset.qdate]


def _position(info: SubmissionInfo) -> tuple[int, str]:
    """Where a submission is in a QDate walk: its oldest QDate, then its name."""
    return info.qdate, info.name
