"""Interval maths for repeated measurements: means, ratios of means, and a rerun's prediction.

    mean_interval([21.0, 22.5, 20.9])                   # t-interval for the mean throughput
    ratio_interval(method_tps, baseline_tps)           # Fieller interval for a speedup
    ratio_prediction_interval(method_tps, baseline_tps) # where a rerun's speedup should land
    bounded_mean_intervals(n, mean, var, lower=1.0)      # an acceptance length's mean, never below 1
    combined_ratios(a, n_a, var_a, b, n_b, var_b)       # several runs' speedups as one, with its interval
    paired_ratio_intervals(ratio, m, log_var)            # a speedup over paired rounds' baselines

Every function returns an ``Interval``. One value gives no interval (``low``/``high`` are ``None``,
``method="none"``): a single run says nothing about its own spread. A speedup whose baseline mean is not
significantly above zero has no bounded Fieller interval; it says so (``method="unbounded"``) rather than
inventing bounds. Student-t quantiles come from ``distributions``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specscope.distributions import t_quantile, t_quantiles

__all__ = [
    "finite",
    "Interval",
    "mean_interval",
    "mean_intervals",
    "bounded_mean_intervals",
    "ratio_interval",
    "ratio_intervals",
    "ratio_prediction_interval",
    "combined_ratios",
    "combined_log_ratios",
    "combined_from_sums",
    "paired_ratio_intervals",
]


def finite(value) -> float | None:
    """``value`` as a float, or None where it is missing, not a number or NaN (a frame's empty cell)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


@dataclass(frozen=True)
class Interval:
    """A point estimate with its two-sided interval at ``level`` (bounds ``None`` when there is none)."""

    estimate: float
    low: float | None
    high: float | None
    level: float
    n: int
    method: str  # "t", "fieller", "log-t prediction", "none" or "unbounded"

    @property
    def bounded(self) -> bool:
        """True when both bounds exist."""
        return self.low is not None and self.high is not None

    @property
    def half_width(self) -> float | None:
        """Half the interval's width (the ``±`` figure), or ``None`` without bounds."""
        if self.low is None or self.high is None:
            return None
        return (self.high - self.low) / 2

    def covers(self, value: float) -> bool:
        """True when ``value`` lies inside the bounds (never for an interval without bounds)."""
        return self.low is not None and self.high is not None and self.low <= value <= self.high


def _sample(values: Sequence[float], what: str) -> np.ndarray:
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        raise ValueError(f"{what} needs at least one value")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} values must be finite numbers")
    return arr


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1, got {level}")


def mean_interval(values: Sequence[float], level: float = 0.95, lower: float | None = None) -> Interval:
    """Student-t interval for the mean of ``values``; one value gives no interval. ``lower``: the
    least the quantity can be (0 for a throughput or a speedup); a bound below it is raised to it."""
    _check_level(level)
    x = _sample(values, "mean_interval")
    n = int(x.size)
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, None, None, level, n, "none")
    [low], [high] = mean_intervals([n], [mean], [float(x.var(ddof=1))], level, lower)
    return Interval(mean, float(low), float(high), level, n, "t")


def mean_intervals(n, mean, var, level: float = 0.95, lower: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``mean_interval`` from each sample's size, mean and variance (ddof 1), for many at once:
    arrays of lows and highs, NaN where a sample has fewer than two values."""
    _check_level(level)
    n, mean, var = (np.asarray(v, dtype=float) for v in (n, mean, var))
    low, high = np.full(n.shape, np.nan), np.full(n.shape, np.nan)
    ok = (n >= 2) & np.isfinite(mean) & np.isfinite(var)
    if ok.any():
        half = t_quantiles(0.5 + level / 2.0, n[ok] - 1) * np.sqrt(var[ok]) / np.sqrt(n[ok])
        low[ok] = _at_least(mean[ok] - half, lower)
        high[ok] = mean[ok] + half
    return low, high


def bounded_mean_intervals(
    n, mean, var, level: float = 0.95, lower: float | None = None, upper: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``mean_intervals`` for a quantity that cannot leave ``[lower, upper]`` (an acceptance length
    >= 1, a rate in [0, 1], a speedup > 0): the t-interval is drawn on a scale where the bounds are
    out of reach, log(x - lower) with a lower bound, logit((x - lower) / (upper - lower)) with both
    (delta method: the mean's standard error over the scale's slope at the mean), and mapped back.
    So both ends stay inside the bounds and hold the mean, and the interval leans away
    from a near bound as the data do. A mean on a bound (every value there) reads [mean, mean];
    NaN where a sample has fewer than two values."""
    _check_level(level)
    n, mean, var = (np.atleast_1d(np.asarray(v, dtype=float)) for v in (n, mean, var))
    low, high = np.full(n.shape, np.nan), np.full(n.shape, np.nan)
    ok = (n >= 2) & np.isfinite(mean) & np.isfinite(var)
    if not ok.any():
        return low, high
    m = mean[ok]
    half = t_quantiles(0.5 + level / 2.0, n[ok] - 1) * np.sqrt(np.maximum(var[ok], 0.0)) / np.sqrt(n[ok])
    if lower is None and upper is None:
        low[ok], high[ok] = m - half, m + half
        return low, high
    if upper is None:
        gap = m - lower
        inside = gap > 0
        step = np.minimum(half / np.where(inside, gap, 1.0), _MAX_LOG_STEP)
        low[ok] = np.minimum(np.where(inside, lower + gap * np.exp(-step), m), m)
        high[ok] = np.maximum(np.where(inside, lower + gap * np.exp(step), m), m)
        return low, high
    if lower is None:
        raise ValueError("bounded_mean_intervals needs a lower bound with an upper one")
    width = upper - lower
    share = (m - lower) / width
    inside = (share > 0) & (share < 1)
    safe = np.where(inside, share, 0.5)
    centre = np.log(safe / (1 - safe))
    step = np.minimum(half / (width * safe * (1 - safe)), _MAX_LOG_STEP)
    with np.errstate(over="ignore"):  # a far end maps to the bound itself
        ends = [lower + width / (1 + np.exp(-(centre + sign * step))) for sign in (-1, 1)]
    low[ok] = np.clip(np.where(inside, ends[0], m), lower, m)
    high[ok] = np.clip(np.where(inside, ends[1], m), m, upper)
    return low, high


_MAX_LOG_STEP = 50.0  # past e^50 an interval's end says nothing more, and stays a finite number


def combined_ratios(a, n_a, var_a, b, n_b, var_b, level: float = 0.95) -> tuple[float, float, float]:
    """Several runs' ratios of means (each run's mean ``a`` over its own baseline's ``b``, with their sizes and
    variances) as one figure and interval: the inverse-variance weighted mean of the log ratios (delta method),
    a random-effects term where the runs differ beyond their own spread (DerSimonian-Laird), and t on the
    Welch-Satterthwaite degrees of freedom of every part of the variance, that term's on the runs' less one (not
    jumping to those wherever it showed); ``exp`` of it. NaN where a run has fewer than two values on a side."""
    a, n_a, var_a, b, n_b, var_b = (np.atleast_1d(np.asarray(v, dtype=float)) for v in (a, n_a, var_a, b, n_b, var_b))
    if a.size == 0:
        return math.nan, math.nan, math.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(a / b)
    terms = (var_a / (n_a * a * a), n_a - 1, var_b / (n_b * b * b), n_b - 1)
    [centre], [low], [high] = combined_log_ratios(np.zeros(len(a), dtype=int), logs, *terms, level=level)
    return float(centre), float(low), float(high)


def combined_log_ratios(
    group, logs, term_a, df_a, term_b, df_b, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``combined_ratios`` for many points at once (``group`` numbers each run's point 0, 1, ...), from each run's
    log ratio and its two variance terms (``term_a`` on ``df_a`` degrees of freedom, ``term_b`` on ``df_b``; a
    paired run: its per-round log ratios' variance over their count on ``m - 1``, and 0). Arrays per point of
    the figure and its bounds, NaN for a point where a run has no spread of its own. The store folds the same
    sums in SQL and finishes with ``combined_from_sums``."""
    _check_level(level)
    group = np.asarray(group, dtype=int)
    logs, term_a, df_a, term_b, df_b = (np.asarray(v, dtype=float) for v in (logs, term_a, df_a, term_b, df_b))
    points = int(group.max()) + 1 if group.size else 0
    v = term_a + term_b
    with np.errstate(invalid="ignore", divide="ignore"):
        usable = np.isfinite(logs) & np.isfinite(v) & (v > 0) & (df_a >= 1) & (df_b >= 1)
        ok = (np.bincount(group, ~usable, points) == 0) & (np.bincount(group, minlength=points) > 0)
        keep = ok[group]
        group, logs, v, term_a, df_a, term_b, df_b = (x[keep] for x in (group, logs, v, term_a, df_a, term_b, df_b))
        runs = np.bincount(group, minlength=points).astype(float)
        w, wl, wll, ww = (np.bincount(group, x, points) for x in (1 / v, logs / v, logs * logs / v, 1 / (v * v)))
        scale = w - ww / w  # the runs' spread beyond their own (DerSimonian-Laird's tau^2; the store's SQL too)
        spread = np.where(scale > 0, np.maximum(0.0, (wll - wl * wl / w - (runs - 1)) / scale), 0.0)
        w = 1.0 / (v + spread[group])
        sums = (
            np.bincount(group, x, points)
            for x in (w, w * logs, w * w * v, w**4 * (term_a**2 / df_a + term_b**2 / df_b), w * w)
        )
        return combined_from_sums(np.where(ok, runs, np.nan), spread, *sums, level=level)


def combined_from_sums(
    runs, spread, w, wl, wwv, w4d, ww, *, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each point's combined figure and interval (``combined_ratios``) from its runs' count (NaN: none), their
    ``spread`` and, with weights w = 1 / (v + spread), the sums of w, w log, w^2 v, w^4 (term_a^2 / df_a +
    term_b^2 / df_b) and w^2: the weighted mean, and t on the Welch-Satterthwaite degrees of freedom of the
    runs' sides and of the spread (the runs less one)."""
    runs, spread, w, wl, wwv, w4d, ww = (np.asarray(x, dtype=float) for x in (runs, spread, w, wl, wwv, w4d, ww))
    ok, out = np.isfinite(runs) & (runs >= 1) & (w > 0), np.full((3, runs.size), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        between = ww / (w * w) * spread  # the random-effects part of the variance
        df = (wwv / (w * w) + between) ** 2 / (w4d / w**4 + between**2 / np.maximum(runs - 1, 1))
        ok &= np.isfinite(df) & (df > 0)
        centre, half = wl / w, t_quantiles(0.5 + level / 2.0, df[ok]) * np.sqrt(1.0 / w[ok])
    out[:, ok] = np.exp([centre[ok], centre[ok] - half, centre[ok] + half])
    return out[0], out[1], out[2]


def paired_ratio_intervals(ratio, m, log_var, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Intervals of speedups measured in paired rounds (each round over the same round's baseline, so a slowdown
    the round shares cancels): ``exp(ln ratio ± t(m-1) · sqrt(log_var / m))``, ``log_var`` the variance of the
    ``m`` per-round log ratios (delta method), about the ratio of the means every view quotes, never reaching 0.
    Arrays of lows and highs, NaN where fewer than two rounds pair."""
    _check_level(level)
    ratio, m, log_var = (np.atleast_1d(np.asarray(v, dtype=float)) for v in (ratio, m, log_var))
    low, high = np.full(ratio.shape, np.nan), np.full(ratio.shape, np.nan)
    ok = (m >= 2) & (ratio > 0) & np.isfinite(ratio) & np.isfinite(log_var) & (log_var >= 0)
    if ok.any():
        step = np.minimum(t_quantiles(0.5 + level / 2.0, m[ok] - 1) * np.sqrt(log_var[ok] / m[ok]), _MAX_LOG_STEP)
        low[ok], high[ok] = ratio[ok] * np.exp(-step), ratio[ok] * np.exp(step)
    return low, high


def _at_least(bound, lower: float | None):
    return bound if lower is None else np.maximum(bound, lower)


def _welch_df(terms: Sequence[tuple[float, int]]) -> float:
    """Welch-Satterthwaite degrees of freedom for a sum of variance terms (var, n)."""
    total = sum(v for v, _ in terms)
    denom = sum(v * v / (n - 1) for v, n in terms)
    if denom == 0.0:
        return float(sum(n - 1 for _, n in terms))
    return total * total / denom


def ratio_interval(
    num_values: Sequence[float], den_values: Sequence[float], level: float = 0.95, lower: float | None = None
) -> Interval:
    """Fieller interval for mean(num) / mean(den), the two samples independent (e.g. a speedup).

    Solves (a - r b)^2 <= t^2 (va + r^2 vb) for r, where a, b are the means and va, vb the
    squared standard errors; t uses Welch-Satterthwaite degrees of freedom at the point
    estimate. When the denominator mean is not significantly above zero (b^2 <= t^2 vb or
    b <= 0) the set is not a bounded interval and the result is ``method="unbounded"``.
    Either sample with a single value gives no interval; ``lower`` as in ``mean_interval``.
    """
    _check_level(level)
    num = _sample(num_values, "ratio_interval numerator")
    den = _sample(den_values, "ratio_interval denominator")
    a, b = float(num.mean()), float(den.mean())
    n = int(min(num.size, den.size))
    var = [float(v.var(ddof=1)) if v.size > 1 else math.nan for v in (num, den)]
    [low], [high], [method] = ratio_intervals(a, num.size, var[0], b, den.size, var[1], level, lower)
    estimate = math.nan if b == 0.0 else a / b
    bounded = method == "fieller"
    return Interval(estimate, float(low) if bounded else None, float(high) if bounded else None, level, n, method)


def ratio_intervals(
    a, n_a, var_a, b, n_b, var_b, level: float = 0.95, lower: float | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``ratio_interval`` from both samples' sizes, means and variances (ddof 1), for many ratios at
    once: arrays of lows, highs (NaN without bounds) and methods ("fieller", "none", "unbounded")."""
    _check_level(level)
    a, n_a, var_a, b, n_b, var_b = (np.atleast_1d(np.asarray(v, dtype=float)) for v in (a, n_a, var_a, b, n_b, var_b))
    low, high = np.full(a.shape, np.nan), np.full(a.shape, np.nan)
    method = np.where(b == 0.0, "unbounded", "none").astype(object)
    both = (n_a >= 2) & (n_b >= 2) & (b != 0.0)
    if not both.any():
        return low, high, method
    a, b = a[both], b[both]
    r = a / b
    va, vb = var_a[both] / n_a[both], var_b[both] / n_b[both]
    vr = r * r * vb
    denom = va * va / (n_a[both] - 1) + vr * vr / (n_b[both] - 1)
    safe = np.where(denom == 0.0, 1.0, denom)
    df = np.where(denom == 0.0, n_a[both] - 1 + n_b[both] - 1, (va + vr) ** 2 / safe)
    t2 = t_quantiles(0.5 + level / 2.0, df) ** 2
    qa = b * b - t2 * vb
    bounded = (b > 0.0) & (qa > 0.0)
    qa = np.where(bounded, qa, 1.0)
    root = np.sqrt(np.maximum((a * b) ** 2 - qa * (a * a - t2 * va), 0.0))
    low[both] = np.where(bounded, _at_least((a * b - root) / qa, lower), np.nan)
    high[both] = np.where(bounded, (a * b + root) / qa, np.nan)
    method[both] = np.where(bounded, "fieller", "unbounded")
    return low, high, method


def ratio_prediction_interval(
    num_values: Sequence[float],
    den_values: Sequence[float],
    level: float = 0.95,
    rerun_repeats: int | None = None,
) -> Interval:
    """Prediction interval for the ratio of means a rerun with ``rerun_repeats`` repeats will show.

    Works on the log scale: log(a2/b2) - log(a1/b1) has variance about
    cv_a^2 (1/n_a + 1/m) + cv_b^2 (1/n_b + 1/m) (delta method, cv = sd / mean), so the
    interval is log(a1/b1) +- t * sqrt(that), exponentiated; t uses Welch-Satterthwaite
    degrees of freedom. ``rerun_repeats`` defaults to the first run's own count.
    """
    _check_level(level)
    num = _sample(num_values, "ratio_prediction_interval numerator")
    den = _sample(den_values, "ratio_prediction_interval denominator")
    a, b = float(num.mean()), float(den.mean())
    n = int(min(num.size, den.size))
    if a <= 0.0 or b <= 0.0:
        raise ValueError("ratio_prediction_interval needs positive means (throughputs)")
    r = a / b
    if num.size < 2 or den.size < 2:
        return Interval(r, None, None, level, n, "none")
    m_a = rerun_repeats or int(num.size)
    m_b = rerun_repeats or int(den.size)
    cv2_a = float(num.var(ddof=1)) / (a * a)
    cv2_b = float(den.var(ddof=1)) / (b * b)
    terms = [
        (cv2_a * (1.0 / num.size + 1.0 / m_a), int(num.size)),
        (cv2_b * (1.0 / den.size + 1.0 / m_b), int(den.size)),
    ]
    se = math.sqrt(sum(v for v, _ in terms))
    half = t_quantile(0.5 + level / 2.0, _welch_df(terms)) * se
    return Interval(r, r * math.exp(-half), r * math.exp(half), level, n, "log-t prediction")
