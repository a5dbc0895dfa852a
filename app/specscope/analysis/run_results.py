"""The Runs page's queries: SpecScope's own sweeps in the results store, one run's cells and prompts.

Functions take a ``Store`` and return DataFrames ready to show, like ``explore`` does for the
Explorer. Speedups come from the store's baseline join, per prompt from the requests table.
"""

from __future__ import annotations

import pandas as pd

from specscope import formats
from specscope.analysis.per_prompt import VARIANT_SQL
from specscope.results.store import Store
from specscope.schema import BASELINE_METHOD

__all__ = ["CELL_COLUMNS", "CELL_TABLE_COLUMNS", "list_runs", "cell_table", "per_prompt"]

CELL_COLUMNS = (
    "method",
    "k",
    "concurrency",
    "status",
    "completed",
    "failed",
    "output_throughput",
    "mean_ttft_ms",
    "mean_tpot_ms",
    "mean_itl_ms",
    "p99_e2el_ms",
    "acceptance_rate",
    "acceptance_length",
    "error",
)
# what cell_table returns besides status and error (repeats and intervals come from the store)
CELL_TABLE_COLUMNS = (
    "method",
    "k",
    "concurrency",
    "k_schedule",
    "response_format",
    "vllm_version",
    "torch_version",
    "weights",
    "acceptance",
    "hardware",
    "repeats",
    "output_throughput",
    "output_throughput_lo",
    "output_throughput_hi",
    "speedup",
    "speedup_lo",
    "speedup_hi",
    "speedup_interval",
    "completed",
    "failed",
    "mean_ttft_ms",
    "mean_tpot_ms",
    "mean_itl_ms",
    "p99_e2el_ms",
    "acceptance_rate",
    "acceptance_length",
    "valid_share",
    "hygiene",
)


_CELL = CELL_TABLE_COLUMNS[:10]  # what tells a run's cells apart: method, K, concurrency, schedule, identity keys


def list_runs(db: Store) -> pd.DataFrame:
    """SpecScope's own runs in the store, newest first: run_id, finished_at, dataset, cells (each cell once,
    its repeats folded, as ``cell_table`` lists them) and rows (the measurements, repeats counted)."""
    return db.query(
        "SELECT run_id, max(created_at) AS finished_at, any_value(dataset) AS dataset, "
        "count(DISTINCT _cell) AS cells, count(*) AS rows FROM _results WHERE source = 'specscope' "
        "GROUP BY run_id ORDER BY finished_at DESC"
    )


def cell_table(db: Store, run_id: str) -> pd.DataFrame:
    """One line per cell of a run, repeats folded: mean throughput and speedup with their 95%
    intervals, repeats, hygiene flags; cells with no ok repeat appear as failed with the reason."""
    wanted = [c for c in CELL_COLUMNS if c not in ("status", "error")] + ["valid_share", "hygiene"]
    ok = db.speedup({"run_id": [run_id]}, columns=wanted)
    ok = ok[[*_CELL, *[c for c in CELL_TABLE_COLUMNS[len(_CELL) :] if c in ok.columns]]].copy()
    ok["status"], ok["error"] = "ok", None
    failed = db.query(
        f"""
        SELECT {", ".join(_CELL)}, any_value(status) AS status, any_value(error) AS error
        FROM results WHERE run_id = ? AND coalesce(status, 'ok') <> 'ok' GROUP BY ALL""",
        [run_id],
    )
    if not ok.empty:
        cell = list(_CELL)
        done = set(ok[cell].itertuples(index=False, name=None))
        keep = [key not in done for key in failed[cell].itertuples(index=False, name=None)]
        failed = failed.loc[pd.Series(keep, index=failed.index, dtype=bool)]
    frames = [f for f in (ok, failed) if not f.empty]
    if not frames:
        return pd.DataFrame(columns=[*CELL_TABLE_COLUMNS, "status", "error"])
    table = pd.concat(frames, ignore_index=True)
    table["_sd"] = table["method"] != BASELINE_METHOD  # the baseline first, free before constrained
    table["_c"] = table["response_format"].map(formats.is_constrained)
    return (
        table.sort_values(
            ["_sd", "method", "k", "k_schedule", "concurrency", "_c", "response_format", "vllm_version"],
            na_position="first",
        )
        .drop(columns=["_sd", "_c"])
        .reset_index(drop=True)
    )


def per_prompt(db: Store, run_id: str) -> pd.DataFrame:
    """Per prompt and cell: acceptance (and the per-request format it came from), mean E2EL, and
    speedup = baseline E2EL / this E2EL, the baseline of the same concurrency and cell variant
    (with the same response formats, on the same vLLM: ``specscope.analysis.per_prompt.PAIR_KEYS``)."""
    return db.query(
        f"""
        WITH r AS (
            SELECT method, k, concurrency, {VARIANT_SQL} AS variant, response_format, prompt_id,
                   avg(acceptance_rate) AS acceptance_rate,
                   avg(acceptance_length) AS acceptance_length, avg(e2el_ms) AS e2el_ms,
                   avg(output_tokens) AS output_tokens, any_value(spec_decode_format) AS spec_decode_format
            FROM requests q WHERE run_id = ? AND success GROUP BY ALL),
        b AS (SELECT concurrency, variant, prompt_id, e2el_ms AS baseline_e2el_ms FROM r
              WHERE method = '{BASELINE_METHOD}')
        SELECT r.*, b.baseline_e2el_ms / r.e2el_ms AS speedup
        FROM r LEFT JOIN b ON b.concurrency = r.concurrency AND b.prompt_id = r.prompt_id
             AND b.variant = r.variant
        ORDER BY r.method, r.k, r.concurrency, r.variant, r.prompt_id""",
        [run_id],
    )
