"""The K advisor: at one concurrency, which K to deploy and why, measured first and modelled where not.

``choose`` holds the one rule every page and command follows (``specscope.advice.deploy`` builds its answer,
schedules included, from it):

- at a concurrency with measured K, the fastest measured K; K it cannot be told apart from (``ties``: the one
  rule of every view) are a tie, and a tie goes to the smaller, cheaper K (it drafts less), and says so;
- a K the fit predicts but nobody measured wins only where its predicted speedup beats the fastest
  measured one by more than the fit's own error (leave-one-out, else ``fitting.POOR_FIT``): it is then
  marked predicted, to be measured before it is deployed;
- without measurements at that concurrency, the fit's best K (predicted, or extrapolated outside the
  measured concurrencies);
- K = 0 (no speculation) where the choice is slower than drafting nothing (the baseline, or a speculative
  server measured drafting 0).

``advise`` wraps the choice with its reasons in plain words, the formulas behind them and the fit's
evidence (``Advice``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from specscope import ties
from specscope.advice import reasons
from specscope.advice.fitting import EXTRAPOLATE, MIN_HELD_OUT, FamilyFit
from specscope.advice.speedup_curves import predicted_crossover
from specscope.analysis import intervals
from specscope.errors import InputError

__all__ = ["Measured", "Choice", "measured_at", "pooled_tie", "choose", "Advice", "Evidence", "MeasuredPoint",
           "advise"]


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
    k, speedup, lo, hi, repeats = (_column(rows, here, c) for c in ("k", "speedup", "speedup_lo", "speedup_hi",
                                                                      "repeats"))
    point, point_lo, point_hi = (_column(rows, here, c) for c in ("point_speedup", "point_speedup_lo",
                                                                  "point_speedup_hi"))
    out = {}
    for x in np.unique(k):
        at = k == x
        dof = float(np.nansum(repeats[at] - 1)) if not np.isnan(repeats[at]).all() else None
        if not np.isnan(point[at]).all():  # several runs: the folded point, as the Explorer shows it
            i = int(np.flatnonzero(at)[0])
            out[int(x)] = Measured(float(point[i]), None if np.isnan(point_lo[i]) else float(point_lo[i]),
                                   None if np.isnan(point_hi[i]) else float(point_hi[i]), dof or None)
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
    k: int                       # 0: do not speculate
    speedup: float               # what K gives here: measured where it was, else predicted
    predicted: float             # the fit's speedup for K here (drafting nothing's for K = 0)
    measured: Measured | None    # K's own measurement here
    source: str                  # "measured", "predicted" or "extrapolated"
    fastest: int | None = None   # the fastest measured K here
    tied: tuple[int, ...] = ()   # measured K tied with the fastest (the choice is the smallest of them)
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
            what = ("the fastest measured" if self.measured_here else "the best predicted")
            best = self.fastest if self.fastest is not None else max(self.by_k, key=self.by_k.__getitem__,
                                                                     default=None)
            figure = 0.0 if best is None else self.by_k.get(best, 0)
            return (f"Do not speculate {at}: {what}, K = {best}, gives {figure:.3f}×, "
                    "slower than drafting nothing.")
        if self.source == "measured":
            assert self.measured is not None and self.fastest is not None  # K was measured here, so the fastest was
            if self.fastest == self.k:
                others = [k for k in self.tied if k != self.k]
                tie = (f"; K = {', '.join(map(str, others))} measured alike within noise"
                       if others else "")
                return f"K = {self.k} {at}: the fastest measured, {self.measured.text()}{tie}."
            return (f"K = {self.k} {at}: measured {self.measured.text()}, tied within noise with the fastest "
                    f"measured, K = {self.fastest} ({self.measured_by[self.fastest].text()}); "
                    "the smaller K drafts less.")
        if self.fastest is not None:  # measured here
            return (f"K = {self.k} {at} was not measured: the fit predicts {self.predicted:.3f}×, above the fastest "
                    f"measured (K = {self.fastest}, {self.by_k[self.fastest]:.3f}×) by more than its error; "
                    "measure it before deploying it.")
        where = "predicted between measured concurrencies" if self.source == "predicted" else \
            "extrapolated past the measured concurrencies"
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


def choose(fit: FamilyFit, concurrency: float, ks: Sequence[int] | None = None,
           nothing: float | None = None, allow_zero: bool = True,
           measured: Mapping[int, Measured] | None = None) -> Choice:
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
        if unmeasured and (best := _smallest_best(unmeasured)) is not None \
                and unmeasured[best] > measured[fastest].speedup * (1.0 + fit.margin):
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
    return Choice(concurrency, k, by_k[k], predicted[k], measured.get(k), source, fastest, tied or (), by_k,
                  measured)


@dataclass(frozen=True)
class MeasuredPoint:
    """A measured row at the advised concurrency, with what the fit predicts for it."""

    k: int
    speedup: float
    predicted: float
    train: bool
    speedup_95: tuple[float, float] | None = None  # the measured point's 95% interval, if it has repeats


@dataclass(frozen=True)
class Evidence:
    """The fit behind an answer (figures rounded to 4 digits), as the Theory page and CLI show it."""

    alpha_iid: float
    alpha_rmse_tokens: float
    rates_first: float
    rates_decay: float
    rates_rmse_tokens: float
    tokens_per_step: float
    d0: float
    d1: float
    draft_cost_c: float
    extrapolated: bool                     # the concurrency lies outside the measured ones
    crossover_extrapolated: float | None   # where best-K speedup falls below 1 past the data
    train_smallest: int | None
    train_median_rel_err: float
    here_median_rel_err: float | None      # the same over the fitted points at this concurrency
    measured: tuple[MeasuredPoint, ...]
    fitted_points: int = 0                 # measured points the fit was fitted to
    held_out_points: int = 0               # of those, how many a refit without them could predict
    held_out_median_rel_err: float | None = None  # leave-one-out; None when not validated (too few)
    held_out_here_rel_err: float | None = None    # the same at this concurrency


@dataclass(frozen=True)
class Advice:
    """The advisor's answer for one family at one concurrency.

    ``basis`` is "measured" (K was measured here: the fastest, or the smallest tied with it) or "model"
    (predicted: nothing was measured here, or the fit predicts an unmeasured K beyond its error).
    ``reason`` says why in plain words; ``details`` holds the formulas and numbers behind it.
    """

    keys: dict[str, Any]
    concurrency: float
    k: int                       # the recommended K
    predicted_speedup: float     # the fit's speedup at k
    speculate: bool              # speedup at k > 1 (measured when basis is "measured")
    speedup_by_k: dict[int, float]
    crossover: float | None      # predicted concurrency above which best-K speedup < 1
    reason: str
    evidence: Evidence
    tied_ks: list[int] = field(default_factory=list)  # measured K it cannot tell apart from k
    basis: str = "model"
    model_k: int | None = None   # the fit's own pick, when the advice follows the measurements
    measured_speedup: float | None = None  # measured speedup at k and this concurrency, if any
    details: list[str] = field(default_factory=list)
    measured: Measured | None = None  # k's measured figure here, with its interval
    # each measured concurrency's choice against the baseline (``ties.outcome``): where speculation pays, measured
    paying: dict[float, str] = field(default_factory=dict)

    @property
    def validated(self) -> bool:
        """Whether the fit was checked on points it was not fitted to (leave-one-out)."""
        return self.evidence.held_out_median_rel_err is not None

    def validation(self) -> str:
        """How far the fit can be trusted, in one sentence: its leave-one-out error, or that it is not validated."""
        ev = self.evidence
        points = f"{ev.fitted_points} point{'' if ev.fitted_points == 1 else 's'}"
        if not self.validated:
            return (f"The model was fitted on {points}, not validated: a check predicts at least {MIN_HELD_OUT} "
                    "measured points from fits without them, and these are too few, so its predictions are "
                    "untested guesses. Measure more K and concurrencies to check it.")
        here = ("" if ev.held_out_here_rel_err is None else
                f"{ev.held_out_here_rel_err:.1%} at this concurrency, ")
        return (f"Leave-one-out, the fit misses each measured speedup it was not fitted to by a median "
                f"{here}{ev.held_out_median_rel_err:.1%} over all {ev.held_out_points} held-out points "
                f"(fitted on {points}; {ev.train_median_rel_err:.1%} on the points it was fitted to).")

    def stops_paying(self) -> str:
        """Where speculation stops paying, e.g. 'above concurrency ≈ 24'."""
        beyond = self.evidence.crossover_extrapolated
        if self.crossover is not None:
            return f"above concurrency ≈ {self.crossover:.0f}"
        if beyond is not None:
            return f"near concurrency ≈ {beyond:.0f} (extrapolated past the measured range)"
        return "nowhere in or near the measured range"

    def summary(self) -> str:
        """The answer in one or two sentences, e.g. 'Use K = 2: measured 1.210× at concurrency 1 ...'."""
        conc = f"{self.concurrency:g}"
        tie = (f" (K = {', '.join(map(str, self.tied_ks))} measured alike within noise; the smaller K drafts less)"
               if self.tied_ks else "")
        if not self.speculate:
            figure = (f"measured {self.measured.text()}" if self.measured is not None else
                      f"measured {self.measured_speedup:.3f}×" if self.measured_speedup is not None else
                      f"predicted {self.predicted_speedup:.3f}×")
            head = (f"Do not speculate at concurrency {conc}: the best K, {self.k}, is {figure}, no faster than "
                    "without speculation (within noise).")
        elif self.basis == "measured" and self.measured is not None and self.measured.against_baseline() != ties.FASTER:
            single = self.measured.against_baseline() == ties.NO_INTERVAL
            tell = ties.telling([self.measured.repeats_to_tell()])
            head = (f"Use K = {self.k}{tie}: measured {self.measured.text()} at concurrency {conc} (a single run: "
                    "no interval tells it from the baseline)." if single else
                    f"No K beats the baseline beyond noise at concurrency {conc}: the fastest measured, K = "
                    f"{self.k}{tie}, reads {self.measured.text()}, tied with it within noise"
                    + (f" ({tell})." if tell else "."))
        elif self.basis == "measured":
            figure = self.measured.text() if self.measured else f"{self.measured_speedup:.3f}×"
            head = f"Use K = {self.k}{tie}: measured {figure} at concurrency {conc}."
        elif self.measured_speedup is None and self.evidence.measured:
            head = (f"Use K = {self.k}: predicted {self.predicted_speedup:.3f}× at concurrency {conc}, beyond the "
                    "fastest measured K by more than the fit's error; measure it before deploying it.")
        else:
            head = (f"Use K = {self.k}: predicted {self.predicted_speedup:.3f}× at concurrency {conc} (nothing was "
                    "measured here).")
        caveat = "" if self.validated else (f" The fit behind it is not validated (fitted on "
                                            f"{self.evidence.fitted_points} point"
                                            f"{'' if self.evidence.fitted_points == 1 else 's'}).")
        return f"{head}{self._paying()}{caveat}"

    def _paying(self) -> str:
        """Where speculation pays, measured first (the one rule against the baseline), then the fit's crossover."""
        ties_at = [c for c, found in self.paying.items() if found in (ties.TIE, ties.SLOWER)]
        names = ", ".join(f"{c:g}" for c in (ties_at or self.paying))
        everywhere = self.paying and all(found == ties.FASTER for found in self.paying.values())
        measured = (f" Measured, no K beats the baseline beyond noise at concurrency {names}." if ties_at else
                    f" Measured, speculation beats the baseline beyond noise at every concurrency ({names})."
                    if everywhere else "")
        if self.crossover is None and self.evidence.crossover_extrapolated is None:
            return measured + (" The fit predicts a gain at every measured concurrency." if not ties_at else "")
        return measured + f" The fit predicts speculation stops paying {self.stops_paying()}."

    def as_dict(self) -> dict[str, Any]:
        """The answer as JSON-ready values."""
        return {"family": self.keys, "concurrency": self.concurrency, "k": self.k, "tied_ks": self.tied_ks,
                "basis": self.basis, "model_k": self.model_k,
                "predicted_speedup": round(self.predicted_speedup, 4), "speculate": self.speculate,
                "measured_speedup": None if self.measured_speedup is None else round(self.measured_speedup, 4),
                "crossover_concurrency": None if self.crossover is None else round(self.crossover, 1),
                "against_baseline": {f"{c:g}": found for c, found in self.paying.items()},
                "validated": self.validated, "validation": self.validation(),
                "reason": self.reason, "details": self.details, "evidence": asdict(self.evidence),
                "speedup_by_k": {str(k): round(v, 4) for k, v in self.speedup_by_k.items()}}



def _error_here(fit: FamilyFit, here: pd.DataFrame, concurrency: float) -> float | None:
    train = here[here["train"]]
    if train.empty:
        return None
    pred = np.array([fit.predict(int(k), concurrency) for k in train["k"]])
    return float(np.median(np.abs(pred / train["speedup"].to_numpy(float) - 1.0)))


def _bounds(row: Any) -> tuple[float, float] | None:  # a row of DataFrame.itertuples
    lo, hi = getattr(row, "speedup_lo", None), getattr(row, "speedup_hi", None)
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return None
    return float(lo), float(hi)


def _reason(fit: FamilyFit, choice: Choice, ks: Sequence[int], d0: float, d1: float) -> tuple[str, str]:
    """Why the choice, in plain words, and the model's formula at its K."""
    k = choice.k or (choice.fastest if choice.fastest is not None else _smallest_best(choice.by_k))
    plain_model, formula = reasons.why_k(fit, k, k == ks[-1], d0, d1)
    if choice.k and choice.source == "measured":
        text = choice.sentence() + " Measured beats modelled: the fit only fills what was not measured."
        return text + (" " + plain_model if k == ks[-1] else ""), formula  # past the largest K: what the fit says
    if choice.k and choice.measured_here:
        return choice.sentence(), formula
    if not choice.k:
        return choice.sentence(), formula
    single = "" if choice.measured_here else " Nothing was measured at this concurrency: this rests on the fit."
    return plain_model + single, formula


def advise(fit: FamilyFit, concurrency: float, ks: Sequence[int] | None = None,
           nothing: float | None = None) -> Advice:
    """The K to deploy at ``concurrency`` (``choose``: measured first), among ``ks`` (default 1..largest
    measured K), with its predicted and measured speedup, where speculation stops paying, the reasons and
    the evidence. ``nothing``: what drafting 0 measured here (default: the baseline's 1.0)."""
    if concurrency <= 0:
        raise InputError(f"Concurrency must be a positive number, got {concurrency}.")
    ks = sorted({int(k) for k in ks}) if ks else list(range(1, int(fit.rows["k"].max()) + 1))
    choice = choose(fit, concurrency, ks, nothing)
    model_k = _smallest_best({k: fit.predict(k, concurrency) for k in ks})
    k = choice.k or (choice.fastest if choice.fastest is not None else model_k)
    here = fit.rows.loc[fit.rows["concurrency"] == concurrency,
                        [c for c in ("k", "speedup", "train", "speedup_lo", "speedup_hi") if c in fit.rows]]
    error_here = _error_here(fit, here, concurrency)
    d0, d1 = fit.cost.at(concurrency)
    crossover = predicted_crossover(fit, ks)
    top = fit.cost.concurrencies[-1]
    beyond = predicted_crossover(fit, ks, upto=EXTRAPOLATE * top) if crossover is None else None
    plain_k, formula_k = _reason(fit, choice, ks, d0, d1)
    plain_c, formula_c = reasons.why_concurrency(fit, crossover, beyond)
    extrapolated = not fit.cost.inside(concurrency)
    reason = plain_k + plain_c + (" This concurrency lies outside the measured ones: the advice extrapolates."
                                  if extrapolated else "")
    if choice.measured_here and not any(_bounds(r) is not None for r in here.itertuples()):
        reason += (" The measured points here are single runs without intervals, so K close in speedup may swap "
                   "on a rerun.")
    al_text = (f"AL(K) from {fit.acceptance_source()}" if fit.acceptance is not None else
               f"AL(K) = 1 + Σ rateᵢ, rateᵢ = {fit.first:.3f}·{fit.decay:.3f}^(i−1)"
               + (" (measured per-position rates where known)" if fit.measured_rates else ""))
    details = ["S(K) = AL(K) / D(K): tokens per step over the step's time in baseline steps, "
               "D(K) = d0 + d1·K (d1: what each draft token costs, d0 − 1: fixed overhead per step).",
               al_text + ".", formula_k, formula_c]
    if error_here is not None:
        details.append(f"Median |predicted / measured − 1| over the points it was fitted to (in-sample, not a "
                       f"check): {error_here:.1%} at this concurrency, {fit.train_error():.1%} over all.")
    held_error = fit.held_out_error()
    details.append(f"Leave-one-out over {len(fit.held_out)} of {fit.fitted_points} fitted points: median "
                   f"|predicted / measured − 1| {held_error:.1%}." if held_error is not None else
                   f"Not validated: a check needs at least {MIN_HELD_OUT} measured points that a fit without each "
                   f"can predict; {len(fit.held_out)} of the {fit.fitted_points} fitted points can be.")
    evidence = Evidence(
        alpha_iid=round(fit.alpha, 4), alpha_rmse_tokens=round(fit.alpha_rmse, 4),
        rates_first=round(fit.first, 4), rates_decay=round(fit.decay, 4),
        rates_rmse_tokens=round(fit.rates_rmse, 4),
        tokens_per_step=round(fit.al(k), 4), d0=round(d0, 4), d1=round(d1, 4),
        draft_cost_c=round(fit.draft_cost, 4), extrapolated=extrapolated,
        crossover_extrapolated=None if beyond is None else round(beyond, 1),
        train_smallest=fit.train_smallest,
        train_median_rel_err=round(fit.train_error(), 4),
        here_median_rel_err=None if error_here is None else round(error_here, 4),
        measured=tuple(MeasuredPoint(int(r.k), round(float(r.speedup), 4),
                                     round(fit.predict(int(r.k), concurrency), 4), bool(r.train),
                                     None if (b := _bounds(r)) is None else (round(b[0], 4), round(b[1], 4)))
                       for r in here.itertuples()),
        fitted_points=fit.fitted_points, held_out_points=len(fit.held_out),
        held_out_median_rel_err=None if held_error is None else round(held_error, 4),
        held_out_here_rel_err=None if (h := fit.held_out_error(concurrency)) is None else round(h, 4))
    measured = choice.measured.speedup if choice.measured is not None else (
        choice.by_k.get(k) if choice.k == 0 and choice.source == "measured" else None)
    paying = {}
    for at in sorted(float(c) for c in fit.rows["concurrency"].unique()):
        there = choice if at == float(concurrency) else choose(fit, at, ks, nothing if at == concurrency else None)
        if there.measured is not None:
            paying[at] = there.measured.against_baseline()
    return Advice(fit.keys, float(concurrency), k, fit.predict(k, concurrency), choice.k > 0,
                  {x: fit.predict(x, concurrency) for x in ks}, crossover, reason, evidence,
                  [x for x in choice.tied if x != k], basis="measured" if choice.source == "measured" else "model",
                  model_k=model_k, measured_speedup=None if measured is None else float(measured),
                  details=details, measured=choice.measured, paying=paying)
