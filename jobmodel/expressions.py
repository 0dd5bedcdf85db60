"""Checking ClassAd text from clients before the ClassAd library sees it.

The library parses and evaluates recursively, one C++ stack frame (roughly 300 bytes) per level of the expression
tree, and follows attribute references up to about 450 levels deep.  A constraint of 100,000 ``!`` or a chain of
100,000 ``+`` parses, but evaluating or printing it overflows an 8 MiB stack and kills the process.  So every
expression a client sends is measured first: its length, and a bound on the depth of the tree it parses into
(:func:`depth_bound`), each against a configurable limit (:class:`ExpressionLimits`); text over either is refused
with a message that names the limit.  The depth bound also sizes the stacks of the threads that evaluate job ads
(:func:`ExpressionLimits.stack_bytes`), since a reference chain multiplies the depth of one expression.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import classad2

#: the library's limit on nested attribute-reference evaluations (measured: a 450-link chain evaluates to error)
REFERENCE_DEPTH = 450
#: stack bytes one level of the tree takes at most while evaluating or printing (measured: 270 to 410), with margin
BYTES_PER_LEVEL = 512

#: multi-character operators first, so that the longest one is taken
_OPERATOR = re.compile(r"=\?=|=!=|>>>|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%<>!~&|^?:=]")
_WORD = re.compile(r"[A-Za-z0-9_.]+")
_NUMBER_START = re.compile(r"\.?[0-9]")
_WORD_OPERATORS = frozenset({"is", "isnt"})

#: the tokens of expression text (read by ``values`` and ``exprtext``), in the order they must be tried: quoted text,
#: names, numbers, closing brackets (which end an operand, as those before do), a minus, any other character
TOKEN = re.compile(r"""
    (?P<quoted>"(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)(?P<glued>[A-Za-z_0-9.]*)
  | (?P<close>[)\]}])
  | (?P<minus>-)
  | (?P<other>\S)
""", re.VERBOSE | re.DOTALL)


class ExpressionRefused(ValueError):
    """Client ClassAd text over a limit; the message names the limit and its setting."""


@dataclass(frozen=True)
class ExpressionLimits:
    """``max_expression_length`` characters and ``max_expression_depth`` levels of nesting, per expression."""

    max_length: int = 65536
    max_depth: int = 1000

    def check(self, text: str, what: str = "expression") -> None:
        """Raise ExpressionRefused when ``text`` is longer or nests deeper than the limits allow."""
        if len(text) > self.max_length:
            raise ExpressionRefused(
                f"{what} is {len(text)} characters long, over the limit of {self.max_length} "
                f"(max_expression_length)")
        depth = depth_bound(text)
        if depth > self.max_depth:
            raise ExpressionRefused(
                f"{what} nests {depth} levels deep, over the limit of {self.max_depth} (max_expression_depth)")

    def parse(self, text: str, what: str = "expression") -> classad2.ExprTree:
        """Check, then parse (a text the library cannot parse raises classad2.ClassAdException)."""
        self.check(text, what)
        return classad2.ExprTree(text)

    def stack_bytes(self) -> int:
        """A thread stack on which any ad whose expressions are within the limits evaluates without overflow."""
        return max(8 << 20, self.max_depth * REFERENCE_DEPTH * BYTES_PER_LEVEL)


def depth_bound(text: str) -> int:
    """An upper bound on the depth of the tree ``text`` parses into, found without recursion.

    Within one bracket level, an expression of *k* operators over operands nesting at most *m* deep is a tree of
    depth at most *k* + *m* + 1, whatever the precedences; commas and semicolons separate operands (arguments,
    list items, ad attributes) that each get their own bound.  Operators are counted as written (``!!x`` is two),
    so chains of unary or binary operators count in full: they are what makes a tree deep without brackets."""
    frames: list[list[int]] = [[0, 0, 0]]  # per bracket level: [operators, deepest operand, best sibling]
    position, end = 0, len(text)
    while position < end:
        char = text[position]
        if char in " \t\r\n":
            position += 1
        elif char in "\"'":
            position = _after_quoted(text, position)
        elif char in "([{":
            frames.append([0, 0, 0])
            position += 1
        elif char in ")]}":
            if len(frames) > 1:
                depth = _close_sibling(frames.pop())
                frames[-1][1] = max(frames[-1][1], depth)
            position += 1
        elif char in ",;":
            _close_sibling(frames[-1])
            position += 1
        elif (word := _WORD.match(text, position)) is not None:
            atom = word.group()
            if atom.lower() in _WORD_OPERATORS:
                frames[-1][0] += 1
            elif not _NUMBER_START.match(atom):
                frames[-1][0] += atom.count(".")  # a.b.c: each selection is a level
            position = word.end()
        elif (operator := _OPERATOR.match(text, position)) is not None:
            frames[-1][0] += 1
            position = operator.end()
        else:
            position += 1  # anything else is the parser's to refuse
    while len(frames) > 1:  # unclosed brackets: the parser refuses them, but bound what was seen
        depth = _close_sibling(frames.pop())
        frames[-1][1] = max(frames[-1][1], depth)
    return _close_sibling(frames[0])


def _close_sibling(frame: list[int]) -> int:
    """End the current operand of a bracket level; the level's depth so far (its deepest operand, plus one)."""
    operators, deepest, best = frame
    frame[:] = [0, 0, max(best, operators + deepest + 1)]
    return frame[2]


def _after_quoted(text: str, start: int) -> int:
    """The position after a string literal or quoted attribute name (backslash escapes honoured)."""
    quote, position = text[start], start + 1
    while position < len(text):
        if text[position] == "\\":
            position += 2
        elif text[position] == quote:
            return position + 1
        else:
            position += 1
    return position

