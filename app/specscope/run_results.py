"""The Runs page's queries: SpecScope's own sweeps in the results store, one run's cells and prompts.

Functions take a ``Store`` and return DataFrames ready to show, like ``explore`` does for the
Explorer. Speedups come from the store's baseline join, per prompt from the requests table.
"""

from __future__ import annotations

import pandas as pd

from specscope.store import Store

__all__ = ["CELL_COLUMNS", "list_runs", "cell_table", "per_prompt"]

CELL_COLUMNS = ("method", "k", "concurrency", "status", "completed", "failed", "output_throughput",
                "mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "p99_e2el_ms", "acceptance_rate",
                "acceptance_length", "error")


def list_runs(db: Store) -> pd.DataFrame:
    """SpecScope's own runs in the store, newest first: run_id, finished_at, dataset, cells."""
    return db.query("SELECT run_id, max(created_at) AS finished_at, any_value(dataset) AS dataset, "
                    "count(*) AS cells FROM results WHERE source = 'specscope' GROUP BY run_id "
                    "ORDER BY finished_at DESC")


def cell_table(db: Store, run_id: str) -> pd.DataFrame:
    """One line per cell of a run, failed cells included, with the speedup over its baseline."""
    columns = ", ".join(f'"{c}"' for c in CELL_COLUMNS)
    cells = db.query(f"SELECT {columns} FROM results WHERE run_id = ? ORDER BY method <> 'none', "
                     "method, k, concurrency", [run_id])
    speedups = db.speedup({"run_id": [run_id]}, columns=["concurrency"])[
        ["method", "k", "concurrency", "speedup"]]
    return cells.merge(speedups, on=["method", "k", "concurrency"], how="left")


def per_prompt(db: Store, run_id: str) -> pd.DataFrame:
    """Per prompt and cell: acceptance, mean E2EL, and speedup = baseline E2EL / this E2EL."""
    return db.query("""
        WITH r AS (
            SELECT method, k, concurrency, prompt_id, avg(acceptance_rate) AS acceptance_rate,
                   avg(acceptance_length) AS acceptance_length, avg(e2el_ms) AS e2el_ms,
                   avg(output_tokens) AS output_tokens
            FROM requests WHERE run_id = ? AND success GROUP BY ALL),
        b AS (SELECT concurrency, prompt_id, e2el_ms AS baseline_e2el_ms FROM r WHERE method = 'none')
        SELECT r.*, b.baseline_e2el_ms / r.e2el_ms AS speedup
        FROM r LEFT JOIN b USING (concurrency, prompt_id)
        ORDER BY r.method, r.k, r.concurrency, r.prompt_id""", [run_id])
