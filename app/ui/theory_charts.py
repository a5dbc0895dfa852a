"""Theory figures: pure functions from the frames of ``specscope.advisor`` to plotly figures.

Curves are lines; measured points are markers on top (filled = used to fit, open = held out),
with their 95% interval as error bars when they have repeats.
"""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

from ui.chart_style import layout

__all__ = ["tokens_per_step_figure", "speedup_vs_k_figure", "speedup_vs_concurrency_figure",
           "measured_cost_figure"]

CURVE_COLORS = ["#4C78A8", "#F58518", "#54A24B", "#B279A2"]
POINT_COLOR = "#E45756"


def _curves(fig: go.Figure, curves: pd.DataFrame, y: str) -> None:
    for i, (name, line) in enumerate(curves.groupby("curve", sort=False)):
        fig.add_trace(go.Scatter(x=line["k"], y=line[y], mode="lines", name=html.escape(str(name)),
                                 line=dict(color=CURVE_COLORS[i % len(CURVE_COLORS)], width=2.5)))


def _points(fig: go.Figure, points: pd.DataFrame | None, y: str, label: str) -> None:
    if points is None or points.empty:
        return
    for train, part in points.groupby("train"):
        fig.add_trace(go.Scatter(
            x=part["k"], y=part[y], mode="markers",
            name=f"{label} ({'fit on' if train else 'held out'})",
            marker=dict(color=POINT_COLOR if train else "white", size=10,
                        line=dict(color=POINT_COLOR, width=2)),
            error_y=_error_bars(part, y), customdata=_interval_labels(part, y),
            hovertemplate="K=%{x}<br>" + label + "=%{y:.3f} %{customdata}<extra></extra>"))


def _has_bounds(part: pd.DataFrame, y: str) -> bool:
    return y == "speedup" and "speedup_lo" in part.columns and part["speedup_lo"].notna().any()


def _error_bars(part: pd.DataFrame, y: str) -> dict:
    if not _has_bounds(part, y):
        return dict(visible=False)
    value = part[y].astype(float)
    return dict(type="data", symmetric=False, array=(part["speedup_hi"].astype(float) - value).tolist(),
                arrayminus=(value - part["speedup_lo"].astype(float)).tolist(), color=POINT_COLOR)


def _interval_labels(part: pd.DataFrame, y: str) -> list[str]:
    if y != "speedup":
        return [""] * len(part)
    if not _has_bounds(part, y):
        return ["(single run: no interval)"] * len(part)
    return [f"(95%: {lo:.3f}–{hi:.3f})" if pd.notna(lo) else "(single run: no interval)"
            for lo, hi in zip(part["speedup_lo"], part["speedup_hi"])]


def _mark_k(fig: go.Figure, k: int | None) -> None:
    if k is not None:
        fig.add_vline(x=k, line_dash="dot", line_color="#888",
                      annotation_text=f"K={k}", annotation_position="top")


def tokens_per_step_figure(curves: pd.DataFrame, points: pd.DataFrame | None = None,
                           marker_k: int | None = None, title: str = "Tokens per step vs K") -> go.Figure:
    """Expected tokens per step against K; ``curves`` has k, curve, tokens_per_step; points k, al, train."""
    fig = go.Figure()
    _curves(fig, curves, "tokens_per_step")
    _points(fig, points, "al", "measured AL")
    _mark_k(fig, marker_k)
    return layout(fig, title, "K (speculative tokens)", "tokens per step", height=400)


def speedup_vs_k_figure(curves: pd.DataFrame, points: pd.DataFrame | None = None,
                        marker_k: int | None = None, title: str = "Speedup vs K") -> go.Figure:
    """Speedup against K; ``curves`` has k, curve, speedup; points k, speedup, train."""
    fig = go.Figure()
    _curves(fig, curves, "speedup")
    _points(fig, points, "speedup", "measured speedup")
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888")
    _mark_k(fig, marker_k)
    return layout(fig, title, "K (speculative tokens)", "speedup ×", height=400)


def speedup_vs_concurrency_figure(curve: pd.DataFrame, measured: pd.DataFrame,
                                  crossover: float | None = None) -> go.Figure:
    """Best-K speedup against concurrency: the fitted curve and the best measured point per concurrency."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=curve["concurrency"], y=curve["speedup"], mode="lines",
                             name="predicted (best K)", customdata=curve["k"],
                             hovertemplate="conc=%{x:.0f}<br>K=%{customdata}<br>%{y:.3f}×<extra></extra>",
                             line=dict(color=CURVE_COLORS[0], width=2.5)))
    fig.add_trace(go.Scatter(x=measured["concurrency"], y=measured["speedup"], mode="markers",
                             name="measured (best K)", customdata=measured["k"],
                             hovertemplate="conc=%{x}<br>K=%{customdata}<br>%{y:.3f}×<extra></extra>",
                             marker=dict(color=POINT_COLOR, size=10)))
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888")
    if crossover is not None:  # a trace, not add_vline: shapes on a log axis take log10 positions
        top = max(curve["speedup"].max(), measured["speedup"].max())
        fig.add_trace(go.Scatter(x=[crossover, crossover], y=[0, top], mode="lines",
                                 name=f"stops paying ~{crossover:.0f}",
                                 line=dict(color=POINT_COLOR, dash="dash")))
    return layout(fig, "Best-K speedup vs concurrency", "concurrency", "speedup ×", log_x=True, height=400)


def measured_cost_figure(rows: pd.DataFrame, title: str) -> go.Figure:
    """Predicted speedup vs K per concurrency on a measured step cost (``calibrate.what_if`` rows):
    a line per concurrency, markers where that K and concurrency were themselves calibrated."""
    fig = go.Figure()
    for i, (conc, line) in enumerate(rows.groupby("concurrency", sort=True)):
        color = CURVE_COLORS[i % len(CURVE_COLORS)]
        fig.add_trace(go.Scatter(
            x=line["k"], y=line["speedup"], mode="lines", name=f"concurrency {conc:g}",
            line=dict(color=color, width=2.5), customdata=line["cost"],
            hovertemplate="K=%{x}<br>predicted %{y:.3f}×<br>step cost %{customdata:.3f}<extra></extra>"))
        measured = line[line["measured_cost"]]
        fig.add_trace(go.Scatter(x=measured["k"], y=measured["speedup"], mode="markers", showlegend=False,
                                 marker=dict(color=color, size=9), hoverinfo="skip"))
    fig.add_hline(y=1.0, line=dict(color="#888", dash="dot", width=1))
    return layout(fig, html.escape(title), "speculative tokens K", "predicted speedup (×)", height=400)
