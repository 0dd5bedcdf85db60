"""Expression text: what a client sent comes back as it was sent; everything else is printed in the old syntax.

classad2 keeps expressions parsed and prints them with its own unparser, in the new ClassAd syntax: ``a =?= b`` comes
back as ``a is b``, ``TRUE`` as ``true``, ``1.0E3`` as ``1.000000000000000E+03``.  The 6.x-8.6 schedds that legacy
clients were written against printed the old syntax, and some clients read job ads with regular expressions
(``VMType\\s=\\?=\\s"(.+?)"``).  So:

- an expression parsed from a client's text is a :class:`SourceExpr`, which carries the text;
- a :class:`TextedAd` remembers that text for as long as the attribute holds that expression (assigning anything
  else, or deleting it, forgets it), and only when it differs from what :func:`old_syntax` would print, so that most
  ads keep nothing (``(VMType =?= "csvm") && (Arch == "X86_64")`` prints back the same);
- :func:`expression_text` is what the gateway shows for an expression: the kept text, else classad2's unparse in the
  old syntax.

Constraints are still parsed and evaluated by classad2: only the printing changes.  Kept texts travel with copies
(``classads.copy_ad``) and into the store (:func:`texts_record`, :func:`restored`), so they survive restarts and the
history.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Iterable

import classad2

from .expressions import TOKEN

#: the new syntax's keywords as the old syntax (and the 6.x-8.6 schedds) wrote them
_OLD_WORDS = {"is": "=?=", "isnt": "=!=", "true": "TRUE", "false": "FALSE", "undefined": "UNDEFINED",
              "error": "ERROR"}


@functools.lru_cache(maxsize=8192)
def old_syntax(unparsed: str) -> str:
    """classad2's unparse of an expression, rewritten token by token into the old syntax: ``=?=`` and ``=!=`` for
    ``is`` and ``isnt``, upper-case ``TRUE``/``FALSE``/``UNDEFINED``/``ERROR``, and reals as the old printer wrote
    them (``1000.0``, ``0.001``, ``1E+20``: 16 significant digits, ``.0`` on whole numbers).  Strings and names are
    left as they are.  Cached: job ads repeat the same few expressions."""
    pieces: list[str] = []
    done = 0
    for token in TOKEN.finditer(unparsed):
        text = token.group()
        if token.lastgroup == "name" and text in _OLD_WORDS:
            new = _OLD_WORDS[text]
        elif token.lastgroup == "glued" and not token.group("glued") and any(mark in text for mark in ".eE"):
            new = _old_real(text)  # a number (its empty "glued" group matched last)
        else:
            continue
        pieces.append(unparsed[done:token.start()])
        pieces.append(new)
        done = token.end()
    if not pieces:
        return unparsed
    pieces.append(unparsed[done:])
    return "".join(pieces)


def _old_real(number: str) -> str:
    text = "%.16G" % float(number)
    return text if any(mark in text for mark in ".EN") else text + ".0"


class SourceExpr(classad2.ExprTree):
    """An expression parsed from a client's text, which it keeps (surrounding whitespace aside)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text.strip()
        #: whether an ad keeps the text (:func:`_worth_keeping`), worked out at the first assignment: the same
        #: parsed expression may be assigned into many ads (``gateway.core.adstruct.attribute_value``)
        self.keep: bool | None = None


class TextedAd(classad2.ClassAd):
    """A ClassAd that keeps the client's text of the expressions assigned to it as :class:`SourceExpr`, by
    lower-case attribute name (ClassAd names ignore case), while the attribute holds them."""

    #: lower-case name -> text; None until a text differs from its old-syntax printing (most ads never keep one)
    texts: dict[str, str] | None = None

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        if isinstance(value, SourceExpr) and self._keeps(key, value):
            if self.texts is None:
                self.texts = {}
            self.texts[key.lower()] = value.text
        elif self.texts:
            self.texts.pop(key.lower(), None)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        if self.texts:
            self.texts.pop(key.lower(), None)

    def _keeps(self, key: str, value: SourceExpr) -> bool:
        """Whether the text of ``value``, just assigned to ``key``, is kept (the same for any ad it is assigned to)."""
        if value.keep is None:
            value.keep = _worth_keeping(value, super().__getitem__(key))
        return value.keep


def _worth_keeping(expr: SourceExpr, stored: object) -> bool:
    """Whether the text says more than the printing would: not for a literal (typed and printed as §4.4 of the
    Birdbath description says, as the originals did), nor for a text the old-syntax printing gives back as it is."""
    return isinstance(stored, classad2.ExprTree) and expr.text != old_syntax(str(expr))


def expression_text(ad: classad2.ClassAd, name: str, expr: classad2.ExprTree) -> str:
    """The text the gateway shows for the expression ``expr`` of ``ad``'s attribute ``name``."""
    texts = getattr(ad, "texts", None)
    if texts:
        kept = texts.get(name.lower())
        if kept is not None:
            return kept
    return old_syntax(str(expr))


def source_text(expr: classad2.ExprTree) -> str:
    """The text to hand on for an expression (to a real schedd, say): the client's, else the old syntax."""
    return expr.text if isinstance(expr, SourceExpr) else old_syntax(str(expr))


def carry_texts(source: classad2.ClassAd, copy: TextedAd, names: Iterable[str] | None = None) -> TextedAd:
    """``copy`` (of ``source``'s attributes, or of those in ``names``) with ``source``'s kept texts for them (the
    names are only looked at when the source keeps texts: most ads keep none)."""
    texts = getattr(source, "texts", None)
    if texts:
        wanted = None if names is None else {name.lower() for name in names}
        kept = texts if wanted is None else {key: text for key, text in texts.items() if key in wanted}
        copy.texts = dict(kept) or None
    return copy


def texts_record(ad: classad2.ClassAd) -> str | None:
    """The kept texts of an ad as stored next to its ClassAd text (None when it keeps none)."""
    texts = getattr(ad, "texts", None)
    return json.dumps(texts, separators=(",", ":"), ensure_ascii=False) if texts else None


def restored(text: str, record: str | None) -> TextedAd:
    """A stored ad (its ClassAd text, and :func:`texts_record`'s record) read back."""
    ad = TextedAd(text)
    if record:
        ad.texts = json.loads(record)
    return ad
