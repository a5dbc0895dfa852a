"""Explorer figures: pure functions from the frames of ``specscope.explore`` to plotly figures.

Hover shows the trace's name, x, y and only the few values not drawn already (``customdata``
holds just those), so a figure's payload grows with its points, not with whole rows.
"""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specscope.schema import BASELINE_METHOD

__all__ = ["speedup_vs_k", "speedup_by_method", "speedup_vs_concurrency", "acceptance_vs_k", "throughput_vs_concurrency",
           "latency_vs_concurrency", "per_position", "empty_figure"]

PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6", "#9D755D",
           "#EECA3B", "#BAB0AC"]


def _layout(fig: go.Figure, title: str, x: str, y: str, *, log_x: bool = False) -> go.Figure:
    fig.update_layout(title=title, template="plotly_white", hovermode="closest",
                      legend=dict(orientation="v", font=dict(size=11)),
                      margin=dict(l=60, r=20, t=60, b=50), height=460)
    fig.update_xaxes(title_text=x, type="log" if log_x else "linear")
    fig.update_yaxes(title_text=y)
    return fig


def empty_figure(message: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=html.escape(message), showarrow=False, font=dict(size=15))
    fig.update_layout(template="plotly_white", height=300, xaxis_visible=False, yaxis_visible=False)
    return fig


def _hover(frame: pd.DataFrame, x: str, y: str, extra: tuple[str, ...] = ()) -> tuple[list | None, str]:
    """``customdata`` with only the ``extra`` columns and a template naming the trace, x and y."""
    lines = ["%{fullData.name}", f"{x}: %{{x}}", f"{y}: %{{y:.3f}}"]
    cols = [c for c in extra if c in frame.columns]
    for i, col in enumerate(cols):
        fmt = ":.3f" if frame[col].dtype.kind == "f" else ""
        lines.append(f"{col}: %{{customdata[{i}]{fmt}}}")
    data = frame[cols].astype(object).where(frame[cols].notna(), "—").to_numpy().tolist() if cols else None
    return data, "<br>".join(lines) + "<extra></extra>"


def _safe(text) -> str:
    return html.escape(str(text))


def _setup_line(line: pd.DataFrame, j: int) -> tuple[bool, dict]:
    """Whether ``line`` is a baseline, and its line style (baselines dark and dashed)."""
    is_base = bool((line["method"] == BASELINE_METHOD).all())
    return is_base, dict(color="#333" if is_base else PALETTE[j % len(PALETTE)],
                         dash="dash" if is_base else "solid")


def speedup_vs_k(frame: pd.DataFrame, setups: list[str]) -> go.Figure:
    """Speedup against K: one panel per chosen setup, one line per concurrency."""
    frame = frame[frame["setup"].isin(setups)]
    if frame.empty:
        return empty_figure("Choose a setup measured at two or more K.")
    concs = sorted(frame["concurrency"].dropna().unique())
    cols = 1 if len(setups) == 1 else 2
    rows = -(-len(setups) // cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[_safe(s) for s in setups],
                        vertical_spacing=min(0.3, 0.45 / rows), horizontal_spacing=0.08)
    for n, setup in enumerate(setups):
        row, col = n // cols + 1, n % cols + 1
        sub = frame[frame["setup"] == setup]
        for j, conc in enumerate(concs):
            line = sub[sub["concurrency"] == conc].sort_values("k")
            if line.empty:
                continue
            data, template = _hover(line, "K", "speedup", ("acceptance_length", "output_throughput", "runs"))
            fig.add_trace(go.Scatter(
                x=line["k"], y=line["speedup"], mode="lines+markers", name=f"concurrency {int(conc)}",
                legendgroup=f"c{conc}", showlegend=n == 0, line=dict(color=PALETTE[j % len(PALETTE)]),
                customdata=data, hovertemplate=template), row=row, col=col)
        fig.add_hline(y=1.0, line_dash="dot", line_color="#888", row=row, col=col)
    _layout(fig, "Speedup vs K (a line per concurrency)", "K (speculative tokens)", "speedup ×")
    fig.update_annotations(font_size=11)
    fig.update_layout(height=max(460, 380 * rows))
    return fig


def speedup_by_method(best: pd.DataFrame) -> go.Figure:
    """Best-K speedup of each method, grouped by model · dataset · hardware · concurrency.

    This is how published tables compare methods at one operating point.
    """
    spec = best[best["method"] != BASELINE_METHOD].dropna(subset=["speedup"]).copy()
    if spec.empty:
        return empty_figure("No speculative rows with a matching baseline for these filters.")
    spec["point"] = [
        " · ".join(str(v) for v in (str(r["model"]).split("/")[-1], r["dataset"], r["hardware"],
                                     f"c={int(r['concurrency'])}" if pd.notna(r["concurrency"]) else None)
                   if v not in (None, "None") and not (isinstance(v, float) and pd.isna(v)))
        for r in spec.to_dict("records")]
    spec["variant"] = [f"{m} ({str(d).split('/')[-1]})" if isinstance(d, str) and d else m
                       for m, d in zip(spec["method"], spec["draft_model"])]
    fig = go.Figure()
    for j, (variant, bars) in enumerate(spec.groupby("variant", sort=True)):
        data, template = _hover(bars, "at", "speedup", ("k", "acceptance_length"))
        fig.add_trace(go.Bar(x=[_safe(p) for p in bars["point"]], y=bars["speedup"], name=_safe(variant),
                             marker_color=PALETTE[j % len(PALETTE)], customdata=data,
                             hovertemplate=template, text=[f"{v:.2f}×" for v in bars["speedup"]],
                             textposition="outside"))
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888")
    _layout(fig, "Speedup by method (best K at each operating point)", "", "speedup ×")
    fig.update_layout(barmode="group", height=520, xaxis_tickangle=-25)
    return fig


def speedup_vs_concurrency(best: pd.DataFrame, crossings: pd.DataFrame) -> go.Figure:
    """Best-K speedup against concurrency, a line per setup; crossings below 1 marked."""
    spec = best[best["method"] != BASELINE_METHOD].dropna(subset=["speedup"])
    if spec.empty:
        return empty_figure("No speculative rows with a matching baseline for these filters.")
    fig = go.Figure()
    for j, (setup, line) in enumerate(spec.groupby("setup", sort=False)):
        line = line.sort_values("concurrency")
        data, template = _hover(line, "concurrency", "speedup", ("k", "acceptance_length"))
        fig.add_trace(go.Scatter(x=line["concurrency"], y=line["speedup"], mode="lines+markers",
                                 name=_safe(setup), line=dict(color=PALETTE[j % len(PALETTE)]),
                                 text=[f"K={k}" for k in line["k"]], textposition="top center",
                                 customdata=data, hovertemplate=template))
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888", annotation_text="no gain",
                  annotation_position="bottom right")
    if not crossings.empty:
        fig.add_trace(go.Scatter(
            x=crossings["crossover_concurrency"], y=[1.0] * len(crossings), mode="markers",
            name="speedup falls below 1", marker=dict(symbol="x", size=13, color="#E45756"),
            customdata=crossings[["setup", "crossover_concurrency", "measured_below"]].to_numpy().tolist(),
            hovertemplate="%{customdata[0]}<br>crosses 1 at concurrency ≈ %{customdata[1]:.0f}"
                          "<br>first measured below 1: %{customdata[2]}<extra></extra>"))
    return _layout(fig, "Speedup vs concurrency (best K per point)", "concurrency", "speedup ×", log_x=True)


def acceptance_vs_k(frame: pd.DataFrame) -> go.Figure:
    """Acceptance length against K per setup; the band spans min to max over concurrency."""
    if frame.empty:
        return empty_figure("No acceptance data for these filters.")
    fig = go.Figure()
    for j, (setup, line) in enumerate(frame.groupby("setup", sort=False)):
        line = line.sort_values("k")
        color = PALETTE[j % len(PALETTE)]
        fig.add_trace(go.Scatter(x=list(line["k"]) + list(line["k"])[::-1],
                                 y=list(line["al_max"]) + list(line["al_min"])[::-1],
                                 fill="toself", fillcolor=color, opacity=0.18, line=dict(width=0),
                                 hoverinfo="skip", showlegend=False, legendgroup=setup))
        data, template = _hover(line, "K", "acceptance length", ("al_min", "al_max", "concurrencies"))
        fig.add_trace(go.Scatter(x=line["k"], y=line["acceptance_length"], mode="lines+markers",
                                 name=_safe(setup), legendgroup=setup, line=dict(color=color),
                                 customdata=data, hovertemplate=template))
    fig.add_trace(go.Scatter(x=[0, frame["k"].max()], y=[1, frame["k"].max() + 1], mode="lines",
                             name="ideal (all accepted)", line=dict(dash="dot", color="#999")))
    return _layout(fig, "Acceptance length vs K (band: min–max over concurrency)", "K", "tokens per step")


def throughput_vs_concurrency(best: pd.DataFrame) -> go.Figure:
    """Output throughput against concurrency: the baseline and each setup at its best K."""
    if best.empty:
        return empty_figure("No rows for these filters.")
    fig = go.Figure()
    for j, (setup, line) in enumerate(best.groupby("setup", sort=False)):
        line = line.sort_values("concurrency")
        is_base, style = _setup_line(line, j)
        data, template = _hover(line, "concurrency", "output tokens/s", ("k", "speedup"))
        fig.add_trace(go.Scatter(x=line["concurrency"], y=line["output_throughput"], mode="lines+markers",
                                 name=_safe(setup) + (" (baseline)" if is_base else ""), line=style,
                                 customdata=data, hovertemplate=template))
    return _layout(fig, "Output throughput vs concurrency (best K; dashed = baseline)", "concurrency",
                   "output tokens/s", log_x=True)


def latency_vs_concurrency(best: pd.DataFrame) -> go.Figure:
    """p99 TTFT, TPOT and ITL against concurrency, side by side."""
    metrics = [("p99_ttft_ms", "p99 TTFT (ms)"), ("p99_tpot_ms", "p99 TPOT (ms)"), ("p99_itl_ms", "p99 ITL (ms)")]
    if best.empty or best[[m for m, _ in metrics]].isna().all().all():
        return empty_figure("No latency data for these filters.")
    fig = make_subplots(rows=1, cols=3, subplot_titles=[t for _, t in metrics])
    for j, (setup, line) in enumerate(best.groupby("setup", sort=False)):
        line = line.sort_values("concurrency")
        _, style = _setup_line(line, j)
        for col, (metric, _) in enumerate(metrics, start=1):
            data, template = _hover(line, "concurrency", metric, ("k",))
            fig.add_trace(go.Scatter(x=line["concurrency"], y=line[metric], mode="lines+markers",
                                     name=_safe(setup), legendgroup=setup, showlegend=col == 1,
                                     line=style,
                                     customdata=data, hovertemplate=template), row=1, col=col)
    _layout(fig, "Tail latency vs concurrency (best K; dashed = baseline)", "concurrency", "ms", log_x=True)
    fig.update_xaxes(type="log")
    return fig


def per_position(frame: pd.DataFrame) -> go.Figure:
    """Acceptance rate at each draft position, a line per (setup, K, concurrency)."""
    if frame.empty:
        return empty_figure("No per-position acceptance in these rows.")
    fig = go.Figure()
    groups = frame.groupby(["setup", "k", "concurrency"], sort=False)
    for j, ((setup, k, conc), line) in enumerate(groups):
        fig.add_trace(go.Scatter(x=line["position"], y=line["rate"], mode="lines+markers",
                                 name=f"{_safe(setup)} · K={k} · c={conc}",
                                 line=dict(color=PALETTE[j % len(PALETTE)]),
                                 hovertemplate="position %{x}: %{y:.3f}<extra></extra>"))
    fig.update_yaxes(range=[0, 1.02])
    return _layout(fig, "Per-position acceptance", "draft position", "acceptance rate")
