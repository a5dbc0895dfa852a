"""Student-t and Fisher's F distributions, computed here (regularised incomplete beta) so no scipy is needed:
t quantiles one at a time or for many degrees of freedom at once, and the F tail probability."""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["t_quantile", "t_quantiles", "f_survival"]


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betai(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _t_cdf(t: float, df: float) -> float:
    tail = 0.5 * _betai(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` (possibly fractional) degrees of freedom
    (remembered: a store's cells share a few repeat counts)."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if _t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def t_quantiles(p: float, df) -> np.ndarray:
    """``t_quantile(p, df)`` for an array of degrees of freedom at once, ``p >= 0.5``: Newton steps
    on the same CDF from a Cornish-Fisher start, to 1e-12 (for the intervals of many cells)."""
    df = np.asarray(df, dtype=float)
    if df.size == 0:
        return df.copy()
    if not 0.5 <= p < 1.0 or np.any(df <= 0) or not np.all(np.isfinite(df)):
        raise ValueError(f"t_quantiles needs 0.5 <= p < 1 and finite df > 0, got p={p}")
    nu, inverse = np.unique(df, return_inverse=True)
    seen = {v: _T_SEEN.get((p, v)) for v in nu.tolist()}  # the same data asks for the same degrees of freedom again
    new = [v for v, t in seen.items() if t is None]
    found = dict(zip(new, _newton_t(p, np.array(new)).tolist() if new else []))
    _T_SEEN.update(((p, v), t) for v, t in found.items() if len(_T_SEEN) < 100_000)
    return np.array([found.get(v, t) for v, t in seen.items()], dtype=float)[inverse].reshape(df.shape)


_T_SEEN: dict[tuple[float, float], float] = {}  # t_quantiles' answers by (p, degrees of freedom), up to 100,000


def _newton_t(p: float, nu: np.ndarray) -> np.ndarray:
    """The ``p`` quantiles of t at the distinct degrees of freedom ``nu``: ``t_quantiles``' Newton steps."""
    z = _normal_quantile(p)
    t = (
        z
        + (z**3 + z) / (4 * nu)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * nu**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * nu**3)
    )
    lg = np.frompyfunc(math.lgamma, 1, 1)
    log_norm = np.asarray(lg((nu + 1) / 2) - lg(nu / 2), dtype=float) - 0.5 * np.log(nu * math.pi)
    active = np.arange(nu.size)
    for _ in range(50):  # from that start Newton needs a handful of steps
        v, x = nu[active], t[active]
        tail = 0.5 * _betai_many(v / 2.0, 0.5, v / (v + x * x))  # P(T > x)
        step = (tail - (1.0 - p)) / np.exp(log_norm[active] - (v + 1) / 2 * np.log1p(x * x / v))
        t[active] = np.where(x + step > 0, x + step, x / 2)  # a step past 0 (a far start) halves instead
        active = active[np.abs(step) > 1e-12 * np.maximum(x, 1.0)]  # the CDF's own noise is near 1e-13
        if active.size == 0:
            break
    return t


@functools.lru_cache(maxsize=64)
def _normal_quantile(p: float) -> float:
    lo, hi = 0.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if 0.5 * math.erfc(-mid / math.sqrt(2.0)) < p else (lo, mid)
    return (lo + hi) / 2.0


def _betai_many(a: np.ndarray, b: float, x: np.ndarray) -> np.ndarray:
    """Regularised incomplete beta I_x(a, b) over arrays (``_betai`` elementwise), 0 < x < 1."""
    lg = np.frompyfunc(math.lgamma, 1, 1)
    front = np.exp((lg(a + b) - lg(a)).astype(float) - math.lgamma(b) + a * np.log(x) + b * np.log1p(-x))
    direct = x < (a + 1.0) / (a + b + 2.0)
    first = np.where(direct, a, b)
    cf = _betacf_many(first, np.where(direct, b, a), np.where(direct, x, 1.0 - x))
    return np.where(direct, front * cf / first, 1.0 - front * cf / first)


def _betacf_many(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``_betacf`` over arrays: the same continued fraction, iterated until every element converged."""
    tiny = 1e-300

    def guard(v):
        return np.where(np.abs(v) > tiny, v, tiny)

    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = np.ones_like(x)
    d = 1.0 / guard(1.0 - qab * x / qap)
    h = d.copy()
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 / guard(1.0 + aa * d)
        c = guard(1.0 + aa / c)
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 / guard(1.0 + aa * d)
        c = guard(1.0 + aa / c)
        delta = d * c
        h *= delta
        if np.all(np.abs(delta - 1.0) < 1e-15):
            break
    return h


def f_survival(f: float, df_between: float, df_within: float) -> float:
    """P(F > f) for Fisher's F on (``df_between``, ``df_within``) degrees of freedom: how often groups' spread
    reads this large against the spread within them by chance alone."""
    return (
        1.0
        if f <= 0
        else 0.0
        if not math.isfinite(f)
        else _betai(df_within / 2.0, df_between / 2.0, df_within / (df_within + df_between * f))
    )
