"""The Explorer's "vLLM versions" section: each setup measured on two or more vLLM versions, its speedup
per version with 95% intervals, and whether a version changed it (apart by the tie rule) or tied.
The data comes from ``specscope.analysis.versions``; this module only draws."""

from __future__ import annotations

import html
import zlib

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from specscope import schema
from specscope.analysis import explore, intervals, versions
from ui import cache, k_charts
from ui.chart_style import PALETTE, empty_figure, layout
from ui.common import figure_download

__all__ = ["figure", "sentence", "section"]

TITLE = "Speedup per vLLM version (each over its own baseline; bars: 95% interval)"


def _point(row: dict) -> str:
    k = f"K={int(row['k'])}" if pd.notna(row.get("k")) else ""
    c = f"concurrency {int(row['concurrency'])}" if pd.notna(row.get("concurrency")) else ""
    return ", ".join(part for part in (k, c) if part)


def figure(frame: pd.DataFrame, setup: str) -> go.Figure:
    """One line per K and concurrency of ``setup``: speedup against the vLLM version, oldest first."""
    lines = frame[frame["setup"] == setup]
    if lines.empty:
        return empty_figure("No setup measured on two or more vLLM versions for these filters.")
    fig = go.Figure()
    for j, (_, line) in enumerate(lines.groupby(["concurrency", "k"], sort=False, dropna=False)):
        records = line.to_dict("records")
        lo, hi = line["speedup_lo"].astype(float), line["speedup_hi"].astype(float)
        y = line["speedup"].astype(float)
        bars = dict(
            type="data",
            symmetric=False,
            thickness=1.2,
            width=6,
            array=[None if pd.isna(v) else float(v) for v in hi - y],
            arrayminus=[None if pd.isna(v) else float(v) for v in y - lo],
        )
        texts = [
            html.escape(
                f"vLLM {r['vllm_version']} (torch {r.get('torch_version') or '?'}): "
                f"{intervals.value_text(r)}, {int(r['repeats'])} repeats"
            )
            for r in records
        ]
        fig.add_trace(
            go.Scatter(
                x=[f"vLLM {v}" for v in line["version"]],
                y=y,
                mode="lines+markers",
                name=html.escape(_point(records[0]) or "speedup"),
                error_y=bars,
                hovertext=texts,
                hovertemplate="%{hovertext}<extra></extra>",
                line=dict(color=PALETTE[j % len(PALETTE)]),
            )
        )
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888")
    layout(fig, TITLE, "vLLM version", "speedup ×")
    fig.update_xaxes(type="category")
    fig.update_layout(height=420)
    return fig


def _table(found: pd.DataFrame) -> pd.DataFrame:
    """Every comparison of two neighbouring versions, one line each."""
    return pd.DataFrame(
        {
            "setup": found["setup"],
            "change": [
                f"changed: {d}"
                if v == versions.CHANGED
                else "tie (within noise)"
                if v == versions.TIE
                else "no verdict (1 run)"
                for v, d in zip(found["verdict"], found["direction"])
            ],
            "K": found["k"],
            "concurrency": found["concurrency"],
            "earlier vLLM": found["from_version"].astype(str) + ": " + found["from_speedup"],
            "later vLLM": found["to_version"].astype(str) + ": " + found["to_speedup"],
        }
    )


def sentence(change: dict) -> str:
    """``vLLM 0.31.0 → 0.32.0 at K=4, concurrency 1: 1.50× [..] → 2.00× [..]; a real change: faster ...``."""
    head = (
        f"vLLM {change['from_version']} → {change['to_version']}"
        f"{' at ' + _point(change) if _point(change) else ''}: {change['from_speedup']} → {change['to_speedup']}"
    )
    if change["verdict"] == versions.CHANGED:
        return f"{head}. A real change: {change['direction']} (beyond noise, by the one tie rule)."
    if change["verdict"] == versions.TIE:
        return f"{head}. A tie: within noise, the measurements cannot tell the versions apart."
    return f"{head}. No verdict: one of them is a single run, without an interval."


def section(filters: dict) -> None:
    """The section, drawn only where a setup was measured on two or more vLLM versions: a sentence
    on the landing page, the table, verdicts and figure once its expander opens."""
    frame = cache.frame(versions.per_version, filters)
    if frame.empty:
        return
    st.subheader("vLLM versions")
    found = cache.built("versions_changes", lambda: versions.changes(frame), frame)
    changed = found[found["verdict"] == versions.CHANGED]
    count = f"{found['setup'].nunique()} setup(s) measured on several vLLM versions"
    st.caption(
        (f"**{count}: no version changed a speedup beyond noise.** " if changed.empty else "")
        + "The same setup (model · method · dataset · hardware · host) measured on several vLLM versions. "
        "Each version's speedup divides by the baseline measured on that version; a change is flagged "
        "only where the two differ beyond noise (one rule for every tie on every page), otherwise the versions "
        "tie."
    )
    if not changed.empty:
        st.warning(
            f"{count}: {changed['setup'].nunique()} of them changed speed between two versions (95% intervals apart).",
            icon="⚠️",
        )
    # drawn only when opened: a table's and a figure's scripts would load ahead of the landing figure
    drawn = st.expander(
        "Each setup per vLLM version: the changes, their verdicts and the figure",
        key="explorer_versions_open",
        on_change="rerun",
    )
    if not drawn.open:
        return
    with drawn:
        st.dataframe(_table(found), hide_index=True, width="stretch", key="explorer_versions_table")
        # setups whose speedup changed come first
        setups = list(dict.fromkeys([*changed["setup"], *frame["setup"]]))
        setup = st.selectbox("Setup measured on several vLLM versions", setups, key="explorer_versions_setup")
        for change in found[found["setup"] == setup].to_dict("records"):
            text = html.escape(sentence(change))  # setup names come from result files
            if change["verdict"] == versions.CHANGED:
                st.warning(text, icon="⚠️")
            else:
                st.info(text, icon=":material/info:")
        folded = frame[(frame["setup"] == setup) & (frame["runs"] > 1)]
        if not folded.empty:  # each run's figure behind a folded one (expanders do not nest)
            keys = [*versions.SAME_SETUP, "concurrency", "k", *schema.VERSION_KEYS]
            runs = cache.frame(explore.point_runs, filters).merge(folded[keys], on=keys)
            st.caption(
                f"{len(folded)} of these figures {'are' if len(folded) > 1 else 'is'} the mean of several "
                f"runs. {k_charts.RUNS_CAPTION}"
            )
            st.table(k_charts.runs_table(runs).set_index("setup"))
        fig = figure(frame, setup)
        st.plotly_chart(fig, width="stretch", key=f"explorer_versions_fig_{zlib.crc32(setup.encode())}")
        figure_download(fig, "Speedup per vLLM version", key="explorer_dl_versions")
