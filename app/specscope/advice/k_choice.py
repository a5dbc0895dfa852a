"""Which K at one concurrency, by the one rule every page and command follows: measured first, modelled where not.

``choose`` holds that rule (``specscope.advice.advisor`` explains it; ``specscope.advice.deploy`` builds its
answer, schedules included, from it):

- at a concurrency with measured K, the fastest measured K; K it cannot be told apart from (``ties``: the one
  rule of every view) are a tie, and a tie goes to the smaller, cheaper K (it drafts less), and says so;
- a K the fit predicts but nobody measured wins only where its predicted speedup beats the fastest
  measured one by more than the fit's own error (leave-one-out, else ``fitting.POOR_FIT``): it is then
  marked predicted, to be measured before it is deployed;
- without measurements at that concurrency, the fit's best K (predicted, or extrapolated outside the
  measured concurrencies);
- K = 0 (no speculation) where the choice is slower than drafting nothing (the baseline, or a speculative
  server measured drafting 0).

``Measured`` is a K's measured figure at one concurrency as the tie rule reads it (``measured_at``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from specscope import ties
from specscope.advice.fitting import FamilyFit
from specscope.analysis import intervals
from specscope.errors import InputError

__all__ = ["Measured", "Choice", "measured_at", "pooled_tie", "choose"]


@dataclass(frozen=True)
class Measured:
    """A K's measured speedup at one concurrency (its point: the runs folded as every view folds them) and its
    95% interval, if any, with the degrees of freedom behind it (``ties`` compares and pools them)."""

    speedup: float
    lo: float | None = None
    hi: float | None = None
    dof: float | None = None

    @property
    def bounded(self) -> bool:
        """Whether it has an interval (repeats)."""
        return self.lo is not None and self.hi is not None

    @property
    def interval(self) -> tuple[float, float] | None:
        """(lo, hi) where it has an interval (repeats), else None."""
        return (self.lo, self.hi) if self.lo is not None and self.hi is not None else None

    @property
    def figure(self) -> ties.Figure:
        """The speedup as the tie rule reads it."""
        return ties.Figure(self.speedup, self.lo, self.hi, self.dof)

    def ties(self, other: Measured) -> bool:
        """Whether the two cannot be told apart by the one rule (``ties.outcome``); single runs: equal points."""
        found = ties.outcome(self.figure, other.figure)
        return found == ties.TIE or (found == ties.NO_INTERVAL and self.speedup == other.speedup)

    def against_baseline(self) -> str:
        """``ties.outcome`` against the baseline: FASTER, SLOWER, TIE or NO_INTERVAL."""
        return ties.outcome(self.figure)

    def repeats_to_tell(self) -> int | None:
        """About how many repeats would tell it from the baseline (``ties.repeats_to_tell``), where it ties."""
        return ties.repeats_to_tell(self.figure, None, round(self.dof) + 1) if self.dof else None

    def text(self) -> str:
        """``1.210× [1.150, 1.270]``, or the point alone."""
        return intervals.text(self.speedup, self.lo, self.hi, unit="×", why_none="")


def _column(rows: pd.DataFrame, here: np.ndarray, name: str) -> np.ndarray:
    """A column of ``rows`` at ``here`` as floats, NaN throughout where the rows lack it."""
    return rows[name].to_numpy(dtype=float, na_value=np.nan)[here] if name in rows else np.full(here.sum(), np.nan)


def measured_at(fit: FamilyFit, concurrency: float) -> dict[int, Measured]:
    """The fitted (training) rows' measured speedup per K at ``concurrency``: the point every view shows
    (``point_speedup`` [``_lo``, ``_hi``], the runs folded as the store folds them) where the rows carry it,
    else the one run's own figure (several runs without their point: their mean, with no interval)."""
    rows = fit.rows
    here = (rows["train"] & (rows["concurrency"] == concurrency)).to_numpy(dtype=bool)
    k, speedup, lo, hi, repeats = (
        _column(rows, here, c) for c in ("k", "speedup", "speedup_lo", "speedup_hi", "repeats")
    )
    point, point_lo, point_hi = (
        _column(rows, here, c) for c in ("point_speedup", "point_speedup_lo", "point_speedup_hi")
    )
    out = {}
    for x in np.unique(k):
        at = k == x
        dof = float(np.nansum(repeats[at] - 1)) if not np.isnan(repeats[at]).all() else None
        if not np.isnan(point[at]).all():  # several runs: the folded point, as the Explorer shows it
            i = int(np.flatnonzero(at)[0])
            out[int(x)] = Measured(
                float(point[i]),
                None if np.isnan(point_lo[i]) else float(point_lo[i]),
                None if np.isnan(point_hi[i]) else float(point_hi[i]),
                dof or None,
            )
            continue
        if at.sum() > 1:  # several runs without their folded point: their mean, no interval to claim
            out[int(x)] = Measured(float(speedup[at].mean()))
            continue
        i = int(np.flatnonzero(at)[0])
        low, high = (None if np.isnan(v[i]) else float(v[i]) for v in (lo, hi))
        out[int(x)] = Measured(float(speedup[i]), low, high if low is not None else None, dof or None)
    return out


def pooled_tie(a: Sequence[Measured], b: Sequence[Measured]) -> bool | None:
    """Whether two K's speedups over the same concurrencies cannot be told apart, pooled over them
    (``ties.pooled``: so consistent small gains add up); None where a point has no interval."""
    found = ties.pooled([m.figure for m in a], [m.figure for m in b])
    return None if found == ties.NO_INTERVAL else found == ties.TIE


@dataclass(frozen=True)
class Choice:
    """The K to deploy at one concurrency and where its figure comes from."""

    concurrency: float
    k: int  # 0: do not speculate
    speedup: float  # what K gives here: measured where it was, else predicted
    predicted: float  # the fit's speedup for K here (drafting nothing's for K = 0)
    measured: Measured | None  # K's own measurement here
    source: str  # "measured", "predicted" or "extrapolated"
    fastest: int | None = None  # the fastest measured K here
    tied: tuple[int, ...] = ()  # measured K tied with the fastest (the choice is the smallest of them)
    by_k: Mapping[int, float] = field(default_factory=dict)  # each K's figure: measured, else predicted
    measured_by: Mapping[int, Measured] = field(default_factory=dict)  # every K measured here

    @property
    def measured_here(self) -> bool:
        """Whether any K was measured at this concurrency."""
        return self.fastest is not None

    def sentence(self) -> str:
        """Why this K, in one sentence."""
        at = f"at concurrency {self.concurrency:g}"
        if self.k == 0:
            what = "the fastest measured" if self.measured_here else "the best predicted"
            best = self.fastest if self.fastest is not None else max(self.by_k, key=self.by_k.__getitem__, default=None)
            figure = 0.0 if best is None else self.by_k.get(best, 0)
            return f"Do not speculate {at}: {what}, K = {best}, gives {figure:.3f}×, slower than drafting nothing."
        if self.source == "measured":
            assert self.measured is not None and self.fastest is not None  # K was measured here, so the fastest was
            if self.fastest == self.k:
                others = [k for k in self.tied if k != self.k]
                tie = f"; K = {', '.join(map(str, others))} measured alike within noise" if others else ""
                return f"K = {self.k} {at}: the fastest measured, {self.measured.text()}{tie}."
            return (
                f"K = {self.k} {at}: measured {self.measured.text()}, tied within noise with the fastest "
                f"measured, K = {self.fastest} ({self.measured_by[self.fastest].text()}); "
                "the smaller K drafts less."
            )
        if self.fastest is not None:  # measured here
            return (
                f"K = {self.k} {at} was not measured: the fit predicts {self.predicted:.3f}×, above the fastest "
                f"measured (K = {self.fastest}, {self.by_k[self.fastest]:.3f}×) by more than its error; "
                "measure it before deploying it."
            )
        where = (
            "predicted between measured concurrencies"
            if self.source == "predicted"
            else "extrapolated past the measured concurrencies"
        )
        return f"K = {self.k} {at}: the fit's best, {self.predicted:.3f}× ({where})."

    def faster(self, a: int, b: int, margin: float) -> bool:
        """Whether K=``a`` is faster than K=``b`` here beyond noise (K=0: drafting nothing, at 1.0): both
        measured, by the one rule (``ties.outcome``; never for single runs); one predicted, by more than the
        fit's error ``margin``; both predicted, by the fit's own figures (their errors are alike)."""
        value = {k: self.by_k.get(k, 1.0) if k else 1.0 for k in (a, b)}
        mine, theirs = self.measured_by.get(a), self.measured_by.get(b)
        if mine is not None and theirs is not None:  # single runs tell nothing apart: no K is picked on points
            return ties.outcome(mine.figure, theirs.figure) == ties.FASTER
        if mine is None and theirs is None and a and b:
            return value[a] > value[b]
        return value[a] > value[b] * (1.0 + margin)


def _smallest_best(values: Mapping[int, float]) -> int:
    return min(values, key=lambda k: (-values[k], k))


def choose(
    fit: FamilyFit,
    concurrency: float,
    ks: Sequence[int] | None = None,
    nothing: float | None = None,
    allow_zero: bool = True,
    measured: Mapping[int, Measured] | None = None,
) -> Choice:
    """The K to deploy at ``concurrency`` by the module's rule, among ``ks`` (default 1..largest measured
    K). ``nothing``: what drafting nothing delivers here (a speculative server measured drafting 0; default
    the baseline's 1.0); ``allow_zero`` False keeps a K where none pays (the smallest); ``measured``: this
    concurrency's ``measured_at``, when the caller has it."""
    if concurrency <= 0:
        raise InputError(f"Concurrency must be a positive number, got {concurrency}.")
    ks = sorted({int(k) for k in ks}) if ks else list(range(1, int(fit.rows["k"].max()) + 1))
    predicted = {k: fit.predict(k, concurrency) for k in ks}
    found = measured_at(fit, concurrency) if measured is None else measured
    measured = {k: m for k, m in found.items() if k in ks}
    by_k = {k: measured[k].speedup if k in measured else predicted[k] for k in ks}
    fastest = tied = None
    if measured:
        fastest = _smallest_best({k: m.speedup for k, m in measured.items()})
        tied = tuple(sorted(k for k, m in measured.items() if k == fastest or m.ties(measured[fastest])))
        k, source = tied[0], "measured"
        unmeasured = {x: v for x, v in predicted.items() if x not in measured}
        if (
            unmeasured
            and (best := _smallest_best(unmeasured)) is not None
            and unmeasured[best] > measured[fastest].speedup * (1.0 + fit.margin)
        ):
            k, source = best, "predicted"
    else:
        k = _smallest_best(predicted)
        source = "predicted" if fit.cost.inside(concurrency) else "extrapolated"
    floor = 1.0 if nothing is None else nothing
    if by_k[k] < floor:
        if allow_zero:
            return Choice(concurrency, 0, floor, floor, None, source, fastest, tied or (), by_k, measured)
        k = ks[0]  # no K pays, and drafting nothing is not offered: the cheapest K
        source = "measured" if k in measured else "predicted" if fit.cost.inside(concurrency) else "extrapolated"
    return Choice(concurrency, k, by_k[k], predicted[k], measured.get(k), source, fastest, tied or (), by_k, measured)
