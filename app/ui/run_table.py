"""The Runs page's cell table as text: throughput and speedup with their 95% intervals, hygiene badges."""

from __future__ import annotations

import math

import pandas as pd

from specscope import hygiene, identity, intervals
from specscope.schema import BASELINE_METHOD

__all__ = ["display_table", "hygiene_counts"]


def _number(value) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _throughput(row) -> str:
    return intervals.row_text(row, "output_throughput", "")


def _speedup(row) -> str:
    return intervals.row_text(row) if _number(row.get("speedup")) is not None else "–"


def _badges(text) -> str:
    ids = hygiene.flagged_ids(text if isinstance(text, str) else None)
    return " · ".join(f"⚠ {hygiene.CHECKS[i].title}" for i in ids) or ("✓" if isinstance(text, str) else "–")


def _identity(row, key: str) -> str:
    value = row.get(key)
    if key == "acceptance" and row.get("method") == BASELINE_METHOD:
        return "–"
    if key == "response_format":
        return identity.format_name(value)
    return value if isinstance(value, str) and value else "not recorded"


def display_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One readable line per cell: throughput and speedup [95% interval], repeats, checks; a column for
    each key that tells the run's cells apart besides method, K and concurrency (response format, vLLM,
    torch, weights, acceptance, hardware), so no two lines read alike."""
    shown = identity.varying(cells, ("response_format", "vllm_version", "torch_version", "weights", "acceptance",
                                     "hardware"))
    rows = []
    for row in cells.to_dict("records"):
        rows.append({
            "method": row["method"], "K": int(row["k"]), "concurrency": int(row["concurrency"]),
            **{identity.COLUMN_NAMES[key]: _identity(row, key) for key in shown},
            "status": row.get("status") or "ok",
            "repeats": int(row["repeats"]) if _number(row.get("repeats")) is not None else 0,
            "tok/s [95%]": _throughput(row), "speedup [95%]": _speedup(row),
            "acceptance": _number(row.get("acceptance_rate")),
            "mean TTFT ms": _number(row.get("mean_ttft_ms")), "mean TPOT ms": _number(row.get("mean_tpot_ms")),
            "checks": _badges(row.get("hygiene")) if (row.get("status") or "ok") == "ok" else "–",
            "error": row.get("error") or "",
        })
    return pd.DataFrame(rows)


def hygiene_counts(cells: pd.DataFrame) -> dict[str, int]:
    """Per check id: how many of the run's measured cells failed it (every check listed)."""
    counts = {check_id: 0 for check_id in hygiene.CHECKS}
    for text in cells.get("hygiene", pd.Series(dtype=object)):
        for check_id in hygiene.flagged_ids(text if isinstance(text, str) else None):
            counts[check_id] += 1
    return counts
