"""The speculative-decoding speedup model: pure formulas, no I/O.

One engine step drafts K tokens, verifies them in one target pass, and emits
``accepted + 1`` tokens (DOMAIN.md section 1). Speedup is tokens per step over the
step's cost in baseline target steps:

    S(K, conc) = AL(K) / D(K, conc)

- ``AL(K)`` (expected tokens per step) from a single i.i.d. alpha or from per-position rates;
- ``D(K, conc) = d0(conc) + d1(conc) * K``: SD step time over the baseline step time at the
  same concurrency. In the Leviathan model ``d0 = 1`` and ``d1 = c`` (draft step cost over
  target step cost). Measured ``d0 - 1`` is fixed per-step overhead; ``d1`` holds the draft
  cost plus the extra verify cost of each drafted token, and both grow with concurrency as
  the target leaves the memory-bound regime (``CostCurve`` interpolates them in log2 conc).
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "tokens_per_step",
    "acceptance_length",
    "geometric_rates",
    "tokens_per_step_rates",
    "leviathan_speedup",
    "step_cost",
    "speedup",
    "optimal_k",
    "CostCurve",
]


def tokens_per_step(alpha: float, k: int) -> float:
    """Expected tokens per step with i.i.d. acceptance alpha: ``(1 - alpha^(K+1)) / (1 - alpha)``.

    Limits: alpha = 1 gives K + 1; alpha = 0 gives 1; K = 0 gives 1.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    if k < 0:
        raise ValueError(f"K must be >= 0, got {k}")
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def acceptance_length(rates: Sequence[float]) -> float:
    """Acceptance length from per-position rates: ``AL = 1 + sum_i rate_i``."""
    return 1.0 + float(sum(rates))


def geometric_rates(first: float, decay: float, k: int) -> list[float]:
    """Per-position rates ``rate_i = first * decay^(i-1)`` for i = 1..K.

    With ``decay == first`` this is the i.i.d. model (rate_i = alpha^i); a separate decay
    lets acceptance fall off with position faster or slower than the first position says.
    """
    return [first * decay ** (i - 1) for i in range(1, k + 1)]


def tokens_per_step_rates(first: float, decay: float, k: int) -> float:
    """Expected tokens per step from geometric per-position rates: ``1 + sum first*decay^(i-1)``."""
    return acceptance_length(geometric_rates(first, decay, k))


def leviathan_speedup(alpha: float, k: int, c: float) -> float:
    """Leviathan et al. (2023) wall-clock speedup: ``(1 - alpha^(K+1)) / ((1 - alpha)(K*c + 1))``."""
    if c < 0:
        raise ValueError(f"draft cost c must be >= 0, got {c}")
    return tokens_per_step(alpha, k) / (k * c + 1.0)


def step_cost(k: float, d0: float, d1: float) -> float:
    """SD step time in baseline target steps: ``D(K) = d0 + d1 * K`` (Leviathan: d0=1, d1=c)."""
    return d0 + d1 * k


def speedup(al: float, k: float, d0: float, d1: float) -> float:
    """Speedup from tokens per step and step cost: ``S = AL / (d0 + d1 * K)``."""
    return al / step_cost(k, d0, d1)


def optimal_k(speedups: Mapping[int, float]) -> int:
    """The K with the highest speedup; ties go to the smaller K (less wasted drafting)."""
    return min(speedups, key=lambda k: (-speedups[k], k))


@dataclass(frozen=True)
class CostCurve:
    """``d0`` and ``d1`` measured at some concurrencies, interpolated linearly in log2(conc).

    Outside the measured range the end segment's slope continues (an extrapolation; the
    advisor says so). ``d0`` stays >= 0.5 and ``d1`` >= 0 there.
    """

    concurrencies: tuple[float, ...]
    d0: tuple[float, ...]
    d1: tuple[float, ...]

    def __post_init__(self):
        if not self.concurrencies:
            raise ValueError("a cost curve needs at least one concurrency")
        if sorted(self.concurrencies) != list(self.concurrencies):
            raise ValueError("concurrencies must be sorted")

    @functools.cached_property
    def _log2(self) -> tuple[float, ...]:
        return tuple(float(x) for x in np.log2(np.asarray(self.concurrencies, dtype=float)))

    def _at(self, ys: Sequence[float], conc: float) -> float:
        """``ys`` at ``conc``: ``np.interp`` in log2(conc) inside, figure for figure, without its per-call cost (a
        schedule asks thousands of times), and the end segment's slope outside."""
        xs, x = self._log2, math.log2(conc)
        if len(xs) == 1:
            return float(ys[0])
        if x < xs[0]:
            slope = (ys[1] - ys[0]) / (xs[1] - xs[0])
            return float(ys[0] + slope * (x - xs[0]))
        if x > xs[-1]:
            slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
            return float(ys[-1] + slope * (x - xs[-1]))
        j = bisect.bisect_right(xs, x) - 1  # xs[j] <= x < xs[j + 1]
        if j == len(xs) - 1 or x == xs[j]:
            return float(ys[j])
        return float((ys[j + 1] - ys[j]) / (xs[j + 1] - xs[j]) * (x - xs[j]) + ys[j])

    def at(self, conc: float) -> tuple[float, float]:
        """``(d0, d1)`` at concurrency ``conc``."""
        if conc <= 0:
            raise ValueError(f"concurrency must be > 0, got {conc}")
        return max(0.5, self._at(self.d0, conc)), max(0.0, self._at(self.d1, conc))

    def inside(self, conc: float) -> bool:
        """Whether ``concurrency`` lies within the measured range."""
        return self.concurrencies[0] <= conc <= self.concurrencies[-1]
