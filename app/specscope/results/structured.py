"""Structured output as a dimension: each setup's speedup and acceptance free vs constrained, the
share of valid constrained answers, and the longest inter-token gap per request (stalls).

A constrained cell divides by the constrained baseline of its own run (``response_format`` is a
key of the baseline match), a free cell by the free one, so both speedups are honest; the two
sit side by side here. Functions take a ``Store`` and filters, like ``specscope.analysis.explore``.

    frame = by_response_format(Store(), {"dataset": ["json-extraction"]})
    gaps = request_gaps(Store(), {"dataset": ["json-extraction"]})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from specscope import formats
from specscope.results import identity
from specscope.results.identity import setup_label
from specscope.results.store import Store
from specscope.schema import BASELINE_METHOD, SETUP_KEYS

__all__ = ["by_response_format", "side_by_side", "request_gaps", "format_label"]

_COLUMNS = (
    "acceptance_length",
    "acceptance_rate",
    "valid_share",
    "max_itl_ms",
    "response_format",
    "output_throughput",
    "completed",
    "failed",
)
_PAIR_KEYS = ("run_id", *(k for k in SETUP_KEYS if k != "response_format"), "k", "k_schedule", "concurrency")


format_label = identity.format_name  # ``free``, ``constrained (json_schema)`` or ``not recorded``


def by_response_format(store: Store, filters: Mapping[str, Sequence] | None = None) -> pd.DataFrame:
    """One row per cell of the runs that measured a setup both free and constrained (repeats folded,
    speedup over its own format's baseline, 95% intervals), free before constrained, with ``setup``
    (the label without the format) and ``format`` (``free`` / ``constrained (json_schema)``)."""
    frame = store.speedup(filters, columns=_COLUMNS)
    frame = frame[frame["response_format"].notna()]
    both = (
        frame.assign(_c=frame["response_format"].map(formats.is_constrained))
        .groupby(list(_PAIR_KEYS), dropna=False)["_c"]
        .transform("nunique")
        == 2
    )
    frame = frame[both].copy()
    if frame.empty:
        return frame.assign(setup=pd.Series(dtype=object), format=pd.Series(dtype=object))
    records = frame.to_dict("records")
    frame["setup"] = [setup_label({**r, "response_format": None}) for r in records]
    frame["format"] = frame["response_format"].map(format_label)
    frame["_c"] = frame["response_format"].map(formats.is_constrained)
    frame["_sd"] = frame["method"] != BASELINE_METHOD  # baselines first
    order = ["_sd", "setup", "concurrency", "k", "run_id", "_c"]
    return frame.sort_values(order, na_position="first").drop(columns=["_c", "_sd"]).reset_index(drop=True)


def side_by_side(frame: pd.DataFrame) -> pd.DataFrame:
    """``by_response_format``'s rows paired: one row per setup, K and concurrency of a run, the free
    figures and the constrained ones in columns of their own (``free_speedup``, ``constrained_speedup``,
    ... and ``valid_share``, the constrained cell's)."""
    if frame.empty:
        return pd.DataFrame()
    keys = [c for c in (*_PAIR_KEYS, "setup") if c in frame.columns]
    figures = [
        "speedup",
        "speedup_lo",
        "speedup_hi",
        "speedup_interval",
        "acceptance_length",
        "max_itl_ms",
        "response_format",
    ]
    constrained = frame["response_format"].map(formats.is_constrained)
    free = frame[~constrained][keys + figures].add_prefix("free_").rename(columns={f"free_{k}": k for k in keys})
    bound = (
        frame[constrained][keys + figures + ["valid_share"]]
        .add_prefix("constrained_")
        .rename(columns={f"constrained_{k}": k for k in keys} | {"constrained_valid_share": "valid_share"})
    )
    return free.merge(bound, on=keys, how="inner").reset_index(drop=True)


def request_gaps(store: Store, filters: Mapping[str, Sequence] | None = None) -> pd.DataFrame:
    """Per request of the runs the filters select (those that recorded a response format): its
    method, K, concurrency, format, longest inter-token gap, output tokens, and whether its answer
    is valid (with the reason when not). Failed requests are left out."""
    where, params = store.where(filters)
    return store.query(
        f"""
        SELECT q.run_id, q.cell_id, q.method, q.k, q.concurrency, q.response_format, q.prompt_id,
               q.max_itl_ms, q.mean_itl_ms, q.output_tokens, q.valid, q.invalid_reason
        FROM requests q
        WHERE q.success AND q.response_format IS NOT NULL AND q.max_itl_ms IS NOT NULL
          AND q.run_id IN (SELECT DISTINCT r.run_id FROM results r WHERE {where})
        ORDER BY q.method, q.k, q.concurrency, q.response_format, q.prompt_id, q.cell_id""",
        params,
    )
