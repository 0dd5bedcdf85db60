"""Reading job ads with the official ClassAd library: constraints, attribute values, states, copies.

Both sides use these: the front ends to parse a client's constraint, the backends to evaluate policies and
queries.  Evaluation never raises for a client's expression; undefined and error values count as absent.
"""

from __future__ import annotations

from typing import Callable, Iterable

import classad2

from .expressions import ExpressionLimits
from .exprtext import TextedAd, carry_texts
from .jobs import JobStatus


def parse_constraint(text: str | None, limits: ExpressionLimits | None = None,
                     unparsable: Callable[[str], None] | None = None) -> classad2.ExprTree | None:
    """Parse a query constraint once per request; ``None`` means "every ad", an unparsable one matches nothing (as
    HTCondor's getJobAds answered it: SUCCESS, no ads), after ``unparsable(text)`` is told.

    A client's constraint is checked against ``limits`` first (raises ExpressionRefused)."""
    if text is None or not text.strip():
        return None
    if limits is not None:
        limits.check(text, "the constraint")
    try:
        constraint = classad2.ExprTree(text)
    except classad2.ClassAdException:
        if unparsable is not None:
            unparsable(text)
        return classad2.ExprTree("false")
    return None if str(constraint) == "true" else constraint  # the literal TRUE (getJobAds(TRUE)): nothing to evaluate


def matches(constraint: classad2.ExprTree | None, ad: classad2.ClassAd) -> bool:
    """True when the constraint evaluates to true or a non-zero number; undefined and error count as false."""
    if constraint is None:
        return True
    try:
        result = constraint.eval(ad)
    except classad2.ClassAdException:
        return False
    if isinstance(result, bool):
        return result
    if isinstance(result, classad2.Value):  # an IntEnum: must not pass for a number
        return False
    return isinstance(result, (int, float)) and result != 0  # numbers count as booleans, as in EvalBool


def evaluate(ad: classad2.ClassAd, name: str, default: object = None) -> object:
    """An attribute evaluated against the ad; ``default`` when absent, undefined or an error."""
    try:
        result = ad[name]  # a literal's value as it is: ad.eval(name) leaks 144 bytes a call (htcondor 24.0)
    except KeyError:
        return default
    if isinstance(result, classad2.ExprTree):
        try:
            result = result.eval(ad)
        except classad2.ClassAdException:
            return default
    return default if isinstance(result, classad2.Value) else result


def evaluate_number(ad: classad2.ClassAd, name: str) -> float:
    """A numeric attribute as a float; 0 when absent, not a number, or a boolean (for sorting and arithmetic)."""
    result = evaluate(ad, name, 0)
    return float(result) if isinstance(result, (int, float)) and not isinstance(result, bool) else 0.0


def evaluate_string(ad: classad2.ClassAd, name: str, default: str = "") -> str:
    result = evaluate(ad, name, default)
    return result if isinstance(result, str) else default


def job_status(ad: classad2.ClassAd) -> JobStatus:
    """The ad's ``JobStatus`` (IDLE when absent or not a known state)."""
    try:
        return JobStatus(evaluate(ad, "JobStatus", int(JobStatus.IDLE)))
    except ValueError:
        return JobStatus.IDLE


def literal_value(expr: classad2.ExprTree) -> object:
    """What an expression is when it is a single literal (an int, float, bool, str, or classad2.Value), else None."""
    probe = classad2.ClassAd()
    probe["value"] = expr
    value = probe["value"]
    return None if isinstance(value, classad2.ExprTree) else value


def literal_string(ad: classad2.ClassAd, name: str) -> str:
    """An attribute that is a string literal, else "" (nothing is evaluated: cheap, and safe on others' ads)."""
    value = ad.get(name)
    return value if isinstance(value, str) else ""


def literal_int(ad: classad2.ClassAd, name: str, default: int = 0) -> int:
    """An attribute that is an integer literal (not a boolean), else ``default``; nothing is evaluated."""
    value = ad.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def copy_ad(ad: classad2.ClassAd) -> TextedAd:
    """A copy, with the expression texts the ad keeps (``exprtext``), made through the ad's text: copying attribute
    by attribute (``update``) makes an ExprTree of each, and classad2 (htcondor 24.0) never frees those (2.4 KB a
    copy of a 45-attribute job ad, for the life of the process; the text costs 144 bytes) and takes longer."""
    return carry_texts(ad, TextedAd(printed(ad)))


_PRINTED = "_birdbath_printed"


def printed(ad: classad2.ClassAd) -> str:
    """``str(ad)``: the text :func:`keep_printed` kept, if any (a running job's ad is printed for its row and copied
    when its run ends)."""
    text = kept_text(ad)
    return str(ad) if text is None else text


def kept_text(ad: classad2.ClassAd) -> str | None:
    """The text :func:`keep_printed` kept of ``ad`` (None: none was)."""
    return getattr(ad, _PRINTED, None)


def keep_printed(ad: classad2.ClassAd) -> str:
    """Print an ad that will never change again (a store's: a change is a new ad) and keep the text for
    :func:`printed` (as long as the ad lives: a store keeps it only for the ads it will soon copy)."""
    text = str(ad)
    setattr(ad, _PRINTED, text)
    return text


def projected(ad: classad2.ClassAd, names: Iterable[str]) -> TextedAd:
    """Only the named attributes (as expressions, unevaluated) that the ad has, with their kept texts."""
    names = tuple(names)
    out = TextedAd()
    for name in names:
        if name in ad:
            out[name] = ad.lookup(name)
    return carry_texts(ad, out, names)
