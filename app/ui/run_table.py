"""The Runs page's cell table as text: throughput and speedup with their 95% intervals, hygiene badges."""

from __future__ import annotations

import math

import pandas as pd

from specscope.analysis import intervals
from specscope.results import hygiene, identity
from specscope.schema import BASELINE_METHOD

__all__ = ["display_table", "hygiene_counts", "cells_text", "preview"]


def _number(value) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _once(row, value: str) -> bool:
    """A cell measured once: the table's repeats column says so, its figure stands alone (no interval)."""
    return (_number(row.get("repeats")) or 0) <= 1 and _number(row.get(f"{value}_lo")) is None


def _throughput(row) -> str:
    if _once(row, "output_throughput") and _number(row.get("output_throughput")) is not None:
        return f"{row['output_throughput']:.1f}"
    return intervals.value_text(row, "output_throughput", "")


def _speedup(row) -> str:
    if _number(row.get("speedup")) is None:
        return "–"
    if row.get("method") != BASELINE_METHOD and _once(row, "speedup") and row.get("speedup_interval") != "unbounded":
        return f"{row['speedup']:.3f}×"
    return intervals.value_text(row)


def _badges(row) -> str:
    ids = hygiene.row_ids(row)
    checked = isinstance(row.get("hygiene"), str)
    return ("⚠ " + hygiene.badges(ids)) if ids else "✓" if checked else "–"


def _identity(row, key: str) -> str:
    value = row.get(key)
    if key == "acceptance" and row.get("method") == BASELINE_METHOD:
        return "–"
    if key == "response_format":
        return identity.format_name(value)
    return value if isinstance(value, str) and value else "not recorded"


def _schedule(text) -> str:
    """A cell's K schedule (batch sizes -> K), or "fixed" where its server drafts one K."""
    return text if isinstance(text, str) and text else "fixed"


def display_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One readable line per cell: throughput and speedup [95% interval] (a cell measured once: its figure
    alone, the repeats column says why there is no interval), repeats, mean TTFT and TPOT, the checks it
    fails in a word or two; a column for each key that tells the run's cells apart besides method, K and
    concurrency (a K schedule: its text, "fixed" for the fixed-K cells; response format, vLLM, torch, weights,
    acceptance, hardware), so no two lines read alike;
    status and error only where a cell failed."""
    shown = identity.varying(
        cells, ("response_format", "vllm_version", "torch_version", "weights", "acceptance", "hardware")
    )
    scheduled = "k_schedule" in cells and cells["k_schedule"].notna().any()
    rows = []
    for row in cells.to_dict("records"):
        rows.append(
            {
                "method": row["method"],
                "K": int(row["k"]),
                **(
                    {"K schedule": "–" if row["method"] == BASELINE_METHOD else _schedule(row.get("k_schedule"))}
                    if scheduled
                    else {}
                ),
                "concurrency": int(row["concurrency"]),
                **{identity.COLUMN_NAMES[key]: _identity(row, key) for key in shown},
                "status": row.get("status") or "ok",
                "repeats": int(row["repeats"]) if _number(row.get("repeats")) is not None else 0,
                "tok/s [95%]": _throughput(row),
                "speedup [95%]": _speedup(row),
                "acceptance": _number(row.get("acceptance_rate")),
                "TTFT ms": _number(row.get("mean_ttft_ms")),
                "TPOT ms": _number(row.get("mean_tpot_ms")),
                "checks": _badges(row) if (row.get("status") or "ok") == "ok" else "–",
                "error": row.get("error") or "",
            }
        )
    table = pd.DataFrame(rows)
    if not table.empty and (table["status"] == "ok").all():  # status and error only where a cell failed
        table = table.drop(columns=["status", "error"])
    return table


def hygiene_counts(cells: pd.DataFrame) -> dict[str, int]:
    """Per check id: how many of the run's measured cells failed it (every check listed)."""
    counts = {check_id: 0 for check_id in hygiene.CHECKS}
    for row in cells.to_dict("records"):
        if (row.get("status") or "ok") == "ok":
            for check_id in hygiene.row_ids(row):
                counts[check_id] += 1
    return counts


def cells_text(run) -> str:
    """``6 cells, 18 measurements`` for a run of ``run_results.list_runs`` (its table's lines, and the
    measurements its repeats made); ``6 cells`` where each cell was measured once."""
    cells, rows = int(run["cells"]), int(run["rows"])
    return f"{cells} cell{'s' if cells != 1 else ''}" + (f", {rows} measurements" if rows != cells else "")


def preview(prompt_set) -> pd.DataFrame:
    """A prompt set's preview: id, line, turns, category, the response format's kind ("–": free) and the
    prompt; an output-tokens column only where a prompt sets its own (the sweep's length otherwise)."""
    rows = [
        {
            "id": p.prompt_id,
            "line": p.line,
            "turns": len(p.messages),
            "category": p.category or "–",
            "format": p.response_format.kind if p.response_format is not None else "–",
            "prompt": p.text[:300],
            "output tokens": p.output_tokens,
        }
        for p in prompt_set.prompts
    ]
    frame = pd.DataFrame(rows)
    if frame.empty or frame["output tokens"].isna().all():
        return frame.drop(columns="output tokens", errors="ignore")
    return frame.assign(**{"output tokens": ["–" if pd.isna(v) else str(int(v)) for v in frame["output tokens"]]})
