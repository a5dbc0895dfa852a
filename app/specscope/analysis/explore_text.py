"""What the Explorer's figures say in words: the Best-K table as shown, each point's runs and checks, ties,
interval summaries, crossover captions and where the bundled results come from (``explore`` holds the
queries these read)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from specscope.analysis import intervals
from specscope.analysis.explore import OWN_FROM, with_point_means
from specscope.results import hygiene
from specscope.schema import BASELINE_METHOD

__all__ = [
    "tie_text",
    "checks_text",
    "passed_over_text",
    "point_runs_text",
    "point_label",
    "best_k_table",
    "interval_summary",
    "crossover_caption",
    "bundled_summary",
    "bundled_label",
]


def tie_text(row: Mapping) -> str:
    """Which other K the best K cannot be told apart from (``ties.outcome``)."""
    tied = row.get("tied_ks")
    if tied is None or (not isinstance(tied, (list, tuple, np.ndarray))) or len(tied) == 0:
        return ""
    names = [k if isinstance(k, str) else f"K {int(k)}" for k in tied]
    return "tied with " + ", ".join(names) + " (within noise)"


def checks_text(row: Mapping) -> str:
    """``⚠ suffix cache · few requests`` for the checks a row's cell fails (its ``checks``, else read from its
    ``hygiene``), '' where it passes them."""
    ids = row.get("checks")
    ids = list(ids) if isinstance(ids, (list, tuple, np.ndarray)) else hygiene.row_ids(row)
    return f"⚠ {hygiene.badges(ids)}" if ids else ""


def passed_over_text(row: Mapping) -> str:
    """``K=4 3.465× [1.2, 9.8] left out (⚠ suffix cache)``: the higher figure of a best-K row's group that a
    distorting check kept from being its best K (``folds.best_with_ties``); '' where there is none."""
    value = row.get("flagged_speedup")
    if value is None or pd.isna(value):
        return ""
    k = row.get("flagged_k")
    name = k if isinstance(k, str) else f"K={k:.0f}"
    figure = intervals.text(
        value, row.get("flagged_speedup_lo"), row.get("flagged_speedup_hi"), unit="×", why_none="1 run"
    )
    return f"{name} {figure} left out ({checks_text({'checks': row.get('flagged_checks')})})"


def point_runs_text(row: Mapping) -> str:
    """``run r1, one of 2 runs of this point (their mean 1.587× [0.679, 2.495])`` for a best-K row
    (``with_point_means``) taken from one of several runs; ``run r1`` otherwise."""
    run = f"run {row.get('run_id')}"
    n = row.get("point_runs")
    if n is None or pd.isna(n) or int(n) < 2:
        return run
    mean = intervals.value_text(
        {
            "speedup": row.get("point_speedup"),
            "speedup_lo": row.get("point_speedup_lo"),
            "speedup_hi": row.get("point_speedup_hi"),
        }
    )
    return f"{run}, one of {int(n)} runs of this point (their mean {mean})"


def point_label(row: Mapping) -> str:
    """``setup, K=4, concurrency 8``, leaving out a K or concurrency the source does not state."""
    parts = [str(row.get("setup"))]
    for name, value in (("K=", row.get("k")), ("concurrency ", row.get("concurrency"))):
        if value is not None and pd.notna(value):
            parts.append(f"{name}{value:.0f}")
    return ", ".join(parts)


def _blank(values, fmt: str = "{:.0f}") -> list[str]:
    """Numbers as text, blank where there is none (a grid would print "None")."""
    return ["" if v is None or pd.isna(v) else fmt.format(v) for v in values]


def best_k_table(best: pd.DataFrame, points: pd.DataFrame | None = None) -> pd.DataFrame:
    """The best-K table as shown: speculative rows with a speedup only, units in the headers,
    blank where a value was not measured or not stated; with ``points`` (``speedup_vs_k``), the run each
    best K comes from and, where several runs measured that point, their mean (``point_runs_text``)."""
    spec = best[(best["method"] != BASELINE_METHOD) & best["speedup"].notna()]
    if points is not None:
        spec = with_point_means(spec, points).set_axis(spec.index)
    records = spec.to_dict("records")
    return pd.DataFrame(
        {
            "setup": spec["setup"],
            "concurrency (requests)": _blank(spec["concurrency"]),
            "K (draft tokens)": [
                f"schedule {s} (max {k:.0f})" if isinstance(s, str) else _blank([k])[0]
                for k, s in zip(spec["k"], spec.get("k_schedule", [None] * len(spec)))
            ],
            "speedup (× baseline, 95%)": [intervals.value_text(r) for r in records],
            "tied (within noise)": [tie_text(r) for r in records],
            "checks": [checks_text(r) or "✓" for r in records],
            "a higher figure left out": [passed_over_text(r) for r in records],
            "acceptance length (tokens/step)": _blank(spec["acceptance_length"], "{:.2f}"),
            "output (tok/s, 95%)": [intervals.value_text(r, "output_throughput", "", short=True) for r in records],
            "p99 TPOT (ms)": _blank(spec["p99_tpot_ms"], "{:.1f}"),
            "repeats": _blank(spec["repeats"]),
            "measured by": [point_runs_text(r) for r in records],
            "baseline run": _blank(spec["baseline_run_id"], "{}"),
        }
    )


def interval_summary(frame: pd.DataFrame) -> str:
    """One sentence on how many shown points have an interval."""
    spec = frame[frame["method"] != BASELINE_METHOD].dropna(subset=["speedup"])
    if spec.empty:
        return ""
    bounded = int((spec["speedup_lo"].notna() & spec["speedup_hi"].notna()).sum())
    single = len(spec) - bounded
    if single == 0:
        return f"All {bounded} speedups carry a 95% interval."
    return (
        f"{bounded} of {len(spec)} speedups carry a 95% interval; the other {single} come from "
        "single runs (published or imported, or measured once), so they have none: treat "
        "differences of about 10% between them as noise."
    )


def crossover_caption(crossings: pd.DataFrame) -> str:
    """One sentence naming where each setup stops paying; empty when none crosses 1."""
    if crossings.empty:
        return ""
    return (
        "Where speculation stops paying: "
        + "; ".join(
            f"{row.setup} at concurrency ≈ {row.crossover_concurrency:.0f} (first measured below 1× at "
            f"{row.measured_below:.0f})"
            for row in crossings.itertuples()
        )
        + "."
    )


def bundled_summary(sources: pd.DataFrame) -> str:
    """One sentence: what the bundled results are, with each group's vLLM version and hardware."""
    if sources.empty:
        return ""

    def short(text: str, width: int = 50) -> str:  # the table below gives the full title
        return text if len(text) <= width else text[:width].rsplit(" ", 1)[0] + "…"

    parts = [
        f"{short(row['from'])} ({row['models']} on {row['hardware']}, vLLM {row['vLLM']})"
        for row in sources.drop_duplicates(["from", "models", "hardware", "vLLM"]).to_dict("records")
    ]
    return "Bundled results: " + "; ".join(parts) + "."


def bundled_label(sources: pd.DataFrame) -> str:
    """The bundled results in a few words, for the expander that holds ``bundled_summary`` and the table."""
    own = int((sources["from"] == OWN_FROM).sum())
    parts = [
        f"{own} of {OWN_FROM}" if own else "",
        f"{len(sources) - own} from published articles" if len(sources) > own else "",
    ]
    return f"Where the bundled results come from ({len(sources)} files: {' and '.join(p for p in parts if p)})"
