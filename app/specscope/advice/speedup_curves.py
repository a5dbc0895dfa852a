"""What the fit (and the plain model) predicts over K and concurrency: the speedup curves the Theory page draws,
and where the best K's speedup falls below 1 (the crossover), predicted or measured."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from specscope.advice import theory
from specscope.advice.fitting import FamilyFit

__all__ = ["predicted_crossover", "measured_crossover", "model_curves", "fit_curves", "concurrency_curves"]


def _best(fit: FamilyFit, ks: Sequence[int], conc: float) -> tuple[int, float, dict[int, float]]:
    by_k = {int(k): fit.predict(int(k), conc) for k in ks}
    k = theory.optimal_k(by_k)
    return k, by_k[k], by_k


def predicted_crossover(
    fit: FamilyFit, ks: Sequence[int], points: int = 240, upto: float | None = None
) -> float | None:
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


def model_curves(alpha: float, c: float, k_max: int) -> pd.DataFrame:
    """The plain model for sliders: K, tokens per step (i.i.d. alpha) and Leviathan speedup."""
    ks = range(0, k_max + 1)
    return pd.DataFrame(
        {
            "k": list(ks),
            "tokens_per_step": [theory.tokens_per_step(alpha, k) for k in ks],
            "speedup": [theory.leviathan_speedup(alpha, k, c) for k in ks],
        }
    )


def fit_curves(fit: FamilyFit, concurrency: float, k_max: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fitted curves against K at one concurrency, and the measured points there.

    Curves: ``k, curve, tokens_per_step, speedup`` for the fitted rates and the i.i.d. alpha
    (same cost); points: ``k, al, speedup, speedup_lo, speedup_hi, predicted, train``.
    """
    d0, d1 = fit.cost.at(concurrency)
    records = []
    for k in range(1, k_max + 1):
        al_rates, al_iid = fit.al(k), theory.tokens_per_step(fit.alpha, k)
        records.append(
            {
                "k": k,
                "curve": "fitted per-position rates",
                "tokens_per_step": al_rates,
                "speedup": theory.speedup(al_rates, k, d0, d1),
            }
        )
        records.append(
            {
                "k": k,
                "curve": f"i.i.d. alpha={fit.alpha:.3f}",
                "tokens_per_step": al_iid,
                "speedup": theory.speedup(al_iid, k, d0, d1),
            }
        )
    here = fit.rows[fit.rows["concurrency"] == concurrency]
    points = pd.DataFrame(
        {
            "k": here["k"].astype(int),
            "al": here["al"],
            "speedup": here["speedup"],
            "speedup_lo": here.get("speedup_lo"),
            "speedup_hi": here.get("speedup_hi"),
            "predicted": [fit.predict(int(k), concurrency) for k in here["k"]],
            "train": here["train"],
        }
    )
    return pd.DataFrame(records), points.reset_index(drop=True)


def concurrency_curves(fit: FamilyFit, ks: Sequence[int], points: int = 120) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Best-K predicted speedup over the fitted concurrency range, and the best measured per concurrency."""
    lo, hi = fit.cost.concurrencies[0], fit.cost.concurrencies[-1]
    grid = np.exp2(np.linspace(math.log2(lo), math.log2(hi), points))
    best = [_best(fit, ks, c)[:2] for c in grid]
    curve = pd.DataFrame({"concurrency": grid, "k": [b[0] for b in best], "speedup": [b[1] for b in best]})
    rows = fit.rows.sort_values("speedup", ascending=False).drop_duplicates("concurrency")
    measured = rows[["concurrency", "k", "speedup"]].sort_values("concurrency").reset_index(drop=True)
    return curve, measured
