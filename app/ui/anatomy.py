""" "Where a step goes": per method and K of one setup, a stacked bar of the measured step (verify, draft,
overhead, in ms, each labelled with its share), the measured D(K) in plain steps beside it, and the speedup.
The numbers come from ``specscope.analysis.anatomy``; this module only draws, inside an expander opened on demand."""

from __future__ import annotations

import html
import zlib

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from specscope import formats
from specscope.analysis import anatomy, intervals
from specscope.results import identity
from ui import cache
from ui.chart_style import PALETTE, empty_figure
from ui.common import figure_download

__all__ = ["setup_label", "bar_label", "figure", "section"]

COLOURS = {"verify": PALETTE[0], "draft": PALETTE[1], "overhead": PALETTE[3], "rest": "#BAB0AC", "step": "#D0D0D0"}
NAMES = {
    "verify": "verify (target over K+1 tokens)",
    "draft": "draft (K passes of the drafter)",
    "overhead": "overhead (the rest)",
    "rest": "draft + overhead (drafter not measured alone)",
    "step": "step, not split (no verify probe)",
}
TITLE = "Where a step goes"


def setup_label(row: dict) -> str:
    """``model · hardware · vLLM v · prompt set [· constrained (json_schema)] · concurrency c (run R)``: what every
    bar of one figure shares; a constrained cell is a setup of its own, never stacked with the free one."""
    response_format = row.get("response_format")
    constrained = f" · {identity.format_name(response_format)}" if formats.is_constrained(response_format) else ""
    return (
        f"{row['model']} · {row['hardware']} · vLLM {row.get('vllm_version') or '?'} · "
        f"{row.get('dataset') or 'no prompt set'}{constrained} · concurrency {int(row['concurrency'])} "
        f"(run {row['run_id']})"
    )


def bar_label(row: dict) -> str:
    """``draft_model K=4``: one bar."""
    return f"{row['method']} K={int(row['k'])}"


def _with_labels(table: pd.DataFrame) -> pd.DataFrame:
    records = table.to_dict("records")
    return table.assign(setup=[setup_label(r) for r in records], bar=[bar_label(r) for r in records])


def _shown(row: dict) -> list[str]:
    """The stacked parts of one bar: the three where all are measured, else what is."""
    if pd.notna(row.get("draft_ms")):
        return ["verify", "draft", "overhead"]
    if pd.notna(row.get("verify_ms")):
        return ["verify", "rest"]
    return ["step"]


def _hover(row: dict, part: str) -> str:
    value = row[f"{part}_ms"]
    text = intervals.text(value, row.get(f"{part}_lo"), row.get(f"{part}_hi"), unit=" ms", digits=2, why_none="")
    share = value / row["step_ms"]
    how = row.get(f"{part}_how") or ("the rest: step − verify" if part == "rest" else "")
    return html.escape(f"{bar_label(row)}, {part}: {text} ({share:.0%} of the step). {how}")


def _error_bars(records: list[dict], value: str, bounds: str) -> dict:
    """Plotly error bars from each record's ``<bounds>_lo``/``_hi`` (none where a cell was measured once)."""

    def gap(r: dict, end: str, sign: float) -> float | None:
        edge = r.get(f"{bounds}_{end}")
        return None if edge is None or pd.isna(edge) or pd.isna(r.get(value)) else sign * (edge - r[value])

    return dict(
        type="data",
        symmetric=False,
        thickness=1.2,
        width=5,
        array=[gap(r, "hi", 1.0) for r in records],
        arrayminus=[gap(r, "lo", -1.0) for r in records],
    )


def _text(row: dict, value: str, bounds: str, unit: str = "") -> str:
    return intervals.text(
        row.get(value), row.get(f"{bounds}_lo"), row.get(f"{bounds}_hi"), unit=unit, digits=2, why_none="1 run"
    )


def figure(table: pd.DataFrame, setup: str) -> go.Figure:
    """Stacked parts per method and K of ``setup`` (ms), the step's D(K) (plain steps, right axis), and the
    speedup (right panel) with their 95% intervals."""
    table = _with_labels(table) if "setup" not in table else table
    rows = table[table["setup"] == setup].sort_values(["method", "k"])
    if rows.empty:
        return empty_figure("No step anatomy for this setup.")
    records = rows.to_dict("records")
    bars = [r["bar"] for r in records]
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.66, 0.34],
        horizontal_spacing=0.12,
        specs=[[{"secondary_y": True}, {}]],
        subplot_titles=("Step time by part (ms) and D(K) (plain steps)", "Speedup"),
    )
    for part in ("verify", "draft", "overhead", "rest", "step"):
        y = [r[f"{part}_ms"] if part in _shown(r) else None for r in records]
        if all(v is None for v in y):
            continue
        fig.add_trace(
            go.Bar(
                x=bars,
                y=y,
                name=NAMES[part],
                marker_color=COLOURS[part],
                legendgroup=part,
                text=[f"{v / r['step_ms']:.0%}" if v is not None and r["step_ms"] else "" for v, r in zip(y, records)],
                textposition="inside",
                insidetextanchor="middle",
                hovertext=[_hover(r, part) if v is not None else "" for v, r in zip(y, records)],
                hovertemplate="%{hovertext}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    fig.add_trace(
        go.Scatter(
            x=bars,
            y=[r["step_ms"] for r in records],
            mode="markers",
            name="measured step (ms)",
            marker=dict(symbol="line-ew-open", size=18, color="#333"),
            error_y=_error_bars(records, "step_ms", "step"),
            hovertext=[
                html.escape(
                    f"{r['bar']}: step {_text(r, 'step_ms', 'step', ' ms')}, {r['tokens_per_step']:.2f} tokens a step"
                )
                for r in records
            ],
            hovertemplate="%{hovertext}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    for j, (method, line) in enumerate(rows.groupby("method", sort=False)):
        d = line["d"] if "d" in line else line["d_ms"]
        d = d.where(d.notna(), line["d_ms"])
        fig.add_trace(
            go.Scatter(
                x=list(line["bar"]),
                y=list(d),
                mode="lines+markers",
                name=html.escape(f"D(K), {method}"),
                line=dict(color="#222", dash="dot" if j % 2 else "solid", width=1.5),
                marker=dict(size=8, symbol="diamond"),
                hovertext=[
                    html.escape(
                        f"{r['bar']}: D = {anatomy.d_text(r, '1 run')} plain steps (tokens a step / "
                        f"speedup); from TPOT {r['d_ms']:.2f}"
                    )
                    for r in line.to_dict("records")
                ],
                hovertemplate="%{hovertext}<extra></extra>",
            ),
            row=1,
            col=1,
            secondary_y=True,
        )
    speedup = [r.get("speedup") for r in records]
    fig.add_trace(
        go.Bar(
            x=bars,
            y=speedup,
            name="speedup",
            marker_color=PALETTE[2],
            showlegend=False,
            text=[f"{s:.2f}×" if s is not None and pd.notna(s) else "" for s in speedup],
            textposition="outside",
            error_y=_error_bars(records, "speedup", "speedup"),
            hovertext=[html.escape(f"{r['bar']}: {intervals.value_text(r)}") for r in records],
            hovertemplate="%{hovertext}<extra></extra>",
        ),
        row=1,
        col=2,
    )
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888", row=1, col=2)
    top = max(float(pd.Series([r.get("d"), r.get("d_ms"), r.get("d_hi")]).max(skipna=True)) for r in records)
    fig.update_layout(
        barmode="stack",
        template="plotly_white",
        height=480,
        hovermode="closest",
        margin=dict(l=60, r=60, t=90, b=50),
        title=f"{TITLE}<br><sup>{html.escape(setup)}</sup>",
        legend=dict(orientation="h", y=-0.18, font=dict(size=11)),
    )
    fig.update_yaxes(title_text="ms per step", row=1, col=1, secondary_y=False)
    fig.update_yaxes(
        title_text="D(K), plain steps",
        row=1,
        col=1,
        secondary_y=True,
        rangemode="tozero",
        range=[0, top * 1.15],
        showgrid=False,
    )
    # the speedup's axis on the panel's right: on its left it would meet D(K)'s axis title in the gap between
    fig.update_yaxes(title_text="speedup ×", row=1, col=2, rangemode="tozero", side="right")
    return fig


def _table(rows: pd.DataFrame) -> pd.DataFrame:
    """The parts as text, one line per method and K, with how each was had."""
    out = []
    for r in rows.to_dict("records"):

        def part(name: str, r: dict = r) -> str:  # this row's part
            if pd.isna(r.get(f"{name}_ms")):
                return "not measured"
            return (
                intervals.text(
                    r[f"{name}_ms"], r.get(f"{name}_lo"), r.get(f"{name}_hi"), unit=" ms", digits=1, why_none=""
                )
                + f" ({r[f'{name}_ms'] / r['step_ms']:.0%})"
            )

        out.append(
            {
                "method, K": r["bar"],
                "step": part("step").rsplit(" (", 1)[0],
                "D (plain steps)": anatomy.d_text(r if "d" in r else {"d": r["d_ms"]}),
                "verify": part("verify"),
                "draft": part("draft"),
                "overhead": part("overhead"),
                "how": " · ".join(str(r.get(h)) for h in ("verify_how", "draft_how") if r.get(h)),
            }
        )
    return pd.DataFrame(out)


def section(key: str, filters: dict | None = None) -> None:
    """The expander, drawn only when opened: the setup chooser, the figure and the parts' table (of the cells
    ``filters`` pick; their baselines, probes and drafters come from the whole store)."""
    drawn = st.expander(
        "Where a step goes: verify, draft and overhead per method and K", key=f"{key}_anatomy_open", on_change="rerun"
    )
    if not drawn.open:
        return
    with drawn:
        table = cache.frame(_anatomy_table, filters)
        if table.empty:
            st.info(
                "No measured step to take apart: `specscope anatomy --measure --preset PRESET --prompts FILE` "
                "measures the baseline, the methods, ngram at each K and each draft model alone."
            )
            return
        table = _with_labels(table)
        setups = list(dict.fromkeys(table.sort_values("draft_ms", na_position="last")["setup"]))
        setup = st.selectbox("Setup", setups, key=f"{key}_anatomy_setup")
        st.caption(
            "A step's time (TPOT × tokens per step) split into verify: the step of ngram, a near-free "
            "drafter, at the same K (per drafting step); draft: K passes of the draft model, each its TPOT "
            "served alone; overhead: the rest. The line is D(K) = tokens per step / speedup in plain steps "
            "(right axis). Bars: 95% intervals over repeats. A part that could not be measured is said so, "
            "never filled in."
        )
        fig = cache.built("anatomy_figure", lambda: figure(table, setup), table, setup)
        st.plotly_chart(fig, width="stretch", key=f"{key}_anatomy_fig_{zlib.crc32(setup.encode())}")
        figure_download(fig, TITLE, key=f"{key}_anatomy_dl")
        st.dataframe(
            _table(table[table["setup"] == setup].sort_values(["method", "k"])),
            hide_index=True,
            width="stretch",
            key=f"{key}_anatomy_table",
        )


def _anatomy_table(store, filters) -> pd.DataFrame:
    return anatomy.from_store(store, filters)
