"""``q -better-analyze``: why a job does not run, in condor_q's words where it has them.  An idle job's
``Requirements`` is split into its conditions (the ``&&`` at its top level), and each is evaluated against every
slot of the pool (the collector's machine ads) with classad2, the job as ``MY`` and the slot as ``TARGET``; the
job's ``RequestCpus`` is set against each slot's CPUs as a partitionable slot would.  Held, running and finished
jobs are described by their state (and hold reason)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .ads import Expr, to_classad
from .jobs import JobStatus

Ad = Mapping[str, Any]


def conditions(text: str) -> list[str]:
    """The conditions a Requirements expression's top-level ``&&`` joins, outer parentheses removed."""
    parts, depth, quoted, start, index = [], 0, False, 0, 0
    while index < len(text):
        char = text[index]
        if quoted:
            if char == "\\":
                index += 1
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith("&&", index):
            parts.append(text[start:index])
            start = index + 2
            index += 1
        index += 1
    parts.append(text[start:])
    return [_unwrapped(part.strip()) for part in parts if part.strip()]


def _unwrapped(text: str) -> str:
    """``(a && b)`` as ``a && b`` when the parentheses enclose the whole text."""
    while text.startswith("(") and text.endswith(")") and conditions_balanced(text[1:-1]):
        text = text[1:-1].strip()
    return text


def conditions_balanced(text: str) -> bool:
    depth, quoted = 0, False
    for index, char in enumerate(text):
        if quoted:
            quoted = not (char == '"' and text[index - 1] != "\\")
        elif char == '"':
            quoted = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _matches(condition: str, job: Any, slot: Any) -> bool:
    import classad2

    try:
        return classad2.ExprTree(condition).eval(scope=job, target=slot) is True
    except Exception:  # classad2 raises its own error types for what does not evaluate
        return False


def analyze(ad: Ad, slots: list[Ad]) -> Iterator[str]:
    """The lines condor_q -better-analyze prints for one job."""
    job = f"{ad.get('ClusterId')}.{int(ad.get('ProcId', 0)):03d}"
    status = JobStatus.of(ad)
    if status is JobStatus.HELD:
        yield f"{job}:  Job is held."
        yield ""
        yield f"Hold reason: {ad.get('HoldReason', '')}"
        return
    if status is not JobStatus.IDLE:
        yield f"{job}:  Job is {status.label.lower() if status else 'in an unknown state'}."
        return
    requirements = str(ad.get("Requirements", "true"))
    yield f"The Requirements expression for job {job} is"
    yield ""
    yield f"    {requirements}"
    yield ""
    job_ad = to_classad(ad)
    machines = [to_classad(slot) for slot in slots]
    rows = [(condition, sum(_matches(condition, job_ad, slot) for slot in machines))
            for condition in conditions(requirements)]
    cpus = int(ad.get("RequestCpus", 1) or 1) if not isinstance(ad.get("RequestCpus"), Expr) else 1
    rows.append((f"TARGET.Cpus >= RequestCpus ({cpus})",
                 sum(1 for slot in slots if int(slot.get("TotalSlotCpus", slot.get("Cpus", 0)) or 0) >= cpus)))
    yield f"The Requirements expression for job {job} reduces to these conditions:"
    yield ""
    yield "         Slots"
    yield "Step    Matched  Condition"
    yield "-----  --------  ---------"
    for step, (condition, matched) in enumerate(rows):
        yield f"[{step}]".ljust(5) + f"{matched:10d}  {condition}"
    everything = sum(all(_matches(condition, job_ad, slot) for condition, _ in rows[:-1]) and
                     int(raw.get("TotalSlotCpus", raw.get("Cpus", 0)) or 0) >= cpus
                     for slot, raw in zip(machines, slots))
    yield ""
    yield f"{job}:  Run analysis summary ignoring user priority.  Of {len(slots)} machines,"
    yield f"      {len(slots) - everything} are rejected by your job's requirements"
    yield f"      {everything} are able to run your job"
    if slots and not everything:
        failing = [condition for condition, matched in rows if matched == 0]
        yield ""
        yield "WARNING:  Be advised:"
        yield "   No machines matched the jobs's constraints"
        for condition in failing:
            yield f"   No slot satisfies: {condition}"
