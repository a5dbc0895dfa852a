"""The Explorer's figure data: small frames aggregated in SQL from the results store.

A *setup* is one (source, model, draft_model, method, dataset, hardware); every figure
draws lines per setup, per concurrency or per K. Functions take a ``Store`` and the
filters ``{column: [values]}`` the page chose, and return DataFrames ready to plot.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from specscope.schema import BASELINE_METHOD
from specscope.store import Store

__all__ = ["SETUP_KEYS", "setup_label", "speedup_vs_k", "k_sweep_setups", "best_k", "acceptance_vs_k",
           "by_concurrency", "crossovers", "per_position", "filtered_rows", "to_csv_bytes",
           "to_parquet_bytes"]

SETUP_KEYS = ("source", "model", "draft_model", "method", "dataset", "hardware")
_KEYS = ", ".join(SETUP_KEYS)  # the setup columns in SQL
Filters = Mapping[str, Sequence] | None


def setup_label(row: Mapping) -> str:
    """A short name for a setup: ``model · method (draft) · dataset · hardware``."""
    model = str(row.get("model") or "?").split("/")[-1]
    method = row.get("method") or "?"
    draft = row.get("draft_model")
    if isinstance(draft, str) and draft:
        method = f"{method} ({draft.split('/')[-1]})"
    parts = [model, method, row.get("dataset"), row.get("hardware")]
    return " · ".join(str(p) for p in parts if isinstance(p, str) and p)


def _with_labels(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return frame.assign(setup=pd.Series(dtype=str))
    return frame.assign(setup=[setup_label(r) for r in frame[list(SETUP_KEYS)].to_dict("records")])


def speedup_vs_k(store: Store, filters: Filters = None) -> pd.DataFrame:
    """Mean speedup, acceptance length and throughput per (setup, concurrency, K); baseline rows left out."""
    sql, params = store.speedup_sql(filters, columns=["acceptance_length", "output_throughput"])
    frame = store.query(
        f"""SELECT {_KEYS}, concurrency, k, avg(speedup) AS speedup,
                   avg(acceptance_length) AS acceptance_length,
                   avg(output_throughput) AS output_throughput, count(*) AS runs
            FROM ({sql}) WHERE method <> '{BASELINE_METHOD}' AND speedup IS NOT NULL
            GROUP BY ALL ORDER BY {_KEYS}, concurrency, k""", params)
    return _with_labels(frame)


def k_sweep_setups(vs_k: pd.DataFrame) -> list[str]:
    """Setups measured at two or more K, best speedup first (the ones a speedup-vs-K plot can show)."""
    if vs_k.empty:
        return []
    summary = vs_k.groupby("setup", sort=False).agg(ks=("k", "nunique"), top=("speedup", "max"))
    summary = summary[summary["ks"] >= 2].sort_values("top", ascending=False)
    return summary.index.tolist()


def best_k(store: Store, filters: Filters = None) -> pd.DataFrame:
    """The best K per setup and concurrency (baseline rows kept, with speedup 1)."""
    return _with_labels(store.speedup(filters, best=True))


def acceptance_vs_k(store: Store, filters: Filters = None) -> pd.DataFrame:
    """Acceptance length per (setup, K): median, min and max over concurrency."""
    where, params = store.where(filters)
    frame = store.query(
        f"""SELECT {_KEYS}, k, median(acceptance_length) AS acceptance_length,
                   min(acceptance_length) AS al_min, max(acceptance_length) AS al_max,
                   count(DISTINCT concurrency) AS concurrencies
            FROM results r WHERE {where} AND acceptance_length IS NOT NULL
                 AND method <> '{BASELINE_METHOD}' AND coalesce(status, 'ok') = 'ok'
            GROUP BY ALL ORDER BY {_KEYS}, k""", params)
    return _with_labels(frame)


def by_concurrency(store: Store, filters: Filters = None) -> pd.DataFrame:
    """Best-K rows per setup and concurrency with throughput and p99 latencies, baseline included."""
    return best_k(store, filters).sort_values([*SETUP_KEYS, "concurrency"], na_position="first")


def crossovers(best: pd.DataFrame) -> pd.DataFrame:
    """Per speculative setup, the concurrency where best-K speedup first falls below 1.

    Interpolated on log2(concurrency) between the last point at or above 1 and the first
    below; ``measured_below`` is that first concurrency measured below 1.
    """
    rows = []
    spec = best[best["method"] != BASELINE_METHOD].dropna(subset=["speedup"])
    for setup, group in spec.groupby("setup", sort=False):
        group = group.sort_values("concurrency")
        conc, speed = group["concurrency"].to_numpy(float), group["speedup"].to_numpy(float)
        below = np.nonzero(speed < 1.0)[0]
        if below.size == 0:
            continue
        i = int(below[0])
        if i == 0:
            at = conc[0]
        else:
            x0, x1 = math.log2(conc[i - 1]), math.log2(conc[i])
            y0, y1 = speed[i - 1], speed[i]
            at = 2 ** (x0 + (1.0 - y0) * (x1 - x0) / (y1 - y0))
        rows.append({"setup": setup, "crossover_concurrency": at, "measured_below": conc[i],
                     "speedup_there": speed[i]})
    return pd.DataFrame(rows, columns=["setup", "crossover_concurrency", "measured_below", "speedup_there"])


def per_position(store: Store, filters: Filters = None) -> pd.DataFrame:
    """Per-position acceptance rates, one row per (setup, K, concurrency, position), where present."""
    where, params = store.where(filters)
    frame = store.query(
        f"""SELECT {_KEYS}, k, concurrency,
                   generate_subscripts(per_position_acceptance, 1) AS position,
                   unnest(per_position_acceptance) AS rate
            FROM results r WHERE {where} AND len(per_position_acceptance) > 0
                 AND coalesce(status, 'ok') = 'ok'
            ORDER BY {_KEYS}, k, concurrency, position""", params)
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
