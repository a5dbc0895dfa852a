"""A cell's folded figures: its throughput and speedup intervals from sufficient statistics (count, mean,
variance, the store's SQL folds them), points combined over runs, and the best choice per group with its ties.

A cell measured in the same rounds as its own run's baseline (``repeat``: round i of every cell measured
together) takes its speedup interval from the per-round log ratios (``_pair_m`` rounds, ``_pair_var`` the
variance of ln(cell / baseline) over them), so a slowdown that a round shares cancels: ``paired``. A cell
without such rounds (another run's baseline, one round, an import) keeps the Fieller interval of its two
samples."""

from __future__ import annotations

import numpy as np
import pandas as pd

from specscope import stats, ties
from specscope.results import hygiene
from specscope.schema import BASELINE_METHOD, BEST_KEYS

__all__ = [
    "LEVEL",
    "BASE_STATS",
    "PAIR_STATS",
    "STATS",
    "COMBINED_SQL",
    "COMBINED",
    "speedup_intervals",
    "points",
    "with_intervals",
    "best_with_ties",
]

LEVEL = 0.95
BASE_STATS = ["_base_n", "_base_mean", "_base_var"]  # count, mean, variance of a baseline's pooled throughputs
PAIR_STATS = ["_pair_m", "_pair_var"]  # rounds paired with the run's own baseline, variance of their log ratios
STATS = ["_n", "_var", *BASE_STATS, *PAIR_STATS]  # with the cell's count and variance: its speedup's statistics
# A point's runs folded in SQL into the sums ``stats.combined_from_sums`` finishes (``points``), from the CTE
# ``speedups`` (a row per run's cell, with ``_point`` and STATS): each run's log ratio and its variance terms (paired:
# its per-round log ratios' variance over m, on m - 1; else its two samples' by the delta method), the runs' spread
# beyond them (``stats.combined_log_ratios``' formula), and the sums under the weights 1 / (v + spread); Kahan sums.
COMBINED_SQL = """
    terms AS (
        SELECT *, _ta + _tb AS _v,
               coalesce(isfinite(_log + _ta + _tb) AND _ta + _tb > 0 AND _dfa >= 1 AND _dfb >= 1, false) AS _usable
        FROM (SELECT _point,
                     if(output_throughput > 0 AND _base_mean > 0, ln(output_throughput / _base_mean), NULL) AS _log,
                     if(_paired, _pair_var / _pair_m, _var / (_n * output_throughput * output_throughput)) AS _ta,
                     if(_paired, 0.0, _base_var / (_base_n * _base_mean * _base_mean)) AS _tb,
                     if(_paired, _pair_m - 1, _n - 1) AS _dfa, if(_paired, 1, _base_n - 1) AS _dfb
              FROM (SELECT *, coalesce(_pair_m >= 2 AND isfinite(_pair_var), false) AS _paired
                    FROM speedups WHERE speedup IS NOT NULL))),
    spread AS (
        SELECT _point, _ok, if(_w - _ww / _w > 0, greatest(0.0, (_wll - _wl * _wl / _w - (_k - 1)) / (_w - _ww / _w)),
                                0.0) AS _spread
        FROM (SELECT _point, bool_and(_usable) AS _ok, count(*) AS _k, fsum(1 / _v) AS _w, fsum(_log / _v) AS _wl,
                     fsum(_log * _log / _v) AS _wll, fsum(1 / (_v * _v)) AS _ww FROM terms GROUP BY _point)),
    combined AS (
        SELECT _point, any_value(_ok) AS _c_ok, any_value(_spread) AS _c_spread, fsum(w) AS _c_w,
               fsum(w * _log) AS _c_wl, fsum(w * w * _v) AS _c_wwv,
               fsum(w * w * w * w * (_ta * _ta / _dfa + _tb * _tb / _dfb)) AS _c_w4d, fsum(w * w) AS _c_ww
        FROM (SELECT t.*, s._ok, s._spread, 1 / (t._v + s._spread) AS w FROM terms t JOIN spread s USING (_point))
        GROUP BY _point)"""
COMBINED = ["_c_ok", "_c_spread", "_c_w", "_c_wl", "_c_wwv", "_c_w4d", "_c_ww"]  # what ``combined`` gives a point


def speedup_intervals(frame: pd.DataFrame, speedup) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's interval of its ``speedup`` from its sufficient statistics: paired where its rounds pair
    with its own run's baseline, else Fieller (cell over its baseline's pool); and how it was made."""
    low, high, method = stats.ratio_intervals(
        frame["output_throughput"],
        frame["_n"],
        frame["_var"],
        frame["_base_mean"],
        frame["_base_n"],
        frame["_base_var"],
        LEVEL,
        lower=0.0,
    )
    paired_low, paired_high = stats.paired_ratio_intervals(speedup, frame["_pair_m"], frame["_pair_var"], LEVEL)
    paired = ~np.isnan(paired_low)
    return (
        np.where(paired, paired_low, low),
        np.where(paired, paired_high, high),
        np.where(paired, "paired", method).astype(object),
    )


def points(frame: pd.DataFrame) -> pd.DataFrame:
    """The store's figure points (one row each, with ``runs``, the mean ``speedup`` of its runs, their
    ``_speedup_var``, ``_mean_throughput``, a single run's ``STATS`` and its runs' sums, ``COMBINED``) as speedups
    with their intervals: a point of one run keeps that run's own; one of several runs is combined
    (``stats.combined_from_sums``); where a run has no interval of its own, the runs' mean and a t-interval over
    them."""
    folded = (frame["runs"] > 1).to_numpy()
    frame[STATS] = frame[STATS].astype(float)
    speedup = frame["speedup"].to_numpy(dtype=float, copy=True)
    low, high, _ = speedup_intervals(frame, speedup)
    if folded.any():
        ok = frame["_c_ok"].astype("boolean").fillna(False).to_numpy(dtype=bool)
        runs = np.where(ok, frame["runs"].to_numpy(dtype=float), np.nan)
        sums = [frame[c].to_numpy(dtype=float, na_value=np.nan)[folded] for c in COMBINED[1:]]
        speedup[folded], low[folded], high[folded] = stats.combined_from_sums(runs[folded], *sums, level=LEVEL)
    alone = folded & np.isnan(low)
    speedup = np.where(alone, frame["speedup"], speedup)
    over_runs = stats.mean_intervals(frame["runs"], speedup, frame["_speedup_var"], LEVEL, lower=0.0)
    low, high = np.where(alone, over_runs[0], low), np.where(alone, over_runs[1], high)
    return frame.assign(
        speedup=speedup, speedup_lo=low, speedup_hi=high, output_throughput=frame["_mean_throughput"]
    ).drop(columns=[*STATS, *COMBINED, "_speedup_var", "_mean_throughput"])


def with_intervals(frame: pd.DataFrame) -> pd.DataFrame:
    """Add the derived interval columns from the cells' sufficient statistics; drop those."""
    frame[STATS] = frame[STATS].astype(float)
    is_baseline = (frame["method"] == BASELINE_METHOD).to_numpy()
    low, high = stats.mean_intervals(frame["_n"], frame["output_throughput"], frame["_var"], LEVEL, lower=0.0)
    speedup = frame["output_throughput"] / frame["baseline_throughput"]
    speed_low, speed_high, method = speedup_intervals(frame, speedup)
    base_rows = frame["_base_rows"].where(frame["_base_rows"] > 0).astype("Int64")  # none without samples
    out = frame.assign(
        output_throughput_lo=low,
        output_throughput_hi=high,
        speedup_lo=np.where(is_baseline, 1.0, speed_low),
        speedup_hi=np.where(is_baseline, 1.0, speed_high),
        speedup_interval=np.where(is_baseline, "baseline", method).astype(object),
        baseline_repeats=base_rows,
        speedup=np.where(is_baseline, 1.0, speedup),
    )
    return out.drop(columns=[*STATS, "_base_rows"])


def _choice(k, k_schedule) -> int | str:
    """What a cell chose: its fixed K, or its schedule's text (``schedule 1-2:4,3-256:1``)."""
    if isinstance(k_schedule, str) and k_schedule:
        return f"schedule {k_schedule}"
    return -1 if pd.isna(k) else int(k)


def best_with_ties(frame: pd.DataFrame) -> pd.DataFrame:
    """The highest-speedup choice per BEST_KEYS group among the cells no distorting check flags (all of them
    where every one is flagged), with ``checks`` (the ids its cell fails, distorting or not), ``tied_ks``
    (the other clean choices, fixed K as numbers and schedules as ``schedule <text>``, that ``ties.outcome``
    cannot tell from it) and, where a flagged choice measured more, that choice as ``flagged_k``,
    ``flagged_speedup`` [``flagged_speedup_lo``, ``flagged_speedup_hi``] and ``flagged_checks``."""
    extra = {
        "tied_ks": object,
        "checks": object,
        "flagged_k": object,
        "flagged_speedup": float,
        "flagged_speedup_lo": float,
        "flagged_speedup_hi": float,
        "flagged_checks": object,
    }
    if frame.empty:
        return frame.assign(**{name: pd.Series(dtype=kind) for name, kind in extra.items()})
    schedules = frame["k_schedule"] if "k_schedule" in frame else [None] * len(frame)
    picks = [_choice(k, s) for k, s in zip(frame["k"], schedules)]
    checks = hygiene.cell_checks(frame)
    frame = frame.assign(
        _group=frame.groupby(list(BEST_KEYS), dropna=False, sort=False).ngroup(),
        _choice=[str(p) for p in picks],
        _pick=picks,
        checks=checks,
        _distorted=[bool(hygiene.distorting(c)) for c in checks],
    )
    ranked = frame.sort_values(
        ["_group", "_distorted", "speedup", "k", "_choice"],
        ascending=[True, True, False, True, True],
        na_position="last",
    )
    best = ranked.drop_duplicates("_group")
    pairs = frame.merge(
        best[["_group", "_choice", "speedup", "speedup_lo", "speedup_hi", "repeats"]],
        on="_group",
        suffixes=("", "_best"),
    )
    figure = ["speedup", "speedup_lo", "speedup_hi"]
    verdict = ties.outcomes(
        [pairs[c].to_numpy(float) for c in figure] + [_dof(pairs["repeats"])],
        [pairs[f"{c}_best"].to_numpy(float) for c in figure] + [_dof(pairs["repeats_best"])],
    )
    tied = pairs[(pairs["_choice"] != pairs["_choice_best"]) & (verdict == ties.TIE) & ~pairs["_distorted"]]
    found = tied.groupby("_group")["_pick"].agg(  # fixed K in order, then schedules
        lambda ps: sorted(set(ps), key=lambda p: (isinstance(p, str), p if isinstance(p, int) else 0, str(p)))
    )
    above = pairs[pairs["_distorted"] & (pairs["speedup"] > pairs["speedup_best"])]
    above = above.sort_values("speedup", ascending=False).drop_duplicates("_group").set_index("_group")
    best = best.assign(tied_ks=[found.get(g, []) for g in best["_group"]])
    over = above.reindex(best["_group"])
    best = best.assign(
        flagged_k=over["_pick"].to_numpy(),
        flagged_speedup=over["speedup"].to_numpy(),
        flagged_speedup_lo=over["speedup_lo"].to_numpy(),
        flagged_speedup_hi=over["speedup_hi"].to_numpy(),
        flagged_checks=over["checks"].to_numpy(),
    )
    best = best.drop(columns=["_group", "_choice", "_pick", "_distorted"])
    return best.sort_values([*BEST_KEYS, "k"], na_position="first").reset_index(drop=True)


def _dof(repeats: pd.Series) -> np.ndarray:
    """The degrees of freedom of a cell's interval: its repeats less one (NaN where unknown or single)."""
    n = repeats.to_numpy(dtype=float, na_value=np.nan)
    return np.where(n > 1, n - 1, np.nan)
