"""The Explorer's figure data: small frames aggregated from the results store.

A *setup* is one (source, model, draft_model, method, dataset, hardware, host, vLLM and torch
versions, dummy or real weights, synthetic or real acceptance); every figure
draws lines per setup, per concurrency or per K. Functions take a ``Store`` and the
filters ``{column: [values]}`` the page chose, and return DataFrames ready to plot, with the
95% intervals of ``Store.speedup`` (``speedup_lo``/``speedup_hi``; null for single runs).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from specscope import settings
from specscope.engine import provenance
from specscope.results import hygiene, identity
from specscope.results.identity import setup_label
from specscope.results.store import Store
from specscope.schema import BASELINE_METHOD, OWN_SOURCE, SETUP_KEYS

__all__ = [
    "best_point",
    "flagged_above",
    "distorted",
    "setup_label",
    "unmatched_setups",
    "headline",
    "speedup_vs_k",
    "point_runs",
    "with_point_means",
    "cells_with_points",
    "k_sweep_setups",
    "default_setups",
    "headline_setup",
    "landing_setups",
    "best_k",
    "acceptance_vs_k",
    "by_concurrency",
    "curves_vs_concurrency",
    "crossovers",
    "bundled_sources",
    "per_position",
    "filtered_rows",
    "to_csv_bytes",
    "to_parquet_bytes",
]

_KEYS = ", ".join(SETUP_KEYS)  # the setup columns in SQL
OWN_FROM = "SpecScope's own measurements"  # what ``bundled_sources`` says SpecScope's own files come from
Filters = Mapping[str, Sequence] | None
_MEANS = ["acceptance_length", "output_throughput", "valid_share", "hygiene"]  # over the runs of a point (the checks:
# their union)
_POINT = ["speedup", "speedup_lo", "speedup_hi", *_MEANS, "repeats", "runs"]  # a figure point's columns


def _with_labels(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return frame.assign(setup=pd.Series(dtype=str))
    keys = frame[list(SETUP_KEYS)]
    first = keys.drop_duplicates()  # each setup once, in the order ngroup numbers them
    labels = np.array(identity.unique_labels(first.to_dict("records")), dtype=object)
    return frame.assign(setup=labels[keys.groupby(list(SETUP_KEYS), dropna=False, sort=False).ngroup().to_numpy()])


def speedup_vs_k(store: Store, filters: Filters = None) -> pd.DataFrame:
    """Speedup with its 95% interval, acceptance length and throughput per (setup, concurrency, K).

    Baseline rows are left out. A point measured by one run keeps that run's interval; a
    point measured by several runs combines the runs' own speedups and spreads (``Store.speedup_points``).
    """
    keys = [*SETUP_KEYS, "concurrency", "k"]
    points = store.speedup_points(filters, _MEANS, fixed_k=True)
    return _with_labels(points.sort_values(keys, kind="stable").reset_index(drop=True)[[*keys, *_POINT]])


def curves_vs_concurrency(store: Store, filters: Filters = None) -> pd.DataFrame:
    """Speedup per (setup, curve, concurrency), a curve being a fixed K (``K=4``) or a schedule
    (``schedule 1-2:4,3-256:1``), for setups that measured a schedule; runs folded as in speedup_vs_k."""
    keys = [*SETUP_KEYS, "curve", "scheduled", "k_schedule", "concurrency", "k"]
    points = _with_labels(store.speedup_points(filters, _MEANS))
    points = points[points["setup"].isin(points.loc[points["k_schedule"].notna(), "setup"])]
    if points.empty:
        return pd.DataFrame(columns=[*keys, *_POINT, "setup"])
    points = points.assign(
        scheduled=points["k_schedule"].notna(),
        curve=[
            f"schedule {s}" if isinstance(s, str) else f"K={int(k)}" for k, s in zip(points["k"], points["k_schedule"])
        ],
    )
    return _with_labels(points.sort_values(keys, kind="stable").reset_index(drop=True)[[*keys, *_POINT]])


def point_runs(store: Store, filters: Filters = None) -> pd.DataFrame:
    """Each run's own figure of the points that fold two or more runs (``runs`` > 1 in ``speedup_vs_k``):
    one row per (setup, concurrency, K, run) with that run's speedup [95% interval], repeats and the run
    whose baseline it divides by, so a "mean of 2 runs" can be opened into its runs."""
    keys = [*SETUP_KEYS, "concurrency", "k"]
    columns = [*keys, "run_id", "speedup", "speedup_lo", "speedup_hi", "speedup_interval", "repeats", "baseline_run_id"]
    cells = store.speedup(filters, columns=["output_throughput"])
    cells = cells[(cells["method"] != BASELINE_METHOD) & cells["k_schedule"].isna() & cells["speedup"].notna()]
    if cells.empty:
        return _with_labels(pd.DataFrame(columns=columns))
    folded = cells.groupby(keys, dropna=False)["run_id"].transform("nunique") > 1
    cells = cells[folded].sort_values([*keys, "run_id"], kind="stable").reset_index(drop=True)
    return _with_labels(cells[columns])


def distorted(frame: pd.DataFrame) -> np.ndarray:
    """Which rows (cells, points or best-K rows) fail a check that distorts their figure (``hygiene``)."""
    return np.array([bool(hygiene.distorting(ids)) for ids in hygiene.cell_checks(frame)], dtype=bool)


def k_sweep_setups(vs_k: pd.DataFrame) -> list[str]:
    """Setups measured at two or more K, best clean speedup first (the ones a speedup-vs-K plot can show): a
    point whose cells a distorting check flags ranks nothing, so a setup flagged throughout comes last."""
    if vs_k.empty:
        return []
    clean = vs_k["speedup"].where(~distorted(vs_k))
    summary = (
        vs_k.assign(_clean=clean)
        .groupby("setup", sort=False)
        .agg(ks=("k", "nunique"), top=("_clean", "max"), flagged_top=("speedup", "max"))
    )
    summary = summary[summary["ks"] >= 2].sort_values(["top", "flagged_top"], ascending=False, na_position="last")
    return summary.index.tolist()


def default_setups(vs_k: pd.DataFrame, count: int = 1) -> list[str]:
    """The landing figure's setups: ``count`` of ``k_sweep_setups`` (one: the chart under the headline),
    a real drafter's before one that measured the engine only (the headline leaves those out too), best
    first, one per setup told apart by more than its vLLM or torch version (the versions view compares
    those), the best of each hardware before a second of any (a CPU demo run beside GPU results), then
    the rest if too few."""
    ranked = k_sweep_setups(vs_k)
    setups = vs_k.drop_duplicates("setup").set_index("setup")
    engine = provenance.engine_only(setups)
    ranked = [setup for setup in ranked if not engine[setup]] + [setup for setup in ranked if engine[setup]]
    family = setups[[key for key in SETUP_KEYS if key not in ("vllm_version", "torch_version")]].apply(
        lambda row: repr(tuple(row)), axis=1
    )
    first: dict[str, str] = {}  # family -> its best setup
    for setup in ranked:
        first.setdefault(family[setup], setup)
    per_hardware: dict[str, str] = {}  # hardware -> its best family
    for setup in first.values():
        per_hardware.setdefault(setups.at[setup, "hardware"], setup)
    chosen = list(dict.fromkeys([*per_hardware.values(), *first.values()]))
    return (chosen + [setup for setup in ranked if setup not in chosen])[:count]


def _matching(frame: pd.DataFrame, row: Mapping, keys: Sequence[str]) -> np.ndarray:
    """Which of ``frame``'s rows equal ``row`` in every one of ``keys`` (a missing value matching a missing one)."""
    same = np.ones(len(frame), dtype=bool)
    for key in keys:
        value = row.get(key)
        missing = value is None or (not isinstance(value, str) and pd.isna(value))
        same &= (frame[key].isna() if missing else frame[key] == value).to_numpy()
    return same


def headline_setup(vs_k: pd.DataFrame, top: Mapping | None) -> tuple[str | None, int, bool]:
    """Where the headline's point is drawn: its setup's label in ``vs_k`` (the speedup-vs-K points), how many
    K that setup measured, and whether the same setup was measured on another vLLM version (the versions
    section draws it there). (None, 0, False) without a point or where ``vs_k`` lacks its setup."""
    if top is None:
        return None, 0, False
    same = _matching(vs_k, top, SETUP_KEYS)
    if not same.any():
        return None, 0, False
    rows = vs_k[same]
    family = _matching(vs_k, top, [key for key in SETUP_KEYS if key not in ("vllm_version", "torch_version")])
    other_version = bool((family & (vs_k["vllm_version"] != top.get("vllm_version")).to_numpy()).any())
    return str(rows["setup"].iloc[0]), int(rows["k"].nunique()), other_version


def landing_setups(vs_k: pd.DataFrame, top: Mapping | None) -> list[str]:
    """The landing figure's setup: the headline's, where it was measured at two or more K (so the number the
    headline names is in the figure under it), else ``default_setups``."""
    label, ks, _ = headline_setup(vs_k, top)
    return [label] if label is not None and ks >= 2 else default_setups(vs_k)


def best_k(store: Store, filters: Filters = None) -> pd.DataFrame:
    """The best K per setup and concurrency (baseline rows kept, at 1), with ``tied_ks``."""
    return _with_labels(store.speedup(filters, best=True))


def with_point_means(best: pd.DataFrame, points: pd.DataFrame) -> pd.DataFrame:
    """``best`` (one run's cell per row) with what every run of its point measured (``points`` from
    ``speedup_vs_k``): ``point_runs`` (how many runs measured that setup, concurrency and K) and, where
    several did, their mean ``point_speedup`` [``point_speedup_lo``, ``point_speedup_hi``]; so a best K
    taken from one of several runs says so. A K schedule's rows get none."""
    keys = [*SETUP_KEYS, "concurrency", "k"]
    folded = points[[*keys, "runs", "speedup", "speedup_lo", "speedup_hi"]].rename(
        columns={
            "runs": "point_runs",
            "speedup": "point_speedup",
            "speedup_lo": "point_speedup_lo",
            "speedup_hi": "point_speedup_hi",
        }
    )
    out = best.merge(folded, on=keys, how="left")
    fixed = out["k_schedule"].isna() if "k_schedule" in out else True
    out["point_runs"] = out["point_runs"].where(fixed).astype("Int64")
    return out


def cells_with_points(store: Store, filters: Filters = None) -> pd.DataFrame:
    """Every cell (``Store.speedup``) with its point's figure (``with_point_means``): what the advice fits, so
    a K measured by several runs reads there the figure every view shows for it. The point's figures are kept to
    12 decimals: DuckDB's parallel sums move their last bits when another run lands, and a family's cached fit
    is kept on the digest of its rows."""
    out = with_point_means(store.speedup(filters), speedup_vs_k(store, filters))
    figures = ["point_speedup", "point_speedup_lo", "point_speedup_hi"]
    return out.assign(**{c: out[c].round(12) for c in figures})


def unmatched_setups(best: pd.DataFrame) -> list[str]:
    """Speculative setups none of whose points has a matching baseline (so no speedup at all)."""
    spec = best[best["method"] != BASELINE_METHOD]
    has = spec.groupby("setup", sort=True)["speedup"].apply(lambda s: s.notna().any())
    return has[~has].index.tolist()


def headline(best: pd.DataFrame) -> dict[str, int]:
    """Counts for the page header: speculative setups with a speedup, and how many of them are
    slower than their baseline (best K below 1×) at one or more measured operating points."""
    spec = best[(best["method"] != BASELINE_METHOD) & best["speedup"].notna()]
    slower = spec[spec["speedup"] < 1.0]["setup"].nunique()
    return {
        "setups": int(spec["setup"].nunique()),
        "slower": int(slower),
        "baselines": int(best[best["method"] == BASELINE_METHOD]["setup"].nunique()),
    }


def _drafters(best: pd.DataFrame) -> pd.DataFrame:
    """Real drafters' rows with a speedup (step-cost calibrations and engine-only runs accept drafts
    synthetically), and whether a distorting check flags each (``_flagged``)."""
    spec = best[(best["method"] != BASELINE_METHOD) & ~provenance.engine_only(best)].dropna(subset=["speedup"])
    return spec.assign(_flagged=distorted(spec))


def best_point(best: pd.DataFrame) -> pd.Series | None:
    """The highest speedup of a real drafter whose cell no distorting check flags (``best`` already holds
    each group's clean K where it has one); where every one is flagged, the highest of them (its
    ``hygiene.row_ids`` then say which)."""
    spec = _drafters(best)
    clean = spec[~spec["_flagged"]]
    spec = clean if not clean.empty else spec
    return None if spec.empty else spec.loc[spec["speedup"].idxmax()].drop("_flagged")


def flagged_above(best: pd.DataFrame, top: pd.Series | None) -> pd.Series | None:
    """The highest real drafter's figure above ``top`` that the clean rule passed over, as a best-K row (its
    K, speedup, interval and ``checks``): a group's flagged K above its clean one (``flagged_*``), or a group
    flagged throughout; None where there is none."""
    spec = _drafters(best)
    if spec.empty:
        return None
    floor = top["speedup"] if top is not None else -1.0
    above = spec[spec["_flagged"]]
    if "flagged_speedup" in spec:  # a group's flagged K above its clean best, as a row of its own
        moved = spec[spec["flagged_speedup"].notna()]
        moved = moved.assign(
            k=[k if not isinstance(k, str) else np.nan for k in moved["flagged_k"]],
            speedup=moved["flagged_speedup"],
            speedup_lo=moved["flagged_speedup_lo"],
            speedup_hi=moved["flagged_speedup_hi"],
            checks=moved["flagged_checks"],
            hygiene=[",".join(c) for c in moved["flagged_checks"]],
        )
        above = pd.concat([above, moved])
    above = above[above["speedup"] > floor]
    return None if above.empty else above.loc[above["speedup"].idxmax()].drop("_flagged")


def acceptance_vs_k(store: Store, filters: Filters = None) -> pd.DataFrame:
    """Acceptance length per (setup, K): median, min and max over concurrency."""
    return _with_labels(store.acceptance_by_k(filters))


def by_concurrency(store: Store, filters: Filters = None) -> pd.DataFrame:
    """Best-K rows per setup and concurrency with throughput and p99 latencies, baseline included."""
    return best_k(store, filters).sort_values([*SETUP_KEYS, "concurrency"], na_position="first")


def crossovers(best: pd.DataFrame) -> pd.DataFrame:
    """Per speculative setup, the concurrency where best-K speedup falls from at or above 1 to below 1.

    Interpolated on log2(concurrency) between the last point at or above 1 and the first
    below; ``measured_below`` is that first concurrency measured below 1. A setup below 1 from
    its lowest concurrency, or with points of unknown concurrency only, has no crossover.
    """
    rows = []
    spec = best[best["method"] != BASELINE_METHOD].dropna(subset=["speedup", "concurrency"])
    for setup, group in spec.groupby("setup", sort=False):
        group = group.sort_values("concurrency")
        conc, speed = group["concurrency"].to_numpy(float), group["speedup"].to_numpy(float)
        below = np.nonzero(speed < 1.0)[0]
        if below.size == 0 or below[0] == 0:
            continue
        i = int(below[0])
        x0, x1 = math.log2(conc[i - 1]), math.log2(conc[i])
        y0, y1 = speed[i - 1], speed[i]
        at = 2 ** (x0 + (1.0 - y0) * (x1 - x0) / (y1 - y0))
        rows.append({"setup": setup, "crossover_concurrency": at, "measured_below": conc[i], "speedup_there": speed[i]})
    return pd.DataFrame(rows, columns=["setup", "crossover_concurrency", "measured_below", "speedup_there"])


def bundled_sources(store: Store) -> pd.DataFrame:
    """Where each bundled results file comes from: the article (or SpecScope's own runs), its
    models, hardware, vLLM version, datasets and row count; one row per bundled file."""
    folder = settings.bundled_data_dir()
    run_ids = sorted(p.stem for p in (folder / "results").glob("*.parquet"))
    columns = ["source", "from", "models", "hardware", "vLLM", "datasets", "rows"]
    if not run_ids:
        return pd.DataFrame(columns=columns)
    frame = store.query(
        f"""SELECT run_id, any_value(source) AS source,
                   string_agg(DISTINCT split_part(model, '/', -1), ', ' ORDER BY split_part(model, '/', -1)) AS models,
                   string_agg(DISTINCT hardware, ', ' ORDER BY hardware) AS hardware,
                   string_agg(DISTINCT vllm_version, ', ' ORDER BY vllm_version) AS vllm,
                   string_agg(DISTINCT dataset, ', ' ORDER BY dataset) AS datasets, count(*) AS rows
            FROM results WHERE run_id IN ({", ".join("?" * len(run_ids))}) GROUP BY run_id ORDER BY run_id""",
        run_ids,
    )
    titles = {}
    path = folder / "sources" / "articles.csv"
    if path.exists():
        with open(path, newline="", encoding="utf-8") as fh:
            titles = {row["source"]: row["title"] for row in csv.DictReader(fh)}
    return pd.DataFrame(
        {
            "source": frame["run_id"],
            "from": [
                f"article: {titles[s]}" if s in titles else OWN_FROM if s == OWN_SOURCE else s for s in frame["source"]
            ],
            "models": frame["models"],
            "hardware": frame["hardware"],
            "vLLM": frame["vllm"].fillna("not stated"),
            "datasets": frame["datasets"].fillna("not stated"),
            "rows": frame["rows"],
        },
        columns=columns,
    )


def per_position(store: Store, filters: Filters = None) -> pd.DataFrame:
    """Per-position acceptance rates, one row per (setup, K, concurrency, position), where present."""
    where, params = store.where(filters)
    frame = store.query(
        f"""SELECT {_KEYS}, k, concurrency,
                   generate_subscripts(per_position_acceptance, 1) AS position,
                   unnest(per_position_acceptance) AS rate
            FROM results r WHERE {where} AND len(per_position_acceptance) > 0
                 AND coalesce(status, 'ok') = 'ok'
            ORDER BY {_KEYS}, k, concurrency, position""",
        params,
    )
    return _with_labels(frame)


def filtered_rows(store: Store, filters: Filters = None) -> pd.DataFrame:
    """Every canonical column plus speedup, for download."""
    return store.speedup(filters)


def to_csv_bytes(frame: pd.DataFrame) -> bytes:
    """A frame as CSV bytes, for a download button."""
    return frame.to_csv(index=False).encode()


def to_parquet_bytes(frame: pd.DataFrame) -> bytes:
    """A frame as Parquet bytes, for a download button."""
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()
