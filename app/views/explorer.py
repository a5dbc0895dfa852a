"""Explorer: what speculative decoding buys, from every results file SpecScope knows."""

from __future__ import annotations

import json
import zlib

import pandas as pd
import streamlit as st

from specscope import schema
from specscope.advice import deploy, fitting
from specscope.analysis import explore, explore_text, intervals, verdict
from specscope.errors import SpecScopeError
from specscope.results import datasets, tool_exports
from ui import (
    anatomy,
    cache,
    charts,
    figures,
    headline,
    import_form,
    k_charts,
    limits_view,
    per_prompt,
    structured,
    versions_view,
)
from ui.access import is_operator
from ui.chart_style import vega_spec
from ui.common import figure_download, fragment, or_stop, plain, shared_store_note, show_error

FILTERS = [
    ("source", "Source"),
    ("model", "Model"),
    ("draft_model", "Draft / head"),
    ("method", "Method"),
    ("dataset", "Dataset"),
    ("response_format", "Response format"),
    ("hardware", "Hardware"),
    ("host", "Host"),
]

st.title("Explorer")
st.caption(
    "Speedup = output throughput with speculative decoding / without, same model, dataset, "
    "hardware, host, output length and concurrency, over the baseline **the same run** measured "
    "(a run without one uses the newest matching baseline of another run; the table names the "
    "baseline run). Error bars and [low, high] are 95% intervals over a cell's repeats (speedup: "
    f"{intervals.SPEEDUP_INTERVALS}; over its requests for an import from {tool_exports.names()} that "
    "keeps them); a single run has none."
)

# The sidebar's forms are drawn only when opened: their scripts would load ahead of the first figure.
# Importing is an operator's (it writes results every viewer then sees).
if is_operator():
    with st.sidebar:
        importing = st.expander(
            "Import results", key="explorer_import_open", on_change="rerun", icon=":material/upload_file:"
        )
        if importing.open:
            with importing:
                upload = st.file_uploader(
                    import_form.uploader_label(st.get_option("server.maxUploadSize")),
                    type=import_form.TYPES,
                    key="explorer_upload",
                )
                source_name = st.text_input("Source name (optional)", key="explorer_source")
                if upload is not None:
                    import_form.import_upload(upload, source_name or None)
                st.caption(
                    "Published: Ruiz 2026, draft_model and EAGLE-3 vs none on Qwen3-32B and Llama-3.3-70B, "
                    "K 0–8, concurrency 1–256 (262 rows, needs internet)."
                )
                if st.button("Download and import Ruiz 2026", key="explorer_download_ruiz"):
                    bar = st.progress(0.0, text="downloading")
                    try:
                        datasets.download_ruiz(
                            progress=lambda done, total: bar.progress(
                                min(1.0, done / total) if total else 0.0, text=f"{done // 1024} KiB"
                            )
                        )
                        st.success("Imported the Ruiz results.")
                    except SpecScopeError as exc:
                        show_error(exc)

try:
    facets = cache.facets()
    shared_store_note()
except SpecScopeError as exc:
    show_error(exc)
    st.stop()

if not facets["model"]:
    st.info("No results yet. Import a file (Import results, in the sidebar), or run a sweep on the Runs page.")
    st.stop()

sources = or_stop(cache.table, explore.bundled_sources)
if not sources.empty:
    # Drawn only when opened: a table's scripts would load ahead of the headline and first figure.
    where = st.expander(
        cache.built("bundled_label", lambda: explore_text.bundled_label(sources), sources),
        key="explorer_sources_open",
        on_change="rerun",
    )
    if where.open:
        with where:
            st.caption(
                cache.built("bundled_summary", lambda: explore_text.bundled_summary(sources), sources)
                + " Each source's rows are kept apart: a speedup always divides by a baseline of the same "
                "source."
            )
            st.dataframe(sources, hide_index=True, width="stretch", key="explorer_sources")
            st.caption("Transcriptions keep the published digits; data/README.md lists every table and choice.")

filters: dict[str, list] = {}
run_id = st.query_params.get("run_id")
if run_id:
    filters["run_id"] = [run_id]
    st.info(f"Showing run {run_id} only.")
# A choice outlives its closed expander (persist_state) for the whole session.
chosen = {
    column: [v for v in st.session_state.get(f"explorer_f_{column}") or [] if v in facets[column]]
    for column, _ in FILTERS
}
with st.sidebar:
    active = sum(bool(values) for values in chosen.values())
    filtering = st.expander(
        f"Filters ({active} active)" if active else "Filters",
        key="explorer_filters_open",
        on_change="rerun",
        icon=":material/filter_list:",
    )
    if filtering.open:
        with filtering:
            for column, label in FILTERS:
                chosen[column] = st.multiselect(
                    label, facets[column], key=f"explorer_f_{column}", persist_state="session"
                )
filters.update({column: values for column, values in chosen.items() if values})

try:
    vs_k = cache.frame(explore.speedup_vs_k, filters)
    best = cache.frame(explore.by_concurrency, filters)
    rows = cache.frame(explore.filtered_rows, filters)
except SpecScopeError as exc:
    show_error(exc)
    st.stop()

counts = cache.built("headline", lambda: explore.headline(best), best)
top = cache.built("best_point", lambda: explore.best_point(best), best)
passed_over = cache.built("flagged_above", lambda: explore.flagged_above(best, top), best)
st.markdown(headline.sentence(len(rows), counts, top))
st.caption(
    headline.caption(
        counts, top, cache.built("headline_setup", lambda: explore.headline_setup(vs_k, top), vs_k, best), passed_over
    )
)


def _speedup_vs_k() -> None:
    """The landing figure: a Vega-Lite chart per chosen setup, two abreast; at first one, the headline's setup
    where it has two or more K (``explore.landing_setups``), so the chart under the headline draws its number."""
    k_setups = cache.built("k_sweep_setups", lambda: explore.k_sweep_setups(vs_k), vs_k)
    landing = cache.built("landing_setups", lambda: explore.landing_setups(vs_k, top), vs_k, best)
    # Keyed by the choices, so new results (an import, a finished run) bring a fresh default; the
    # choice outlives a visit to another tab and the chooser's closing. The chooser is drawn only when
    # opened: its scripts would load ahead of the landing figure.
    key = f"explorer_k_setups_{zlib.crc32(repr(k_setups).encode())}"
    kept = st.session_state.get(key)
    shown = landing if kept is None else [setup for setup in kept if setup in k_setups]
    picker = st.expander(
        f"Setups: {len(shown)} of {len(k_setups)} shown",
        key="explorer_k_setups_open",
        on_change="rerun",
        icon=":material/tune:",
    )
    if picker.open:
        with picker:
            shown = st.multiselect("Setups", k_setups, default=landing, persist_state="session", key=key)
    drawn = cache.built("fig_speedup_vs_k", lambda: k_charts.speedup_vs_k(vs_k, shown), vs_k, shown)
    if not drawn:
        st.info(k_charts.EMPTY)
        return
    specs = cache.built("fig_speedup_vs_k_specs", lambda: [vega_spec(chart) for _, chart in drawn], vs_k, shown)
    st.caption(cache.built("fig_speedup_vs_k_title", lambda: k_charts.title(vs_k, shown), vs_k, shown))
    columns = st.columns(2) if len(drawn) > 1 else [st.container()]
    for n, ((setup, _), spec) in enumerate(zip(drawn, specs)):
        columns[n % 2].vega_lite_chart(spec=spec, width="stretch", key=f"explorer_k_chart_{zlib.crc32(setup.encode())}")
    # Drawn only when opened: a download button's scripts would load ahead of the landing figure.
    download = st.expander(
        "Download this figure (HTML)",
        key="explorer_dl_speedup_vs_k_open",
        on_change="rerun",
        icon=":material/download:",
    )
    if download.open:
        with download:
            figure_download(
                cache.built("fig_speedup_vs_k_all", lambda: k_charts.combined(drawn), vs_k, shown),
                "Speedup vs K",
                key="explorer_dl_speedup_vs_k",
            )
    folded = vs_k[vs_k["setup"].isin(shown) & (vs_k["runs"] > 1)]
    if not folded.empty:
        opened = st.expander(
            f"{len(folded)} point{'s' if len(folded) > 1 else ''} shown "
            f"{'are' if len(folded) > 1 else 'is'} the mean of several runs: each run's figure",
            key="explorer_k_runs_open",
            on_change="rerun",
        )
        if opened.open:
            with opened:
                runs = cache.frame(explore.point_runs, filters)
                st.caption(k_charts.RUNS_CAPTION)
                st.table(k_charts.runs_table(runs[runs["setup"].isin(shown)]).set_index("setup"))


def _frames(needs: tuple[str, ...]) -> list[pd.DataFrame]:
    """The frames a figure is drawn from (``figures.frames``), each once per content, filters and input."""
    return figures.frames(
        needs,
        lambda query: cache.frame(query, filters),
        lambda name, make, base: cache.built(f"figure_input_{name}", lambda: make(base), base),
    )


def _show(key: str, name: str, fig, caption: str | None = None) -> None:
    st.plotly_chart(fig, width="stretch", key=f"explorer_fig_{key}")
    figure_download(fig, name, key=f"explorer_dl_{key}")
    if caption:
        st.caption(caption)


def _draw(entry: figures.Figure) -> None:
    """A registered figure, drawn from its frames."""
    inputs = _frames(entry.needs)
    fig = cache.built(f"fig_{entry.key}", lambda: entry.draw(*inputs), *inputs)
    _show(entry.key, entry.tab, fig, entry.caption(*inputs) if entry.caption else None)


def _best_k_table() -> None:
    unmatched = explore.unmatched_setups(best)
    st.caption(
        "Speculative setups only (the baseline is 1× by definition); blank = not measured or not "
        "stated by the source. Speedup over the baseline and output tok/s with their 95% intervals; AL: "
        "acceptance length, tokens a step. A K the measurements cannot tell from the best K (one rule for "
        "every tie) is marked as tied. The best K is the fastest cell no distorting hygiene check flags; a "
        'higher flagged figure is shown beside it under "left out" with its checks. '
        + explore_text.interval_summary(best)
        + (
            f" Not listed: {len(unmatched)} setup(s) without a matching baseline, so without a speedup."
            if unmatched
            else ""
        )
    )
    # a table that wraps, with short headers and the setup's column the widest: a setup's name (up to ~150
    # characters) is read whole, never cut at a column's edge
    with st.container(key="explorer_best_table"):
        st.html(
            "<style>.st-key-explorer_best_table th:first-child,.st-key-explorer_best_table td:first-child"
            "{min-width:min(26rem,40vw)}</style>"
        )
        st.table(
            cache.built(
                "best_k_shown", lambda: k_charts.best_k_shown(explore_text.best_k_table(best, vs_k)), best, vs_k
            ),
            hide_index=True,
            border="horizontal",
        )


@fragment
def _figures() -> None:
    """The figure tabs: a tab switch (or a setup chosen) reruns this, not the page."""
    # Only the open tab builds and draws its content; the first is the landing figure.
    registered = figures.registered()
    first, table, *rest = st.tabs(
        ["Speedup vs K", "Best K per setup", *(f.tab for f in registered)], key="explorer_tabs", on_change="rerun"
    )
    if first.open:
        with first:
            _speedup_vs_k()
    if table.open:
        with table:
            _best_k_table()
    for tab, entry in zip(rest, registered):
        if tab.open:
            with tab:
                _draw(entry)


@fragment
def _deploy_section(curves: pd.DataFrame) -> None:
    """What to deploy per setup (``deploy.answer``, as Theory and ``specscope advise`` give it), and the measured K
    schedules' verdicts in a sentence; a setup's answer, config and figure once opened."""
    st.subheader("What to deploy")
    found = cache.built("schedule_verdicts", lambda: verdict.verdicts(curves), curves) if not curves.empty else []
    measured = [v.setup for v in found if v.deploy_schedule]
    st.markdown(
        "Per setup: one K to deploy, the fastest measured over the concurrencies (a tie within noise goes to "
        "the smaller K), or a K schedule only where the best K moves with load beyond noise. "
        + (
            f"{len(found)} setup{'s' if len(found) != 1 else ''} measured a K schedule beside fixed K: "
            + (
                f"deploy the schedule on {len(measured)} ({', '.join(plain(name) for name in measured)})."
                if measured
                else "a fixed K is the one to deploy" + (" on each." if len(found) > 1 else ".")
            )
            if found
            else ""
        )
    )
    # drawn only when opened: the answers, a chooser's and a figure's scripts would load ahead of the landing figure
    drawn = st.expander(
        "Each setup's answer: the speculative_config to deploy, its K at each concurrency and where that comes from",
        key="explorer_deploy_open",
        on_change="rerun",
    )
    if not drawn.open:
        return
    with drawn:
        try:
            fits = [
                f
                for f in cache.fits(None)
                if all(f.keys.get(key) in values for key, values in filters.items() if key in schema.FAMILY_KEYS)
                and ("run_id" not in filters or f.rows["run_id"].isin(filters["run_id"]).any())
            ]
        except SpecScopeError as exc:
            show_error(exc)
            return
        if not fits:
            st.info(
                "No setup here can be fitted: it needs speculative rows with a K, a concurrency and an "
                "acceptance rate or length."
            )
            return
        fits = sorted(fits, key=lambda f: -f.fitted_points)
        labels = fitting.family_labels([f.keys for f in fits])
        fit = fits[labels.index(st.selectbox("Setup", labels, key="explorer_deploy_setup"))]
        frame = cache.speedup_rows()
        answer = cache.built("explorer_answer", lambda: deploy.answer(fit, rows=frame), fit.rows, frame)
        (st.success if answer.config else st.warning)(plain(answer.sentence()))
        if answer.config:
            st.caption("The speculative_config to deploy:")
            st.code(json.dumps(answer.config), language="json", wrap_lines=True)
        deployed = [(c, answer.deployed(c)) for c in answer.choices]
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "concurrency": c.concurrency,
                        "K deployed": d["k"],
                        "from": d["source"],
                        "speedup": intervals.value_text(d),
                        "why": d["why"],
                    }
                    for c, d in deployed
                ]
            ),
            hide_index=True,
            width="stretch",
            key="explorer_deploy_table",
        )
        setup = next(
            (
                v.setup
                for v in found
                if answer.measured_schedule is not None and v.k_schedule == answer.measured_schedule.k_schedule
            ),
            None,
        )
        if setup is not None:
            _show("schedule_vs_concurrency", "K schedule vs fixed K", charts.schedule_vs_concurrency(curves, setup))


# Each part below the header is a fragment: what a viewer opens or picks in one reruns only that part.
_figures()
curves = cache.frame(explore.curves_vs_concurrency, filters)
_deploy_section(curves)
fragment(structured.section)(filters)  # constrained vs free, when a run measured both
fragment(versions_view.section)(filters)  # one setup on several vLLM versions
fragment(anatomy.section)("explorer", filters)  # where a step goes: verify, draft, overhead
fragment(limits_view.section)(filters)  # rooflines, oracle bound, side effects, Pareto, acceptance over the output
st.subheader("Where it pays, per prompt")
fragment(per_prompt.section)(filters, "explorer", folded=True)

# Drawn only when opened: a download button's scripts would load ahead of the landing figure.
downloads = st.expander(
    f"Download the {len(rows)} result rows (CSV, Parquet)",
    key="explorer_dl_rows_open",
    on_change="rerun",
    icon=":material/download:",
)
if downloads.open:
    with downloads:
        left, right = st.columns(2)
        left.download_button(
            "Download rows (CSV)",
            lambda: explore.to_csv_bytes(rows),
            "specscope-results.csv",
            "text/csv",
            key="explorer_dl_csv",
            on_click="ignore",
        )
        right.download_button(
            "Download rows (Parquet)",
            lambda: explore.to_parquet_bytes(rows),
            "specscope-results.parquet",
            "application/octet-stream",
            key="explorer_dl_parquet",
            on_click="ignore",
        )
