"""Live: stream 2-6 servers side by side with token provenance, live metrics and a lossless check."""

from __future__ import annotations

import html

import streamlit as st

from specscope import live, prompts, stream
from specscope.errors import ConfigError, SpecScopeError
from specscope.stream import GenerationRequest
from ui import state
from ui.common import show_error
from ui.live_panes import stream_panes
from ui.tokens import STYLE, legend_html, tokens_html

SERVER_HELP = ("One server a line: label URL [method] [speculative config JSON]. "
               "'none' marks the baseline; with an ngram config the rejected tokens are rebuilt exactly.")

st.title("Live")
st.caption("Each token coloured by where it came from: accepted draft (underlined), the target's own "
           "token (bonus in bold, correction plain), rejected drafts (struck through).")

try:
    launched = {spec.label: spec for spec in live.launched_specs()}
except SpecScopeError as exc:
    launched = {}
    show_error(exc)
picked = st.multiselect("Started or attached servers", list(launched), key="live_launched",
                        help="Start servers on the Servers page or with `specscope serve`.")
servers_text = st.text_area("More servers by URL", key="live_servers", height=100, help=SERVER_HELP,
                            placeholder="baseline http://127.0.0.1:8001 none\n"
                                        'ngram http://127.0.0.1:8002 {"method": "ngram", "num_speculative_tokens": 4}')

source = st.radio("Prompt", ["Typed", "Sample", "From a prompt set"], horizontal=True, key="live_prompt_source")
sets = prompts.stored_sets() + prompts.bundled_sets()
prompt_text = ""
if source == "Typed":
    prompt_text = st.text_area("Prompt text", key="live_prompt_text", height=80)
elif not sets:
    st.info("No prompt sets yet: upload one on the Prompt sets page, or type a prompt.")
else:
    chosen = sets if source == "From a prompt set" else prompts.bundled_sets()[:1] or sets[:1]
    path = st.selectbox("Prompt set", chosen, format_func=lambda p: p.name, key="live_prompt_set")
    try:
        items = prompts.load(path).prompts
        item = st.selectbox("Prompt", items, format_func=lambda p: f"{p.prompt_id}: {p.text[:70]}", key="live_prompt_item")
        prompt_text = item.text if item else ""
    except SpecScopeError as exc:
        show_error(exc)

cols = st.columns(5)
temperature = cols[0].number_input("Temperature", 0.0, 2.0, 0.0, 0.1, key="live_temperature")
max_tokens = cols[1].number_input("Max tokens", 1, 4096, 128, 16, key="live_max_tokens")
chat = cols[2].toggle("Chat endpoint", value=True, key="live_chat")
mode = cols[3].radio("Mode", live.MODES, key="live_mode", horizontal=True,
                     format_func={"race": "Race", "fair": "Fair replay"}.get,
                     help="Race runs every server at once; fair replay runs them one after another, "
                          "then plays them back side by side on their recorded timestamps.")
show_rejected = cols[4].toggle("Show rejected", value=True, key="live_show_rejected")

start, save, replay_again = st.columns(3)
if start.button("Start", type="primary", key="live_start"):
    try:
        specs = [launched[name] for name in picked] + live.parse_server_lines(servers_text)
        if not prompt_text.strip():
            raise ConfigError("Type or pick a prompt first.")
        request = GenerationRequest(prompt=prompt_text, max_tokens=int(max_tokens),
                                    temperature=float(temperature), chat=chat)
        session = live.LiveSession.create(specs, request, mode)
        session.start()
        st.session_state[state.LIVE_SESSION] = session
    except SpecScopeError as exc:
        show_error(exc)

with st.expander("Recordings"):
    upload = st.file_uploader("Load a recording", type=["json"], key="live_upload")
    if upload is not None and st.button("Load", key="live_load"):
        try:
            st.session_state[state.LIVE_SESSION] = live.load_recording(upload.getvalue())
        except SpecScopeError as exc:
            show_error(exc)

session: live.LiveSession | None = st.session_state.get(state.LIVE_SESSION)


def _finished_controls(session: live.LiveSession) -> None:
    if save.button("Save recording", key="live_save"):
        st.success(f"Saved to {session.save()}")
    if session.mode == "fair" and replay_again.button("Replay", key="live_replay"):
        session.restart_replay()


if session is not None and session.finished:
    _finished_controls(session)


def _metric_rows(view: live.PaneView) -> str:
    m = view.metrics
    fmt = lambda v, spec, unit="": "–" if v is None else f"{v:{spec}}{unit}"  # noqa: E731
    cells = [("tokens", str(m.tokens)), ("ttft", fmt(m.ttft_ms, ".0f", " ms")), ("tpot", fmt(m.tpot_ms, ".1f", " ms")),
             ("itl", fmt(m.itl_ms, ".1f", " ms")), ("tok/s", fmt(m.tokens_per_s, ".1f")),
             ("AL", fmt(m.acceptance_length, ".2f")), ("acceptance", fmt(m.acceptance_rate, ".0%")),
             ("speedup", fmt(m.speedup, ".2f", "×"))]
    row = "".join(f'<td data-metric="{name}"><small>{name}</small><br><b>{html.escape(value)}</b></td>'
                  for name, value in cells)
    positions = " · ".join(f"p{i} {rate:.0%}" for i, rate in enumerate(m.per_position))
    return (f'<table class="ss-metrics"><tr>{row}</tr></table>'
            + (f'<div data-metric="per-position"><small>per-position acceptance: {positions}</small></div>'
               if positions else ""))


def _figure_source(view: live.PaneView, spec_format: str | None) -> str:
    """Where the pane's acceptance figures and token labels come from, in words."""
    source = view.provenance.source
    if source == "server":
        flag = stream.FORMAT_FLAGS.get(spec_format or "", "")
        return f"figures: the server's per-request SD stats ({spec_format or 'per request'}, {flag})"
    if source == "ngram":
        return "figures: ngram proposer rebuilt from the token ids (exact)"
    if source == "chunks":
        return "figures: chunk sizes (estimated: the server can merge steps into one chunk)"
    return "figures: no speculative decoding (every token is the target's)"


def _pane_html(view: live.PaneView, show: bool, spec_format: str | None) -> str:
    spec = view.spec
    badge = ""
    if view.lossless is True:
        badge = '<span data-lossless="pass">✓ lossless: identical to the baseline</span>'
    elif view.lossless is False:
        badge = f'<span data-lossless="fail">✗ differs from the baseline at token {view.divergence}</span>'
    phase = "done" if view.done else "streaming…"
    notes = "".join(f"<div><small>{html.escape(n)}</small></div>" for n in view.provenance.notes)
    source = _figure_source(view, spec_format)
    error = f'<div class="ss-error" data-error="1">⚠️ {html.escape(view.error)}</div>' if view.error else ""
    t0 = "" if view.t0 is None else f' data-t0="{view.t0:.6f}"'
    return (f'<div data-pane="{html.escape(spec.label, quote=True)}"{t0}>'
            f"<b>{html.escape(spec.label)}</b> <small>{html.escape(spec.method)} · {phase} · {html.escape(source)}</small> {badge}"
            f"{_metric_rows(view)}{error}"
            f"{tokens_html(view.provenance.tokens, view.provenance.steps, show_rejected=show, token_texts=view.token_texts, divergence=view.divergence)}"
            f"{notes}</div>")


def _spec_format(session: live.LiveSession, label: str) -> str | None:
    """The per-request format the server of pane ``label`` answered in, once it has."""
    return next((stream.spec_format(p.snapshot()) for p in session.panes if p.spec.label == label), None)


if session is not None:
    st.html(STYLE + legend_html())
    streaming = not session.finished
    stream_panes(session, lambda view: _pane_html(view, show_rejected, _spec_format(session, view.spec.label)))
    if streaming:  # it finished while this run drew it: its controls go in their place above
        _finished_controls(session)
