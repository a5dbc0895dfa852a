"""The cells a step anatomy (``anatomy``) reads: result rows (one per repeat) with tokens per decode step, drafting
share and step time (TPOT x tokens per step), folded into one row per cell with the means and their 95% intervals."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from specscope import stats
from specscope.analysis.anatomy_figure import Figure
from specscope.engine.catalog import MATCH_DRAFTERS
from specscope.results import identity
from specscope.schema import BASELINE_METHOD

__all__ = ["CELL", "NEEDED", "cells"]

CELL = (
    "run_id",
    "source",
    "model",
    "draft_model",
    "method",
    "k",
    "k_schedule",
    "method_params",
    "hardware",
    "host",
    "vllm_version",
    "torch_version",
    "weights",
    "acceptance",
    "dataset",
    "response_format",
    "output_len",
    "temperature",
    "concurrency",
)


NEEDED = frozenset(
    {
        "mean_tpot_ms",
        "total_output_tokens",
        "completed",
        "accepted_tokens",
        "num_drafts",
        "draft_tokens",
        "acceptance_length",
        "run_id",
        "created_at",
        "model",
        "draft_model",
    }
)


def _mean(values: Sequence[float]) -> Figure:
    values = [float(v) for v in values if pd.notna(v)]
    found = stats.mean_interval(values)
    return Figure(found.estimate, found.half_width)


def _mean_of(values: np.ndarray) -> float:
    """The mean of the values that are not NaN (NaN where none is), as ``Series.mean`` gives it."""
    known = values[~np.isnan(values)]
    return float(known.mean()) if known.size else np.nan


def _per_row(raw: pd.DataFrame) -> pd.DataFrame:
    """Each measured row with ``tokens_per_step``, ``drafting_share`` and ``step_ms`` (TPOT x tokens per step)."""
    rows = raw.copy()
    decode = rows["total_output_tokens"].astype(float) - rows["completed"].astype(float)
    accepted = rows["accepted_tokens"].astype(float).where(rows["method"] != BASELINE_METHOD, 0.0)
    drafts = rows["num_drafts"].astype(float)
    # a step drafts once: more drafts than decode - accepted steps means a request's last step accepted tokens
    # past its output cap (counted as accepted, never output), so there the drafts count the steps
    steps = (decode - accepted).where(~(drafts > decode - accepted), drafts)
    counted = (steps > 0) & decode.notna() & accepted.notna()
    every_step = ~rows["method"].isin(MATCH_DRAFTERS)
    fallback = rows["acceptance_length"].astype(float).where(every_step)  # AL is per step where every step drafts
    rows["tokens_per_step"] = (decode / steps).where(counted, fallback)
    rows.loc[rows["method"] == BASELINE_METHOD, "tokens_per_step"] = 1.0
    share = (drafts / steps).where(counted).clip(0.0, 1.0)
    rows["drafting_share"] = share.where(share.notna(), np.where(every_step, 1.0, np.nan))
    rows.loc[rows["method"] == BASELINE_METHOD, "drafting_share"] = 0.0
    rows["step_ms"] = rows["mean_tpot_ms"].astype(float) * rows["tokens_per_step"]
    return rows


def cells(raw: pd.DataFrame) -> pd.DataFrame:
    """One row per cell (a run's rows differing only in ``repeat``): the means of ``step_ms``, ``mean_tpot_ms``,
    ``tokens_per_step``, ``drafting_share``, ``draft_len`` (draft tokens per drafting step), with
    ``step_half`` and ``tpot_half`` (their 95% half-widths) and ``repeats``."""
    ok = raw[raw["status"].fillna("ok") == "ok"] if "status" in raw else raw
    rows = _per_row(ok[[c for c in ok if c in NEEDED or c in CELL]]).dropna(subset=["step_ms"])
    figures = rows[
        ["step_ms", "mean_tpot_ms", "num_drafts", "tokens_per_step", "drafting_share", "draft_tokens"]
    ].astype(float)
    keys = identity.keyed(rows, CELL)[list(CELL)]
    cell_of: dict[tuple, list[int]] = {}  # grouped in plain Python: a pandas group costs more than these few rows
    for i, values in enumerate(keys.itertuples(index=False, name=None)):
        cell_of.setdefault(values, []).append(i)
    columns = {c: figures[c].to_numpy() for c in figures}
    out = []
    for values, at in cell_of.items():
        step, tpot = _mean(columns["step_ms"][at]), _mean(columns["mean_tpot_ms"][at])
        drafts = np.nansum(columns["num_drafts"][at])
        out.append(
            {
                **dict(zip(CELL, values)),
                "created_at": rows["created_at"].iloc[at].max(),
                "repeats": len(at),
                "step_ms": step.value,
                "step_half": step.half,
                "tpot_ms": tpot.value,
                "tpot_half": tpot.half,
                "tokens_per_step": _mean_of(columns["tokens_per_step"][at]),
                "drafting_share": _mean_of(columns["drafting_share"][at]),
                "draft_len": float(np.nansum(columns["draft_tokens"][at]) / drafts) if drafts > 0 else np.nan,
            }
        )
    return pd.DataFrame(
        out,
        columns=[
            *CELL,
            "created_at",
            "repeats",
            "step_ms",
            "step_half",
            "tpot_ms",
            "tpot_half",
            "tokens_per_step",
            "drafting_share",
            "draft_len",
        ],
    )
