"""Explorer figures: pure functions from the frames of ``specscope.analysis.explore`` to plotly figures, each tab's
registered with ``@figure`` (``ui.figures``: its tab, title words and the frames it is drawn from).

Hover shows the trace's name, x, y and only the few values not drawn already (``customdata``
holds just those), so a figure's payload grows with its points, not with whole rows. Speedups
and throughputs carry their 95% interval as error bars and as ``[low, high]`` in the hover; a point
from a single run has no bar, and its hover says so. A bar that reaches far past the figure's points
is cut at the edge (``intervals.drawn``), marked with a triangle on a line chart (a bar chart's labels
give the bounds), so one wide interval does not flatten every line.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specscope.analysis import intervals
from specscope.analysis.explore_text import crossover_caption
from specscope.schema import BASELINE_METHOD
from ui import limit_charts
from ui.chart_style import PALETTE, empty_figure, layout
from ui.figures import figure

SPEEDUP_95 = "speedup [95%]"
THROUGHPUT_95 = "output tok/s [95%]"
ROOFLINE_SHARE = "share of the roofline"

__all__ = [
    "speedup_by_method",
    "speedup_vs_concurrency",
    "acceptance_vs_k",
    "throughput_vs_concurrency",
    "latency_vs_concurrency",
    "per_position",
]


def _with_interval_text(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with ``speedup [95%]`` and ``output tok/s [95%]`` texts for the hover (and the share of
    the roofline ceiling where the frame has ceilings)."""
    records = frame.to_dict("records")
    out = frame.copy()
    if "ceiling_tok_s" in frame.columns:
        out[ROOFLINE_SHARE] = [limit_charts.share_text(r) for r in records]
    if "speedup" in frame.columns:
        out[SPEEDUP_95] = [intervals.value_text(r) for r in records]
    if "output_throughput" in frame.columns:
        out[THROUGHPUT_95] = [intervals.value_text(r, "output_throughput", "") for r in records]
    return out


def _drawn(frame: pd.DataFrame, value: str = "speedup") -> pd.DataFrame:
    """The frame with its bars as a figure draws them (``_<value>_lo``/``_hi``: cut at the figure's edge,
    ``intervals.drawn``) and ``_<value>_cut``, the end where a bar was cut (NaN elsewhere)."""
    lo, hi = f"{value}_lo", f"{value}_hi"
    if lo not in frame.columns:
        return frame
    low, high, cut_low, cut_high = intervals.drawn(
        frame[value], frame[lo], frame[hi], 1.0 if value == "speedup" else None
    )
    return frame.assign(
        **{f"_{lo}": low, f"_{hi}": high, f"_{value}_cut": np.where(cut_high, high, np.where(cut_low, low, np.nan))}
    )


def _cut_marks(fig: go.Figure, frame: pd.DataFrame, value: str = "speedup") -> None:
    """A triangle at each bar's end that ``_drawn`` cut at the figure's edge, pointing on."""
    cut = frame.dropna(subset=[f"_{value}_cut"]) if f"_{value}_cut" in frame.columns else frame[:0]
    if not cut.empty:
        up = cut[f"_{value}_cut"] > cut[value]
        fig.add_trace(
            go.Scatter(
                x=cut["concurrency"],
                y=cut[f"_{value}_cut"],
                mode="markers",
                hoverinfo="skip",
                name="interval runs past the chart",
                marker=dict(symbol=np.where(up, "triangle-up", "triangle-down"), size=10, color="#555"),
            )
        )


def _error_bars(frame: pd.DataFrame, value: str = "speedup") -> dict:
    """Asymmetric error bars from ``<value>_lo``/``_hi`` (as drawn where ``_drawn`` cut them); none where a
    point has no interval."""
    lo, hi = f"{value}_lo", f"{value}_hi"
    if lo not in frame.columns or frame[lo].isna().all():
        return dict(visible=False)
    lo, hi = (f"_{c}" if f"_{c}" in frame.columns else c for c in (lo, hi))
    y = frame[value].astype(float)

    def lengths(series: pd.Series) -> list:  # null (no bar) where a point has no interval, never NaN
        return [None if pd.isna(v) else float(v) for v in series]

    return dict(
        type="data",
        symmetric=False,
        array=lengths(frame[hi].astype(float) - y),
        arrayminus=lengths(y - frame[lo].astype(float)),
        thickness=1.2,
        width=4,
    )


def _hover(frame: pd.DataFrame, x: str, y: str, extra: tuple[str, ...] = ()) -> tuple[list | None, str]:
    """``customdata`` with only the ``extra`` columns (``[95%]`` texts included) and a template
    naming the trace, x and y; text values escaped."""
    frame = _with_interval_text(frame)
    lines = ["%{fullData.name}", f"{x}: %{{x}}", f"{y}: %{{y:.3f}}"]
    cols = [c for c in extra if c in frame.columns]
    for i, col in enumerate(cols):
        fmt = ":.3f" if frame[col].dtype.kind == "f" else ""
        lines.append(f"{col}: %{{customdata[{i}]{fmt}}}")
    data = (
        [
            [html.escape(v) if isinstance(v, str) else v for v in row]
            for row in frame[cols].astype(object).where(frame[cols].notna(), "—").to_numpy().tolist()
        ]
        if cols
        else None
    )
    return data, "<br>".join(lines) + "<extra></extra>"


def _escape(text) -> str:
    return html.escape(str(text))


def _setup_line(line: pd.DataFrame, j: int) -> tuple[bool, dict]:
    """Whether ``line`` is a baseline, and its line style (baselines dark and dashed)."""
    is_base = bool((line["method"] == BASELINE_METHOD).all())
    return is_base, dict(color="#333" if is_base else PALETTE[j % len(PALETTE)], dash="dash" if is_base else "solid")


def _setup_lines(frame: pd.DataFrame, order: str):
    """(index, setup, its rows sorted by ``order``) for each setup, in first-seen order."""
    for j, (setup, line) in enumerate(frame.groupby("setup", sort=False)):
        yield j, setup, line.sort_values(order)


def _bar_text(row: dict) -> str:
    return intervals.text(row["speedup"], row.get("speedup_lo"), row.get("speedup_hi"), unit="×", digits=2, why_none="")


@figure("speedup_by_method", "Speedup by method", "Speedup by method", needs=("best",))
def speedup_by_method(best: pd.DataFrame) -> go.Figure:
    """Best-K speedup of each method, grouped by model · dataset · hardware · concurrency.

    This is how published tables compare methods at one operating point.
    """
    spec = best[best["method"] != BASELINE_METHOD].dropna(subset=["speedup"]).copy()
    if spec.empty:
        return empty_figure("No speculative rows with a matching baseline for these filters.")
    spec["point"] = [
        " · ".join(
            str(v)
            for v in (
                str(r["model"]).split("/")[-1],
                r["dataset"],
                r["hardware"],
                f"c={int(r['concurrency'])}" if pd.notna(r["concurrency"]) else None,
                f"T={r['temperature']:g}" if pd.notna(r.get("temperature")) else None,
            )
            if v is not None and pd.notna(v) and v != "None"
        )
        for r in spec.to_dict("records")
    ]
    spec["variant"] = [
        f"{m} ({str(d).split('/')[-1]})" if isinstance(d, str) and d else m
        for m, d in zip(spec["method"], spec["draft_model"])
    ]
    spec = _drawn(spec)
    fig = go.Figure()
    for j, (variant, bars) in enumerate(spec.groupby("variant", sort=True)):
        data, template = _hover(bars, "at", "speedup", ("k", SPEEDUP_95, "acceptance_length", "baseline_run_id"))
        fig.add_trace(
            go.Bar(
                x=[_escape(p) for p in bars["point"]],
                y=bars["speedup"],
                name=_escape(variant),
                marker_color=PALETTE[j % len(PALETTE)],
                customdata=data,
                hovertemplate=template,
                error_y=_error_bars(bars),
                text=[_bar_text(r) for r in bars.to_dict("records")],
                textposition="outside",
            )
        )
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888")
    layout(fig, "Speedup by method (best K at each operating point; bars: 95% interval)", "", "speedup ×")
    fig.update_layout(barmode="group", height=520, xaxis_tickangle=-25)
    fig.update_xaxes(type="category")  # _layout's linear axis would place the named points nowhere
    return fig


@figure(
    "speedup_vs_concurrency",
    "Speedup vs concurrency",
    "Speedup vs concurrency",
    needs=("ceilings", "crossings"),
    caption=lambda _, crossings: crossover_caption(crossings),
)
def speedup_vs_concurrency(best: pd.DataFrame, crossings: pd.DataFrame) -> go.Figure:
    """Best-K speedup against concurrency, a line per setup; crossings below 1 marked."""
    spec = best[best["method"] != BASELINE_METHOD].dropna(subset=["speedup", "concurrency"])
    if spec.empty:
        return empty_figure("No speculative rows with a matching baseline and a stated concurrency for these filters.")
    spec = _drawn(spec)
    fig = go.Figure()
    for j, setup, line in _setup_lines(spec, "concurrency"):
        data, template = _hover(
            line, "concurrency", "speedup", ("k", SPEEDUP_95, "acceptance_length", "baseline_run_id")
        )
        fig.add_trace(
            go.Scatter(
                x=line["concurrency"],
                y=line["speedup"],
                mode="lines+markers",
                name=_escape(setup),
                line=dict(color=PALETTE[j % len(PALETTE)]),
                legendgroup=setup,
                text=[f"K={k}" for k in line["k"]],
                textposition="top center",
                error_y=_error_bars(line),
                customdata=data,
                hovertemplate=template,
            )
        )
        if "k_ceiling" in line:  # a step emits at most K+1 tokens: speedup <= AL <= K+1
            limit_charts.ceiling_trace(
                fig, line, "k_ceiling", PALETTE[j % len(PALETTE)], f"{setup}: K+1 ceiling", setup, marks=True
            )
    _cut_marks(fig, spec)
    fig.add_hline(
        y=1.0, line_dash="dot", line_color="#888", annotation_text="no gain", annotation_position="bottom right"
    )
    crossings = crossings.dropna(subset=["crossover_concurrency"])
    if not crossings.empty:
        fig.add_trace(
            go.Scatter(
                x=crossings["crossover_concurrency"],
                y=[1.0] * len(crossings),
                mode="markers",
                name="speedup falls below 1",
                marker=dict(symbol="x", size=13, color="#E45756"),
                customdata=crossings[["setup", "crossover_concurrency", "measured_below"]].to_numpy().tolist(),
                hovertemplate="%{customdata[0]}<br>crosses 1 at concurrency ≈ %{customdata[1]:.0f}"
                "<br>first measured below 1: %{customdata[2]}<extra></extra>",
            )
        )
    ceilings = "; dashes: each point's K+1, which no speedup passes" if "k_ceiling" in spec else ""
    return layout(
        fig,
        f"Speedup vs concurrency (best K per point; bars: 95% interval{ceilings})",
        "concurrency",
        "speedup ×",
        log_x=True,
    )


def schedule_vs_concurrency(frame: pd.DataFrame, setup: str) -> go.Figure:
    """Speedup against concurrency for one setup: a line per fixed K, each schedule bold and dashed."""
    frame = frame[frame["setup"] == setup].dropna(subset=["speedup", "concurrency"])
    if frame.empty:
        return empty_figure("No schedule measured for this setup.")
    frame = _drawn(frame)
    fig = go.Figure()
    for j, (curve, line) in enumerate(frame.groupby("curve", sort=False)):
        line = line.sort_values("concurrency")
        scheduled = bool(line["scheduled"].all())
        data, template = _hover(line, "concurrency", "speedup", ("k", SPEEDUP_95, "acceptance_length"))
        fig.add_trace(
            go.Scatter(
                x=line["concurrency"],
                y=line["speedup"],
                mode="lines+markers",
                name=_escape(curve),
                line=dict(
                    color="#111" if scheduled else PALETTE[j % len(PALETTE)],
                    width=3.5 if scheduled else 2,
                    dash="dash" if scheduled else "solid",
                ),
                marker=dict(symbol="diamond" if scheduled else "circle", size=10 if scheduled else 7),
                error_y=_error_bars(line),
                customdata=data,
                hovertemplate=template,
            )
        )
    _cut_marks(fig, frame)
    fig.add_hline(
        y=1.0, line_dash="dot", line_color="#888", annotation_text="no gain", annotation_position="bottom right"
    )
    return layout(
        fig,
        "K schedule vs fixed K: speedup vs concurrency (bars: 95% interval)",
        "concurrency",
        "speedup ×",
        log_x=True,
    )


@figure("acceptance_vs_k", "Acceptance length vs K", "Acceptance length vs K", needs=("acceptance",))
def acceptance_vs_k(frame: pd.DataFrame) -> go.Figure:
    """Acceptance length against K per setup; the band spans min to max over concurrency."""
    frame = frame.dropna(subset=["k", "acceptance_length"])
    if frame.empty:
        return empty_figure("No acceptance data for these filters.")
    fig = go.Figure()
    for j, setup, line in _setup_lines(frame, "k"):
        color = PALETTE[j % len(PALETTE)]
        fig.add_trace(
            go.Scatter(
                x=list(line["k"]) + list(line["k"])[::-1],
                y=list(line["al_max"]) + list(line["al_min"])[::-1],
                fill="toself",
                fillcolor=color,
                opacity=0.18,
                line=dict(width=0),
                hoverinfo="skip",
                showlegend=False,
                legendgroup=setup,
            )
        )
        data, template = _hover(line, "K", "acceptance length", ("al_min", "al_max", "concurrencies"))
        fig.add_trace(
            go.Scatter(
                x=line["k"],
                y=line["acceptance_length"],
                mode="lines+markers",
                name=_escape(setup),
                legendgroup=setup,
                line=dict(color=color),
                customdata=data,
                hovertemplate=template,
            )
        )
    fig.add_trace(
        go.Scatter(
            x=[0, frame["k"].max()],
            y=[1, frame["k"].max() + 1],
            mode="lines",
            name="ideal (all accepted)",
            line=dict(dash="dot", color="#999"),
        )
    )
    return layout(fig, "Acceptance length vs K (band: min–max over concurrency)", "K", "tokens per step")


@figure("throughput", "Throughput vs concurrency", "Output throughput", needs=("ceilings",))
def throughput_vs_concurrency(best: pd.DataFrame) -> go.Figure:
    """Output throughput against concurrency: the baseline and each setup at its best K."""
    drawn = ["concurrency", "output_throughput"]  # a point without either has no place on the axes
    if best[drawn].isna().any(axis=1).all():
        return empty_figure("No rows for these filters.")
    fig = go.Figure()
    best = _drawn(best.dropna(subset=drawn), "output_throughput")
    for j, setup, line in _setup_lines(best, "concurrency"):
        is_base, style = _setup_line(line, j)
        data, template = _hover(
            line, "concurrency", "output tokens/s", ("k", THROUGHPUT_95, SPEEDUP_95, ROOFLINE_SHARE)
        )
        fig.add_trace(
            go.Scatter(
                x=line["concurrency"],
                y=line["output_throughput"],
                mode="lines+markers",
                name=_escape(setup) + (" (baseline)" if is_base else ""),
                line=style,
                error_y=_error_bars(line, "output_throughput"),
                legendgroup=setup,
                customdata=data,
                hovertemplate=template,
            )
        )
        if "ceiling_tok_s" in line:
            limit_charts.ceiling_trace(fig, line, "ceiling_tok_s", style["color"], f"{setup}: roofline ceiling", setup)
    _cut_marks(fig, best, "output_throughput")
    ceilings = "ceiling_tok_s" in best and best["ceiling_tok_s"].notna().any()
    title = "Output throughput vs concurrency (best K; dashed = baseline; bars: 95% interval" + (
        "; dotted: each setup's roofline ceiling, log scale)" if ceilings else ")"
    )
    layout(fig, title, "concurrency", "output tokens/s", log_x=True)
    if ceilings:  # ceilings run 4-10x above what is measured: a log axis keeps both readable
        fig.update_yaxes(type="log")
    return fig


@figure("latency", "Tail latency vs concurrency", "Tail latency", needs=("ceilings",))
def latency_vs_concurrency(best: pd.DataFrame) -> go.Figure:
    """p99 TTFT, TPOT and ITL against concurrency, side by side."""
    metrics = [("p99_ttft_ms", "p99 TTFT (ms)"), ("p99_tpot_ms", "p99 TPOT (ms)"), ("p99_itl_ms", "p99 ITL (ms)")]
    best = best.dropna(subset=["concurrency"])
    if best.empty or best[[m for m, _ in metrics]].isna().all().all():
        return empty_figure("No latency data for these filters.")
    fig = make_subplots(rows=1, cols=3, subplot_titles=[t for _, t in metrics])
    for j, setup, line in _setup_lines(best, "concurrency"):
        _, style = _setup_line(line, j)
        legend = True
        for col, (metric, _) in enumerate(metrics, start=1):
            points = line.dropna(subset=[metric])  # a latency the source does not state is not drawn
            if points.empty:
                continue
            data, template = _hover(points, "concurrency", metric, ("k",))
            fig.add_trace(
                go.Scatter(
                    x=points["concurrency"],
                    y=points[metric],
                    mode="lines+markers",
                    name=_escape(setup),
                    legendgroup=setup,
                    showlegend=legend,
                    line=style,
                    customdata=data,
                    hovertemplate=template,
                ),
                row=1,
                col=col,
            )
            legend = False
        if "ceiling_tpot_ms" in line:  # no token can come faster than the step's floor over K+1
            limit_charts.ceiling_trace(
                fig, line, "ceiling_tpot_ms", style["color"], f"{setup}: TPOT floor", setup, row=1, col=2
            )
    floors = "; dotted: each setup's TPOT floor" if "ceiling_tpot_ms" in best else ""
    layout(fig, f"Tail latency vs concurrency (best K; dashed = baseline{floors})", "concurrency", "ms", log_x=True)
    fig.update_xaxes(type="log")
    return fig


@figure("per_position", "Per-position acceptance", "Per-position acceptance", needs=("positions",))
def per_position(frame: pd.DataFrame) -> go.Figure:
    """Acceptance rate at each draft position, a line per (setup, K, concurrency)."""
    if frame.empty:
        return empty_figure("No per-position acceptance in these rows.")
    fig = go.Figure()
    groups = frame.groupby(["setup", "k", "concurrency"], sort=False)
    for j, ((setup, k, conc), line) in enumerate(groups):
        fig.add_trace(
            go.Scatter(
                x=line["position"],
                y=line["rate"],
                mode="lines+markers",
                name=f"{_escape(setup)} · K={k} · c={conc}",
                line=dict(color=PALETTE[j % len(PALETTE)]),
                hovertemplate="position %{x}: %{y:.3f}<extra></extra>",
            )
        )
    fig.update_yaxes(range=[0, 1.02])
    return layout(fig, "Per-position acceptance", "draft position", "acceptance rate")
