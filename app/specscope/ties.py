"""The one rule for "within noise": whether two speedups, or a speedup and the baseline, can be told apart.

Every table, badge, sentence and answer that ranks, ties or recommends takes its verdict and words from here:
the Explorer's best K and headline, the advisor, the deploy answer, a schedule's verdict, ``speedup --best``.

    outcome(a, b)              # FASTER, SLOWER, TIE, or NO_INTERVAL (a single run on either side)
    outcome(a)                 # against the baseline, exactly 1.000x
    pooled([a1, a2], [b1, b2]) # the same over several concurrencies together: consistent gains add up
    repeats_to_tell(a, b, 3)   # about how many repeats would tell them apart, from the measured spread

A ``Figure`` is a speedup, its 95% interval and the degrees of freedom behind it. Two figures are apart when
the gap of their logs exceeds t times the standard error of that gap: each side's standard error is its
log half-width towards the other side over its own t quantile, and t is taken on the degrees of freedom of
both (Welch would be finer; summing keeps one rule for one point and for several pooled). Against the
baseline (a speedup's interval already holds the baseline's spread) that is exactly "the interval excludes
1.000x". Overlapping intervals can still be apart: two 95% intervals overlap well before the ratio's interval
reaches 1. Without an interval on either side nothing is decided: a single run's points are compared by no one
that recommends.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from specscope import distributions, stats

__all__ = [
    "Figure",
    "FASTER",
    "SLOWER",
    "TIE",
    "NO_INTERVAL",
    "outcome",
    "outcomes",
    "pooled",
    "repeats_to_tell",
    "telling",
    "words",
    "LEVEL",
]

LEVEL = 0.95
FASTER, SLOWER, TIE, NO_INTERVAL = "faster", "slower", "tie", "no interval"
_Z = 1.959963984540054  # where the degrees of freedom are not known (an import's interval over its requests)


@dataclass(frozen=True)
class Figure:
    """A speedup with its 95% interval (``lo``/``hi`` None for a single run) and the degrees of freedom of
    that interval (None where not known)."""

    value: float
    lo: float | None = None
    hi: float | None = None
    dof: float | None = None

    @classmethod
    def of(cls, row: Mapping, prefix: str = "speedup") -> Figure:
        """A result row's figure: ``speedup``, ``speedup_lo``/``_hi`` and its repeats (dof = repeats - 1)."""
        repeats = stats.finite(row.get("repeats"))
        value = stats.finite(row.get(prefix))
        return cls(
            value if value is not None else math.nan,
            stats.finite(row.get(f"{prefix}_lo")),
            stats.finite(row.get(f"{prefix}_hi")),
            repeats - 1 if repeats and repeats > 1 else None,
        )

    @property
    def bounded(self) -> bool:
        """Whether it has an interval."""
        return self.lo is not None and self.hi is not None

    def _t(self) -> float:
        return distributions.t_quantile(0.5 + LEVEL / 2, self.dof) if self.dof else _Z

    def log_se(self, towards: float) -> float:
        """The standard error of its log on the side facing ``towards`` (inf where that end is 0)."""
        assert self.lo is not None and self.hi is not None
        end = self.lo if towards < self.value else self.hi
        if end == self.value:
            return 0.0  # no spread on that side (the baseline)
        if end <= 0 or self.value <= 0:
            return math.inf
        return abs(math.log(self.value) - math.log(end)) / self._t()


BASELINE = Figure(1.0, 1.0, 1.0, 0.0)  # the reference: exactly 1.000x, its spread inside every speedup's interval


def _gap(a: Sequence[Figure], b: Sequence[Figure]) -> tuple[float, float, float] | None:
    """The mean log gap of ``a`` over ``b``, its standard error and t quantile; None without intervals."""
    if not all(f.bounded for f in (*a, *b)) or any(f.value <= 0 for f in (*a, *b)):
        return None
    logs = [math.log(x.value) - math.log(y.value) for x, y in zip(a, b)]
    gap = sum(logs) / len(logs)
    ses = [s for x, y in zip(a, b) for s in (x.log_se(y.value), y.log_se(x.value))]
    se = math.sqrt(sum(s * s for s in ses)) / len(logs)
    dofs = [f.dof or 0.0 for f in (*a, *b) if f is not BASELINE]
    t = distributions.t_quantile(0.5 + LEVEL / 2, sum(dofs)) if dofs and all(dofs) else _Z
    return gap, se, t


def pooled(a: Sequence[Figure], b: Sequence[Figure] | None = None) -> str:
    """``a`` against ``b`` (default the baseline) over several concurrencies together (pairs in order): their
    mean log gap against its pooled standard error, so a small gain at every load adds up."""
    b = list(b) if b is not None else [BASELINE] * len(a)
    if not a or len(a) != len(b):
        raise ValueError("pooled needs figures in pairs")
    found = _gap(a, b)
    if found is None:
        return NO_INTERVAL
    gap, se, t = found
    if math.isinf(se) or abs(gap) <= t * se:
        return TIE
    return FASTER if gap > 0 else SLOWER


def outcome(a: Figure, b: Figure | None = None) -> str:
    """``a`` against ``b`` (default the baseline, 1.000x): FASTER or SLOWER beyond noise, TIE, or
    NO_INTERVAL where either has none."""
    return pooled([a], [b or BASELINE])


def _log_se_many(value, lo, hi, dof, towards) -> np.ndarray:
    """``Figure.log_se`` over arrays (NaN bounds give NaN)."""
    end = np.where(towards < value, lo, hi)
    t = np.where(
        np.isnan(dof) | (dof <= 0), _Z, distributions.t_quantiles(0.5 + LEVEL / 2, np.where(dof > 0, dof, 1.0))
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.abs(np.log(value) - np.log(end)) / t
    return np.where(end == value, 0.0, np.where((end <= 0) | (value <= 0), np.inf, se))


def outcomes(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> np.ndarray:
    """``outcome`` over arrays: ``a`` and ``b`` each (value, lo, hi, dof) arrays of one length (NaN: none);
    an array of FASTER, SLOWER, TIE and NO_INTERVAL, row by row as ``outcome`` decides each."""
    va, la, ha, da = (np.asarray(x, dtype=float) for x in a)
    vb, lb, hb, db = (np.asarray(x, dtype=float) for x in b)
    bounded = ~(np.isnan(la) | np.isnan(ha) | np.isnan(lb) | np.isnan(hb)) & (va > 0) & (vb > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.log(va) - np.log(vb)
        se = np.hypot(_log_se_many(va, la, ha, da, vb), _log_se_many(vb, lb, hb, db, va))
    known = ~np.isnan(da) & ~np.isnan(db) & (da > 0) & (db > 0)
    total = np.where(known, np.nan_to_num(da) + np.nan_to_num(db), 1.0)
    t = np.where(known, distributions.t_quantiles(0.5 + LEVEL / 2, total), _Z)
    apart = bounded & np.isfinite(se) & (np.abs(gap) > t * se)
    return np.where(~bounded, NO_INTERVAL, np.where(~apart, TIE, np.where(gap > 0, FASTER, SLOWER))).astype(object)


def repeats_to_tell(a: Figure, b: Figure | None, repeats: int, cap: int = 100) -> int | None:
    """About how many repeats (of each, in interleaved rounds) would tell ``a`` from ``b`` (default the
    baseline) if the measured gap holds: the standard error shrinks as one over the root of the repeats.
    None where they are already apart, have no interval, or measured no gap; ``cap + 1`` beyond ``cap``."""
    pair = [a, b or BASELINE]
    found = _gap(pair[:1], pair[1:])
    if found is None or repeats < 1:
        return None
    gap, se, t = found
    if gap == 0 or math.isinf(se) or abs(gap) > t * se:
        return None
    sides = sum(f is not BASELINE for f in pair)
    known = all(f.dof for f in pair if f is not BASELINE)
    for more in range(repeats + 1, cap + 1):  # the spread as measured, its t at the larger count
        t_more = distributions.t_quantile(0.5 + LEVEL / 2, sides * (more - 1)) if known else _Z
        if abs(gap) > t_more * se * math.sqrt(repeats / more):
            return more
    return cap + 1


def words(result: str, against: str = "the baseline") -> str:
    """``faster than the baseline beyond noise``, ``tied with K = 2 within noise``, ``not told apart from ...
    (a single run has no interval)``."""
    return {
        FASTER: f"faster than {against} beyond noise",
        SLOWER: f"slower than {against} beyond noise",
        TIE: f"tied with {against} within noise",
    }.get(result, f"not told apart from {against} (a single run has no interval)")


def telling(needed: Sequence[int | None], cap: int = 100) -> str:
    """``about 6 repeats would tell, if the measured spread holds`` for the most of ``needed``
    (``repeats_to_tell`` of several ties); '' where none says."""
    found = [n for n in needed if n]
    if not found:
        return ""
    if max(found) > cap:
        return f"even {cap} repeats would not tell them apart at the measured spread"
    return f"about {max(found)} repeats would tell, if the measured spread holds"
