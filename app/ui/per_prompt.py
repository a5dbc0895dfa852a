"""Where speculation pays, per prompt: speedup and acceptance by category or prompt length (with
95% intervals), the prompts slower than their baseline, each openable in Live; and Live's prefill
from such a link. The Explorer and the Runs page draw the section with ``section``."""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from specscope.analysis import intervals, per_prompt
from specscope.live import PaneSpec
from specscope.prompts import library
from specscope.schema import BASELINE_METHOD
from ui import cache
from ui.chart_style import PALETTE, empty_figure, layout
from ui.common import plain

__all__ = ["section", "by_group", "prefill_live"]

BY = {"category": "Category", "prompt_length": "Prompt length (tokens)"}
LIVE_PREFILLED = "live_prefilled"  # the Live link (query) whose prompt and servers were filled in
_QUERY = ("dataset", "prompt_id", "method", "k", "max_tokens")


def _cell_name(row) -> str:
    return f"{row['method']} K={int(row['k'])} c={int(row['concurrency'])}{per_prompt.variant_label(row)}"


def by_group(frame: pd.DataFrame, value: str, title: str, y_title: str) -> go.Figure:
    """``value`` (speedup or acceptance_length) per group, one trace per method cell (a constrained cell apart
    from the free one of the same method, K and concurrency, its legend entry saying so), with its 95%
    interval as error bars; a group too small for an interval is a hollow marker with no bar, and
    says so on hover. Speedup draws the baseline at 1.000x."""
    data = frame[(frame["method"] != BASELINE_METHOD) & frame[value].notna()]
    if data.empty:
        return empty_figure(
            "No per-prompt speedups: the run needs per-request rows of a baseline and a method cell."
            if value == "speedup"
            else "No acceptance per prompt: this run's servers "
            "reported no per-request acceptance (its speedups are measured all the same).",
            height=300,
        )
    fig = go.Figure()
    # one trace per cell: a constrained cell (or one on another vLLM) apart from the free one, named so
    for n, (_, rows) in enumerate(data.groupby(["method", "k", "concurrency", "variant"], sort=True)):
        name = html.escape(_cell_name(rows.iloc[0]))
        bounded = rows[f"{value}_lo"].notna() & rows[f"{value}_hi"].notna()
        for part, with_interval in ((rows[bounded], True), (rows[~bounded], False)):
            if not part.empty:  # a group without an interval goes in a trace of its own that has no error bars
                _group_points(
                    fig,
                    part,
                    value,
                    name,
                    PALETTE[n % len(PALETTE)],
                    with_interval,
                    legend=with_interval or not bounded.any(),
                )
    layout(fig, title, "", y_title, height=380)
    fig.update_layout(scattermode="group", legend_title="cell", showlegend=True)  # one cell: still named
    fig.update_xaxes(type="category")
    if value == "speedup":
        fig.add_hline(
            y=1.0,
            line_dash="dot",
            line_color="grey",
            annotation_text="baseline 1.000×",
            annotation_position="bottom right",
        )
    return fig


def _group_points(
    fig: go.Figure, rows: pd.DataFrame, value: str, name: str, color: str, with_interval: bool, legend: bool
) -> None:
    """One cell's groups as markers: filled with their error bars, or hollow with none (too few prompts);
    both parts of a cell share its offset and legend entry."""
    speedup = value == "speedup"
    lo, hi = rows[f"{value}_lo"], rows[f"{value}_hi"]
    texts = [
        intervals.text(
            v,
            a,
            b,
            unit="×" if speedup else "",
            digits=3 if speedup else 2,
            why_none=intervals.too_few(int(p)) if p < intervals.MIN_GROUP else "",
        )
        for v, a, b, p in zip(rows[value], lo, hi, rows["prompts"])
    ]
    bars = (
        dict(
            type="data",
            symmetric=False,
            thickness=1.2,
            width=5,
            array=(hi - rows[value]).tolist(),
            arrayminus=(rows[value] - lo).tolist(),
        )
        if with_interval
        else None
    )
    fig.add_scatter(
        x=[html.escape(str(g)) for g in rows["group"]],
        y=rows[value],
        name=name,
        mode="markers",
        legendgroup=name,
        offsetgroup=name,
        showlegend=legend,
        error_y=bars,
        marker=dict(
            size=10, color=color, symbol="circle" if with_interval else "circle-open", line=dict(width=2, color=color)
        ),
        customdata=list(zip(texts, rows["prompts"], rows["verdict"], rows["slower_prompts"])),
        hovertemplate=f"{name}<br>%{{x}}: %{{customdata[0]}}<br>%{{customdata[1]}} prompts, "
        "%{customdata[2]}, %{customdata[3]} slower than baseline<extra></extra>",
    )


def _slower_table(slow: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "prompt": slow["prompt_id"],
            "cell": [_cell_name(r) for _, r in slow.iterrows()],
            "category": slow["category"],
            "prompt tokens": slow["prompt_tokens"],
            "speedup [95%]": [
                intervals.text(r["speedup"], r["speedup_lo"], r["speedup_hi"], unit="×") for _, r in slow.iterrows()
            ],
            "within noise": ["tie" if tie else "slower" for tie in slow["within_noise"]],
            "acceptance length": slow["acceptance_length"].round(2),
            "run": slow["run_id"],
        }
    )


def _open_in_live(slow: pd.DataFrame, key: str) -> None:
    """Pick a slow prompt and open Live with it and its cell's method beside the baseline."""
    labels = [f"{r['prompt_id']} · {_cell_name(r)} · {r['speedup']:.3f}× · {r['run_id']}" for _, r in slow.iterrows()]
    cols = st.columns([3, 1])
    chosen = cols[0].selectbox(
        "Open a slow prompt in Live", range(len(slow)), format_func=labels.__getitem__, key=f"{key}_slow_pick"
    )
    row = slow.iloc[chosen]
    query = {"dataset": row["dataset"], "prompt_id": row["prompt_id"], "method": row["method"], "k": str(int(row["k"]))}
    if pd.notna(row.get("output_len")):  # Live asks for as many tokens as the sweep did
        query["max_tokens"] = str(int(row["output_len"]))
    cols[1].page_link("views/live.py", label="Open in Live", icon=":material/play_circle:", query_params=query)


FOLDED = "By category and prompt length, and the slower prompts (open one in Live)"


def section(filters: dict | None, key: str, *, folded: bool = False) -> None:
    """The per-prompt section for the runs ``filters`` keep: by category or prompt length, and the
    slower-than-baseline list. ``folded``: a sentence on the newest run, the rest drawn only once its
    expander opens (the Explorer's landing page loads no plotly, table or chooser)."""
    rows = cache.frame(per_prompt.per_prompt, filters)
    if rows.empty:
        st.info("No per-prompt rows here: SpecScope's own sweeps record every request; imported results have none.")
        return
    runs, datasets, kinds = cache.built(
        "per_prompt_runs",
        lambda: (
            per_prompt.runs(rows),
            rows.groupby("run_id")["dataset"].first(),
            rows.groupby("run_id")["category"].nunique(),
        ),
        rows,
    )
    if folded:
        slow = cache.built(
            "per_prompt_slower", lambda: per_prompt.slower_rows(rows[rows["run_id"] == runs[0]]), rows, runs[:1]
        )
        st.markdown(
            f"Run {plain(runs[0])} ({plain(datasets[runs[0]])}"
            f"{f', the newest of {len(runs)}' if len(runs) > 1 else ''}): {_slower(slow)}."
        )
        drawn = st.expander(FOLDED, key=f"{key}_per_prompt_open", on_change="rerun")
        if not drawn.open:
            return
        with drawn:
            _body(rows, runs, datasets, kinds, key)
        return
    _body(rows, runs, datasets, kinds, key)


def _slower(slow: pd.DataFrame) -> str:
    if slow.empty:
        return "no prompt ran slower than its baseline"
    return (
        f"{len(slow)} prompt-cell pair{'s' if len(slow) > 1 else ''} slower than the baseline, "
        f"{int(slow.within_noise.sum())} of them within noise"
    )


def _body(rows: pd.DataFrame, runs: list[str], datasets: pd.Series, kinds: pd.Series, key: str) -> None:
    if len(runs) > 1:
        runs = [
            st.selectbox(
                "Run",
                runs,
                key=f"{key}_per_prompt_run",
                format_func=lambda r: (
                    f"{r} ({datasets[r]}, {kinds[r]} {'category' if kinds[r] == 1 else 'categories'})"
                ),
            )
        ]
    every, rows = rows, rows[rows["run_id"].isin(runs)]
    _charts(rows, key)
    slow = cache.built("per_prompt_slower", lambda: per_prompt.slower_rows(rows), every, runs)
    st.markdown(
        f"**Slower than baseline** ({len(slow)} prompt-cell pairs"
        f"{f', {int(slow.within_noise.sum())} of them within noise' if len(slow) else ''})"
    )
    if slow.empty:
        st.success("No prompt ran slower than its baseline.")
        return
    st.dataframe(_slower_table(slow), hide_index=True, width="stretch", key=f"{key}_per_prompt_slower")
    _open_in_live(slow, key)


def _charts(rows: pd.DataFrame, key: str) -> None:
    """Speedup and acceptance length by the chosen grouping, with their intervals."""
    dimension = st.radio("Group prompts by", list(BY), format_func=BY.get, horizontal=True, key=f"{key}_per_prompt_by")
    grouped = cache.built(f"per_prompt_{dimension}", lambda: per_prompt.group(rows, dimension), rows, dimension)
    left, right = st.columns(2)
    left.plotly_chart(
        cache.built(
            "fig_per_prompt_speedup",
            lambda: by_group(
                grouped, "speedup", f"Speedup by {BY[dimension].lower()}", "speedup (geometric mean over prompts)"
            ),
            grouped,
            dimension,
        ),
        key=f"{key}_per_prompt_speedup",
    )
    right.plotly_chart(
        cache.built(
            "fig_per_prompt_acceptance",
            lambda: by_group(
                grouped, "acceptance_length", f"Acceptance length by {BY[dimension].lower()}", "tokens per step"
            ),
            grouped,
            dimension,
        ),
        key=f"{key}_per_prompt_acceptance",
    )
    st.caption(
        "A prompt's speedup: its requests' tokens/s (TTFT included) over the same prompt's in the run's "
        "baseline at the same concurrency and response format. A group reads the geometric mean of its "
        "prompts' speedups "
        f"[{intervals.WORDS}: t-interval over prompts; acceptance length stays at least 1]. A group of fewer "
        f"than {intervals.MIN_GROUP} prompts is too few for an interval: a hollow marker, no bar, no verdict. "
        "An interval that holds 1 is a tie with the baseline."
    )


def _pick_servers(launched: dict[str, PaneSpec], method: str, k: str) -> list[str]:
    """The launched baseline servers and those of ``method`` (those at K ``k`` when there are any)."""
    speculative = [name for name, spec in launched.items() if spec.method == method]
    same_k = [
        name
        for name in speculative
        if str((launched[name].speculative_config or {}).get("num_speculative_tokens")) == k
    ]
    baseline = [name for name, spec in launched.items() if spec.method == BASELINE_METHOD]
    return baseline[:1] + (same_k or speculative)[:1]


def prefill_live(launched: dict[str, PaneSpec]) -> str | None:
    """Once per link: fill Live's prompt, servers and max tokens from a slow prompt's link (query parameters
    ``dataset``, ``prompt_id``, ``method``, ``k``, ``max_tokens``); returns what it filled in, or why it could
    not."""
    query = {name: st.query_params.get(name) for name in _QUERY}
    if not query["dataset"] or not query["prompt_id"]:
        return None
    signature = repr(sorted(query.items()))
    if st.session_state.get(LIVE_PREFILLED) == signature:
        return None
    st.session_state[LIVE_PREFILLED] = signature
    found = library.find(query["dataset"], query["prompt_id"])
    shown = {name: plain(value or "") for name, value in query.items()}
    if found is None:
        return (
            f"Prompt {shown['prompt_id']} of set '{shown['dataset']}' is in no prompt set here; "
            "upload the set on the Runs page to open it."
        )
    path, prompt = found
    st.session_state.update(
        {"live_prompt_source": "From a prompt set", "live_prompt_set": path, "live_prompt_item": prompt}
    )
    max_tokens = query["max_tokens"] or ""
    if max_tokens.isdigit():  # the output length the sweep asked for
        st.session_state["live_max_tokens"] = max(1, min(4096, int(max_tokens)))
    servers = _pick_servers(launched, query["method"] or "", query["k"] or "")
    st.session_state["live_launched"] = servers
    wanted = f"the baseline and {shown['method']} K={shown['k']}"
    filled = f"Prompt {shown['prompt_id']} of '{shown['dataset']}'" + (
        f" with the sweep's {st.session_state['live_max_tokens']} max tokens"
        if (query["max_tokens"] or "").isdigit()
        else ""
    )
    if len(servers) < 2:
        return (
            f"{filled} is filled in; start {wanted} on the Servers page (or add them by URL below) to "
            "compare them on it."
        )
    return f"{filled} and {wanted} ({', '.join(plain(s) for s in servers)}) are filled in."
