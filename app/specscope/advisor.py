"""Fits of the speedup model to measured rows, and the K advisor built on them.

A *family* is one (source, model, draft_model, method, dataset, hardware); a *group* is a
family at one concurrency. ``fit_family`` fits, from the family's SD rows (any store rows:
bundled, imported, own runs):

- acceptance, pooled over concurrencies (acceptance does not depend on load): a single
  i.i.d. alpha, and geometric per-position rates ``first * decay^(i-1)`` (the model used,
  since acceptance falls off with position differently from what the first position says);
  measured per-position rates are used directly when the rows carry them;
- cost, per concurrency: ``D(K) = AL / speedup = d0 + d1 * K`` by least squares, then a
  ``CostCurve`` over concurrency, so speedup is predicted at any K and concurrency.

``train_smallest=n`` fits each group only on its n smallest measured K (for honest
held-out checks). ``advise`` turns a fit into a recommended K, a predicted speedup and the
concurrency above which speculation stops paying, with the reason and its evidence. Where
measured K at that concurrency have 95% speedup intervals overlapping the recommended K's,
the answer lists them in ``tied_ks``: the measurements cannot tell those K apart, so the
advisor does not rank them. Where the fit misses the measured points at a concurrency by a
median of more than ``POOR_FIT``, the advice follows the best measured K there instead, and
says so. Every answer has a plain-words reason and, apart, the formulas behind it.

A fit is never called good on the points it was fitted to: ``FamilyFit.held_out`` refits the
family without each measured point in turn and predicts that point (leave-one-out). With at
least ``MIN_HELD_OUT`` such predictions the answer reports their median error; with fewer it
says "fitted on N points, not validated" (``Advice.validation``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from specscope import anatomy, identity, provenance, theory
from specscope.errors import InputError
from specscope.schema import BASELINE_METHOD

__all__ = ["FAMILY_KEYS", "FamilyFit", "with_parts", "Advice", "Evidence", "MeasuredPoint", "fit_alpha", "fit_rates", "fit_cost",
           "fit_family", "fit_families", "family_rows", "keyed", "advise", "family_label", "family_labels", "missing",
           "unfitted", "measured_crossover",
           "predicted_crossover", "with_acceptance_length", "model_curves", "fit_curves",
           "concurrency_curves", "measured_ties"]

FAMILY_KEYS = ("source", "model", "draft_model", "method", "dataset", "response_format", "hardware", "vllm_version", "weights",
               "acceptance")
_DECAYS = np.linspace(0.01, 1.0, 991)
EXTRAPOLATE = 4  # how far past the largest measured concurrency a crossover is extrapolated
_ALPHAS = np.linspace(0.0, 0.999, 1999)
AL_ROUNDING = 0.01  # acceptance lengths published with two decimals
POOR_FIT = 0.10     # above this median error at a concurrency, the advice follows the measurements
MIN_HELD_OUT = 3    # held-out predictions a fit needs before its error is reported as validated


def with_acceptance_length(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with column ``al`` (tokens per step): the measured acceptance length, or
    ``1 + acceptance_rate * K`` where it agrees with it to rounding (rates carry more digits)
    or the length is missing. They disagree when steps draft fewer than K tokens (suffix)."""
    out = rows.copy()
    length = out["acceptance_length"].astype(float)
    from_rate = 1.0 + out["acceptance_rate"].astype(float) * out["k"].astype(float)
    agrees = from_rate.notna() & (length.isna() | ((from_rate - length).abs() <= AL_ROUNDING))
    out["al"] = from_rate.where(agrees, length)
    return out


def fit_alpha(ks: Sequence[int], al: Sequence[float]) -> tuple[float, float]:
    """Least-squares i.i.d. alpha for measured AL(K); returns ``(alpha, rmse in tokens)``."""
    ks_arr, al_arr = np.asarray(ks, float), np.asarray(al, float)
    a = _ALPHAS[:, None]
    pred = (1.0 - a ** (ks_arr + 1.0)) / (1.0 - a)
    sse = ((pred - al_arr) ** 2).sum(axis=1)
    best = int(np.argmin(sse))
    return float(_ALPHAS[best]), float(math.sqrt(sse[best] / len(ks_arr)))


def fit_rates(ks: Sequence[int], al: Sequence[float]) -> tuple[float, float, float]:
    """Least-squares geometric rates ``first * decay^(i-1)`` for measured AL(K).

    Returns ``(first, decay, rmse in tokens)``; ``first`` is solved in closed form per decay.
    """
    ks_arr, gain = np.asarray(ks, int), np.asarray(al, float) - 1.0
    powers = _DECAYS[:, None] ** np.arange(int(ks_arr.max()))[None, :]
    basis = np.cumsum(powers, axis=1)[:, ks_arr - 1]
    first = np.clip((basis @ gain) / (basis ** 2).sum(axis=1), 0.0, 1.0)
    sse = ((first[:, None] * basis - gain) ** 2).sum(axis=1)
    best = int(np.argmin(sse))
    return float(first[best]), float(_DECAYS[best]), float(math.sqrt(sse[best] / len(ks_arr)))


def fit_cost(ks: Sequence[int], cost: Sequence[float]) -> tuple[float, float]:
    """``(d0, d1)`` of ``D(K) = d0 + d1*K`` with d1 >= 0; with one K, the Leviathan form d0 = 1."""
    ks_arr, d = np.asarray(ks, float), np.asarray(cost, float)
    if len(set(ks_arr.tolist())) < 2:
        return 1.0, float(max(0.0, (d.mean() - 1.0) / ks_arr.mean()))
    d1, d0 = np.polyfit(ks_arr, d, 1)
    if d1 < 0:  # drafting cannot make a step cheaper: the best fit with d1 = 0 is the mean
        return float(d.mean()), 0.0
    return float(d0), float(d1)


@dataclass
class FamilyFit:
    """The fitted model of one family, with the evidence behind it."""

    keys: dict
    alpha: float
    alpha_rmse: float
    first: float
    decay: float
    rates_rmse: float
    cost: theory.CostCurve
    groups: pd.DataFrame          # per concurrency: d0, d1, train_ks, baseline_step_ms, rmse
    rows: pd.DataFrame            # all SD rows of the family, with column `train`
    train_smallest: int | None
    measured_rates: list[float] = field(default_factory=list)

    def al(self, k: int) -> float:
        """Expected tokens per step at K from the fitted (or measured) per-position rates."""
        rates = theory.geometric_rates(self.first, self.decay, k)
        known = self.measured_rates[:k]
        return theory.acceptance_length(known + rates[len(known):])

    def predict(self, k: int, concurrency: float) -> float:
        """Predicted speedup at K and concurrency: tokens per step over the fitted step cost."""
        d0, d1 = self.cost.at(concurrency)
        return theory.speedup(self.al(k), k, d0, d1)

    @property
    def draft_cost(self) -> float:
        """Leviathan's c at the lowest measured concurrency (d1 there)."""
        return float(self.cost.d1[0])

    def train_error(self) -> float:
        """Median absolute relative error of predicted speedup on the training rows (in-sample)."""
        train = self.rows[self.rows["train"]]
        pred = [self.predict(int(r.k), float(r.concurrency)) for r in train.itertuples()]
        return float(np.median(np.abs(np.asarray(pred) / train["speedup"].to_numpy() - 1.0)))

    @property
    def fitted_points(self) -> int:
        """How many measured points the fit was fitted to."""
        return int(self.rows["train"].sum())

    @functools.cached_property
    def held_out(self) -> pd.DataFrame:
        """Leave-one-out: each training point predicted by the family refitted without it
        (``concurrency, k, speedup, predicted, rel_err``); a point whose removal leaves nothing to
        fit has no row."""
        train = self.rows[self.rows["train"]]
        found = []
        for index, row in train.iterrows():
            try:
                refit = fit_family(self.rows.drop(index=index).drop(columns=["al", "train"]), self.train_smallest)
            except InputError:
                continue
            predicted = refit.predict(int(row["k"]), float(row["concurrency"]))
            found.append({"concurrency": row["concurrency"], "k": int(row["k"]), "speedup": float(row["speedup"]),
                          "predicted": predicted, "rel_err": predicted / float(row["speedup"]) - 1.0})
        return pd.DataFrame(found, columns=["concurrency", "k", "speedup", "predicted", "rel_err"])

    def held_out_error(self, concurrency: float | None = None) -> float | None:
        """Median |held-out prediction / measured − 1| (at ``concurrency``, or over all points); None
        with fewer than ``MIN_HELD_OUT`` held-out predictions overall, or none at that concurrency."""
        held = self.held_out
        if len(held) < MIN_HELD_OUT:
            return None
        if concurrency is not None:
            held = held[held["concurrency"] == concurrency]
        return float(np.median(np.abs(held["rel_err"]))) if len(held) else None


def family_label(keys: Mapping) -> str:
    """A family's name for menus and CLI lines: its setup's name (``identity.setup_label``: model ·
    method (draft) · dataset · format · hardware · vLLM · weights/acceptance marks) and its source."""
    return f"{identity.setup_label(keys)} ({keys.get('source') or 'no source'})"


def family_labels(keys: Sequence[Mapping]) -> list[str]:
    """``family_label`` of each, with the key that tells two apart where two would read the same
    (``identity.unique_labels``), then numbered where two still would, so every menu entry is distinct."""
    labels = identity.unique_labels(list(keys), label=family_label)
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if labels.count(label) == 1 else f"{label} #{seen[label]}")
    return out


def _usable(rows: pd.DataFrame) -> pd.DataFrame:
    """SD rows with a speedup, K and concurrency, with their tokens per step (column ``al``)."""
    rows = with_acceptance_length(rows[rows["method"] != BASELINE_METHOD])
    rows = rows.dropna(subset=["speedup", "k", "concurrency"])
    return rows[(rows["k"] > 0) & (rows["speedup"] > 0)]


def missing(rows: pd.DataFrame) -> str | None:
    """What one family's rows lack for a fit, in words, or None if they can be fitted."""
    sd = rows[rows["method"] != BASELINE_METHOD]
    if sd.empty:
        return "there is no speculative row"
    usable = _usable(sd)
    if usable.empty:
        lacks = [what for column, what in (("k", "K (speculative tokens)"),
                                           ("concurrency", "a concurrency (rate-limited runs, or not published)"),
                                           ("speedup", "a speedup (no baseline row with the same setup)"))
                 if sd[column].isna().all()]
        return "no row states " + (" or ".join(lacks) if lacks else "a speedup, K and concurrency together")
    if usable["al"].isna().all():
        return ("no acceptance rate or length is given, so the tokens each step gains cannot be told "
                "apart from what drafting costs")
    return None


def unfitted(frame: pd.DataFrame) -> list[tuple[dict, str]]:
    """The families of ``frame`` the advisor cannot fit, each with what it lacks (``missing``)."""
    out = []
    for keys, rows in _families(frame):
        problem = missing(rows)
        if problem:
            out.append((keys, problem))
    return out


def _families(frame: pd.DataFrame):
    """``(keys, rows)`` of each family with fixed-K speculative rows in ``frame`` (a K schedule's rows
    are what advice is checked against, not what it is fitted on: their K is the schedule's maximum).
    Drafts accepted synthetically (calibrations, engine-only GPU runs) measure the engine at a set
    acceptance, not a drafter, so no family is fitted on them."""
    sd = frame[(frame["method"] != BASELINE_METHOD) & ~provenance.engine_only(frame)]
    if "k_schedule" in sd:
        sd = sd[sd["k_schedule"].isna()]
    for values, g in keyed(sd).groupby(list(FAMILY_KEYS), sort=True):
        yield {k: (v if v != "" else None) for k, v in zip(FAMILY_KEYS, values)}, sd.loc[g.index]


def keyed(frame: pd.DataFrame, keys: Sequence[str] = FAMILY_KEYS) -> pd.DataFrame:
    """``frame`` with a missing key (NaN or None, or no such column) in the ``keys`` columns written as "",
    so rows group and compare on them."""
    return frame.assign(**{k: frame[k].astype(object).where(frame[k].notna(), "") if k in frame else ""
                           for k in keys})


def family_rows(frame: pd.DataFrame, keys: Mapping) -> pd.DataFrame:
    """The rows of ``frame`` in the family ``keys`` (a fit's ``keys``), schedules and baselines included."""
    known = keyed(frame)
    keep = np.ones(len(frame), dtype=bool)
    for k in FAMILY_KEYS:
        match = (known[k] == (keys.get(k) or "")).to_numpy().copy()
        if k == "acceptance":  # the baseline drafts nothing, so it has no acceptance kind
            match |= (known["method"] == BASELINE_METHOD).to_numpy()
        keep &= match
    return frame[keep]


def _rates_column(rows: pd.DataFrame) -> list[float]:
    """Mean measured per-position rates over the rows that carry them (longest prefix)."""
    lists = [[float(x) for x in v] for v in rows["per_position_acceptance"]
             if isinstance(v, (list, tuple, np.ndarray)) and len(v) > 0]
    if not lists:
        return []
    depth = max(len(v) for v in lists)
    return [float(np.mean([v[i] for v in lists if len(v) > i])) for i in range(depth)]


def fit_family(rows: pd.DataFrame, train_smallest: int | None = None) -> FamilyFit:
    """Fit one family's SD rows (columns of ``Store.speedup``); see the module docstring."""
    problem = missing(rows)
    if problem:
        raise InputError(f"These results cannot be fitted: {problem}.")
    rows = _usable(rows).sort_values(["concurrency", "k"]).reset_index(drop=True)
    train = np.zeros(len(rows), bool)
    for _, idx in rows.groupby("concurrency").groups.items():
        ks = sorted(rows.loc[idx, "k"].unique())
        keep = ks[:train_smallest] if train_smallest else ks
        train[idx] = rows.loc[idx, "k"].isin(keep).to_numpy()
    rows["train"] = train
    fit_rows = rows[rows["train"] & rows["al"].notna()]
    if fit_rows.empty:
        raise InputError("The rows chosen for the fit carry no acceptance rate or length; fit on all measured K.")
    pooled = fit_rows.groupby("k")["al"].mean()
    measured = [] if train_smallest else _rates_column(fit_rows)
    ks, als = list(pooled.index.astype(int)), list(pooled.to_numpy())
    if measured:
        ks = sorted(set(ks) | set(range(1, len(measured) + 1)))
        als = [float(pooled.get(k, 1.0 + sum(measured[:k]))) for k in ks]
    alpha, alpha_rmse = fit_alpha(ks, als)
    if len(ks) >= 2:
        first, decay, rates_rmse = fit_rates(ks, als)
    else:  # one K cannot tell how acceptance falls with position: i.i.d.
        first, decay, rates_rmse = alpha, alpha, alpha_rmse
    groups = []
    for conc, g in fit_rows.groupby("concurrency"):
        d0, d1 = fit_cost(g["k"].to_numpy(), (g["al"] / g["speedup"]).to_numpy())
        groups.append({"concurrency": int(conc), "d0": d0, "d1": d1,
                       "train_ks": sorted(int(k) for k in g["k"].unique()),
                       "baseline_step_ms": float(1000.0 * conc / g["baseline_throughput"].mean())})
    table = pd.DataFrame(groups)
    cost = theory.CostCurve(tuple(float(c) for c in table["concurrency"]),
                            tuple(table["d0"]), tuple(table["d1"]))
    keys = {k: _scalar(rows[k].iloc[0]) if k in rows else None for k in FAMILY_KEYS}
    fit = FamilyFit(keys, alpha, alpha_rmse, first, decay, rates_rmse, cost, table, rows,
                    train_smallest, measured)
    return fit


def _scalar(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def fit_families(frame: pd.DataFrame, train_smallest: int | None = None,
                 fit: Callable[[pd.DataFrame, int | None], FamilyFit] | None = None) -> list[FamilyFit]:
    """One fit per family in ``frame`` (rows of ``Store.speedup``); unfittable families are left out.

    ``fit(rows, train_smallest)`` fits one family (default ``fit_family``; a cache may wrap it).
    """
    fit = fit or fit_family
    if (frame["method"] != BASELINE_METHOD).sum() == 0:
        raise InputError("No speculative rows match; widen the filters or import results first.")
    fits, skipped = [], []
    for _, rows in _families(frame):
        try:
            fits.append(fit(rows, train_smallest))
        except InputError as exc:
            skipped.append(str(exc))
    if not fits:
        raise InputError(skipped[0] if skipped else "Only step-cost calibration rows match; run or import "
                         "results of a real drafter to fit.")
    parts = anatomy.table(frame) if anatomy.NEEDED <= set(frame.columns) else pd.DataFrame()
    return [with_parts(f, anatomy.cost_slopes(parts, f.keys)) for f in fits]


def with_parts(fit: FamilyFit, slopes: Mapping[float, float]) -> FamilyFit:
    """The fit with the cost per drafted token measured from the step's parts (``anatomy.cost_slopes``:
    the drafter's pass served alone, verify's growth with K) wherever the family was measured at one K only,
    in place of Leviathan's d0 = 1: the line still passes through the measured D(K)."""
    groups = fit.groups.copy()
    used = [i for i, g in groups.iterrows() if len(g["train_ks"]) == 1 and float(g["concurrency"]) in slopes]
    if not used:
        return fit
    groups["cost_from"] = "fit"
    for i in used:
        k, d1 = groups.at[i, "train_ks"][0], slopes[float(groups.at[i, "concurrency"])]
        measured = groups.at[i, "d0"] + groups.at[i, "d1"] * k
        groups.loc[i, ["d0", "d1", "cost_from"]] = [measured - d1 * k, d1, "measured parts"]
    cost = theory.CostCurve(tuple(float(c) for c in groups["concurrency"]), tuple(groups["d0"]), tuple(groups["d1"]))
    return FamilyFit(fit.keys, fit.alpha, fit.alpha_rmse, fit.first, fit.decay, fit.rates_rmse, cost, groups,
                     fit.rows, fit.train_smallest, fit.measured_rates)


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

    ``basis`` is "model" (K ranked by the fit) or "measured": where the fit misses the
    measured points at this concurrency by more than ``POOR_FIT``, K is the best measured one.
    ``reason`` says why in plain words; ``details`` holds the formulas and numbers behind it.
    """

    keys: dict
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

    @property
    def validated(self) -> bool:
        """Whether the fit was checked on points it was not fitted to (leave-one-out)."""
        return self.evidence.held_out_median_rel_err is not None

    def validation(self) -> str:
        """How far the fit can be trusted, in one sentence: its leave-one-out error, or that it is not validated."""
        ev = self.evidence
        points = f"{ev.fitted_points} point{'' if ev.fitted_points == 1 else 's'}"
        if not self.validated:
            return (f"The model was fitted on {points}, not validated: fewer than {MIN_HELD_OUT} of them can be "
                    "predicted by a fit without them, so its predictions are untested guesses. Measure more K "
                    "and concurrencies to check it.")
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
        """The answer in one or two sentences, e.g. 'Use K = 4: predicted speedup 2.16× ...'."""
        conc = f"{self.concurrency:g}"
        pick = f"K = {self.k}" + (f" (or {', '.join(map(str, self.tied_ks))}: tied within noise)"
                                  if self.tied_ks else "")
        measured = "" if self.measured_speedup is None else f", measured {self.measured_speedup:.2f}×"
        if self.basis == "measured":
            head = (f"Use {pick}: measured speedup {self.measured_speedup:.2f}× at concurrency {conc}, the best "
                    f"measured there (the fit misses there by a median {self.evidence.here_median_rel_err:.0%}, "
                    "so this follows the measurements)." if self.speculate else
                    f"Do not speculate at concurrency {conc}: the best measured, K = {self.k}, gave "
                    f"{self.measured_speedup:.2f}×.")
        elif self.measured_speedup is not None and (self.measured_speedup > 1.0) != self.speculate:
            head = (f"About break-even at concurrency {conc}: K = {self.k} is predicted at "
                    f"{self.predicted_speedup:.2f}× and measured at {self.measured_speedup:.2f}×, on "
                    "either side of 1×, so any gain or loss is within noise.")
        else:
            head = (f"Use {pick}: predicted speedup {self.predicted_speedup:.2f}× at concurrency {conc}"
                    f"{measured}." if self.speculate else
                    f"Do not speculate at concurrency {conc}: even K = {self.k} is predicted at "
                    f"{self.predicted_speedup:.2f}×{measured}.")
        caveat = "" if self.validated else (f" The fit behind it is not validated (fitted on "
                                            f"{self.evidence.fitted_points} point"
                                            f"{'' if self.evidence.fitted_points == 1 else 's'}).")
        if self.crossover is None and self.evidence.crossover_extrapolated is None:
            return f"{head} Speculation pays at every measured concurrency.{caveat}"
        return f"{head} Speculation stops paying {self.stops_paying()}.{caveat}"

    def as_dict(self) -> dict:
        """The answer as JSON-ready values."""
        return {"family": self.keys, "concurrency": self.concurrency, "k": self.k, "tied_ks": self.tied_ks,
                "basis": self.basis, "model_k": self.model_k,
                "predicted_speedup": round(self.predicted_speedup, 4), "speculate": self.speculate,
                "measured_speedup": self.measured_speedup,
                "crossover_concurrency": None if self.crossover is None else round(self.crossover, 1),
                "validated": self.validated, "validation": self.validation(),
                "reason": self.reason, "details": self.details, "evidence": asdict(self.evidence),
                "speedup_by_k": {str(k): round(v, 4) for k, v in self.speedup_by_k.items()}}


def _best(fit: FamilyFit, ks: Sequence[int], conc: float) -> tuple[int, float, dict[int, float]]:
    by_k = {int(k): fit.predict(int(k), conc) for k in ks}
    k = theory.optimal_k(by_k)
    return k, by_k[k], by_k


def predicted_crossover(fit: FamilyFit, ks: Sequence[int], points: int = 240,
                        upto: float | None = None) -> float | None:
    """Lowest concurrency where the best-K predicted speedup drops below 1.

    Scans the measured concurrency range, or up to ``upto`` (an extrapolation past it).
    """
    lo, hi = fit.cost.concurrencies[0], max(fit.cost.concurrencies[-1], upto or 0)
    grid = np.exp2(np.linspace(math.log2(lo), math.log2(hi), points))
    best = np.array([_best(fit, ks, c)[1] for c in grid])
    return _first_below_one(grid, best)


def _first_below_one(conc: np.ndarray, best: np.ndarray) -> float | None:
    below = np.nonzero(best < 1.0)[0]
    if len(below) == 0:
        return None
    i = int(below[0])
    if i == 0:
        return float(conc[0])
    x0, x1 = math.log2(conc[i - 1]), math.log2(conc[i])
    t = (best[i - 1] - 1.0) / (best[i - 1] - best[i])
    return float(2 ** (x0 + t * (x1 - x0)))


def measured_crossover(rows: pd.DataFrame) -> float | None:
    """Concurrency where the best measured speedup crosses 1 (log2-interpolated), if it does."""
    best = rows.groupby("concurrency")["speedup"].max().sort_index()
    return _first_below_one(best.index.to_numpy(float), best.to_numpy(float))


def _bounds(row) -> tuple[float, float] | None:
    lo, hi = getattr(row, "speedup_lo", None), getattr(row, "speedup_hi", None)
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return None
    return float(lo), float(hi)


def measured_ties(here: pd.DataFrame, k: int) -> list[int]:
    """Measured K whose 95% speedup interval overlaps one of K=``k``'s at the same concurrency."""
    rows = list(here.itertuples())
    ref = [b for r in rows if int(r.k) == k and (b := _bounds(r)) is not None]
    tied = {int(r.k) for r in rows if int(r.k) != k and (b := _bounds(r)) is not None
            and any(b[1] >= lo and b[0] <= hi for lo, hi in ref)}
    return sorted(tied)


def _interval_note(here: pd.DataFrame, k: int, tied: list[int]) -> str:
    if tied:
        return (f" Measured here, K = {k} cannot be told apart from K = {', '.join(map(str, tied))} "
                "(their 95% speedup intervals overlap), so any of them will do.")
    if not any(_bounds(r) is not None for r in here.itertuples()):
        return (" The measured points here are single runs without intervals, so K close in speedup "
                "may swap on a rerun.")
    return ""


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _why_k(fit: FamilyFit, k: int, largest: bool, d0: float, d1: float) -> tuple[str, str]:
    """Why K = k, in plain words and as the formula: one more token pays iff it adds a larger
    share of tokens per step than of step time (``ΔAL / AL > d1 / D``, i.e. ``ΔAL > d1 · S``)."""
    al, gain, cost = fit.al(k), fit.al(k + 1) - fit.al(k), theory.step_cost(k, d0, d1)
    more_tokens, more_time = gain / al, d1 / cost
    pays = more_tokens > more_time
    rule = ("One more draft token pays only if it adds a larger share of tokens per step than it "
            "adds to the time of a step.")
    step = (f"A {_ordinal(k + 1)} draft token would be accepted {gain:.0%} of the time, adding "
            f"{more_tokens:.0%} more tokens per step for {more_time:.0%} more time")
    if largest:
        plain = (f"{rule} K = {k} is the largest K considered. {step}, so a larger K "
                 + ("may pay: measure one." if pays else "would not pay either."))
    else:
        plain = (f"{rule} {step}, " + ("so it does not pay: " if not pays else "and the tokens after it add "
                 "less, so overall ") + f"K = {k} gives the most tokens per second.")
    speedup = al / cost
    formula = (f"At K = {k}: AL = {al:.3f} tokens per step, D = d0 + d1·K = {d0:.3f} + {d1:.3f}·{k} = "
               f"{cost:.3f} baseline steps, S = AL / D = {speedup:.3f}. K + 1 pays iff ΔAL > d1·S: "
               f"{gain:.3f} {'>' if pays else '≤'} {d1:.3f} × {speedup:.3f} = {d1 * speedup:.3f}.")
    return plain, formula


def _why_concurrency(fit: FamilyFit, crossover: float | None, beyond: float | None) -> tuple[str, str]:
    """Where speculation stops paying, in plain words and as the cost figures behind it."""
    lo = fit.groups.iloc[0]
    top = fit.cost.concurrencies[-1]
    if crossover is None:
        plain = (f" It pays at every measured concurrency up to {top:g}"
                 + (f"; if the cost keeps growing as measured, it stops near {beyond:.0f} (not measured)."
                    if beyond is not None else
                    f" and, if the cost keeps growing as measured, still up to {EXTRAPOLATE * top:g} (not measured)."))
        return plain, f"d1 (draft cost per token, in baseline steps) = {lo.d1:.3f} at concurrency {lo.concurrency:g}."
    x0, x1 = fit.cost.at(crossover)
    plain = (f" Above about {crossover:.0f} concurrent requests speculation stops paying: with that "
             "many requests in each batch the hardware is busy anyway, so checking draft tokens is "
             "no longer almost free and costs more than the accepted tokens return.")
    formula = (f"At concurrency {crossover:.0f}: d0 = {x0:.3f}, d1 = {x1:.3f}, against d1 = {lo.d1:.3f} "
               f"at concurrency {lo.concurrency:g}; the best K's S = AL / D falls below 1 there.")
    return plain, formula


def _measured_here(here: pd.DataFrame) -> dict[int, float]:
    """The best measured speedup per K among fitted rows at one concurrency."""
    train = here[here["train"]]
    return {int(k): float(v) for k, v in train.groupby("k")["speedup"].max().items()}


def _error_here(fit: FamilyFit, here: pd.DataFrame, concurrency: float) -> float | None:
    train = here[here["train"]]
    if train.empty:
        return None
    pred = np.array([fit.predict(int(k), concurrency) for k in train["k"]])
    return float(np.median(np.abs(pred / train["speedup"].to_numpy(float) - 1.0)))


def advise(fit: FamilyFit, concurrency: float, ks: Sequence[int] | None = None) -> Advice:
    """Recommended K (from ``ks``, default 1..largest measured K), speedup and crossover.

    K is the fit's best, unless the fit misses the measured points at this concurrency by a
    median of more than ``POOR_FIT``: then it is the best measured K there, and the reason says so.
    """
    if concurrency <= 0:
        raise InputError(f"Concurrency must be a positive number, got {concurrency}.")
    ks = sorted(set(int(k) for k in ks)) if ks else list(range(1, int(fit.rows["k"].max()) + 1))
    model_k, _, by_k = _best(fit, ks, concurrency)
    here = fit.rows[fit.rows["concurrency"] == concurrency]
    measured = {x: v for x, v in _measured_here(here).items() if x in ks}
    error_here = _error_here(fit, here, concurrency)
    poor = bool(measured) and error_here is not None and error_here > POOR_FIT
    k = min(measured, key=lambda x: (-measured[x], x)) if poor else model_k
    d0, d1 = fit.cost.at(concurrency)
    crossover = predicted_crossover(fit, ks)
    top = fit.cost.concurrencies[-1]
    beyond = predicted_crossover(fit, ks, upto=EXTRAPOLATE * top) if crossover is None else None
    plain_k, formula_k = _why_k(fit, k, k == ks[-1], d0, d1)
    plain_c, formula_c = _why_concurrency(fit, crossover, beyond)
    if poor:
        plain_k = (f"The fitted model misses the measured speedups here by a median {error_here:.0%}, more "
                   f"than the {POOR_FIT:.0%} the advisor trusts, so this follows the measurements: K = {k} "
                   f"was the fastest measured ({measured[k]:.2f}×). The model alone would pick K = {model_k} "
                   f"({by_k[model_k]:.2f}× predicted).")
    extrapolated = not fit.cost.inside(concurrency)
    reason = plain_k + plain_c + (" This concurrency lies outside the measured ones: the advice extrapolates."
                                  if extrapolated else "")
    tied = measured_ties(here, k)
    if not here.empty:
        reason += _interval_note(here, k, tied)
    details = ["S(K) = AL(K) / D(K): tokens per step over the step's time in baseline steps, "
               "D(K) = d0 + d1·K (d1: what each draft token costs, d0 − 1: fixed overhead per step).",
               f"AL(K) = 1 + Σ rateᵢ, rateᵢ = {fit.first:.3f}·{fit.decay:.3f}^(i−1)"
               + (" (measured per-position rates where known)." if fit.measured_rates else "."),
               formula_k, formula_c]
    if error_here is not None:
        details.append(f"Median |predicted / measured − 1| over the points it was fitted to (in-sample, not a "
                       f"check): {error_here:.1%} at this concurrency, {fit.train_error():.1%} over all.")
    held_error = fit.held_out_error()
    details.append(f"Leave-one-out over {len(fit.held_out)} of {fit.fitted_points} fitted points: median "
                   f"|predicted / measured − 1| {held_error:.1%}." if held_error is not None else
                   f"Not validated: {len(fit.held_out)} of {fit.fitted_points} fitted points can be predicted "
                   f"without themselves (leave-one-out needs {MIN_HELD_OUT}).")
    speculate = measured[k] > 1.0 if poor else by_k[k] > 1.0
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
    return Advice(fit.keys, float(concurrency), k, by_k.get(k, fit.predict(k, concurrency)), speculate, by_k,
                  crossover, reason, evidence, tied, basis="measured" if poor else "model",
                  model_k=model_k, measured_speedup=None if k not in measured else round(measured[k], 4),
                  details=details)


def model_curves(alpha: float, c: float, k_max: int) -> pd.DataFrame:
    """The plain model for sliders: K, tokens per step (i.i.d. alpha) and Leviathan speedup."""
    ks = range(0, k_max + 1)
    return pd.DataFrame({"k": list(ks),
                         "tokens_per_step": [theory.tokens_per_step(alpha, k) for k in ks],
                         "speedup": [theory.leviathan_speedup(alpha, k, c) for k in ks]})


def fit_curves(fit: FamilyFit, concurrency: float, k_max: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fitted curves against K at one concurrency, and the measured points there.

    Curves: ``k, curve, tokens_per_step, speedup`` for the fitted rates and the i.i.d. alpha
    (same cost); points: ``k, al, speedup, speedup_lo, speedup_hi, predicted, train``.
    """
    d0, d1 = fit.cost.at(concurrency)
    records = []
    for k in range(1, k_max + 1):
        al_rates, al_iid = fit.al(k), theory.tokens_per_step(fit.alpha, k)
        records.append({"k": k, "curve": "fitted per-position rates", "tokens_per_step": al_rates,
                        "speedup": theory.speedup(al_rates, k, d0, d1)})
        records.append({"k": k, "curve": f"i.i.d. alpha={fit.alpha:.3f}", "tokens_per_step": al_iid,
                        "speedup": theory.speedup(al_iid, k, d0, d1)})
    here = fit.rows[fit.rows["concurrency"] == concurrency]
    points = pd.DataFrame({"k": here["k"].astype(int), "al": here["al"], "speedup": here["speedup"],
                           "speedup_lo": here.get("speedup_lo"), "speedup_hi": here.get("speedup_hi"),
                           "predicted": [fit.predict(int(k), concurrency) for k in here["k"]],
                           "train": here["train"]})
    return pd.DataFrame(records), points.reset_index(drop=True)


def concurrency_curves(fit: FamilyFit, ks: Sequence[int], points: int = 120) -> tuple[pd.DataFrame,
                                                                                      pd.DataFrame]:
    """Best-K predicted speedup over the fitted concurrency range, and the best measured per concurrency."""
    lo, hi = fit.cost.concurrencies[0], fit.cost.concurrencies[-1]
    grid = np.exp2(np.linspace(math.log2(lo), math.log2(hi), points))
    best = [_best(fit, ks, c)[:2] for c in grid]
    curve = pd.DataFrame({"concurrency": grid, "k": [b[0] for b in best],
                          "speedup": [b[1] for b in best]})
    rows = fit.rows.sort_values("speedup", ascending=False).drop_duplicates("concurrency")
    measured = rows[["concurrency", "k", "speedup"]].sort_values("concurrency").reset_index(drop=True)
    return curve, measured
