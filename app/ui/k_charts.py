"""The Explorer's first figure, speedup against K, drawn with Vega-Lite (Altair).

It is the one figure on the landing page, and Streamlit's Vega-Lite renderer is a sixth of the
Plotly bundle the other figures load when their tab is opened. One chart per setup (the page
lays them out two abreast), a line per concurrency coloured alike in every chart, 95% intervals
as bars, and the no-gain line at 1. Vega draws names as text, never as HTML.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from specscope.explore import interval_text
from ui.chart_style import PALETTE, k_axis, no_gain

__all__ = ["EMPTY", "speedup_vs_k", "combined", "runs_table", "RUNS_CAPTION"]

EMPTY = "Choose a setup measured at two or more K."
TITLE = "Speedup vs K (a line per concurrency; bars: 95% interval)"
RUNS_CAPTION = ("A point measured by several runs is their mean with a t-interval over the runs; below, each "
                "run's own figure over its own baseline.")
# Hover fields beyond K, speedup and concurrency: (column in the chart's data, label)
_TOOLTIP = [("speedup_95", "speedup [95%]"), ("acceptance_length", "acceptance length"),
            ("throughput_95", "output tok/s"), ("repeats", "repeats"), ("runs", "runs"),
            ("baseline_run_id", "baseline run")]


def _points(frame: pd.DataFrame) -> pd.DataFrame:
    """Only the columns drawn or hovered, interval texts included, under plain field names."""
    records = frame.to_dict("records")
    out = frame.assign(concurrency=frame["concurrency"].astype(int), speedup_95=[interval_text(r) for r in records])
    if "output_throughput_lo" in frame.columns:
        out["throughput_95"] = [interval_text(r, "output_throughput", " tok/s") for r in records]
    elif "output_throughput" in frame.columns:  # a mean without its interval: no "single run" claim
        out["throughput_95"] = [f"{v:.1f}" if pd.notna(v) else "—" for v in frame["output_throughput"]]
    keep = ["k", "speedup", "speedup_lo", "speedup_hi", "concurrency", *(c for c, _ in _TOOLTIP)]
    return out[[c for c in keep if c in out.columns]].sort_values(["concurrency", "k"])


def _chart(points: pd.DataFrame, setup: str, colours: alt.Scale) -> alt.LayerChart:
    x = k_axis()
    color = alt.Color("concurrency:O", scale=colours, title="concurrency")
    tooltip = [alt.Tooltip("concurrency:O"), alt.Tooltip("k:Q", title="K"),
               *(alt.Tooltip(f"{c}:N", title=t) for c, t in _TOOLTIP if c in points.columns)]
    line = alt.Chart(points).mark_line(point=alt.OverlayMarkDef(filled=True, size=55)).encode(
        x=x, y=alt.Y("speedup:Q", title="speedup ×", scale=alt.Scale(zero=False)), color=color, tooltip=tooltip)
    layers = [no_gain(), line]
    bounded = points.dropna(subset=["speedup_lo", "speedup_hi"]) if "speedup_lo" in points.columns else points[:0]
    if not bounded.empty:
        layers.insert(1, alt.Chart(bounded).mark_errorbar(ticks=True, thickness=1.2).encode(
            x=x, y=alt.Y("speedup_lo:Q", title="speedup ×"), y2="speedup_hi:Q", color=color))
    return alt.layer(*layers).properties(title=alt.Title(_title_lines(setup), fontSize=13, anchor="start"),
                                         height=320)


def _title_lines(setup: str) -> str | list[str]:
    """A long setup name over two lines, split between its `` · `` parts (Vega cuts a long line)."""
    parts = setup.split(" · ")
    if len(setup) <= 48 or len(parts) < 2:
        return setup
    cut = min(range(1, len(parts)), key=lambda i: abs(len(" · ".join(parts[:i])) - len(setup) / 2))
    return [" · ".join(parts[:cut]), " · ".join(parts[cut:])]


def speedup_vs_k(frame: pd.DataFrame, setups: list[str]) -> list[tuple[str, alt.LayerChart]]:
    """(setup, its chart) for each chosen setup with points; none when nothing is left to draw."""
    frame = frame[frame["setup"].isin(setups)].dropna(subset=["k", "speedup", "concurrency"])
    concurrencies = sorted(int(c) for c in frame["concurrency"].unique())
    colours = alt.Scale(domain=concurrencies, range=[PALETTE[j % len(PALETTE)] for j in range(len(concurrencies))])
    return [(setup, _chart(_points(frame[frame["setup"] == setup]), setup, colours))
            for setup in setups if (frame["setup"] == setup).any()]


def combined(charts: list[tuple[str, alt.LayerChart]]) -> alt.ConcatChart:
    """Every setup's chart in one figure, two abreast, titled (what the download holds)."""
    return alt.concat(*(chart for _, chart in charts), columns=2).properties(title=TITLE)


def runs_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Each run's own figure of the points folded over several runs (``explore.point_runs``), as shown."""
    return pd.DataFrame({
        "setup": runs["setup"], "concurrency": runs["concurrency"].astype(int), "K": runs["k"].astype(int),
        "run": runs["run_id"], "speedup (× its baseline, 95%)": [interval_text(r) for r in runs.to_dict("records")],
        "repeats": runs["repeats"], "baseline run": runs["baseline_run_id"]})
