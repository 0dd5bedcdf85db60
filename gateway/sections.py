"""A configuration section read into the frozen dataclass of its knobs, the way the front ends' sections are
(``[carod]``, ``[qmf]``): a knob's type is its default's, some knobs have a lower bound, and an unknown knob, a value
of another type or one below its bound raises ``error`` naming the knob.  A section's own checks come after."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")


def read_section(cls: type[T], section: str, values: dict[str, Any], where: str, minima: dict[str, int],
                 error: type[Exception]) -> T:
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    for key, value in values.items():
        if key not in known:
            raise error(f"{where}: unknown setting in [{section}]: {key}")
        expected = type(getattr(cls, key))
        if type(value) is not expected:
            raise error(f"{where} [{section}] {key}: expected {expected.__name__}, got {value!r}")
        if key in minima and value < minima[key]:
            raise error(f"{where} [{section}] {key} must be at least {minima[key]}, not {value}")
    return cls(**values)
