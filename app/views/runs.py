"""Prompt sets & runs: upload and check a prompt set, sweep methods x K x concurrency, read the results."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from specscope import launch, prompts, sweep
from specscope.analysis import intervals, run_results
from specscope.client.progress import ProgressEvent
from specscope.engine import presets
from specscope.errors import SpecScopeError
from specscope.prompts import library
from specscope.results import hygiene
from ui import per_prompt, run_charts, run_table, state
from ui.access import is_operator
from ui.common import or_stop, plain, show_error, store
from ui.jobs import cancel_sweep, start_sweep, sweep_jobs

REQUESTS_CAP = 8  # default requests per cell: the set's size, at most this
DEFAULTS_FOR = "runs_defaults_for"  # sha256 of the set the form's defaults were taken from
PRESET_MODE, SERVERS_MODE = "Servers from a preset", "Servers already running"
HERE = "This machine"


def prompt_set_section() -> tuple[prompts.PromptSet, Path]:
    """1. Pick a bundled or stored prompt set, or upload one (every problem listed with its line)."""
    st.subheader("1. Prompt set")
    choices = {f"sample: {p.name}": p for p in library.bundled_sets()}
    choices.update({f"uploaded: {p.name} ({p.parent.name[:8]})": p for p in library.stored_sets()})
    # Any type and any size up to the server's own limit is taken: a file of the wrong type or over the set's
    # cap gets the library's one sentence and replaces the last file's problems (a file the browser refused
    # left the last file, and its problems, in place with only a red chip). The cap is the label's; the
    # drop zone's own "per file" line, the server's limit, is hidden so the two never disagree.
    upload = st.file_uploader(
        f"Upload a prompt set (JSONL with prompt/messages, CSV, TXT, ShareGPT JSON; at most "
        f"{prompts.MAX_BYTES // 2**20} MB and {prompts.MAX_PROMPTS:,} prompts)",
        key="runs_upload",
    )
    st.html("<style>.st-key-runs_upload [data-testid='stFileUploaderDropzoneInstructions']{display:none}</style>")
    if upload is not None:
        found = prompts.problems(upload.getvalue(), upload.name)
        if found:
            st.error(
                f"{upload.name} has {len(found)} problem{'s' if len(found) > 1 else ''}; fix them and upload it again."
                if len(found) > 1
                else str(found[0]),
                icon="⚠️",
            )
            if len(found) > 1:  # a table, so a long problem wraps instead of being cut
                st.table(
                    pd.DataFrame(
                        [{"line": e.line, "field": e.field or "", "problem": str(e)} for e in found[:200]]
                    ).set_index("line")
                )
        else:
            try:
                saved_set, saved_path = library.save(upload.getvalue(), upload.name)
                label = f"uploaded: {saved_path.name} ({saved_path.parent.name[:8]})"
                choices[label] = saved_path
                if st.session_state.get(state.RUNS_UPLOADED) != saved_set.sha256:
                    st.session_state[state.RUNS_UPLOADED] = saved_set.sha256
                    st.session_state[state.RUNS_SET] = label
                st.success(f"{upload.name}: {len(saved_set)} prompts, stored as set '{saved_set.name}'.")
            except SpecScopeError as exc:
                show_error(exc)

    if not choices:
        st.info("Upload a prompt set to start.")
        st.stop()
    chosen = st.selectbox("Prompt set", list(choices), key=state.RUNS_SET)
    try:
        prompt_set = prompts.load(choices[chosen])
    except SpecScopeError as exc:
        show_error(exc)
        st.stop()
    with st.expander(f"Preview: {prompt_set.name}, {len(prompt_set)} prompts ({prompt_set.format})"):
        st.dataframe(run_table.preview(prompt_set), hide_index=True, key="runs_preview")
    return prompt_set, choices[chosen]


@st.fragment(run_every=1.0)
def _progress() -> None:
    active = {run_id: job for run_id, job in sweep_jobs().items() if not job.done}
    for run_id, job in active.items():
        event = job.event or ProgressEvent("server", message="starting")
        text = f"{run_id}: {event.cells_done}/{event.cells_total} cells"
        if event.cell:
            text += f" · {event.cell}"
        if event.stage == "request":
            text += f" · {event.requests_done}/{event.requests_total} requests"
        elif event.message:
            text += f" · {event.message}"
        if event.remaining:
            text += f" · {event.remaining}"
        st.progress(event.fraction, text=text)
        if is_operator() and st.button("Stop after this cell", key=f"runs_cancel_{run_id}"):
            cancel_sweep(run_id)
    shown = st.session_state.setdefault(state.RUNS_FINISHED_SEEN, set())
    finished = {run_id for run_id, job in sweep_jobs().items() if job.done} - shown
    if finished:
        shown.update(finished)
        st.rerun()


def _per_set_defaults(prompt_set: prompts.PromptSet) -> None:
    """Requests per cell, repeats and response formats (both for a set that carries them) follow the chosen
    set until the user changes them."""
    if st.session_state.get(DEFAULTS_FOR) != prompt_set.sha256 or "runs_num_prompts" not in st.session_state:
        st.session_state["runs_num_prompts"] = min(len(prompt_set), REQUESTS_CAP)
        st.session_state["runs_repeats"] = intervals.DEFAULT_REPEATS
        st.session_state["runs_structured"] = sweep.structured_default(prompt_set)
        st.session_state[DEFAULTS_FOR] = prompt_set.sha256


def _load_fields(cols) -> dict:
    """The form fields every sweep has: concurrency, requests, output length, repeats."""
    conc_text = cols[0].text_input("Concurrency values", "1,4", key="runs_conc")
    num_prompts = cols[1].number_input("Requests per cell (0 = the whole set)", 0, 100_000, key="runs_num_prompts")
    output_len = cols[2].number_input("Output tokens per request", 1, 8192, 64, key="runs_output_len")
    cols = st.columns(3)
    repeats = cols[0].number_input(
        "Repeats per cell (interleaved)",
        1,
        20,
        key="runs_repeats",
        help="Each cell is measured this many times in rounds (every cell once, then "
        "again), so throughput and speedup get a 95% interval; a speedup's is "
        f"paired with the same round's baseline. {intervals.repeats_note(2)}",
    )
    return {
        "conc_text": conc_text,
        "num_prompts": int(num_prompts) or None,
        "output_len": int(output_len),
        "repeats": int(repeats),
        "cols": cols,
    }


def _keep_offered(key: str, offered: list[str], default: list[str]) -> None:
    """A multiselect's choice kept to what it offers now (another preset offers other methods): what is left of
    it, else ``default`` where offered; at first, ``default``."""
    chosen = st.session_state.get(key)
    if chosen is None or not set(chosen) <= set(offered):
        st.session_state[key] = [m for m in chosen or [] if m in offered] or [m for m in default if m in offered]


def _planned(
    mode: str, all_presets: dict, running: list, on_ray: bool, prompt_set: prompts.PromptSet, prompt_path: Path
) -> sweep.SweepPlan | None:
    """The sweep's fields, and one sentence of what Start runs with them: its plan, or None (what is wrong is
    shown). No form: each field's change (Enter commits a text field's) redraws the sentence, only Start starts."""
    cols = st.columns(3)
    if mode == PRESET_MODE:
        preset_name = cols[0].selectbox(
            "Preset",
            sorted(all_presets),
            key="runs_preset",
            index=sorted(all_presets).index("cpu-smollm2") if "cpu-smollm2" in all_presets else 0,
        )
        offered = sorted(all_presets[preset_name].methods)
        _keep_offered("runs_methods", offered, ["none", "ngram"])
        methods = cols[1].multiselect(
            "Methods", offered, key="runs_methods", help=f"The methods the {preset_name} preset defines."
        )
        ks_text = cols[2].text_input("K values", "1,2,4", key="runs_ks")
    else:
        names = st.multiselect(
            "Servers (healthy ones; K is each server's own)",
            [s.name for s in running],
            key="runs_servers",
            format_func=lambda n: next(f"{n} ({s.method}{f' K={s.k}' if s.k else ''})" for s in running if s.name == n),
        )
    load = _load_fields(st.columns(3))
    alongside = (
        mode == PRESET_MODE
        and not on_ray
        and load["cols"][1].checkbox(
            "Baseline alongside (two servers at once)",
            True,
            key="runs_alongside",
            help="Repeats run in rounds (every cell once, then again), the baseline in each round. On a GPU, "
            "where one server runs at a time, this keeps the baseline's server up beside it.",
        )
    )
    schedule_text = ""
    if mode == PRESET_MODE:
        schedule_text = load["cols"][2].text_input(
            "K schedule (optional)",
            "",
            key="runs_k_schedule",
            placeholder="1-2:4,3-8:2,9-256:1 or auto",
            help="Also measures each method on one server drafting K by batch size (K = its maximum); "
            "auto advises it from this run's fixed-K cells once they are done.",
        )
    structured = st.radio(
        "Response formats",
        sweep.STRUCTURED,
        horizontal=True,
        key="runs_structured",
        disabled=not prompt_set.has_formats,
        help="The set's prompts carry response formats (JSON schema, regex or choice): run each cell free, "
        "constrained to them, or both side by side."
        if prompt_set.has_formats
        else "The set's prompts carry no response format, so every cell runs free.",
    )
    if prompt_set.has_formats:
        st.caption(
            " ".join(
                filter(
                    None,
                    [
                        prompt_set.split_note(),
                        (
                            "Constrained requests ask for the output tokens above, as free ones do, and stop where "
                            "their format closes; an answer cut before it closes is counted invalid."
                        ),
                    ],
                )
            )
        )
    if mode == PRESET_MODE or names:
        try:
            fields = dict(
                concurrencies=sweep.parse_ints(load["conc_text"]),
                prompts=prompt_path.resolve(),
                num_prompts=load["num_prompts"],
                output_len=load["output_len"],
                repeats=load["repeats"],
                structured=structured if prompt_set.has_formats else "free",
            )
            if mode == PRESET_MODE:
                spec = sweep.SweepSpec(
                    preset=preset_name,
                    methods=tuple(methods),
                    ks=sweep.parse_ints(ks_text),
                    baseline_alongside=bool(alongside),
                    k_schedule=schedule_text.strip() or None,
                    **fields,
                )
            else:
                spec = sweep.servers_spec(names, **fields)
            plan = sweep.resolve(spec, prompt_set)
            finished = sum(cell.ok for cell in sweep.finished_cells(plan.run_id).values())
            st.info(f"**Start sweep runs** {plain(sweep.describe(plan, finished))}", icon=":material/checklist:")
            return plan
        except SpecScopeError as exc:
            show_error(exc)
    return None


def sweep_section(prompt_set: prompts.PromptSet, prompt_path: Path) -> None:
    """2. Sweep a preset's methods x K x concurrency, or running servers over concurrency, in the background."""
    st.subheader("2. Sweep")
    _per_set_defaults(prompt_set)
    mode = st.radio("Measure", [PRESET_MODE, SERVERS_MODE], horizontal=True, key="runs_mode")
    all_presets = or_stop(presets.load_presets) if mode == PRESET_MODE else {}
    running = [s.state for s in launch.list_servers() if s.status == "healthy"] if mode == SERVERS_MODE else []
    ray_address = sweep.ray_address() if mode == PRESET_MODE else None
    where = HERE
    if ray_address:
        where = st.radio(
            "Run on",
            [HERE, f"Ray cluster at {ray_address}"],
            horizontal=True,
            key="runs_where",
            help="On the cluster each (method, K) server group is one Ray task on a node that "
            "fits it; as many groups run at once as the cluster fits.",
        )
    on_ray = where != HERE
    with st.container(key="runs_sweep"):
        plan = _planned(mode, all_presets, running, on_ray, prompt_set, prompt_path)
        submitted = st.button("Start sweep", type="primary", key="runs_start", disabled=plan is None)
    if on_ray:
        st.caption(
            "Each (method, K) group runs as one task on a cluster node that fits its server, with a "
            "server of its own; finished cells come back here at once, so a stopped or failed sweep "
            "resumes where it stopped."
        )
    elif mode == PRESET_MODE:
        st.caption(
            "A server already running with exactly a cell's configuration is measured as it is and "
            "left running (the hygiene checks note its earlier requests); otherwise the sweep starts "
            "its own under a free name and stops it at the end."
        )
    elif not running:
        st.info("No healthy server is known: start one on the Servers page or attach one by URL there.")

    if submitted and plan is not None:
        try:
            if intervals.repeats_note(plan.spec.repeats):
                st.info(intervals.repeats_note(plan.spec.repeats))
            if not start_sweep(plan, sweep.OnRay(ray_address) if on_ray else sweep.Here()):
                st.warning(f"Sweep {plan.run_id} is already running.")
            st.session_state[state.RUNS_CURRENT] = plan.run_id
        except SpecScopeError as exc:
            show_error(exc)

    _progress()
    for run_id, job in sweep_jobs().items():
        if job.done and job.error:
            st.error(f"Sweep {run_id}: {job.error}", icon="⚠️")
        elif job.done and job.result is not None and job.result.failed:
            st.warning(f"Sweep {run_id}: {len(job.result.failed)} cell(s) failed; see the table below.")
        elif job.done and job.event is not None and job.event.stage == "sweep_done":
            said = st.info if job.result is not None and job.result.stopped else st.success
            said(f"Sweep {run_id}: {job.event.message}.")  # "... 0 failed; done in N s", or "stopped after ..."


def _hygiene(cells: pd.DataFrame) -> None:
    """The run's hygiene badge: which checks failed in how many cells, and what each means."""
    counts = run_table.hygiene_counts(cells)
    failed_checks = {check_id: n for check_id, n in counts.items() if n}
    if failed_checks:
        st.warning(
            "Hygiene: "
            + " · ".join(
                f"⚠ {hygiene.CHECKS[c].title} ({n} cell{'s' if n > 1 else ''})" for c, n in failed_checks.items()
            ),
            icon=":material/science:",
        )
    else:
        st.success("Hygiene: every check passed.", icon=":material/science:")
    with st.expander("What the hygiene checks mean"):
        for check_id, check in hygiene.CHECKS.items():
            mark = f"⚠ failed in {counts[check_id]} cells" if counts[check_id] else "✓ passed"
            st.markdown(f"**{check.title}** ({mark}): {check.explanation}")


def results_section() -> None:
    """3. One run's cells (with speedups) and per-prompt charts; follows the sweep just started."""
    st.subheader("3. Results")
    db = store()
    try:
        runs = run_results.list_runs(db)
    except SpecScopeError as exc:
        show_error(exc)
        st.stop()
    if runs.empty:
        st.info("No sweeps yet.")
        st.stop()
    run_ids = runs["run_id"].tolist()
    current = st.session_state.get(state.RUNS_CURRENT)
    if current in run_ids and st.session_state.get(state.RUNS_FOLLOWED) != current:
        st.session_state[state.RUNS_VIEW] = current  # show the sweep just started once its first cell lands
        st.session_state[state.RUNS_FOLLOWED] = current
    by_id = runs.set_index("run_id")
    run_id = st.selectbox(
        "Run",
        run_ids,
        key=state.RUNS_VIEW,
        format_func=lambda r: f"{r} ({by_id.loc[r, 'dataset']}, {run_table.cells_text(by_id.loc[r])})",
    )
    try:
        cells = run_results.cell_table(db, run_id)
        prompt_rows = run_results.per_prompt(db, run_id)
    except SpecScopeError as exc:
        show_error(exc)
        st.stop()
    st.page_link(
        "views/explorer.py",
        label="Open this run in the Explorer",
        icon=":material/insights:",
        query_params={"run_id": run_id},
    )
    _hygiene(cells)
    st.caption(
        f"Run `{run_id}` only. Throughput: mean over repeats [95% t-interval]. Speedup: mean throughput / "
        f"mean baseline throughput of this run [95% interval: {intervals.SPEEDUP_INTERVALS}]. A cell measured "
        "once has no interval. "
        "TTFT and TPOT: means over the cell's requests. Checks: the hygiene checks a cell fails (above). "
        "Where other runs measured the same setup, the Explorer reads their mean (mean of N runs) and "
        "lists each run's figure."
    )
    st.table(
        run_table.display_table(cells).style.format(
            {"acceptance": "{:.3f}", "TTFT ms": "{:.1f}", "TPOT ms": "{:.1f}"}, na_rep="–"
        )
    )
    if prompt_rows.empty:  # bundled or copied without its requests file: one sentence, not three empty parts
        st.info(run_charts.NO_REQUESTS)
        return
    left, right = st.columns(2)
    left.plotly_chart(run_charts.per_prompt_acceptance(prompt_rows), key="runs_chart_acceptance")
    right.plotly_chart(run_charts.per_prompt_speedup(prompt_rows), key="runs_chart_speedup")
    st.subheader("Where it pays, per prompt")
    per_prompt.section({"run_id": [run_id]}, "runs")


st.title("Prompt sets & runs")
st.caption(
    "Which method, with which K, helps on your prompts at your load? Each finished cell is "
    "saved: starting the same sweep again resumes where it stopped."
)
if is_operator():
    chosen_set, chosen_path = prompt_set_section()
    sweep_section(chosen_set, chosen_path)
else:
    st.info(
        "You are a viewer: the results of every sweep are below. Operators (the sidebar's Operator "
        "token) upload prompt sets and start sweeps, one at a time on this machine."
    )
    _progress()
results_section()
