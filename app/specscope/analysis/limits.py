"""Against the limits: each cell's roofline share, oracle bound and side effects, and the Pareto view.

From the results store (``Store.speedup`` rows, repeats folded) and its per-request rows:

- ``cells``: each speculative cell with its speedup, its ceilings (``roofline.with_ceilings``: the
  roofline throughput and its share of it; K + 1) and its oracle bound (``oracle.cell_gain``:
  ``oracle_speedup`` = speedup x the gain of drafting only what is accepted), where they can be computed;
- ``side_effects``: per speculative cell against its baseline, TTFT mean and p99 (ratios), the
  prefix-cache hit rate of both, and the draft tokens rejected (in all, and per output token);
- ``pareto``: every cell's tokens/s per user (output throughput / concurrency) against tokens/s per
  GPU (output throughput / the GPUs of its hardware label, else its TP, else 1; a CPU counts as one),
  as ``vllm bench sweep plot_pareto`` computes them, with ``on_front``: no other cell of the same model,
  hardware and prompts does better on both.

A request's cell is matched to a result row by run, method, K, concurrency and the cell's variant
(constrained or free, vLLM version), as the per-prompt views pair them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from specscope.analysis import oracle
from specscope.analysis.per_prompt import VARIANT_SQL
from specscope.engine import provenance, roofline
from specscope.results.store import Store
from specscope.schema import BASELINE_KEYS, BASELINE_METHOD, FRONT_KEYS

__all__ = [
    "oracle_cells",
    "oracle_requests",
    "with_oracle",
    "cells",
    "side_effects",
    "pareto",
    "gpus_of",
    "SIDE_EFFECT_COLUMNS",
]

Filters = Mapping[str, Sequence] | None
_REQUEST_CELL = ("run_id", "method", "k", "concurrency", "variant", "cell")  # cell: its id, repeat left out
_SUCCESS = "q.success AND q.e2el_ms > q.ttft_ms AND q.output_tokens > 1"


def _spec_requests(store: Store, filters: Filters) -> pd.DataFrame:
    """Successful speculative requests with per-step counts, of the cells ``filters`` choose."""
    where, params = store.where(filters)
    return store.query(
        f"""
        SELECT q.run_id, q.method, q.k, q.concurrency, {VARIANT_SQL} AS variant,
               regexp_replace(q.cell_id, '-r[0-9]+$', '') AS cell, q.prompt_id, q.output_tokens,
               q.ttft_ms, q.e2el_ms, q.tpot_ms, q.per_step_accepted, q.per_step_drafted
        FROM requests q
        WHERE {_SUCCESS} AND q.method <> '{BASELINE_METHOD}' AND len(q.per_step_drafted) > 0
              AND EXISTS (SELECT 1 FROM results r WHERE r.run_id = q.run_id AND r.method = q.method
                          AND r.k IS NOT DISTINCT FROM q.k AND r.concurrency IS NOT DISTINCT FROM q.concurrency
                          AND coalesce(r.status, 'ok') = 'ok' AND {where})""",
        params,
    )


def _baseline_tpot(store: Store) -> pd.DataFrame:
    """Per run, concurrency and variant: the baseline's decode time per token (ms), over all its requests."""
    return store.query(f"""
        SELECT q.run_id, q.concurrency, {VARIANT_SQL} AS variant,
               sum(q.e2el_ms - q.ttft_ms) / sum(q.output_tokens - 1) AS baseline_tpot_ms
        FROM requests q WHERE {_SUCCESS} AND q.method = '{BASELINE_METHOD}' GROUP BY ALL""")


def oracle_cells(store: Store, filters: Filters = None) -> pd.DataFrame:
    """Per request cell (run, method, K, concurrency, variant) with per-step counts and a baseline: its
    ``oracle.cell_gain`` figures (``oracle_gain`` and what it rests on)."""
    requests = _spec_requests(store, filters)
    columns = [*_REQUEST_CELL, *oracle.ORACLE_COLUMNS, "tokens_per_step"]
    if requests.empty:
        return pd.DataFrame(columns=columns)
    base = _baseline_tpot(store)
    requests = requests.merge(base, on=["run_id", "concurrency", "variant"], how="inner")
    rows = []
    for key, group in requests.groupby(list(_REQUEST_CELL), dropna=False, sort=True):
        found = oracle.cell_gain(group, float(group["baseline_tpot_ms"].iloc[0]))
        if found is not None:
            rows.append(
                {
                    **dict(zip(_REQUEST_CELL, key)),
                    "oracle_gain": found["gain"],
                    "oracle_requests": found["requests"],
                    "step_ratio": found["step_ratio"],
                    "per_token_cost": found["per_token_cost"],
                    "wasted_per_step": found["wasted_per_step"],
                    "tokens_per_step": found["tokens_per_step"],
                }
            )
    return pd.DataFrame(rows, columns=columns)


def oracle_requests(store: Store, cell: Mapping) -> pd.DataFrame:
    """Each request of one oracle cell (a row of ``oracle_cells``): its decode speedup and oracle bound."""
    requests = _spec_requests(store, {"run_id": [cell["run_id"]]})
    chosen = requests[requests["cell"] == cell["cell"]]
    base = _baseline_tpot(store)
    base = base[
        (base["run_id"] == cell["run_id"])
        & (base["concurrency"] == cell["concurrency"])
        & (base["variant"] == cell["variant"])
    ]
    if chosen.empty or base.empty:
        return oracle.request_gains(chosen.iloc[:0], 1.0, 0.0)
    return oracle.request_gains(chosen, float(base["baseline_tpot_ms"].iloc[0]), float(cell["per_token_cost"]))


def _variant_fits(row: Mapping, variant: str, cell: str) -> bool:
    """Whether a result row is the request cell ``cell`` of ``variant`` (``-constrained``, ``-vllm0.31.0``;
    ``ngram-schedule-1-2k4_3-256k1-c1`` for a K schedule)."""
    if isinstance(row.get("k_schedule"), str) != ("-schedule-" in cell):
        return False
    constrained = row.get("response_format") not in (None, "none") and not pd.isna(row.get("response_format"))
    if constrained != ("-constrained" in variant):
        return False
    version = re.search(r"-vllm(.+)$", variant)
    return version is None or str(row.get("vllm_version") or "").startswith(version.group(1))


def with_oracle(rows: pd.DataFrame, found: pd.DataFrame) -> pd.DataFrame:
    """``rows`` (speedup rows) with ``oracle_gain``, ``oracle_speedup`` and the figures the gain rests on,
    where ``found`` (``oracle_cells``) has the row's cell; null elsewhere."""
    extra = [*oracle.ORACLE_COLUMNS, "tokens_per_step"]
    out = rows.assign(**{c: np.nan for c in extra})
    if found.empty or rows.empty:
        return out.assign(oracle_speedup=np.nan)
    keyed = found.groupby(["run_id", "method", "k", "concurrency"], dropna=False)
    for i, row in zip(out.index, out.to_dict("records")):
        key = (row["run_id"], row["method"], row["k"], row["concurrency"])
        if key not in keyed.groups:
            continue
        match = [
            r for r in keyed.get_group(key).to_dict("records") if _variant_fits(row, str(r["variant"]), str(r["cell"]))
        ]
        if len(match) == 1:
            out.loc[i, extra] = [match[0][c] for c in extra]
    return out.assign(oracle_speedup=out["speedup"].astype(float) * out["oracle_gain"].astype(float))


def cells(store: Store, filters: Filters = None) -> pd.DataFrame:
    """Every speculative cell with a speedup: its roofline ceiling and share, K + 1, and oracle bound."""
    rows = store.speedup(filters)
    spec = rows[(rows["method"] != BASELINE_METHOD) & rows["speedup"].notna()].reset_index(drop=True)
    return with_oracle(roofline.with_ceilings(spec), oracle_cells(store, filters))


SIDE_EFFECT_COLUMNS = (
    "ttft_mean_ratio",
    "ttft_p99_ratio",
    "baseline_prefix_cache_hit_rate",
    "wasted_tokens",
    "wasted_per_output_token",
    "tpot_mean_ratio",
)


def _baseline_rows(rows: pd.DataFrame) -> dict:
    """Baseline cells by (run, BASELINE_KEYS), nulls as None."""
    base = rows[rows["method"] == BASELINE_METHOD]
    return {
        tuple(None if pd.isna(v) else v for v in (r["run_id"], *(r[k] for k in BASELINE_KEYS))): r
        for r in base.to_dict("records")
    }


def side_effects(rows: pd.DataFrame) -> pd.DataFrame:
    """Speculative cells of ``rows`` (``Store.speedup``, baselines included) with their side effects
    against the baseline each divides by (``SIDE_EFFECT_COLUMNS``); null where either side lacks a figure."""
    bases = _baseline_rows(rows)
    spec = rows[(rows["method"] != BASELINE_METHOD) & rows["speedup"].notna()].reset_index(drop=True)
    out: dict[str, list[float]] = {c: [] for c in SIDE_EFFECT_COLUMNS}
    for row in spec.to_dict("records"):
        key = tuple(None if pd.isna(v) else v for v in (row["baseline_run_id"], *(row[k] for k in BASELINE_KEYS)))
        base = bases.get(key, {})

        def ratio(column: str, row: dict = row, base: dict = base) -> float:  # this iteration's pair
            mine, theirs = row.get(column, np.nan), base.get(column, np.nan)
            return float(mine) / float(theirs) if pd.notna(mine) and pd.notna(theirs) and theirs else np.nan

        wasted = (
            row["draft_tokens"] - row["accepted_tokens"]
            if pd.notna(row.get("draft_tokens")) and pd.notna(row.get("accepted_tokens"))
            else np.nan
        )
        out["ttft_mean_ratio"].append(ratio("mean_ttft_ms"))
        out["ttft_p99_ratio"].append(ratio("p99_ttft_ms"))
        out["tpot_mean_ratio"].append(ratio("mean_tpot_ms"))
        out["baseline_prefix_cache_hit_rate"].append(base.get("prefix_cache_hit_rate", np.nan))
        out["wasted_tokens"].append(wasted)
        total = row.get("total_output_tokens")
        out["wasted_per_output_token"].append(wasted / total if pd.notna(total) and total else np.nan)
    return spec.assign(
        **{c: pd.array(v, dtype="Float64") if c != "baseline_prefix_cache_hit_rate" else v for c, v in out.items()}
    )


def gpus_of(hardware, tp=None) -> int:
    """GPUs a cell ran on: the count of its hardware label (``2xH200``), else its TP, else 1."""
    return provenance.gpu_count(hardware) or (int(tp) if tp is not None and pd.notna(tp) and tp else 1)


def _group_names(keys: list[tuple], columns: list[str]) -> list[str]:
    """A name per FRONT_KEYS group: model · dataset · hardware, then the keys that tell apart the groups
    sharing those three (e.g. ``vllm version 0.26.0``)."""
    values = [dict(zip(columns, key)) for key in keys]
    base = [
        " · ".join(
            str(v)
            for v in (str(value.get("model")).split("/")[-1], value.get("dataset"), value.get("hardware"))
            if v is not None and not pd.isna(v)
        )
        for value in values
    ]
    names = []
    for name, value in zip(base, values):
        twins = [other for b, other in zip(base, values) if b == name]
        differ = [c for c in columns if len({repr(o.get(c)) for o in twins}) > 1]
        names.append(" · ".join([name, *(f"{c.replace('_', ' ')} {value[c]}" for c in differ)]))
    return names


def pareto(rows: pd.DataFrame) -> pd.DataFrame:
    """Every cell with a throughput and concurrency: ``tokens_per_user``, ``tokens_per_gpu``, ``gpus``, ``on_front``
    (not beaten on both by another cell of its FRONT_KEYS group; the baseline included) and ``front_group``
    (that group's name)."""
    frame = rows.dropna(subset=["output_throughput", "concurrency"]).reset_index(drop=True)
    gpus = [gpus_of(h, t) for h, t in zip(frame["hardware"], frame.get("tp", [None] * len(frame)))]
    frame = frame.assign(
        gpus=gpus,
        tokens_per_user=frame["output_throughput"] / frame["concurrency"],
        tokens_per_gpu=frame["output_throughput"] / np.asarray(gpus, dtype=float),
    )
    front, group_of = np.zeros(len(frame), dtype=bool), np.zeros(len(frame), dtype=int)
    columns = [k for k in FRONT_KEYS if k in frame]
    groups = list(frame.groupby(columns, dropna=False, sort=False))
    for g, (_, group) in enumerate(groups):
        user, gpu = group["tokens_per_user"].to_numpy(float), group["tokens_per_gpu"].to_numpy(float)
        for i, index in enumerate(group.index):
            beaten = (user >= user[i]) & (gpu >= gpu[i]) & ((user > user[i]) | (gpu > gpu[i]))
            front[index], group_of[index] = not beaten.any(), g
    names = np.array(_group_names([k if isinstance(k, tuple) else (k,) for k, _ in groups], columns), dtype=object)
    return frame.assign(on_front=front, front_group=names[group_of] if len(frame) else [])
