"""The least-squares fits behind ``fitting.FamilyFit``, on arrays: a family's acceptance (i.i.d. alpha, and
geometric per-position rates) and step cost per concurrency, from its usable points. ``fitting.fit_family``
fits a family's rows through ``fit_points``, and its leave-one-out check refits the same points without
each one, without a DataFrame per refit."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specscope.advice import theory
from specscope.errors import InputError

__all__ = ["fit_alpha", "fit_rates", "fit_cost", "Points", "Estimate", "fit_points"]

_ALPHAS = np.linspace(0.0, 0.999, 1999)
_DECAYS = np.linspace(0.01, 1.0, 991)


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
    first = np.clip((basis @ gain) / (basis**2).sum(axis=1), 0.0, 1.0)
    sse = ((first[:, None] * basis - gain) ** 2).sum(axis=1)
    best = int(np.argmin(sse))
    return float(first[best]), float(_DECAYS[best]), float(math.sqrt(sse[best] / len(ks_arr)))


def fit_cost(ks: Sequence[int], cost: Sequence[float]) -> tuple[float, float]:
    """``(d0, d1)`` of ``D(K) = d0 + d1*K`` with d1 >= 0, and d0 >= 1 where the line rises (one that falls is
    read as flat: its mean); with one K, the Leviathan form d0 = 1.

    D is a speculative step's cost over the baseline's step. A step verifies K + 1 tokens per sequence where
    the baseline's computes one, so it never costs less than the baseline's: where the free line's d0 falls
    below 1 (a drafter whose step cost grows faster than linearly between the measured K, such as a draft
    model's), the line through d0 = 1 is fitted instead, so the smaller K are not promised a step cheaper
    than no drafting at all."""
    ks_arr, d = np.asarray(ks, float), np.asarray(cost, float)
    if len(set(ks_arr.tolist())) < 2:
        return 1.0, float(max(0.0, (d.mean() - 1.0) / ks_arr.mean()))
    d1, d0 = np.polyfit(ks_arr, d, 1)
    if d1 < 0:  # drafting cannot make a step cheaper: the best fit with d1 = 0 is the mean
        return float(d.mean()), 0.0
    if d0 < 1.0:  # least squares of d1 with d0 held at 1
        return 1.0, float(max(0.0, (ks_arr @ (d - 1.0)) / (ks_arr @ ks_arr)))
    return float(d0), float(d1)


def _rates_column(values: Sequence) -> list[float]:
    """Mean measured per-position rates over the rows that carry them (longest prefix)."""
    lists = [[float(x) for x in v] for v in values if isinstance(v, (list, tuple, np.ndarray)) and len(v) > 0]
    if not lists:
        return []
    depth = max(len(v) for v in lists)
    return [float(np.mean([v[i] for v in lists if len(v) > i])) for i in range(depth)]


@dataclass(frozen=True)
class Points:
    """A family's usable rows, sorted by concurrency and K, as arrays: what a fit is computed from."""

    k: np.ndarray
    concurrency: np.ndarray
    al: np.ndarray
    speedup: np.ndarray
    baseline_throughput: np.ndarray
    rates: np.ndarray  # per_position_acceptance of each row (objects)

    @classmethod
    def of(cls, rows: pd.DataFrame) -> Points:
        """The points of a family's usable rows (a column that is missing reads NaN)."""

        def floats(name: str) -> np.ndarray:
            return rows[name].to_numpy(dtype=float, na_value=np.nan) if name in rows else np.full(len(rows), np.nan)

        rates = (
            rows["per_position_acceptance"].to_numpy(dtype=object)
            if "per_position_acceptance" in rows
            else np.full(len(rows), None, dtype=object)
        )
        return cls(
            floats("k"), floats("concurrency"), floats("al"), floats("speedup"), floats("baseline_throughput"), rates
        )

    def without(self, i: int) -> Points:
        """All the points but the ``i``-th (a leave-one-out refit's)."""
        keep = np.arange(len(self.k)) != i
        return Points(
            *(
                getattr(self, name)[keep]
                for name in ("k", "concurrency", "al", "speedup", "baseline_throughput", "rates")
            )
        )


@dataclass(frozen=True)
class Estimate:
    """What ``fit_points`` finds: which points it was fitted on (``train``), acceptance, and the cost per
    concurrency (``groups``: concurrency, d0, d1, train_ks, baseline_step_ms)."""

    train: np.ndarray
    alpha: float
    alpha_rmse: float
    first: float
    decay: float
    rates_rmse: float
    groups: list[dict]
    measured: list[float]

    @property
    def cost(self) -> theory.CostCurve:
        """The step cost per concurrency as a curve over concurrency."""
        return theory.CostCurve(
            tuple(float(g["concurrency"]) for g in self.groups),
            tuple(g["d0"] for g in self.groups),
            tuple(g["d1"] for g in self.groups),
        )


def _mean(values: np.ndarray) -> float:
    """The mean of the values that are there (NaN where none is), as pandas takes it."""
    there = values[~np.isnan(values)]
    return float(there.mean()) if len(there) else math.nan


def fit_points(points: Points, train_smallest: int | None) -> Estimate:
    """The fit of a family's usable points (see the module docstring); InputError where none can be fitted on."""
    train = np.zeros(len(points.k), bool)
    for conc in np.unique(points.concurrency):
        here = points.concurrency == conc
        measured_ks = np.unique(points.k[here])
        train[here] = np.isin(points.k[here], measured_ks[:train_smallest] if train_smallest else measured_ks)
    on = train & ~np.isnan(points.al)
    if not on.any():
        raise InputError("The rows chosen for the fit carry no acceptance rate or length; fit on all measured K.")
    k, conc, al, speedup, base = (
        points.k[on],
        points.concurrency[on],
        points.al[on],
        points.speedup[on],
        points.baseline_throughput[on],
    )
    pooled = {int(x): _mean(al[k == x]) for x in np.unique(k)}
    measured = [] if train_smallest else _rates_column(points.rates[on])
    ks, als = list(pooled), list(pooled.values())
    if measured:
        ks = sorted(set(ks) | set(range(1, len(measured) + 1)))
        als = [float(pooled.get(x, 1.0 + sum(measured[:x]))) for x in ks]
    alpha, alpha_rmse = fit_alpha(ks, als)
    if len(ks) >= 2:
        first, decay, rates_rmse = fit_rates(ks, als)
    else:  # one K cannot tell how acceptance falls with position: i.i.d.
        first, decay, rates_rmse = alpha, alpha, alpha_rmse
    groups = []
    for c in np.unique(conc):
        here = conc == c
        d0, d1 = fit_cost(k[here], al[here] / speedup[here])
        groups.append(
            {
                "concurrency": int(c),
                "d0": d0,
                "d1": d1,
                "train_ks": [int(x) for x in np.unique(k[here])],
                "baseline_step_ms": float(1000.0 * c / _mean(base[here])),
            }
        )
    return Estimate(train, alpha, alpha_rmse, first, decay, rates_rmse, groups, measured)
