"""The Explorer's "Constrained vs free" section: speedup and acceptance with and without the prompts'
response formats side by side, the share of valid constrained answers, and each request's longest
inter-token gap (stalls). Data from ``specscope.results.structured``; drawn only when some run measured both."""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from specscope import formats
from specscope.analysis import intervals
from specscope.results import structured
from specscope.schema import BASELINE_METHOD
from ui import cache
from ui.chart_style import PALETTE, layout
from ui.common import figure_download

__all__ = ["section", "comparison_figure", "gaps_figure", "comparison_table"]

_COLOURS = {"free": PALETTE[0], "constrained": PALETTE[1]}
LABELLED = 4  # bar groups whose bars still hold their value as text


def _point(row: dict) -> str:
    """A bar group's label: method, K and concurrency, and below them what tells its setup from the others'."""
    k = "" if pd.isna(row.get("k")) else f" · K={row['k']:.0f}"
    c = "" if pd.isna(row.get("concurrency")) else f" · c={row['concurrency']:.0f}"
    told = " · ".join(p for p in str(row.get("setup") or "").split(" · ") if p and p != row["method"])
    return html.escape(f"{row['method']}{k}{c}") + (f"<br>{html.escape(told)}" if told else "")


def _told_apart(setups: pd.Series, response_formats: pd.Series) -> list[str]:
    """Each setup's name less its response format (free and constrained bars stand side by side) and less the
    parts every drawn setup shares (the model, the hardware ...): '' where one setup is drawn."""
    parts = [
        [p for p in str(s).split(" · ") if p != formats.constrained_label(f)] for s, f in zip(setups, response_formats)
    ]
    shared = set.intersection(*(set(p) for p in parts)) if parts else set()
    return [" · ".join(p for p in names if p not in shared) for names in parts]


def comparison_figure(frame: pd.DataFrame) -> go.Figure:
    """Two panels, free and constrained bars side by side per method, K and concurrency: speedup over
    each one's own baseline (95% intervals), and acceptance length."""
    spec = frame[frame["method"] != BASELINE_METHOD]
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=(
            "Speedup × its own baseline (bars: 95% interval)",
            "Acceptance length (tokens / drafting step)",
        ),
    )
    setups = spec.assign(setup=_told_apart(spec["setup"], spec["response_format"])) if "setup" in spec else spec
    for name in ("free", "constrained"):
        part = setups[setups["response_format"].map(formats.is_constrained) == (name == "constrained")]
        records = part.to_dict("records")
        x = [_point(r) for r in records]
        bars = dict(
            type="data",
            symmetric=False,
            array=[None if pd.isna(r["speedup_hi"]) else r["speedup_hi"] - r["speedup"] for r in records],
            arrayminus=[None if pd.isna(r["speedup_lo"]) else r["speedup"] - r["speedup_lo"] for r in records],
            thickness=1.2,
            width=4,
        )
        hover = [
            html.escape(
                f"{r['format']}: {intervals.value_text(r)}; valid "
                f"{'–' if pd.isna(r['valid_share']) else format(r['valid_share'], '.0%')}"
            )
            for r in records
        ]
        # the value at its bar's foot, clear of the error bar (which is the interval; the hover says both), and
        # only while bars are wide enough: the full "1.20× [1.03, 1.40]" above each bar ran into the next one
        fig.add_trace(
            go.Bar(
                x=x,
                y=part["speedup"],
                name=name,
                marker_color=_COLOURS[name],
                error_y=bars,
                text=[f"{r['speedup']:.2f}×" for r in records] if len(records) <= LABELLED else None,
                textposition="inside",
                insidetextanchor="start",
                textangle=0,
                textfont=dict(size=12),
                hovertext=hover,
                hoverinfo="text+x",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Bar(
                x=x,
                y=part["acceptance_length"],
                name=name,
                marker_color=_COLOURS[name],
                showlegend=False,
                hovertemplate="%{x}: %{y:.2f}<extra>" + name + "</extra>",
            ),
            row=1,
            col=2,
        )
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888", row=1, col=1)
    layout(fig, "", "", "")
    fig.update_layout(barmode="group", height=420, margin=dict(t=40))
    fig.update_xaxes(type="category")
    return fig


def gaps_figure(gaps: pd.DataFrame) -> go.Figure:
    """Each request's longest gap between streamed chunks, per method and format; invalid answers
    marked with a cross."""
    fig = go.Figure()
    gaps = gaps.assign(
        group=[f"{m} · {structured.format_label(f)}" for m, f in zip(gaps["method"], gaps["response_format"])]
    )
    for valid, symbol, label in (
        (True, "circle", "valid answer"),
        (False, "x", "invalid answer"),
        (None, "circle-open", "free (no format)"),
    ):
        part = gaps[gaps["valid"].isna()] if valid is None else gaps[gaps["valid"].fillna(not valid) == valid]
        if part.empty:
            continue
        hover = [
            html.escape(
                f"{p} ({c}): longest gap {g:.0f} ms, mean {m:.0f} ms, {n:.0f} tokens"
                + (f"; {why}" if isinstance(why, str) else "")
            )
            for p, c, g, m, n, why in zip(
                part["prompt_id"],
                part["cell_id"],
                part["max_itl_ms"],
                part["mean_itl_ms"].fillna(0),
                part["output_tokens"].fillna(0),
                part["invalid_reason"],
            )
        ]
        fig.add_trace(
            go.Box(
                x=[html.escape(g) for g in part["group"]],
                y=part["max_itl_ms"],
                name=label,
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                marker_symbol=symbol,
                fillcolor="rgba(0,0,0,0)",
                line_color="rgba(0,0,0,0)",
                marker_color="#E45756" if valid is False else PALETTE[0 if valid is None else 1],
                hovertext=hover,
                hoverinfo="text",
            )
        )
    layout(
        fig,
        "Longest inter-token gap per request (a stall shows as a high point)",
        "",
        "longest gap between chunks (ms)",
    )
    fig.update_layout(height=400, boxmode="overlay")
    fig.update_xaxes(type="category")
    return fig


def comparison_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """The side-by-side rows as shown (speculative setups: a baseline is 1× on both sides by definition):
    speedups with intervals, acceptance, validity, longest gaps."""
    pairs = pairs[pairs["method"] != BASELINE_METHOD]
    records = pairs.to_dict("records")

    def figure(prefix: str, row: dict, digits: str = "{:.2f}", column: str = "acceptance_length") -> str:
        value = row.get(f"{prefix}_{column}")
        return "" if value is None or pd.isna(value) else digits.format(value)

    def speedup(prefix: str, row: dict) -> str:
        return intervals.value_text({k.removeprefix(f"{prefix}_"): v for k, v in row.items() if k.startswith(prefix)})

    return pd.DataFrame(
        {
            "setup": pairs["setup"],
            "K": [("" if pd.isna(k) else f"{k:.0f}") for k in pairs["k"]],
            "concurrency": [("" if pd.isna(c) else f"{c:.0f}") for c in pairs["concurrency"]],
            "speedup free (95%)": [speedup("free", r) for r in records],
            "speedup constrained (95%)": [speedup("constrained", r) for r in records],
            "valid constrained answers": ["" if pd.isna(v) else f"{v:.0%}" for v in pairs["valid_share"]],
            "acceptance length free": [figure("free", r) for r in records],
            "acceptance length constrained": [figure("constrained", r) for r in records],
            "longest gap free (ms)": [figure("free", r, "{:.0f}", "max_itl_ms") for r in records],
            "longest gap constrained (ms)": [figure("constrained", r, "{:.0f}", "max_itl_ms") for r in records],
            "run": pairs["run_id"],
        }
    )


def section(filters: dict) -> None:
    """The section, when a run of the filtered results measured a setup both free and constrained."""
    frame = cache.frame(structured.by_response_format, filters)
    if frame.empty:
        return
    st.subheader("Constrained vs free (structured output)")
    shares = cache.built(
        "structured_valid_shares",
        lambda: frame.loc[frame["response_format"].map(formats.is_constrained), "valid_share"].dropna(),
        frame,
    )
    st.caption(
        "Each cell divides by the baseline of its own run **with the same response format**: a constrained "
        "cell by the constrained baseline, a free one by the free baseline. Constrained answers end where "
        "their format closes, at most at the output length asked (an answer cut there is invalid); free "
        "ones run to the fixed output length. Constrained cells hold only the prompts that carry a format. "
        + (
            f"Valid constrained answers: {shares.min():.0%} in the worst cell, "
            f"{'every' if (shares == 1).all() else 'not every'} cell fully valid."
            if not shares.empty
            else ""
        )
    )
    # Drawn only when opened: plotly's scripts would load ahead of the landing page's first figure.
    drawn = st.expander(
        "Speedup, acceptance, validity and longest gaps, free vs constrained",
        key="explorer_structured_open",
        on_change="rerun",
    )
    if not drawn.open:
        return
    with drawn:
        fig = cache.built("fig_structured", lambda: comparison_figure(frame), frame)
        st.plotly_chart(fig, width="stretch", key="explorer_fig_structured")
        figure_download(fig, "Constrained vs free", key="explorer_dl_structured")
        st.dataframe(
            comparison_table(structured.side_by_side(frame)),
            hide_index=True,
            width="stretch",
            key="explorer_structured_table",
        )
        gaps = cache.frame(structured.request_gaps, filters)
        if not gaps.empty:
            st.plotly_chart(
                cache.built("fig_structured_gaps", lambda: gaps_figure(gaps), gaps),
                width="stretch",
                key="explorer_fig_structured_gaps",
            )
