"""The Explorer's first figure, speedup against K, drawn with Vega-Lite (Altair).

It is the one figure on the landing page, and Streamlit's Vega-Lite renderer is a sixth of the
Plotly bundle the other figures load when their tab is opened. One chart per setup (the page
lays them out two abreast), a line per concurrency coloured alike in every chart, 95% intervals
as bars, and the no-gain line at 1. A bar that reaches far past the points is cut at the chart's
edge with a triangle (``intervals.drawn``), so one wide interval does not flatten every line; the
hover gives its bounds. Vega draws names as text, never as HTML.
"""

from __future__ import annotations

from typing import cast

import altair as alt
import numpy as np
import pandas as pd

from specscope.analysis import intervals
from specscope.analysis.explore import distorted
from specscope.analysis.explore_text import checks_text
from ui.chart_style import PALETTE, k_axis, no_gain

__all__ = ["EMPTY", "speedup_vs_k", "combined", "runs_table", "RUNS_CAPTION", "best_k_shown", "title"]

EMPTY = "Choose a setup measured at two or more K."
TITLE = "Speedup vs K (a line per concurrency; bars: 95% interval, a triangle where one runs past the chart)"
RUNS_CAPTION = (
    "A point measured by several runs combines each run's own speedup and spread (weighted by how "
    "precise each is; wider where the runs disagree beyond their noise); below, each run's own figure "
    "over its own baseline."
)
# Hover fields beyond K, speedup and concurrency: (column in the chart's data, label)
_TOOLTIP = [
    ("speedup_95", "speedup [95%]"),
    ("checks", "checks"),
    ("acceptance_length", "acceptance length"),
    ("throughput_95", "output tok/s"),
    ("repeats", "repeats"),
    ("runs", "runs"),
    ("baseline_run_id", "baseline run"),
]
FLAGGED = "#d62728"  # the ring round a point a distorting check flags


def _points(frame: pd.DataFrame) -> pd.DataFrame:
    """Only the columns drawn or hovered, interval texts included, under plain field names."""
    records = frame.to_dict("records")
    out = frame.assign(
        concurrency=frame["concurrency"].astype(int),
        speedup_95=[intervals.value_text(r) for r in records],
        checks=[checks_text(r) or "✓" for r in records],
        flagged=distorted(frame),
    )
    if "output_throughput_lo" in frame.columns:
        out["throughput_95"] = [intervals.value_text(r, "output_throughput", " tok/s") for r in records]
    elif "output_throughput" in frame.columns:  # a mean without its interval: no "single run" claim
        out["throughput_95"] = [f"{v:.1f}" if pd.notna(v) else "—" for v in frame["output_throughput"]]
    if "speedup_lo" in frame.columns:  # the bars as drawn: cut at the chart's edge where they reach far past it
        low, high, cut_low, cut_high = intervals.drawn(frame["speedup"], frame["speedup_lo"], frame["speedup_hi"], 1.0)
        out = out.assign(
            speedup_lo=low,
            speedup_hi=high,
            cut=np.where(cut_high, high, np.where(cut_low, low, np.nan)),
            cut_shape=np.where(cut_high, "triangle-up", "triangle-down"),
        )
    keep = [
        "k",
        "speedup",
        "speedup_lo",
        "speedup_hi",
        "cut",
        "cut_shape",
        "concurrency",
        "flagged",
        *(c for c, _ in _TOOLTIP),
    ]
    return out[[c for c in keep if c in out.columns]].sort_values(["concurrency", "k"])


def _chart(points: pd.DataFrame, setup: str, colours: alt.Scale) -> alt.LayerChart:
    x = k_axis()
    color = alt.Color("concurrency:O", scale=colours, title="concurrency")
    tooltip = [
        alt.Tooltip("concurrency:O"),
        alt.Tooltip("k:Q", title="K"),
        *(alt.Tooltip(f"{c}:N", title=t) for c, t in _TOOLTIP if c in points.columns),
    ]
    line = (
        alt.Chart(points)
        .mark_line(point=alt.OverlayMarkDef(filled=True, size=55))
        .encode(x=x, y=alt.Y("speedup:Q", title="speedup ×", scale=alt.Scale(zero=False)), color=color, tooltip=tooltip)
    )
    layers = [no_gain(), line]
    bounded = points.dropna(subset=["speedup_lo", "speedup_hi"]) if "speedup_lo" in points.columns else points[:0]
    if not bounded.empty:
        layers.insert(
            1,
            alt.Chart(bounded)
            .mark_errorbar(ticks=True, thickness=1.2)
            .encode(x=x, y=alt.Y("speedup_lo:Q", title="speedup ×"), y2="speedup_hi:Q", color=color),
        )
        cut = bounded.dropna(subset=["cut"]) if "cut" in bounded.columns else bounded[:0]
        if not cut.empty:  # where a bar was cut at the edge: a triangle pointing on
            layers.insert(
                2,
                alt.Chart(cut.drop(columns="flagged", errors="ignore"))
                .mark_point(filled=True, size=70)
                .encode(
                    x=x,
                    y=alt.Y("cut:Q", title="speedup ×"),
                    color=color,
                    tooltip=tooltip,
                    shape=alt.Shape("cut_shape:N", scale=None),
                ),
            )
    flagged = points[points["flagged"]] if "flagged" in points.columns else points[:0]
    if not flagged.empty:  # drawn, never hidden: ringed, its checks in the hover
        layers.append(
            alt.Chart(flagged.drop(columns="flagged"))
            .mark_point(shape="circle", size=240, strokeWidth=2, color=FLAGGED, filled=False)
            .encode(x=x, y=alt.Y("speedup:Q"), tooltip=tooltip)
        )
    # alt.layer makes a FacetChart only of layers with facet encodings; these have none
    return cast(
        alt.LayerChart,
        alt.layer(*layers).properties(title=alt.Title(_title_lines(setup), fontSize=13, anchor="start"), height=320),
    )


def title(frame: pd.DataFrame, setups: list[str]) -> str:
    """The figure's caption: what its lines and bars are, and what a ring means where one is drawn."""
    shown = frame[frame["setup"].isin(setups)]
    ringed = bool(distorted(shown).any()) if not shown.empty else False
    return TITLE + (
        " Ringed points fail a hygiene check that distorts their figure (hover says which): they are "
        "drawn, never ranked or advised from."
        if ringed
        else ""
    )


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
    colour = {c: PALETTE[j % len(PALETTE)] for j, c in enumerate(sorted(int(c) for c in frame["concurrency"].unique()))}
    charts = []
    for setup in setups:
        points = frame[frame["setup"] == setup]
        if points.empty:
            continue
        # each chart's legend lists only its own concurrencies, each in the colour it has in every chart
        mine = sorted(int(c) for c in points["concurrency"].unique())
        charts.append((setup, _chart(_points(points), setup, alt.Scale(domain=mine, range=[colour[c] for c in mine]))))
    return charts


def combined(charts: list[tuple[str, alt.LayerChart]]) -> alt.ConcatChart:
    """Every setup's chart in one figure, two abreast, titled (what the download holds)."""
    return alt.concat(*(chart for _, chart in charts), columns=2).properties(title=TITLE)


def runs_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Each run's own figure of the points folded over several runs (``explore.point_runs``), as shown."""
    return pd.DataFrame(
        {
            "setup": runs["setup"],
            "concurrency": runs["concurrency"].astype(int),
            "K": runs["k"].astype(int),
            "run": runs["run_id"],
            "speedup (× its baseline, 95%)": [intervals.value_text(r) for r in runs.to_dict("records")],
            "repeats": runs["repeats"],
            "baseline run": runs["baseline_run_id"],
        }
    )


# the best-K table's headers as the Explorer shows them: short, so the setup's column gets the width
SHORT_HEADERS = {
    "concurrency (requests)": "concurrency",
    "K (draft tokens)": "K",
    "speedup (× baseline, 95%)": "speedup [95%]",
    "tied (within noise)": "tied with",
    "acceptance length (tokens/step)": "AL",
    "output (tok/s, 95%)": "tok/s [95%]",
    "p99 TPOT (ms)": "p99 TPOT ms",
    "baseline run": "baseline",
    "a higher figure left out": "left out",
}


def best_k_shown(table: pd.DataFrame) -> pd.DataFrame:
    """``explore_text.best_k_table`` as the Explorer's tab shows it: short headers, "(1 run)" for a single run's
    missing interval (the caption says why), the tied K alone under "tied with", and "its run" where a row's
    baseline is the run that measured it."""
    shown = table.rename(columns=SHORT_HEADERS).replace(
        {r"\(1 run: no interval\)": "(1 run)", r"^tied with (.*) \(within noise\)$": r"\1"}, regex=True
    )
    if "baseline" in shown and "measured by" in shown:
        runs = shown["measured by"].str.removeprefix("run ").str.split(",").str[0]
        shown["baseline"] = ["its run" if base == run else base for base, run in zip(shown["baseline"], runs)]
    return shown
