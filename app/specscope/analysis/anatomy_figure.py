"""A step anatomy's measured figure (``anatomy``): a mean in ms with the half-width of its 95% interval, and how
figures measured apart add, subtract and scale (half-widths in quadrature; none where a part was measured once)."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Figure", "ZERO"]


@dataclass(frozen=True)
class Figure:
    """A measured mean (ms) with the half-width of its 95% interval (None: measured once)."""

    value: float
    half: float | None = None

    def __add__(self, other: Figure) -> Figure:
        return Figure(self.value + other.value, _quadrature(self.half, other.half))

    def __sub__(self, other: Figure) -> Figure:
        return Figure(self.value - other.value, _quadrature(self.half, other.half))

    def times(self, factor: float) -> Figure:
        """The figure scaled by a known factor (its interval too)."""
        return Figure(self.value * factor, None if self.half is None else self.half * abs(factor))

    @property
    def low(self) -> float | None:
        """The interval's low end (None without one)."""
        return None if self.half is None else self.value - self.half

    @property
    def high(self) -> float | None:
        """The interval's high end (None without one)."""
        return None if self.half is None else self.value + self.half


ZERO = Figure(0.0, 0.0)


def _quadrature(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else math.hypot(a, b)
