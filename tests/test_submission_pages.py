"""Aviary's GetSubmissionID paging rules (gateway.core.submission_pages), case by case against what the original's
AviaryQueryServiceSkeleton::getSubmissionID answered; the wire is tested in tests/test_aviary.py."""

from __future__ import annotations

import pytest

from gateway.core.submission_pages import PageOffset, ScanMode, submission_page
from gateway.core.submissions import SubmissionInfo


def info(name: str, owner: str, qdate: int) -> SubmissionInfo:
    return SubmissionInfo(name, owner, qdate, {})


#: five submissions, two sharing a QDate, given out of order (the page sorts them)
FOUND = [info("d", "bob", 300), info("a", "alice", 100), info("e", "alice", 400), info("c", "alice", 200),
         info("b", "bob", 200)]
AFTER, BEFORE = ScanMode.AFTER, ScanMode.BEFORE


def page(size: int, mode: ScanMode | None = None, offset: PageOffset | None = None) -> tuple[str, int]:
    found = submission_page(FOUND, size, mode, offset)
    return "".join(s.name for s in found.submissions), found.remaining


@pytest.mark.parametrize("size, offset, expected", [
    (2, None, ("ab", 3)),
    (2, PageOffset("c"), ("cd", 1)),  # the page starts at the offset
    (10, PageOffset("d"), ("de", 0)),
    (2, PageOffset("b", "alice"), ("cd", 1)),  # b is bob's: on to the first of alice's after it
    (2, PageOffset("zz"), ("", 0)),  # an unknown name: nothing
    (2, PageOffset(None, "alice"), ("", 0)),  # an owner alone names no start
    (-1, None, ("", 5)),  # a negative size: an empty page, the rest remaining
    (0, PageOffset("c"), ("", 3)),
    (2**31 - 1, None, ("abcde", 0)),
])
def test_by_name(size, offset, expected):
    assert page(size, None, offset) == expected


@pytest.mark.parametrize("size, offset, expected", [
    (2, None, ("ab", 3)),  # without an offset: from the oldest
    (1, PageOffset(qdate=100), ("b", 3)),
    (2, PageOffset("b", qdate=200), ("cd", 1)),  # right after the offset: c shares its QDate, and comes after b
    (2, PageOffset(qdate=200), ("de", 0)),  # a QDate alone: after it
    (2, PageOffset(qdate=400), ("", 0)),  # nothing newer
    (2, PageOffset(qdate=-2**31), ("ab", 3)),
    (0, PageOffset(qdate=100), ("", 4)),  # a size below 1: an empty page, the rest remaining
    (-5, None, ("", 5)),
])
def test_after(size, offset, expected):
    assert page(size, AFTER, offset) == expected


@pytest.mark.parametrize("size, offset, expected", [
    (2, None, ("ed", 3)),  # without an offset: from the newest
    (2, PageOffset("c", qdate=200), ("ba", 0)),  # right before the offset: b shares its QDate, and comes before c
    (1, PageOffset("d", qdate=300), ("c", 2)),
    (1, PageOffset(qdate=200), ("c", 2)),  # a QDate alone: up to and including it
    (1, PageOffset(qdate=350), ("d", 3)),
    (2, PageOffset(qdate=50), ("", 0)),  # nothing at or before it
    (2, PageOffset("a", qdate=0), ("", 0)),  # a QDate of 0 (or none) answers nothing, as the original
    (0, PageOffset("x", qdate=400), ("", 5)),  # a size below 1: an empty page
    (-5, None, ("", 5)),
    (2**31 - 1, PageOffset(qdate=2**31 - 1), ("edcba", 0)),
])
def test_before(size, offset, expected):
    assert page(size, BEFORE, offset) == expected


@pytest.mark.parametrize("mode", [AFTER, BEFORE])
def test_paging_by_qdate_from_the_last_id_visits_each_submission_once(mode):
    """Submissions of one second as well (the original looped for ever on them going BEFORE, and lost them AFTER)."""
    found = [info(f"s{n:02}", "alice", 1000 + n // 4) for n in range(13)]
    seen, offset = [], None
    while True:
        answer = submission_page(found, 3, mode, offset)
        seen += [s.name for s in answer.submissions]
        if not answer.remaining:
            break
        last = answer.submissions[-1]
        offset = PageOffset(last.name, last.owner, last.qdate)
    assert seen == sorted(seen, reverse=mode is BEFORE) == sorted(s.name for s in found)[::-1 if mode is BEFORE else 1]


def test_paging_by_name_visits_each_submission_once():
    seen, offset = [], None
    while True:
        found = submission_page(FOUND, 2, None, offset)
        seen += [s.name for s in found.submissions if offset is None or s.name != offset.name]
        if not found.remaining:
            break
        offset = PageOffset(found.submissions[-1].name)
    assert seen == list("abcde")


@pytest.mark.parametrize("mode", [None, AFTER, BEFORE])
def test_no_submissions_is_an_empty_page(mode):
    found = submission_page([], 10, mode, PageOffset("a", qdate=100))
    assert (found.submissions, found.remaining) == ([], 0)
