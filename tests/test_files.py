"""jobmodel.files: the names an input file may have when a client sends it, and the byte ranges of a file sent in
parts (what lets a commit tell a complete file from one with holes)."""

from __future__ import annotations

import random

import pytest

from jobmodel.files import ByteRanges, is_plain_name, transfer_name_problem


@pytest.mark.parametrize("name", ["in.txt", "input data.v2", "caf\u00e9", "-dash", ".hidden", "a" * 255])
def test_plain_names_can_be_sent(name):
    assert transfer_name_problem(name) is None


@pytest.mark.parametrize("name, words", [
    ("", "empty"), (".", "not a file name"), ("..", "not a file name"), ("a/b", "path separator"),
    ("a\\b", "backslash"), ("a,b", "comma"), ("a\nb", "control"), ("a\0b", "control"), ("a\x7fb", "control"),
    ("a\x85b", "control"), (" a", "white space"), ("a\u2003", "white space"), ("a\ud800", "surrogate"),
])
def test_names_transfers_would_mangle_cannot_be_sent(name, words):
    assert words in transfer_name_problem(name)


def test_reading_keeps_the_plain_name_rule():
    assert is_plain_name("a,b") and is_plain_name("a\\b") and not is_plain_name("a/b")


def test_byte_ranges_merge_overlapping_and_adjacent_parts_in_any_order():
    ranges = ByteRanges()
    for start, end in ((500, 800), (0, 300), (250, 550), (800, 1000)):
        ranges.add(start, end)
    assert ranges.covered() == 1000 and len(ranges) == 1
    ranges.remove(100, 200)
    assert ranges.covered() == 900 and len(ranges) == 2
    ranges.add(5, 5)
    ranges.remove(3000, 4000)
    assert ranges.covered() == 900


def test_byte_ranges_agree_with_a_set_of_bytes():
    generator = random.Random(13)
    for _ in range(500):
        ranges, expected = ByteRanges(), set()
        for _ in range(generator.randint(1, 15)):
            start = generator.randint(0, 60)
            end = start + generator.randint(0, 12)
            if generator.random() < 0.7:
                ranges.add(start, end)
                expected |= set(range(start, end))
            else:
                ranges.remove(start, end)
                expected -= set(range(start, end))
            assert ranges.covered() == len(expected)
