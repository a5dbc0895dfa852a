"""Live: stream 2-6 servers side by side with token provenance, live metrics and a lossless check.

Start (and Save, Replay) sit at the top, the panes right below them, then recordings and the
settings, which fold away once a comparison runs: the streaming is the first thing on screen.
Panes whose server reused cached work (an answer suffix decoding produced before, prefix-cache hits) are
badged, and the page offers a fresh comparison: a variant of the prompt (no prefix cache holds it), or a
restart of the suffix servers. Runs of the same prompt on the same servers add up to an interval."""

from __future__ import annotations

import streamlit as st

from specscope import launch, live, prompts
from specscope.client.stream import GenerationRequest
from specscope.errors import ConfigError, SpecScopeError
from specscope.live import freshness
from specscope.prompts import library
from ui import answer_format as answer_format_ui
from ui import state
from ui.access import is_operator
from ui.common import plain, show_error
from ui.live_panes import PANE_STYLE, sent_label, session_pane_html, stream_panes
from ui.per_prompt import prefill_live
from ui.tokens import STYLE, legend_html

SERVER_HELP = (
    "One server a line: label URL [method] [speculative config JSON]. "
    "'none' marks the baseline; with an ngram config the rejected tokens are rebuilt exactly."
)
MODE_CHOSEN = "live_mode_chosen"

st.title("Live")
st.caption(
    "Each token coloured by where it came from: accepted draft (underlined), the target's own "
    "token (bonus in bold, correction plain), rejected drafts (struck through). TTFT: time to first "
    "token · TPOT: time per output token after the first · ITL: mean gap between arrivals · AL: "
    "acceptance length, tokens per step (1 = no gain) · speedup: tok/s over the baseline pane's · decode: "
    "its TPOT ratio. Grey: so far. Hover "
    "a figure for more. Servers are warmed up before their first run; nothing of the warm-up is shown."
)
start, save, replay_again, skip, _ = st.columns([0.8, 1.4, 0.9, 1.1, 2.9])
start_clicked = is_operator() and start.button("Start", type="primary", key="live_start")  # viewers: recordings
messages = st.container()
board = st.container()  # the running comparison, above its settings

with st.expander("Recordings"):
    upload = st.file_uploader("Load a recording", type=["json"], key="live_upload")
    if upload is not None and st.button("Load", key="live_load"):
        try:
            st.session_state[state.LIVE_SESSION] = live.load_recording(upload.getvalue())
        except SpecScopeError as exc:
            show_error(exc)

settings = st.expander("Servers, prompt and settings", expanded=st.session_state.get(state.LIVE_SESSION) is None)
with settings:
    try:
        launched = {spec.label: spec for spec in live.launched_specs()}
    except SpecScopeError as exc:
        launched = {}
        show_error(exc)
    if note := prefill_live(launched):  # a slow prompt opened from the Explorer or the Runs page
        messages.info(note)
    # the baseline and the speculative servers that run, until the user picks others
    kept = [name for name in st.session_state.get("live_launched", []) if name in launched]
    if "live_launched" not in st.session_state or kept == st.session_state.get(state.LIVE_DEFAULT_SERVERS):
        kept = st.session_state[state.LIVE_DEFAULT_SERVERS] = live.default_servers(launched.values())
    st.session_state["live_launched"] = kept
    picked = st.multiselect(
        "Started or attached servers",
        list(launched),
        key="live_launched",
        help="Start servers on the Servers page or with `specscope serve`.",
    )
    servers_text = st.text_area(
        "More servers by URL",
        key="live_servers",
        height=100,
        help=SERVER_HELP,
        placeholder="baseline http://127.0.0.1:8001 none\n"
        "ngram http://127.0.0.1:8002 "
        '{"method": "ngram", "num_speculative_tokens": 4}',
    )

    source = st.radio("Prompt", ["Typed", "Sample", "From a prompt set"], horizontal=True, key="live_prompt_source")
    sets = library.stored_sets() + library.bundled_sets()
    prompt_text = ""
    answer_format = None  # the response format the answers must follow (JSON), if any
    if source == "Typed":
        prompt_text = st.text_area("Prompt text", key="live_prompt_text", height=80)
    elif not sets:
        st.info("No prompt sets yet: upload one on the Prompt sets page, or type a prompt.")
    else:
        chosen = sets if source == "From a prompt set" else library.bundled_sets()[:1] or sets[:1]
        path = st.selectbox("Prompt set", chosen, format_func=lambda p: p.name, key="live_prompt_set")
        try:
            items = prompts.load(path).prompts
            item = st.selectbox(
                "Prompt", items, format_func=lambda p: f"{p.prompt_id}: {p.text[:70]}", key="live_prompt_item"
            )
            prompt_text = item.text if item else ""
            if item is not None and item.response_format is not None:
                answer_format = answer_format_ui.from_prompt(item)
        except SpecScopeError as exc:
            show_error(exc)
    if source == "Typed":
        answer_format = answer_format_ui.editor()


def _specs() -> list[live.PaneSpec]:
    return [launched[name] for name in picked] + live.parse_server_lines(servers_text)


try:
    candidates = _specs()
except SpecScopeError:  # a bad server line is reported on Start
    candidates = []
shared = live.sharing(candidates)
if not st.session_state.get(MODE_CHOSEN):  # until the user picks a mode, it follows the servers
    st.session_state["live_mode"] = live.default_mode(candidates)

with settings:
    cols = st.columns(5)
    temperature = cols[0].number_input("Temperature", 0.0, 2.0, 0.0, 0.1, key="live_temperature")
    st.session_state.setdefault("live_max_tokens", 128)  # a slow prompt's link sets it (``prefill_live``)
    max_tokens = cols[1].number_input("Max tokens", 1, 4096, step=16, key="live_max_tokens")
    chat = cols[2].toggle("Chat endpoint", value=True, key="live_chat")
    mode = cols[3].radio(
        "Mode",
        live.MODES,
        key="live_mode",
        horizontal=True,
        format_func={"race": "Race", "fair": "Fair replay"}.get,
        on_change=lambda: st.session_state.update({MODE_CHOSEN: True}),
        help="Race runs every server at once; fair replay runs them one after another, "
        "then plays them back side by side on their recorded timestamps.",
    )
    show_rejected = cols[4].toggle("Show rejected", value=True, key="live_show_rejected")
    if shared:
        where = "; ".join(f"{label} on {what}" for label, what in shared.items())
        st.caption(
            f"These servers share hardware ({plain(where)}). Racing them measures how they slow each other "
            "down, not what speculation gains, so fair replay is the default."
        )


def _start(specs: list[live.PaneSpec], request: GenerationRequest) -> None:
    history = st.session_state.setdefault(state.LIVE_HISTORY, live.RunHistory())  # repeats give an interval
    session = live.LiveSession.create(specs, request, mode, shared=live.sharing(specs), history=history)
    session.start()
    st.session_state[state.LIVE_SESSION] = session


if start_clicked:
    try:
        if not prompt_text.strip():
            raise ConfigError("Type or pick a prompt first (under Servers, prompt and settings).")
        _start(
            _specs(),
            GenerationRequest(
                prompt=prompt_text,
                max_tokens=int(max_tokens),
                temperature=float(temperature),
                chat=chat,
                response_format=answer_format,
            ),
        )
    except SpecScopeError as exc:
        with messages:
            show_error(exc)

session: live.LiveSession | None = st.session_state.get(state.LIVE_SESSION)


def _finished_controls(session: live.LiveSession) -> None:
    if save.button("Save recording", key="live_save"):
        messages.success(f"Saved to {session.save()}")
    if session.mode == "fair" and replay_again.button("Replay", key="live_replay"):
        session.restart_replay()
    if session.replaying() and skip.button("Skip to end", key="live_skip", help="Show every pane as it finished"):
        session.skip_replay()
        st.rerun()  # drawn again without this button


def _offer_fresh(session: live.LiveSession) -> None:
    """Say which panes repeat a prompt, and offer the comparison again on a fresh one."""
    repeated = session.repeated()
    restart = session.restartable()
    with board:
        seen = [(p.spec.label, p.freshness) for p in repeated if p.freshness is not None]  # all of them
        text, offer_variant = freshness.advice(
            [label for label, f in seen if f.cached_answer],
            [label for label, f in seen if not f.cached_answer],
            restart,
        )
        st.warning(text)
        left, right, _ = st.columns([1, 2.4, 1.6])
        specs = [p.spec for p in session.panes]
        if offer_variant and left.button("Run a prompt variant", key="live_variant"):
            fresh = session.fresh_request()
            st.session_state[state.LIVE_SENT] = fresh.prompt  # shown above the panes: what was sent
            _start(specs, fresh)
            st.rerun()
        if restart and right.button(f"Restart {', '.join(restart)} and run again", key="live_restart"):
            with st.spinner(f"Restarting {', '.join(restart)} (a fresh server has empty caches)…"):
                try:
                    for name in restart:
                        launch.restart(name)
                except SpecScopeError as exc:
                    show_error(exc)
                    return
            _start(specs, session.panes[0].request)
            st.rerun()


if session is not None:
    streaming = not session.finished
    if not streaming:
        _finished_controls(session)
    with board:
        if session.contention:
            st.warning(
                "These servers raced on shared CPU cores: the speedups measure how they slow each "
                "other down, not what speculation gains. Start again in Fair replay for the real speedup."
            )
        sent = session.panes[0].request.prompt
        if st.session_state.get(state.LIVE_SENT) == sent:  # a variant of the prompt: one line on what was sent
            with st.expander(sent_label(sent)):
                st.code(sent, language=None, wrap_lines=True)  # shown literally, whole
        st.html(STYLE + PANE_STYLE + legend_html())
        stream_panes(session, session_pane_html(session, show_rejected))
    if streaming:  # it finished while this run drew it: its controls go in their place above
        _finished_controls(session)
    if session.recorded_mode is None and session.repeated():
        _offer_fresh(session)
