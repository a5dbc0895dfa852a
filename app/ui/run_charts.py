"""Charts of one sweep's per-prompt results: pure ``(DataFrame) -> go.Figure`` functions."""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

from specscope.analysis import per_prompt
from specscope.schema import BASELINE_METHOD
from ui.chart_style import empty_figure

__all__ = ["per_prompt_acceptance", "per_prompt_speedup", "NO_REQUESTS"]

# a run whose results came without their per-request rows (a results file copied or bundled alone)
NO_REQUESTS = (
    "No per-prompt figures: this run's per-request rows are not in the store (its results file came "
    "without its requests file); its cells are measured all the same."
)


def _setup(row) -> str:
    return html.escape(f"{row['method']} K={int(row['k'])} c={int(row['concurrency'])}{per_prompt.variant_label(row)}")


def _bars(frame: pd.DataFrame, column: str, title: str, y_title: str, source: str = "") -> go.Figure:
    fig = go.Figure()
    for _, group in frame.groupby(["method", "k", "concurrency", "variant"], sort=True):
        label = _setup(group.iloc[0])
        fig.add_bar(
            x=[html.escape(str(p)) for p in group["prompt_id"]],
            y=group[column],
            name=label,
            hovertemplate=f"{label}<br>prompt %{{x}}<br>{y_title} %{{y:.3f}}{source}<extra></extra>",
        )
    fig.update_layout(
        title=title,
        barmode="group",
        xaxis_title="prompt",
        yaxis_title=y_title,
        legend_title="cell",
        height=380,
        margin=dict(t=50, b=40),
    )
    return fig


def per_prompt_acceptance(frame: pd.DataFrame) -> go.Figure:
    """Per-request draft acceptance rate of each prompt, one bar group per SD cell."""
    if frame.empty:
        return empty_figure(NO_REQUESTS, height=260)
    data = frame[(frame["method"] != BASELINE_METHOD) & frame["acceptance_rate"].notna()]
    if data.empty:
        return empty_figure(
            "No acceptance per prompt: this run's servers reported no per-request acceptance "
            "(its speedups are measured all the same).",
            height=260,
        )
    formats = sorted(set(data.get("spec_decode_format", pd.Series(dtype=object)).dropna()))
    source = f"<br>from the server's {html.escape(', '.join(formats))}" if formats else ""  # the field, on hover
    return _bars(
        data, "acceptance_rate", "Drafted tokens accepted, per prompt", "share accepted (server's count)", source
    )


def per_prompt_speedup(frame: pd.DataFrame) -> go.Figure:
    """Baseline E2EL / SD E2EL per prompt (same concurrency): above 1 the prompt gains (plain words on the chart)."""
    if frame.empty:
        return empty_figure(NO_REQUESTS, height=260)
    data = frame[(frame["method"] != BASELINE_METHOD) & frame["speedup"].notna()]
    if data.empty:
        missing = "baseline (none)" if (frame["method"] != BASELINE_METHOD).any() else "speculative"
        return empty_figure(
            f"No per-prompt speedup: this run's per-request rows have no {missing} requests at "
            "the same concurrency to pair its prompts with.",
            height=260,
        )
    fig = _bars(data, "speedup", "Speedup per prompt (above 1: faster)", "times faster than the baseline")
    fig.add_hline(y=1.0, line_dash="dot", line_color="grey")
    return fig
