"""Figures and tables of the Explorer's limits section: pure functions from ``specscope.analysis.limits`` and
``specscope.analysis.output_acceptance`` frames to plotly figures and display tables (text escaped)."""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

from specscope.analysis import intervals
from specscope.analysis.explore_text import point_label
from specscope.schema import BASELINE_METHOD
from ui.chart_style import PALETTE, empty_figure, layout

__all__ = [
    "cells_table",
    "oracle_figure",
    "request_oracle_figure",
    "side_effects_table",
    "pareto_figure",
    "acceptance_over_output_figure",
    "ceiling_trace",
    "share_text",
]

DOTTED = dict(dash="dot", width=1.5)


def _number(value, fmt: str) -> str:
    return "–" if value is None or pd.isna(value) else format(value, fmt)


def share_text(row) -> str:
    """``37% of 545 tok/s (memory-bound)``, or why there is no ceiling."""
    if pd.isna(row.get("ceiling_tok_s")):
        return f"no ceiling: {row.get('ceiling_note') or 'unknown'}"
    return f"{row['ceiling_share']:.0%} of {row['ceiling_tok_s']:,.0f} tok/s ({row['ceiling_bound']}-bound)"


def cells_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Each speculative cell: speedup [95%], oracle bound, K + 1, AL, throughput and its roofline share."""
    records = cells.to_dict("records")
    return pd.DataFrame(
        {
            "setup": cells["setup"],
            "K, concurrency": [point_label(r).removeprefix(str(r["setup"]) + ", ") for r in records],
            "speedup (95%)": [intervals.value_text(r) for r in records],
            "oracle bound": [
                _number(r["oracle_speedup"], ".3f") + ("×" if pd.notna(r["oracle_speedup"]) else "") for r in records
            ],
            "K+1 ceiling": [_number(r["k_ceiling"], ".0f") for r in records],
            "acceptance length": [_number(r["acceptance_length"], ".2f") for r in records],
            "output tok/s": [_number(r["output_throughput"], ",.1f") for r in records],
            "roofline share": [share_text(r) for r in records],
        }
    )


def _cell_name(row) -> str:
    """``ngram K=4, c=1<br>SmolLM2-135M-Instruct · long-output · cpu-2core`` (escaped), for a category axis."""
    point = ", ".join(
        part
        for part in (
            f"K={row['k']:.0f}" if pd.notna(row.get("k")) else "",
            f"c={row['concurrency']:.0f}" if pd.notna(row.get("concurrency")) else "",
        )
        if part
    )
    where = " · ".join(
        str(v)
        for v in (str(row["model"]).split("/")[-1], row.get("dataset"), row.get("hardware"))
        if v is not None and pd.notna(v)
    )
    return html.escape(f"{row['method']} {point}") + "<br>" + html.escape(where)


def oracle_figure(cells: pd.DataFrame) -> go.Figure:
    """Measured speedup [95%], its oracle bound and its K + 1 ceiling per cell that has an oracle bound,
    as horizontal bars (a cell per row)."""
    shown = cells.dropna(subset=["oracle_speedup"])
    if shown.empty:
        return empty_figure("No cell with per-step counts and a baseline in its run: no oracle bound to draw.")
    records = shown.to_dict("records")
    y = [_cell_name(r) for r in records]
    x = shown["speedup"].astype(float)
    bars = dict(
        type="data",
        symmetric=False,
        array=(shown["speedup_hi"] - x).tolist(),
        arrayminus=(x - shown["speedup_lo"]).tolist(),
        visible=bool(shown["speedup_lo"].notna().any()),
    )
    hover = [
        html.escape(f"{r['setup']}: measured {intervals.value_text(r)}, oracle bound {r['oracle_speedup']:.3f}×")
        for r in records
    ]
    fig = go.Figure(
        [
            go.Bar(
                y=y,
                x=x,
                orientation="h",
                name="measured speedup",
                marker_color=PALETTE[0],
                error_x=bars,
                hovertext=hover,
                hovertemplate="%{hovertext}<extra></extra>",
            ),
            go.Bar(
                y=y,
                x=shown["oracle_speedup"],
                orientation="h",
                name="oracle bound (drafting only what is accepted)",
                marker_color=PALETTE[2],
                hovertext=hover,
                hovertemplate="%{hovertext}<extra></extra>",
            ),
            go.Scatter(
                y=y,
                x=shown["k_ceiling"],
                mode="markers",
                name="K+1 ceiling",
                marker=dict(symbol="line-ns-open", size=26, line=dict(width=3, color="#333")),
                hovertemplate="K+1 = %{x:.0f}<extra></extra>",
            ),
        ]
    )
    fig.add_vline(x=1.0, line_dash="dot", line_color="#888")
    layout(
        fig,
        "Speedup, its oracle bound and its K+1 ceiling (bars: 95% interval)",
        "speedup ×",
        "",
        height=max(260, 90 * len(shown) + 140),
    )
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=-0.35))
    fig.update_yaxes(type="category", autorange="reversed")
    return fig


def request_oracle_figure(requests: pd.DataFrame) -> go.Figure:
    """Each request's decode speedup (its baseline's TPOT over its own) and its oracle bound."""
    if requests.empty:
        return empty_figure("This cell's requests carry no per-step counts.")
    ordered = requests.sort_values("decode_speedup").reset_index(drop=True)
    names = [html.escape(f"{p} #{i + 1}") for i, p in enumerate(ordered["prompt_id"])]
    fig = go.Figure()
    for i, row in ordered.iterrows():
        fig.add_trace(
            go.Scatter(
                x=[row["decode_speedup"], row["oracle_speedup"]],
                y=[names[i]] * 2,
                mode="lines",
                line=dict(color="#bbb"),
                showlegend=False,
                hoverinfo="skip",
            )
        )
    hover = [
        html.escape(
            f"{n}: {s.tokens_per_step:.2f} tokens a step, {s.wasted:.0f} drafts rejected over {s.steps:.0f} steps"
        )
        for n, s in zip(names, ordered.itertuples())
    ]
    fig.add_trace(
        go.Scatter(
            x=ordered["decode_speedup"],
            y=names,
            mode="markers",
            name="measured (decode)",
            marker=dict(color=PALETTE[0], size=9),
            hovertext=hover,
            hovertemplate="%{hovertext}<br>%{x:.3f}×<extra>measured</extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=ordered["oracle_speedup"],
            y=names,
            mode="markers",
            name="oracle bound",
            marker=dict(color=PALETTE[2], size=9, symbol="diamond"),
            hovertext=hover,
            hovertemplate="%{hovertext}<br>%{x:.3f}×<extra>oracle</extra>",
        )
    )
    layout(
        fig,
        "Per request: decode speedup and its oracle bound",
        "speedup × (baseline TPOT / request TPOT)",
        "",
        height=max(300, 28 * len(ordered) + 120),
    )
    return fig


def side_effects_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per speculative cell against its baseline: TTFT and TPOT ratios, prefix-cache hits, rejected drafts."""

    def times(v) -> str:
        return "–" if pd.isna(v) else f"{v:.2f}× ({v - 1:+.0%})"

    def share(v) -> str:
        return "–" if v is None or pd.isna(v) else f"{v:.0%}"

    records = frame.to_dict("records")
    return pd.DataFrame(
        {
            "setup": frame["setup"],
            "K, concurrency": [point_label(r).removeprefix(str(r["setup"]) + ", ") for r in records],
            "speedup (95%)": [intervals.value_text(r) for r in records],
            "TTFT mean": [times(r["ttft_mean_ratio"]) for r in records],
            "TTFT p99": [times(r["ttft_p99_ratio"]) for r in records],
            "TPOT mean": [times(r["tpot_mean_ratio"]) for r in records],
            "prefix-cache hits (cell / baseline)": [
                f"{share(r['prefix_cache_hit_rate'])} / {share(r['baseline_prefix_cache_hit_rate'])}" for r in records
            ],
            "rejected drafts": [_number(r["wasted_tokens"], ",.0f") for r in records],
            "rejected per output token": [_number(r["wasted_per_output_token"], ".2f") for r in records],
        }
    )


def pareto_figure(frame: pd.DataFrame) -> go.Figure:
    """Tokens/s per user against tokens/s per GPU, a marker per cell coloured by method; the front (no cell
    better on both) joined by a line, its cells labelled by K and concurrency (every cell's label would crowd
    where one concurrency's K sit together; the hover names each)."""
    if frame.empty:
        return empty_figure("No cell with a throughput and a concurrency for these filters.")
    fig = go.Figure()
    for j, (method, part) in enumerate(frame.groupby("method", sort=True)):
        records = part.to_dict("records")
        hover = [
            html.escape(
                f"{r['setup']}, K={_number(r['k'], '.0f')}, concurrency {r['concurrency']:.0f}: "
                f"{r['output_throughput']:,.1f} tok/s on {r['gpus']} GPU(s)"
            )
            for r in records
        ]
        fig.add_trace(
            go.Scatter(
                x=part["tokens_per_user"],
                y=part["tokens_per_gpu"],
                mode="markers+text",
                name=html.escape(method),
                text=[
                    (f"c{r['concurrency']:.0f}" + ("" if method == BASELINE_METHOD else f" K{_number(r['k'], '.0f')}"))
                    if r["on_front"]
                    else ""
                    for r in records
                ],
                textposition="top center",
                textfont=dict(size=9),
                marker=dict(
                    color="#333" if method == BASELINE_METHOD else PALETTE[j % len(PALETTE)],
                    size=10,
                    symbol=["star" if f else "circle" for f in part["on_front"]],
                ),
                hovertext=hover,
                hovertemplate="%{hovertext}<br>%{x:.1f} tok/s/user, %{y:.1f} tok/s/GPU<extra></extra>",
            )
        )
    front = frame[frame["on_front"]].sort_values("tokens_per_user")
    fig.add_trace(
        go.Scatter(
            x=front["tokens_per_user"],
            y=front["tokens_per_gpu"],
            mode="lines",
            name="Pareto front",
            line=dict(color="#999", dash="dash"),
            hoverinfo="skip",
        )
    )
    layout(
        fig,
        "Tokens/s per user vs tokens/s per GPU (stars: the Pareto front)",
        "tokens/s per user",
        "tokens/s per GPU",
        height=480,
    )
    return fig


def acceptance_over_output_figure(frame: pd.DataFrame) -> go.Figure:
    """Acceptance length against the generated-token index, a line per cell with its 95% band."""
    if frame.empty:
        return empty_figure("No requests with vLLM's per-step counts for these filters.")
    fig = go.Figure()
    for j, (cell, line) in enumerate(frame.groupby(["run_id", "cell"], sort=True)):
        color, first = PALETTE[j % len(PALETTE)], line.iloc[0]
        name = html.escape(
            f"{first['method']} K={first['k']:.0f}, c={first['concurrency']:.0f} · {cell[0]}"
            + ("" if first["placed"] else " (steps without a draft not placed)")
        )
        mid = (line["start"] + line["end"]) / 2
        band = line.dropna(subset=["al_lo", "al_hi"])
        if not band.empty:
            x = ((band["start"] + band["end"]) / 2).tolist()
            fig.add_trace(
                go.Scatter(
                    x=x + x[::-1],
                    y=band["al_hi"].tolist() + band["al_lo"].tolist()[::-1],
                    fill="toself",
                    fillcolor=color,
                    opacity=0.15,
                    line=dict(width=0),
                    hoverinfo="skip",
                    showlegend=False,
                    legendgroup=name,
                )
            )
        hover = [
            html.escape(
                f"tokens {s:.0f}–{e - 1:.0f}: AL {intervals.text(a, lo, hi, digits=2, why_none='')} "
                f"over {n:.0f} requests, {st:.0f} steps"
            )
            for s, e, a, lo, hi, n, st in zip(
                line["start"],
                line["end"],
                line["acceptance_length"],
                line["al_lo"],
                line["al_hi"],
                line["requests"],
                line["steps"],
            )
        ]
        fig.add_trace(
            go.Scatter(
                x=mid,
                y=line["acceptance_length"],
                mode="lines+markers",
                name=name,
                legendgroup=name,
                line=dict(color=color),
                hovertext=hover,
                hovertemplate="%{hovertext}<extra></extra>",
            )
        )
        if pd.notna(first["k"]):
            fig.add_trace(
                go.Scatter(
                    x=[line["start"].min(), line["end"].max()],
                    y=[first["k"] + 1] * 2,
                    mode="lines",
                    line=dict(color=color, **DOTTED),
                    legendgroup=name,
                    showlegend=False,
                    hovertemplate=f"K+1 = {first['k'] + 1:.0f}<extra></extra>",
                )
            )
    layout(
        fig,
        "Acceptance length over the output (band: 95% over requests; dotted: K+1)",
        "generated token index",
        "tokens per drafting step",
        height=500,
    )
    fig.update_layout(legend=dict(orientation="h", y=-0.2))  # long cell names: the plot keeps the width
    return fig


def ceiling_trace(
    fig: go.Figure, line: pd.DataFrame, y: str, color: str, name: str, group: str, *, marks: bool = False, **where
) -> None:
    """Add ``line``'s ceiling column ``y`` against concurrency in ``color``, in the legend group of its setup
    (shown and hidden with it, no legend entry of its own): a dotted line, or ``marks``: a dash at each point
    (a ceiling of each point's own K)."""
    known = line.dropna(subset=[y])
    if known.empty:
        return
    style = (
        dict(mode="markers", marker=dict(symbol="line-ew-open", size=18, line=dict(width=2, color=color)))
        if marks
        else dict(mode="lines", line=dict(color=color, **DOTTED))
    )
    fig.add_trace(
        go.Scatter(
            x=known["concurrency"],
            y=known[y],
            name=html.escape(name),
            legendgroup=group,
            showlegend=False,
            hovertemplate="%{x}: %{y:,.1f}<extra>" + html.escape(name) + "</extra>",
            **style,
        ),
        **where,
    )
