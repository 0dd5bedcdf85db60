"""HTCondor's certificate map file (``certificate_mapfile``): which user a client certificate's subject is.

The syntax is HTCondor's own (``src/condor_utils/MapFile.cpp``, its default mode), so one file can serve both::

    # METHOD  PRINCIPAL (a regular expression)            CANONICALIZATION (the user)
    SSL "^/C=US/O=Example/OU=People/CN=([a-z]+)$"      \\1@example.org
    SSL "/CN=Build Robot$"                              robot
    GSI "^/DC=org/DC=cilogon/.*"                        cilogon   # other methods are read and not used here

- one rule per line, three fields separated by blanks; a field may be quoted with ``"..."``, in which a backslash
  escapes ``"`` or ``\\`` and is kept before any other character (so ``\\.`` and ``\\1`` reach the regex and the
  canonicalization as written); without quotes a field ends at the first blank;
- a line whose first field starts with ``#`` is a comment, blank lines are skipped; the rest of a rule's line may
  be a ``#`` comment;
- the principal is a regular expression *searched* in the subject (anchor it with ``^`` and ``$`` to match the whole
  subject), the method compares without regard to case, and the first rule of the method whose expression matches
  wins; in the canonicalization ``\\0`` is the whole match and ``\\1``..``\\9`` the groups (a group beyond the last
  one that took part in the match stays as written, as HTCondor does).

HTCondor logs a bad line and skips it; here a bad line (too few fields, a regular expression that does not compile,
other text after the rule, ``@include``) refuses the whole file, since a skipped rule silently refuses or
mis-maps users.  The expressions are Python's ``re`` dialect, which agrees with HTCondor's PCRE on what map files
use (classes, anchors, groups, alternation, quantifiers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .textfile import read_text

#: the method HTCondor's SOAP SSL port looked subjects up under
SSL = "SSL"

_BLANKS = " \t\n"


class MapFileError(ValueError):
    """The map file cannot be read or has a line that is not a rule."""


@dataclass(frozen=True)
class Rule:
    method: str
    pattern: re.Pattern[str]
    canonicalization: str
    line: int


class CertificateMap:
    """The rules of one map file, in the order they were written."""

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules

    @classmethod
    def load(cls, path: Path) -> "CertificateMap":
        return cls.parse(read_text(path, "the certificate map file", MapFileError), str(path))

    @classmethod
    def parse(cls, text: str, source: str = "the certificate map file") -> "CertificateMap":
        rules = []
        for number, line in enumerate(text.splitlines(), 1):
            rule = _rule(line, number, f"{source} line {number}")
            if rule is not None:
                rules.append(rule)
        return cls(rules)

    def canonicalize(self, method: str, principal: str) -> str | None:
        """The user the first matching rule of ``method`` names, or None when no rule matches."""
        for rule in self.rules:
            if rule.method.casefold() != method.casefold():
                continue
            match = rule.pattern.search(principal)
            if match is not None:
                return substitute(rule.canonicalization, match) or None
        return None


def _rule(line: str, number: int, where: str) -> Rule | None:
    method, offset = parse_field(line, 0)
    if not method or method.startswith("#"):
        return None
    if method == "@include":
        raise MapFileError(f"{where}: @include is not supported; put the rules in this file")
    principal, offset = parse_field(line, offset)
    canonicalization, offset = parse_field(line, offset)
    if not principal or not canonicalization:
        raise MapFileError(f"{where}: expected METHOD \"REGEX\" USER, got {line.strip()!r}")
    rest = line[offset:].strip(_BLANKS)
    if rest and not rest.startswith("#"):
        raise MapFileError(f"{where}: unexpected text after the rule: {rest!r} (quote a principal with blanks)")
    try:
        pattern = re.compile(principal)
    except re.error as exc:
        raise MapFileError(f"{where}: bad regular expression {principal!r}: {exc}") from None
    return Rule(method, pattern, canonicalization, number)


def parse_field(line: str, offset: int) -> tuple[str, int]:
    """One field from ``offset`` (leading blanks skipped) and the offset after it, as MapFile::ParseField reads it.

    A quoted field runs to its closing quote, or to the end of the line when there is none."""
    while offset < len(line) and line[offset] in _BLANKS:
        offset += 1
    if offset < len(line) and line[offset] == '"':
        field: list[str] = []
        offset += 1
        while offset < len(line):
            char = line[offset]
            if char == '"':
                return "".join(field), offset + 1
            if char == "\\" and offset + 1 < len(line):
                offset += 1
                escaped = line[offset]
                field.append(escaped if escaped in '"\\' else "\\" + escaped)
            else:
                field.append(char)
            offset += 1
        return "".join(field), offset
    end = offset
    while end < len(line) and line[end] not in _BLANKS:
        end += 1
    return line[offset:end], end


def substitute(canonicalization: str, match: re.Match[str]) -> str:
    """``\\N`` replaced by group N of the match (MapFile::PerformSubstitution); a backslash before anything else,
    or before a group past the last one that took part in the match, is kept."""
    taking_part = [n for n in range(1, (match.re.groups or 0) + 1) if match.group(n) is not None]
    groups = [match.group(n) or "" for n in range(0, max(taking_part, default=0) + 1)]
    out: list[str] = []
    index = 0
    while index < len(canonicalization):
        char = canonicalization[index]
        following = canonicalization[index + 1:index + 2]
        if char != "\\":
            out.append(char)
        elif following.isdigit() and following.isascii() and int(following) < len(groups):
            out.append(groups[int(following)])
        else:
            out.append(char + following)
        index += 2 if char == "\\" else 1
    return "".join(out)
