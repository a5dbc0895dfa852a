"""The Runs page's cell table as text: mean ± 95% interval, speedup interval, hygiene badges."""

from __future__ import annotations

import math

import pandas as pd

from specscope import hygiene

__all__ = ["display_table", "hygiene_counts", "NO_INTERVAL"]

NO_INTERVAL = "1 run: no interval"


def _number(value) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _throughput(row) -> str:
    mean, low, high = (_number(row.get(c)) for c in ("output_throughput", "output_throughput_lo",
                                                     "output_throughput_hi"))
    if mean is None:
        return "–"
    if low is None or high is None:
        return f"{mean:.1f} ({NO_INTERVAL})"
    return f"{mean:.1f} ± {(high - low) / 2:.1f}"


def _speedup(row) -> str:
    value, low, high = (_number(row.get(c)) for c in ("speedup", "speedup_lo", "speedup_hi"))
    if value is None:
        return "–"
    if row.get("method") == "none":
        return f"{value:.3f} (baseline)"
    if low is not None and high is not None:
        return f"{value:.3f} [{low:.3f}, {high:.3f}]"
    if row.get("speedup_interval") == "unbounded":
        return f"{value:.3f} (interval unbounded: baseline too noisy)"
    return f"{value:.3f} ({NO_INTERVAL})"


def _badges(text) -> str:
    ids = hygiene.flagged_ids(text if isinstance(text, str) else None)
    return " · ".join(f"⚠ {hygiene.CHECKS[i].title}" for i in ids) or ("✓" if isinstance(text, str) else "–")


def display_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One readable line per cell: throughput ± half-width, speedup [95%], repeats, checks."""
    rows = []
    for row in cells.to_dict("records"):
        rows.append({
            "method": row["method"], "K": int(row["k"]), "concurrency": int(row["concurrency"]),
            "status": row.get("status") or "ok",
            "repeats": int(row["repeats"]) if _number(row.get("repeats")) is not None else 0,
            "tok/s (mean ± 95%)": _throughput(row), "speedup [95%]": _speedup(row),
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
