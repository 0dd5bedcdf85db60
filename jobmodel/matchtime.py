"""``$$()`` match-time substitution, as the schedd does it when a job is matched with a slot (HTCondor manual,
"condor_submit", *$$(attribute)*): in every attribute of the job's ad, ``$$(Attr)`` becomes the value of the
slot's ``Attr`` (``$$(Attr:default)`` the default when the slot has none) and ``$$([expression])`` the value of the
expression, evaluated with the job as ``MY`` and the slot as ``TARGET``.  Each attribute a reference named is
recorded in the expanded ad as ``MATCH_<Attr>``, as the schedd records it.

The value goes in as text (``"/bin/prog.$$(OpSys)"`` becomes ``"/bin/prog.LINUX"``).  Only string attributes hold
references: the submit language refuses ``$$()`` where an expression is expected.
"""

from __future__ import annotations

import re
from typing import Any

import classad2

from .classads import copy_ad, printed

#: ``$$(Name)``, ``$$(Name:default)`` or ``$$([expression])``
_REFERENCE = re.compile(r"\$\$\((?:\[(?P<expression>.*?)\]|(?P<name>[A-Za-z_][\w.]*)(?::(?P<default>[^)]*))?)\)")


class UnexpandedReference(ValueError):
    """A ``$$()`` reference the slot cannot fill: the attribute it is in, and the reference."""

    def __init__(self, attribute: str, reference: str, why: str) -> None:
        super().__init__(f"Cannot expand {reference} in {attribute}: {why}")
        self.attribute = attribute
        self.reference = reference


def _references(ad: classad2.ClassAd, name: str) -> bool:
    value = ad.lookup(name)
    return "$$(" in str(value) and isinstance(ad[name], str)


def expand(ad: classad2.ClassAd, machine: classad2.ClassAd) -> classad2.ClassAd:
    """A copy of the job's ad with the ``$$()`` references of its string attributes (what condor_submit writes
    them into: ``executable``, ``arguments``, ``environment``, ``+Attr = "..."``) filled from ``machine``; the ad
    itself when it has none.  Raises UnexpandedReference for a reference the slot cannot fill.  An ad whose text has
    no reference at all (most) is not looked at attribute by attribute (a sixth of the time to start a job)."""
    if "$$(" not in printed(ad):
        return ad
    names = [name for name in ad.keys() if _references(ad, name)]
    if not names:
        return ad
    expanded = copy_ad(ad)
    for name in names:
        expanded[name] = _REFERENCE.sub(lambda found, name=name: _text(_value(name, found, ad, machine, expanded)),
                                        ad[name])
    return expanded


def _text(value: Any) -> str:
    """A value as the text that replaces its reference in a string (a number or boolean as ClassAds write it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _value(attribute: str, found: re.Match[str], ad: classad2.ClassAd, machine: classad2.ClassAd,
           expanded: classad2.ClassAd) -> Any:
    if found["expression"] is not None:
        try:
            value = classad2.ExprTree(found["expression"]).eval(scope=ad, target=machine)
        except (classad2.ClassAdException, ValueError) as exc:
            raise UnexpandedReference(attribute, found.group(), f"the expression does not parse ({exc})") from None
        if isinstance(value, classad2.Value):  # undefined or error
            raise UnexpandedReference(attribute, found.group(), f"the expression is {value.name.lower()}")
        return value
    name = found["name"]
    if name in machine:
        value = machine.eval(name)
        if not isinstance(value, classad2.Value):
            expanded[f"MATCH_{name}"] = value
            return value
    if found["default"] is not None:
        return found["default"]
    raise UnexpandedReference(attribute, found.group(), f"the machine ad has no attribute {name}")
