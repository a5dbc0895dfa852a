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
advisor does not rank them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from specscope import theory
from specscope.errors import InputError
from specscope.schema import BASELINE_METHOD

__all__ = ["FAMILY_KEYS", "FamilyFit", "Advice", "Evidence", "MeasuredPoint", "fit_alpha", "fit_rates", "fit_cost",
           "fit_family", "fit_families", "advise", "family_label", "measured_crossover",
           "predicted_crossover", "with_acceptance_length", "model_curves", "fit_curves",
           "concurrency_curves", "measured_ties"]

FAMILY_KEYS = ("source", "model", "draft_model", "method", "dataset", "hardware")
_DECAYS = np.linspace(0.01, 1.0, 991)
EXTRAPOLATE = 4  # how far past the largest measured concurrency a crossover is extrapolated
_ALPHAS = np.linspace(0.0, 0.999, 1999)


def with_acceptance_length(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with column ``al``: ``1 + acceptance_rate * K`` (4-digit rates), else acceptance_length."""
    out = rows.copy()
    from_rate = 1.0 + out["acceptance_rate"].astype(float) * out["k"].astype(float)
    out["al"] = from_rate.where(out["acceptance_rate"].notna(), out["acceptance_length"].astype(float))
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
    """``(d0, d1)`` of ``D(K) = d0 + d1*K``; with one K, the Leviathan form d0 = 1."""
    ks_arr, d = np.asarray(ks, float), np.asarray(cost, float)
    if len(set(ks_arr.tolist())) < 2:
        return 1.0, float(max(0.0, (d.mean() - 1.0) / ks_arr.mean()))
    d1, d0 = np.polyfit(ks_arr, d, 1)
    return float(d0), float(max(d1, 0.0))


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
        """Median absolute relative error of predicted speedup on the training rows."""
        train = self.rows[self.rows["train"]]
        pred = [self.predict(int(r.k), float(r.concurrency)) for r in train.itertuples()]
        return float(np.median(np.abs(np.asarray(pred) / train["speedup"].to_numpy() - 1.0)))


def family_label(keys: Mapping) -> str:
    """A family's name for menus: ``model | method | draft | source``."""
    draft = keys.get("draft_model") or "-"
    return f"{keys['model']} | {keys['method']} | {draft} | {keys.get('source') or '-'}"


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
    rows = with_acceptance_length(rows[rows["method"] != BASELINE_METHOD])
    rows = rows.dropna(subset=["speedup", "k", "concurrency"])
    rows = rows[(rows["k"] > 0) & (rows["speedup"] > 0)]
    if rows.empty:
        raise InputError("No speculative rows with a speedup match; import or run results with a "
                         "baseline (method 'none') at the same concurrency.")
    rows = rows.sort_values(["concurrency", "k"]).reset_index(drop=True)
    train = np.zeros(len(rows), bool)
    for _, idx in rows.groupby("concurrency").groups.items():
        ks = sorted(rows.loc[idx, "k"].unique())
        keep = ks[:train_smallest] if train_smallest else ks
        train[idx] = rows.loc[idx, "k"].isin(keep).to_numpy()
    rows["train"] = train
    fit_rows = rows[rows["train"] & rows["al"].notna()]
    if fit_rows.empty:
        raise InputError("The matching rows carry no acceptance rate or length, so acceptance "
                         "cannot be fitted; re-run with speculative decoding metrics on.")
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
    keys = {k: _scalar(rows[k].iloc[0]) for k in FAMILY_KEYS}
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
    sd = frame[frame["method"] != BASELINE_METHOD]
    if sd.empty:
        raise InputError("No speculative rows match; widen the filters or import results first.")
    keyed = sd.assign(**{k: sd[k].astype(object).where(sd[k].notna(), "") for k in FAMILY_KEYS})
    fits, skipped = [], []
    for _, g in keyed.groupby(list(FAMILY_KEYS), sort=True):
        try:
            fits.append(fit(sd.loc[g.index], train_smallest))
        except InputError as exc:
            skipped.append(str(exc))
    if not fits:
        raise InputError(skipped[0])
    return fits


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
    measured: tuple[MeasuredPoint, ...]


@dataclass(frozen=True)
class Advice:
    """The advisor's answer for one family at one concurrency."""

    keys: dict
    concurrency: float
    k: int                       # best K among the candidates
    predicted_speedup: float
    speculate: bool              # predicted speedup > 1
    speedup_by_k: dict[int, float]
    crossover: float | None      # predicted concurrency above which best-K speedup < 1
    reason: str
    evidence: Evidence
    tied_ks: list[int] = field(default_factory=list)  # measured K it cannot tell apart from k

    def stops_paying(self) -> str:
        """Where speculation stops paying, e.g. 'above concurrency ≈ 24'."""
        beyond = self.evidence.crossover_extrapolated
        if self.crossover is not None:
            return f"above concurrency ≈ {self.crossover:.0f}"
        if beyond is not None:
            return f"near concurrency ≈ {beyond:.0f} (extrapolated past the measured range)"
        return "nowhere in or near the measured range"

    def as_dict(self) -> dict:
        """The answer as JSON-ready values."""
        return {"family": self.keys, "concurrency": self.concurrency, "k": self.k, "tied_ks": self.tied_ks,
                "predicted_speedup": round(self.predicted_speedup, 4), "speculate": self.speculate,
                "crossover_concurrency": None if self.crossover is None else round(self.crossover, 1),
                "reason": self.reason, "evidence": asdict(self.evidence),
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
        return (f"; measured here, K={k} cannot be told apart from K={', '.join(map(str, tied))} "
                "(their 95% speedup intervals overlap), so any of them will do")
    if not any(_bounds(r) is not None for r in here.itertuples()):
        return "; the measured points here are single runs without intervals, so close K may swap on a rerun"
    return ""


def advise(fit: FamilyFit, concurrency: float, ks: Sequence[int] | None = None) -> Advice:
    """Recommended K (from ``ks``, default 1..largest measured K), speedup and crossover."""
    if concurrency <= 0:
        raise InputError(f"Concurrency must be a positive number, got {concurrency}.")
    ks = sorted(set(int(k) for k in ks)) if ks else list(range(1, int(fit.rows["k"].max()) + 1))
    k, best, by_k = _best(fit, ks, concurrency)
    d0, d1 = fit.cost.at(concurrency)
    crossover = predicted_crossover(fit, ks)
    nxt = fit.al(k + 1) - fit.al(k)
    if k == ks[-1]:
        why_k = (f"K={k} is the largest candidate; position {k + 1} would still add "
                 f"{nxt:.2f} tokens/step against {d1:.3f} steps of cost (worth it above "
                 f"{d1 * best:.2f}), so a larger K may pay: measure it")
    else:
        why_k = (f"K={k}: one more draft token would be accepted {nxt:.0%} of the time, adding "
                 f"{nxt:.3f} tokens/step, but costs {d1:.3f} target steps, which pays only if "
                 f"the gain exceeds {d1:.3f} x {best:.2f} = {d1 * best:.3f}")
    extrapolated = not fit.cost.inside(concurrency)
    if crossover is None:
        top = fit.cost.concurrencies[-1]
        beyond = predicted_crossover(fit, ks, upto=EXTRAPOLATE * top)
        why_c = (f"speculation pays at every measured concurrency up to {top:g}" +
                 (f"; extrapolating the cost trend, it stops near {beyond:.0f} (not measured)"
                  if beyond is not None else
                  f" and, extrapolating the cost trend, still up to {EXTRAPOLATE * top:g}"))
        evidence_beyond = beyond
    else:
        evidence_beyond = None
    if crossover is not None:
        lo = fit.groups.iloc[0]
        x0, x1 = fit.cost.at(crossover)
        why_c = (f"above concurrency ~{crossover:.0f} speculation stops paying: the batch leaves "
                 f"the memory-bound regime, so each draft token costs {x1:.3f} target steps "
                 f"there (plus {x0 - 1:.2f} fixed) vs {lo.d1:.3f} at concurrency "
                 f"{lo.concurrency:g}, more than the extra accepted tokens return")
    reason = f"{why_k}; {why_c}" + (" (extrapolated beyond the measured concurrencies)"
                                    if extrapolated else "")
    here = fit.rows[fit.rows["concurrency"] == concurrency]
    tied = measured_ties(here, k)
    if not here.empty:
        reason += _interval_note(here, k, tied)
    evidence = Evidence(
        alpha_iid=round(fit.alpha, 4), alpha_rmse_tokens=round(fit.alpha_rmse, 4),
        rates_first=round(fit.first, 4), rates_decay=round(fit.decay, 4),
        rates_rmse_tokens=round(fit.rates_rmse, 4),
        tokens_per_step=round(fit.al(k), 4), d0=round(d0, 4), d1=round(d1, 4),
        draft_cost_c=round(fit.draft_cost, 4), extrapolated=extrapolated,
        crossover_extrapolated=None if evidence_beyond is None else round(evidence_beyond, 1),
        train_smallest=fit.train_smallest,
        train_median_rel_err=round(fit.train_error(), 4),
        measured=tuple(MeasuredPoint(int(r.k), round(float(r.speedup), 4),
                                     round(fit.predict(int(r.k), concurrency), 4), bool(r.train),
                                     None if (b := _bounds(r)) is None else (round(b[0], 4), round(b[1], 4)))
                       for r in here.itertuples()))
    return Advice(fit.keys, float(concurrency), k, best, best > 1.0, by_k, crossover, reason,
                  evidence, tied)


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
