"""A cell's folded figures: its throughput and speedup intervals from sufficient statistics (count, mean,
variance, the store's SQL folds them), points combined over runs, and the best choice per group with its ties."""

from __future__ import annotations

import numpy as np
import pandas as pd

from specscope import stats, ties
from specscope.results import hygiene
from specscope.schema import BASELINE_METHOD, BEST_KEYS

__all__ = ["LEVEL", "BASE_STATS", "STATS", "speedup_intervals", "combined", "with_intervals", "best_with_ties"]

LEVEL = 0.95
BASE_STATS = ["_base_n", "_base_mean", "_base_var"]  # count, mean, variance of a baseline's pooled throughputs
STATS = ["_n", "_var", *BASE_STATS]  # with the cell's count and variance: its speedup's sufficient statistics


def speedup_intervals(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's Fieller interval from its sufficient statistics (cell over its baseline's pool)."""
    return stats.ratio_intervals(frame["output_throughput"], frame["_n"], frame["_var"], frame["_base_mean"],
                                 frame["_base_n"], frame["_base_var"], LEVEL, lower=0.0)


def combined(cells) -> tuple[float, float, float]:
    """The runs of one point (their cells' sufficient statistics) as one speedup and interval."""
    a, n_a, var_a, b, n_b, var_b = zip(*[(c["mean"], c["n"], c["var"], c["base_mean"], c["base_n"], c["base_var"])
                                         for c in cells])
    return stats.combined_ratios(a, n_a, var_a, b, n_b, var_b, level=LEVEL)


def with_intervals(frame: pd.DataFrame) -> pd.DataFrame:
    """Add the derived interval columns from the cells' sufficient statistics; drop those."""
    frame[STATS] = frame[STATS].astype(float)
    is_baseline = (frame["method"] == BASELINE_METHOD).to_numpy()
    low, high = stats.mean_intervals(frame["_n"], frame["output_throughput"], frame["_var"], LEVEL, lower=0.0)
    speed_low, speed_high, method = speedup_intervals(frame)
    base_rows = frame["_base_rows"].where(frame["_base_rows"] > 0).astype("Int64")  # none without samples
    out = frame.assign(
        output_throughput_lo=low, output_throughput_hi=high,
        speedup_lo=np.where(is_baseline, 1.0, speed_low), speedup_hi=np.where(is_baseline, 1.0, speed_high),
        speedup_interval=np.where(is_baseline, "baseline", method).astype(object),
        baseline_repeats=base_rows,
        speedup=np.where(is_baseline, 1.0, frame["output_throughput"] / frame["baseline_throughput"]))
    return out.drop(columns=[*STATS, "_base_rows"])


def _choice(k, schedule) -> int | str:
    """What a cell chose: its fixed K, or its schedule's text (``schedule 1-2:4,3-256:1``)."""
    if isinstance(schedule, str) and schedule:
        return f"schedule {schedule}"
    return -1 if pd.isna(k) else int(k)


def best_with_ties(frame: pd.DataFrame) -> pd.DataFrame:
    """The highest-speedup choice per BEST_KEYS group among the cells no distorting check flags (all of them
    where every one is flagged), with ``checks`` (the ids its cell fails, distorting or not), ``tied_ks``
    (the other clean choices, fixed K as numbers and schedules as ``schedule <text>``, that ``ties.outcome``
    cannot tell from it) and, where a flagged choice measured more, that choice as ``flagged_k``,
    ``flagged_speedup`` [``flagged_speedup_lo``, ``flagged_speedup_hi``] and ``flagged_checks``."""
    extra = {"tied_ks": object, "checks": object, "flagged_k": object, "flagged_speedup": float,
             "flagged_speedup_lo": float, "flagged_speedup_hi": float, "flagged_checks": object}
    if frame.empty:
        return frame.assign(**{name: pd.Series(dtype=kind) for name, kind in extra.items()})
    schedules = frame["k_schedule"] if "k_schedule" in frame else [None] * len(frame)
    picks = [_choice(k, s) for k, s in zip(frame["k"], schedules)]
    checks = hygiene.cell_checks(frame)
    frame = frame.assign(_group=frame.groupby(list(BEST_KEYS), dropna=False, sort=False).ngroup(),
                         _choice=[str(p) for p in picks], _pick=picks, checks=checks,
                         _distorted=[bool(hygiene.distorting(c)) for c in checks])
    ranked = frame.sort_values(["_group", "_distorted", "speedup", "k", "_choice"],
                               ascending=[True, True, False, True, True], na_position="last")
    best = ranked.drop_duplicates("_group")
    pairs = frame.merge(best[["_group", "_choice", "speedup", "speedup_lo", "speedup_hi", "repeats"]], on="_group",
                        suffixes=("", "_best"))
    figure = ["speedup", "speedup_lo", "speedup_hi"]
    verdict = ties.outcomes([pairs[c].to_numpy(float) for c in figure] + [_dof(pairs["repeats"])],
                            [pairs[f"{c}_best"].to_numpy(float) for c in figure] + [_dof(pairs["repeats_best"])])
    tied = pairs[(pairs["_choice"] != pairs["_choice_best"]) & (verdict == ties.TIE) & ~pairs["_distorted"]]
    found = tied.groupby("_group")["_pick"].agg(  # fixed K in order, then schedules
        lambda ps: sorted(set(ps), key=lambda p: (isinstance(p, str), p if isinstance(p, int) else 0, str(p))))
    above = pairs[pairs["_distorted"] & (pairs["speedup"] > pairs["speedup_best"])]
    above = above.sort_values("speedup", ascending=False).drop_duplicates("_group").set_index("_group")
    best = best.assign(tied_ks=[found.get(g, []) for g in best["_group"]])
    over = above.reindex(best["_group"])
    best = best.assign(flagged_k=over["_pick"].to_numpy(), flagged_speedup=over["speedup"].to_numpy(),
                       flagged_speedup_lo=over["speedup_lo"].to_numpy(),
                       flagged_speedup_hi=over["speedup_hi"].to_numpy(), flagged_checks=over["checks"].to_numpy())
    best = best.drop(columns=["_group", "_choice", "_pick", "_distorted"])
    return best.sort_values([*BEST_KEYS, "k"], na_position="first").reset_index(drop=True)


def _dof(repeats: pd.Series) -> np.ndarray:
    """The degrees of freedom of a cell's interval: its repeats less one (NaN where unknown or single)."""
    n = repeats.to_numpy(dtype=float, na_value=np.nan)
    return np.where(n > 1, n - 1, np.nan)
