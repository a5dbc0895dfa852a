"""The K advisor: at one concurrency, which K to deploy and why, measured first and modelled where not.

``advise`` wraps ``k_choice.choose`` (the one rule every page and command follows: the fastest measured K, a
tie going to the smaller K; an unmeasured K only where the fit predicts it beyond its own error; K = 0 where
nothing pays) with its reasons in plain words, the formulas behind them and the fit's evidence (``Advice``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from specscope import ties
from specscope.advice import reasons, theory
from specscope.advice.fitting import EXTRAPOLATE, MIN_HELD_OUT, FamilyFit
from specscope.advice.k_choice import Choice, Measured, choose
from specscope.advice.speedup_curves import predicted_crossover
from specscope.errors import InputError

__all__ = ["Advice", "Evidence", "MeasuredPoint", "advise"]


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
    extrapolated: bool  # the concurrency lies outside the measured ones
    crossover_extrapolated: float | None  # where best-K speedup falls below 1 past the data
    train_smallest: int | None
    train_median_rel_err: float
    here_median_rel_err: float | None  # the same over the fitted points at this concurrency
    measured: tuple[MeasuredPoint, ...]
    fitted_points: int = 0  # measured points the fit was fitted to
    held_out_points: int = 0  # of those, how many a refit without them could predict
    held_out_median_rel_err: float | None = None  # leave-one-out; None when not validated (too few)
    held_out_here_rel_err: float | None = None  # the same at this concurrency


@dataclass(frozen=True)
class Advice:
    """The advisor's answer for one family at one concurrency.

    ``basis`` is "measured" (K was measured here: the fastest, or the smallest tied with it) or "model"
    (predicted: nothing was measured here, or the fit predicts an unmeasured K beyond its error).
    ``reason`` says why in plain words; ``details`` holds the formulas and numbers behind it.
    """

    keys: dict[str, Any]
    concurrency: float
    k: int  # the recommended K
    predicted_speedup: float  # the fit's speedup at k
    speculate: bool  # speedup at k > 1 (measured when basis is "measured")
    speedup_by_k: dict[int, float]
    crossover: float | None  # predicted concurrency above which best-K speedup < 1
    reason: str
    evidence: Evidence
    tied_ks: list[int] = field(default_factory=list)  # measured K it cannot tell apart from k
    basis: str = "model"
    model_k: int | None = None  # the fit's own pick, when the advice follows the measurements
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
            return (
                f"The model was fitted on {points}, not validated: a check predicts at least {MIN_HELD_OUT} "
                "measured points from fits without them, and these are too few, so its predictions are "
                "untested guesses. Measure more K and concurrencies to check it."
            )
        here = "" if ev.held_out_here_rel_err is None else f"{ev.held_out_here_rel_err:.1%} at this concurrency, "
        return (
            f"Leave-one-out, the fit misses each measured speedup it was not fitted to by a median "
            f"{here}{ev.held_out_median_rel_err:.1%} over all {ev.held_out_points} held-out points "
            f"(fitted on {points}; {ev.train_median_rel_err:.1%} on the points it was fitted to)."
        )

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
        tie = (
            f" (K = {', '.join(map(str, self.tied_ks))} measured alike within noise; the smaller K drafts less)"
            if self.tied_ks
            else ""
        )
        if not self.speculate:
            figure = (
                f"measured {self.measured.text()}"
                if self.measured is not None
                else f"measured {self.measured_speedup:.3f}×"
                if self.measured_speedup is not None
                else f"predicted {self.predicted_speedup:.3f}×"
            )
            head = (
                f"Do not speculate at concurrency {conc}: the best K, {self.k}, is {figure}, no faster than "
                "without speculation (within noise)."
            )
        elif self.basis == "measured" and self.measured is not None and self.measured.against_baseline() != ties.FASTER:
            single = self.measured.against_baseline() == ties.NO_INTERVAL
            tell = ties.telling([self.measured.repeats_to_tell()])
            head = (
                f"Use K = {self.k}{tie}: measured {self.measured.text()} at concurrency {conc} (a single run: "
                "no interval tells it from the baseline)."
                if single
                else f"No K beats the baseline beyond noise at concurrency {conc}: the fastest measured, K = "
                f"{self.k}{tie}, reads {self.measured.text()}, tied with it within noise"
                + (f" ({tell})." if tell else ".")
            )
        elif self.basis == "measured":
            figure = self.measured.text() if self.measured else f"{self.measured_speedup:.3f}×"
            head = f"Use K = {self.k}{tie}: measured {figure} at concurrency {conc}."
        elif self.measured_speedup is None and self.evidence.measured:
            head = (
                f"Use K = {self.k}: predicted {self.predicted_speedup:.3f}× at concurrency {conc}, beyond the "
                "fastest measured K by more than the fit's error; measure it before deploying it."
            )
        else:
            head = (
                f"Use K = {self.k}: predicted {self.predicted_speedup:.3f}× at concurrency {conc} (nothing was "
                "measured here)."
            )
        caveat = (
            ""
            if self.validated
            else (
                f" The fit behind it is not validated (fitted on "
                f"{self.evidence.fitted_points} point"
                f"{'' if self.evidence.fitted_points == 1 else 's'})."
            )
        )
        return f"{head}{self._paying()}{caveat}"

    def _paying(self) -> str:
        """Where speculation pays, measured first (the one rule against the baseline), then the fit's crossover."""
        ties_at = [c for c, found in self.paying.items() if found in (ties.TIE, ties.SLOWER)]
        names = ", ".join(f"{c:g}" for c in (ties_at or self.paying))
        everywhere = self.paying and all(found == ties.FASTER for found in self.paying.values())
        measured = (
            f" Measured, no K beats the baseline beyond noise at concurrency {names}."
            if ties_at
            else f" Measured, speculation beats the baseline beyond noise at every concurrency ({names})."
            if everywhere
            else ""
        )
        if self.crossover is None and self.evidence.crossover_extrapolated is None:
            return measured + (" The fit predicts a gain at every measured concurrency." if not ties_at else "")
        return measured + f" The fit predicts speculation stops paying {self.stops_paying()}."

    def as_dict(self) -> dict[str, Any]:
        """The answer as JSON-ready values."""
        return {
            "family": self.keys,
            "concurrency": self.concurrency,
            "k": self.k,
            "tied_ks": self.tied_ks,
            "basis": self.basis,
            "model_k": self.model_k,
            "predicted_speedup": round(self.predicted_speedup, 4),
            "speculate": self.speculate,
            "measured_speedup": None if self.measured_speedup is None else round(self.measured_speedup, 4),
            "crossover_concurrency": None if self.crossover is None else round(self.crossover, 1),
            "against_baseline": {f"{c:g}": found for c, found in self.paying.items()},
            "validated": self.validated,
            "validation": self.validation(),
            "reason": self.reason,
            "details": self.details,
            "evidence": asdict(self.evidence),
            "speedup_by_k": {str(k): round(v, 4) for k, v in self.speedup_by_k.items()},
        }


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
    k = choice.k or (choice.fastest if choice.fastest is not None else theory.optimal_k(choice.by_k))
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


def advise(fit: FamilyFit, concurrency: float, ks: Sequence[int] | None = None, nothing: float | None = None) -> Advice:
    """The K to deploy at ``concurrency`` (``choose``: measured first), among ``ks`` (default 1..largest
    measured K), with its predicted and measured speedup, where speculation stops paying, the reasons and
    the evidence. ``nothing``: what drafting 0 measured here (default: the baseline's 1.0)."""
    if concurrency <= 0:
        raise InputError(f"Concurrency must be a positive number, got {concurrency}.")
    ks = sorted({int(k) for k in ks}) if ks else list(range(1, int(fit.rows["k"].max()) + 1))
    choice = choose(fit, concurrency, ks, nothing)
    model_k = theory.optimal_k({k: fit.predict(k, concurrency) for k in ks})
    k = choice.k or (choice.fastest if choice.fastest is not None else model_k)
    here = fit.rows.loc[
        fit.rows["concurrency"] == concurrency,
        [c for c in ("k", "speedup", "train", "speedup_lo", "speedup_hi") if c in fit.rows],
    ]
    error_here = _error_here(fit, here, concurrency)
    d0, d1 = fit.cost.at(concurrency)
    crossover = predicted_crossover(fit, ks)
    top = fit.cost.concurrencies[-1]
    beyond = predicted_crossover(fit, ks, upto=EXTRAPOLATE * top) if crossover is None else None
    plain_k, formula_k = _reason(fit, choice, ks, d0, d1)
    plain_c, formula_c = reasons.why_concurrency(fit, crossover, beyond)
    extrapolated = not fit.cost.inside(concurrency)
    reason = (
        plain_k
        + plain_c
        + (" This concurrency lies outside the measured ones: the advice extrapolates." if extrapolated else "")
    )
    if choice.measured_here and not any(_bounds(r) is not None for r in here.itertuples()):
        reason += (
            " The measured points here are single runs without intervals, so K close in speedup may swap on a rerun."
        )
    al_text = (
        f"AL(K) from {fit.acceptance_source()}"
        if fit.acceptance is not None
        else f"AL(K) = 1 + Σ rateᵢ, rateᵢ = {fit.first:.3f}·{fit.decay:.3f}^(i−1)"
        + (" (measured per-position rates where known)" if fit.measured_rates else "")
    )
    details = [
        "S(K) = AL(K) / D(K): tokens per step over the step's time in baseline steps, "
        "D(K) = d0 + d1·K (d1: what each draft token costs, d0 − 1: fixed overhead per step).",
        al_text + ".",
        formula_k,
        formula_c,
    ]
    if error_here is not None:
        details.append(
            f"Median |predicted / measured − 1| over the points it was fitted to (in-sample, not a "
            f"check): {error_here:.1%} at this concurrency, {fit.train_error():.1%} over all."
        )
    held_error = fit.held_out_error()
    details.append(
        f"Leave-one-out over {len(fit.held_out)} of {fit.fitted_points} fitted points: median "
        f"|predicted / measured − 1| {held_error:.1%}."
        if held_error is not None
        else f"Not validated: a check needs at least {MIN_HELD_OUT} measured points that a fit without each "
        f"can predict; {len(fit.held_out)} of the {fit.fitted_points} fitted points can be."
    )
    evidence = Evidence(
        alpha_iid=round(fit.alpha, 4),
        alpha_rmse_tokens=round(fit.alpha_rmse, 4),
        rates_first=round(fit.first, 4),
        rates_decay=round(fit.decay, 4),
        rates_rmse_tokens=round(fit.rates_rmse, 4),
        tokens_per_step=round(fit.al(k), 4),
        d0=round(d0, 4),
        d1=round(d1, 4),
        draft_cost_c=round(fit.draft_cost, 4),
        extrapolated=extrapolated,
        crossover_extrapolated=None if beyond is None else round(beyond, 1),
        train_smallest=fit.train_smallest,
        train_median_rel_err=round(fit.train_error(), 4),
        here_median_rel_err=None if error_here is None else round(error_here, 4),
        measured=tuple(
            MeasuredPoint(
                int(r.k),
                round(float(r.speedup), 4),
                round(fit.predict(int(r.k), concurrency), 4),
                bool(r.train),
                None if (b := _bounds(r)) is None else (round(b[0], 4), round(b[1], 4)),
            )
            for r in here.itertuples()
        ),
        fitted_points=fit.fitted_points,
        held_out_points=len(fit.held_out),
        held_out_median_rel_err=None if held_error is None else round(held_error, 4),
        held_out_here_rel_err=None if (h := fit.held_out_error(concurrency)) is None else round(h, 4),
    )
    measured = (
        choice.measured.speedup
        if choice.measured is not None
        else (choice.by_k.get(k) if choice.k == 0 and choice.source == "measured" else None)
    )
    paying = {}
    for at in sorted(float(c) for c in fit.rows["concurrency"].unique()):
        there = choice if at == float(concurrency) else choose(fit, at, ks, nothing if at == concurrency else None)
        if there.measured is not None:
            paying[at] = there.measured.against_baseline()
    return Advice(
        fit.keys,
        float(concurrency),
        k,
        fit.predict(k, concurrency),
        choice.k > 0,
        {x: fit.predict(x, concurrency) for x in ks},
        crossover,
        reason,
        evidence,
        [x for x in choice.tied if x != k],
        basis="measured" if choice.source == "measured" else "model",
        model_k=model_k,
        measured_speedup=None if measured is None else float(measured),
        details=details,
        measured=choice.measured,
        paying=paying,
    )
