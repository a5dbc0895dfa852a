"""The Explorer's "Against the limits" section: each cell against its roofline and K+1 ceilings with its
oracle bound, side effects beside TPOT, the Pareto of tokens/s per user and per GPU, and acceptance over
the output. Drawn only once its expander opens, each tab only once chosen; data from ``specscope.analysis.limits``,
``specscope.engine.roofline`` and ``specscope.analysis.output_acceptance``."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import streamlit as st

from specscope.analysis import explore, explore_text, limits, output_acceptance
from specscope.engine import roofline
from specscope.results import identity
from ui import cache, limit_charts
from ui.common import figure_download, plain, store

__all__ = ["section", "TITLE"]

TITLE = "Against the limits: rooflines, oracle bound, side effects, Pareto, acceptance over the output"


def _labelled(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(setup=identity.unique_labels(frame.to_dict("records")) if not frame.empty else [])


def _limits_tab(filters: dict | None) -> None:
    found_cells = cache.frame(limits.cells, filters)
    cells = cache.built(
        "limits_cells",
        lambda: _labelled(found_cells).sort_values(  # oracle, then ceiling first
            ["oracle_speedup", "ceiling_tok_s"], key=lambda c: c.isna(), kind="stable"
        ),
        found_cells,
    )
    if cells.empty:
        st.info("No speculative cell with a matching baseline for these filters.")
        return
    st.caption(
        "The roofline: a step reads every weight once and each sequence's KV cache, and does 2 FLOPs per "
        "weight for each of concurrency × (K+1) tokens; its time is at least the larger over the GPUs' "
        "datasheet bandwidth and bf16 peak, and a sequence gains at most K+1 tokens a step. The oracle bound: "
        "the same accepted tokens had every step drafted only what was accepted (within its K), a drafted "
        'token costing what the cell\'s own timing says (README, "How the numbers are made").'
    )
    above = [r for r in cells.to_dict("records") if roofline.above(r)]
    if above:
        st.warning(
            f"{len(above)} cell{'s are' if len(above) > 1 else ' is'} above a physical ceiling, so flagged, "
            "not believed: "
            + "; ".join(f"{plain(explore_text.point_label(r))}: {'; '.join(roofline.above(r))}" for r in above[:5]),
            icon=":material/warning:",
        )
    missing = Counter(cells.loc[cells["ceiling_tok_s"].isna(), "ceiling_note"])
    if missing:
        st.caption(
            "No roofline drawn for "
            + "; ".join(f"{n} cell{'s' if n > 1 else ''}: {plain(why)}" for why, n in missing.most_common())
            + "."
        )
    st.dataframe(limit_charts.cells_table(cells), hide_index=True, width="stretch", key="explorer_limits_table")
    found = cache.frame(limits.oracle_cells, filters)
    if found.empty or cells["oracle_speedup"].isna().all():
        st.caption(
            "No cell here has requests with vLLM's per-step counts and a baseline in its run (SpecScope "
            "records them with --per-request-spec-decode-metrics detailed), so no oracle bound."
        )
        return
    fig = cache.built("fig_oracle", lambda: limit_charts.oracle_figure(cells), cells)
    st.plotly_chart(fig, width="stretch", key="explorer_fig_oracle")
    figure_download(fig, "Speedup and its oracle bound", key="explorer_dl_oracle")
    names = [f"{r['run_id']} · {r['cell']}" for r in found.to_dict("records")]
    chosen = st.selectbox("A cell's requests", names, key="explorer_oracle_cell")
    cell = found.iloc[names.index(chosen)].to_dict()
    requests = cache.built("oracle_requests", lambda: limits.oracle_requests(store(), cell), found, chosen)
    st.caption(
        f"A drafted token costs {cell['per_token_cost']:.1%} of a plain step here (its steps took "
        f"{cell['step_ratio']:.2f}× a plain step, {cell['wasted_per_step']:.2f} rejected drafts a step)."
    )
    st.plotly_chart(limit_charts.request_oracle_figure(requests), width="stretch", key="explorer_fig_oracle_requests")


def _of_rows(name: str, build, filters: dict | None) -> pd.DataFrame:
    """``build`` of the filtered result rows (``Store.speedup``), with setup labels, once per content."""
    rows = cache.frame(explore.filtered_rows, filters)
    return cache.built(name, lambda: _labelled(build(rows)), rows)


def _side_effects_tab(filters: dict | None) -> None:
    found = _of_rows("side_effects", limits.side_effects, filters)
    if found.empty:
        st.info("No speculative cell with a matching baseline for these filters.")
        return
    st.caption(
        "Each speculative cell against the baseline it divides by: TTFT mean and p99 and TPOT mean as ratios "
        "(above 1×: slower), the prefix-cache hit rate of both (a drafter's blocks can crowd the cache out), "
        "and the draft tokens the target rejected: work done for nothing. – where either side lacks a figure."
    )
    known = found[list(limits.SIDE_EFFECT_COLUMNS)].notna().sum(axis=1)  # the most figures first
    st.dataframe(
        limit_charts.side_effects_table(found.loc[known.sort_values(ascending=False, kind="stable").index]),
        hide_index=True,
        width="stretch",
        key="explorer_side_effects_table",
    )


def _pareto_tab(filters: dict | None) -> None:
    frame = _of_rows("pareto", limits.pareto, filters)
    if frame.empty:
        st.info("No cell with a throughput and a concurrency for these filters.")
        return
    names = list(dict.fromkeys(frame.sort_values("output_throughput", ascending=False)["front_group"]))
    chosen = st.selectbox("Model · prompts · hardware", names, key="explorer_pareto_group")
    shown = frame[frame["front_group"] == chosen]
    st.caption(
        "Tokens/s per user = output throughput / concurrency; per GPU = output throughput / the GPUs of the "
        "hardware label (a CPU counts as one), as `vllm bench sweep plot_pareto` computes them. Stars: cells "
        "no other cell of the same setup beats on both (methods, K and concurrency together)."
    )
    fig = cache.built("fig_pareto", lambda: limit_charts.pareto_figure(shown), shown)
    st.plotly_chart(fig, width="stretch", key="explorer_fig_pareto")
    figure_download(fig, "Pareto", key="explorer_dl_pareto")


def _acceptance_tab(filters: dict | None) -> None:
    curves = cache.frame(output_acceptance.curves, filters)
    if curves.empty:
        st.info(
            "No requests carry vLLM's per-step counts for these filters; `bash data/measure_long_output.sh` "
            "measures some on this machine."
        )
        return
    runs = list(dict.fromkeys(curves.sort_values("run_id")["run_id"]))
    run = st.selectbox("Run", runs, key="explorer_output_acceptance_run") if len(runs) > 1 else runs[0]
    shown = curves[curves["run_id"] == run]
    decays = shown.drop_duplicates("cell")
    st.caption(
        "Each drafting step sits at the generated token it starts at, from vLLM's per-step counts; a bin's "
        "acceptance length is the mean over its requests, with a 95% band. "
        + "; ".join(f"{plain(r.method)} K={r.k:.0f}: last bin {r.decay:.2f}× the first" for r in decays.itertuples())
        + "."
    )
    fig = cache.built("fig_output_acceptance", lambda: limit_charts.acceptance_over_output_figure(shown), shown)
    st.plotly_chart(fig, width="stretch", key="explorer_fig_output_acceptance")
    figure_download(fig, "Acceptance over the output", key="explorer_dl_output_acceptance")


def section(filters: dict | None) -> None:
    """The section: an expander whose tabs draw only once chosen."""
    opened = st.expander(TITLE, key="explorer_limits_open", on_change="rerun", icon=":material/speed:")
    if not opened.open:
        return
    with opened:
        tabs = st.tabs(
            ["Roofline and oracle", "Side effects", "Pareto", "Acceptance over the output"],
            key="explorer_limits_tabs",
            on_change="rerun",
        )
        for tab, draw in zip(tabs, (_limits_tab, _side_effects_tab, _pareto_tab, _acceptance_tab)):
            if tab.open:
                with tab:
                    draw(filters)
