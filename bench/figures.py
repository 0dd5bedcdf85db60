"""Figures the benchmarks print: a measurement repeated, its median/min/max, and its ratio to a baseline.

Every benchmark in bench/ reports through this module so that ``bench/all.py`` prints one table: each figure is
measured at least :data:`RUNS` times, interleaved with its baseline where it has one (so that a machine that slows
down slows both), and printed as median, min and max with the ratio of the medians.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Callable, Iterable

#: repetitions of every figure (the issue's "median of 3")
RUNS = 3


@dataclass
class Figure:
    """One measured quantity: its samples, its unit, and whether more is better (rates) or worse (times)."""

    name: str
    unit: str
    higher_is_better: bool = True
    samples: list[float] = field(default_factory=list)

    def add(self, value: float) -> None:
        self.samples.append(value)

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")

    def ratio_to(self, baseline: "Figure") -> float:
        """How this figure compares with the baseline, > 1 meaning better, whatever the unit's direction."""
        if not self.samples or not baseline.samples or not baseline.median or not self.median:
            return float("nan")
        return self.median / baseline.median if self.higher_is_better else baseline.median / self.median

    def line(self, baseline: "Figure | None" = None) -> str:
        if not self.samples:
            return f"{self.name:<58} (not measured)"
        spread = f"{_number(self.median)} {self.unit} (min {_number(min(self.samples))}, max {_number(max(self.samples))})"
        text = f"{self.name:<58} {spread}"
        if baseline is not None and baseline.samples:
            text += f"  ratio {self.ratio_to(baseline):.2f} of {baseline.name} ({_number(baseline.median)})"
        return text


def interleaved(measurements: Iterable[tuple[Figure, Callable[[], float]]], runs: int = RUNS) -> None:
    """Run every measurement ``runs`` times, round-robin, adding each result to its figure."""
    pairs = list(measurements)
    for _ in range(runs):
        for figure, measure in pairs:
            figure.add(measure())


def print_figures(title: str, rows: Iterable[tuple[Figure, Figure | None]]) -> None:
    print(f"\n== {title}")
    for figure, baseline in rows:
        print(figure.line(baseline))


def _number(value: float) -> str:
    if value != value:  # NaN
        return "nan"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"
