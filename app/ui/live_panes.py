"""The Live page's panes: their HTML, and their redraw the moment a token arrives, one pane at a time.

Instead of rerunning on a timer, the script holds one ``st.empty`` slot per pane and, while
the session streams (or replays), waits on the session for the next arrival and rewrites
only the slots whose HTML changed, at most once a frame (``FRAME_S``: faster, the browser falls behind
and every token waits in its queue). A token therefore reaches the browser within a frame and the time
it takes to draw one pane, and panes that received nothing are never resent. A click on
any widget stops the loop at the next arrival and reruns the page, which resumes it.

Metrics sit in a grid that wraps inside the pane, so they stay in it however narrow it is;
a pane's title wraps between words only. Badges say what a figure cannot: cached work the server
reused (an answer suffix decoding had produced before, prefix-cache hits), a cold start, a server being
warmed up; and, for a prompt with a response format, whether the finished answer follows it.

The speedup reads end to end (tok/s, TTFT included) beside the decode speedup (TPOT ratio), with a
note when TTFT decides the end-to-end figure; repeated runs of a prompt give an interval. Until a pane
is done its figures are greyed and say "so far".
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable

import streamlit as st

from specscope import live
from specscope.analysis import intervals
from specscope.client import stream
from specscope.client.stream import FORMAT_FLAGS
from specscope.live import LiveSession, PaneView
from specscope.live.labels import Provenance
from ui.common import plain
from ui.tokens import tokens_html

__all__ = ["stream_panes", "pane_html", "session_pane_html", "sent_label", "PANE_STYLE", "IDLE_WAIT_S"]

IDLE_WAIT_S = 0.25  # longest wait between checks when nothing arrives
# Shortest time between two redraws. Measured (dashboard bench's replay at 12x, two panes streaming at once,
# ~80 chunks/s): unthrottled, the browser fell behind (token sent -> drawn 26-90 ms, median 36); one redraw per
# 30 ms waits up to 30 ms on the server but the browser keeps up (12-15 ms): p95 60-95 ms against 80-110 ms.
FRAME_S = 0.03

PANE_STYLE = """<style>
[data-pane]{min-width:0}
.ss-title{overflow-wrap:break-word;word-break:normal;hyphens:none}
.ss-badge{display:inline-block;font-size:0.75rem;border-radius:4px;padding:0 0.3rem;margin:0.1rem 0.2rem 0 0;
cursor:help}
.ss-badge.ss-warn-badge{background:#b26a0022;color:#b26a00}
.ss-metrics{display:grid;grid-template-columns:repeat(auto-fill,minmax(4.2rem,1fr));gap:0.15rem 0.4rem;margin:0.3rem 0}
.ss-metrics>div{min-width:0;line-height:1.2;font-size:0.85rem;white-space:nowrap}
.ss-metrics small{font-size:0.75rem}
.ss-below{margin-top:0.2rem;line-height:1.3}
.ss-metrics small,.ss-source small{color:#888}
.ss-warn{color:#b26a00}
.ss-source{cursor:help;text-decoration:underline dotted #8888}
.ss-provisional b{color:#999;font-weight:normal;font-style:italic}
</style>"""

MODE_WORDS = {"race": "raced", "fair": "fair replay"}
METRIC_HELP = {
    "tokens": "output tokens so far",
    "ttft": "TTFT, time to first token: from sending the request to the first token",
    "tpot": "TPOT, time per output token after the first: (last - first arrival) / (tokens - 1)",
    "itl": "ITL, inter-token latency: the mean gap between two arrivals (several tokens may arrive at once)",
    "tok/s": "output tokens per second",
    "AL": "AL, acceptance length: tokens per engine step = accepted drafts per step + 1 (1 = no gain)",
    "acceptance": "share of drafted tokens the model accepted",
    "decode": "decode speedup: the baseline pane's TPOT over this pane's (time to first token left out)",
}
METRIC_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL"}
COLD_HELP = (
    "Its server had answered no request before this one, so the figures include its cold start "
    "(lazy initialisation, first-use compilation): TTFT and speed read worse than they will next time."
)


def sent_label(prompt: str, chars: int = 90) -> str:
    """One line on a prompt variant that was sent, its start clipped (the whole prompt opens beneath it): the
    first screen stays the panes'. Markdown-escaped."""
    words = " ".join(prompt.split())
    start = words if len(words) <= chars else words[:chars].rsplit(" ", 1)[0] + " …"
    return (
        f"Prompt sent: a variant of the one under Servers, prompt and settings (new first tokens, so no prefix "
        f"cache holds it): {plain(start)} ({len(prompt):,} characters)"
    )


def _duration(ms: float | None) -> str:
    """Milliseconds short enough for a narrow cell: '7.1 ms', '284 ms', '24.7 s'."""
    if ms is None:
        return "–"
    return f"{ms:.1f} ms" if ms < 100 else f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def _speedup(value: str, timing: str, contention: bool, final: bool, ttft: str = "") -> str:
    """The end-to-end speedup cell; ``ttft``, when set, says why time to first token decides it."""
    title = (
        f"end to end: tok/s against the baseline pane, time to first token included, measured in "
        f"{'fair replay' if timing == 'fair' else 'a race'}"
    )
    warn = ""
    if contention:
        title += (
            "; these servers share CPU cores or a GPU, so a race speedup measures how they slow each other "
            "down, not what speculation gains: use fair replay"
        )
        warn = '<br><small class="ss-warn">contention</small>'
    if ttft:
        title += "; " + ttft
        warn += '<br><small class="ss-warn" data-note="ttft">TTFT decides</small>'
    name = f"{timing} speedup" if final else "speedup so far"
    return (
        f'<div data-metric="speedup" data-timing="{timing}" title="{html.escape(title, quote=True)}">'
        f"<small>{name}</small><br><b>{html.escape(value)}</b>{warn}</div>"
    )


def _times(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def _notes(view: PaneView) -> str:
    """Below the grid of a finished speculative pane: the runs of this prompt so far (their interval
    from ``live.MIN_REPEATS`` runs)."""
    m, notes = view.metrics, []
    if not (view.done and view.spec.speculative and m.speedup is not None):
        return ""
    repeats = view.repeats
    if repeats is not None:
        span, decode = repeats.interval(), repeats.interval(decode=True)
        if span is None:
            more = live.MIN_REPEATS - repeats.count
            text = (
                f"{repeats.count} run of this prompt on these servers; {more} more "
                f"give{'s' if more == 1 else ''} an interval"
            )
            if repeats.count > 1:
                text = text.replace(" run ", " runs ")
        else:
            text = (
                f"over {repeats.count} runs of this prompt: end to end "
                f"{intervals.text(*span, unit='×', digits=2)}"
                + (f" · decode {intervals.text(*decode, unit='×', digits=2)}" if decode else "")
                + (f" · {repeats.cached} of them drew on cached work (badged)" if repeats.cached else "")
            )
        notes.append(
            f'<div class="ss-below" data-note="repeats" title="geometric mean and 95% interval over '
            f'the finished runs of the same prompt, servers and settings in this session">'
            f"<small>{html.escape(text)}</small></div>"
        )
    return "".join(notes)


def _metrics(view: PaneView, timing: str, contention: bool) -> tuple[str, str]:
    """The metric grid (greyed while provisional), and the per-position acceptance line (below the tokens)."""
    m = view.metrics
    fmt = lambda v, spec, unit="": "–" if v is None else f"{v:{spec}}{unit}"  # noqa: E731
    cells = [
        ("tokens", str(m.tokens)),
        ("ttft", _duration(m.ttft_ms)),
        ("tpot", _duration(m.tpot_ms)),
        ("itl", _duration(m.itl_ms)),
        ("tok/s", fmt(m.tokens_per_s, ".1f")),
        ("AL", fmt(m.acceptance_length, ".2f")),
        ("acceptance", fmt(m.acceptance_rate, ".0%")),
    ]
    grid = "".join(
        f'<div data-metric="{name}" title="{METRIC_HELP[name]}"><small>{METRIC_NAMES.get(name, name)}'
        f"</small><br><b>{html.escape(value)}</b></div>"
        for name, value in cells
    )
    ttft = (
        f"time to first token decides the end-to-end figure (first token after {_duration(m.ttft_ms)}); "
        f"decoding alone runs at {_times(m.decode_speedup)} the baseline's speed"
        if view.done and m.ttft_decides and m.decode_speedup is not None
        else ""
    )
    grid += _speedup(
        _times(m.speedup),
        timing,  # the baseline is 1.00x however it was raced
        contention and m.speedup is not None and view.spec.speculative,
        view.done,
        ttft,
    )
    if view.spec.speculative:
        grid += (
            f'<div data-metric="decode" title="{METRIC_HELP["decode"]}"><small>decode</small><br>'
            f"<b>{_times(m.decode_speedup)}</b></div>"
        )
    positions = " · ".join(f"{i + 1}: {rate:.0%}" for i, rate in enumerate(m.per_position))
    per_position = (
        f'<div class="ss-below" data-metric="per-position" title="share of drafting steps whose n-th '
        f'draft token was accepted"><small>accepted by draft position: {positions}</small></div>'
        if positions
        else ""
    )
    final = "" if view.done else ' ss-provisional" data-provisional="1'
    return f'<div class="ss-metrics{final}">{grid}</div>', per_position


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def describe_source(provenance: Provenance, spec_format: str | None = None) -> tuple[str, str]:
    """(a sentence a newcomer understands, the technical detail) on where a pane's colours come from."""
    source, notes = provenance.source, " ".join(provenance.notes)
    if source == "baseline":
        return "No speculation: every token is the model's own.", "A server without speculative decoding."
    if not provenance.tokens:
        return "Waiting for the first tokens.", "No token has arrived yet."
    if source == "ngram":
        return (
            "Colours are exact: SpecScope re-ran the ngram drafter on the same text.",
            "vLLM's ngram proposer rebuilt from the token ids; it also names the rejected drafts. " + notes,
        )
    if source == "chunks":
        plain = (
            "Colours are a guess from how tokens arrived together; the server did not report its steps."
            if notes
            else "Colours so far are a guess from how tokens arrived together; the server's own "
            "counts come at the end, if it sends them."
        )
        return (
            plain,
            "One chunk = one engine step, accepted drafts = chunk size - 1; the server can merge steps "
            "under load. "
            + (notes or "The server's own per-step counts come at the end of the stream, where its vLLM reports them."),
        )
    where = f" ({spec_format}, from {FORMAT_FLAGS[spec_format]})" if spec_format in FORMAT_FLAGS else ""
    detail = f"The server's own count of drafted and accepted tokens at each step{where}. {notes}"
    if provenance.ambiguous > 0:
        return (
            f"Colours come from the server's counts, which fit the text in more than one way at "
            f"{_plural(provenance.ambiguous, 'place')}: the colours there are a best guess.",
            detail.strip(),
        )
    return "Colours are exact: the server reported what it accepted at every step.", detail.strip()


def pane_html(
    view: PaneView,
    *,
    show_rejected: bool,
    spec_format: str | None = None,
    timing: str = "race",
    contention: bool = False,
) -> str:
    """One pane: header, lossless badge, metrics, its tokens, then per-position acceptance and
    where its colours come from.
    ``timing`` is the mode the speedup was measured in; ``contention`` marks a race on shared cores or a GPU."""
    spec = view.spec
    badge = ""
    if view.lossless is True:
        badge = (
            '<span data-lossless="pass" title="lossless: identical to the baseline\'s output, token for '
            'token">✓ lossless</span>'
        )
    elif view.lossless is False:
        badge = (
            f'<span data-lossless="fail" title="not lossless: the output differs from the baseline\'s">'
            f"✗ differs at token {view.divergence}</span>"
        )
    elif view.lossless_note:
        badge = (
            f'<span data-lossless="n/a" title="lossless check {html.escape(view.lossless_note, quote=True)}">'
            "lossless: n/a</span>"
        )
    if view.valid is True:
        badge += ' <span data-valid="pass" title="the answer follows the prompt\'s response format">✓ valid</span>'
    elif view.valid is False:
        badge += (
            f' <span data-valid="fail" title="{html.escape(view.invalid_reason or "", quote=True)}">'
            f"✗ invalid: {html.escape(view.invalid_reason or '')}</span>"
        )
    phase = "done" if view.done else "warming up (not measured)…" if view.warming else "streaming…"
    plain, detail = describe_source(view.provenance, spec_format)
    source = (
        f'<div class="ss-source ss-below" data-source="{view.provenance.source}" '
        f'title="{html.escape(detail, quote=True)}"><small>{html.escape(plain)}</small></div>'
    )
    error = f'<div class="ss-error" data-error="1">⚠️ {html.escape(view.error)}</div>' if view.error else ""
    t0 = "" if view.t0 is None else f' data-t0="{view.t0:.6f}"'
    grid, per_position = _metrics(view, timing, contention)
    tokens = tokens_html(
        view.provenance.tokens,
        view.provenance.steps,
        show_rejected=show_rejected,
        token_texts=view.token_texts,
        divergence=view.divergence,
        special=view.special,
    )
    return (
        f'<div data-pane="{html.escape(spec.label, quote=True)}"{t0}>'
        f'<div class="ss-title"><b>{_breakable(spec.label)}</b> '
        f"<small>{html.escape(spec.method)} · {phase} · {MODE_WORDS[timing]}</small> {badge}</div>"
        f"{_badges(view)}{grid}{_notes(view)}{error}{tokens}{per_position}{source}</div>"
    )


def _breakable(label: str) -> str:
    """A server name that may wrap after its - and _ (cpu-smollm2-draft_model-k3), never inside a word."""
    return html.escape(label).replace("-", "-<wbr>").replace("_", "_<wbr>")


def _badges(view: PaneView) -> str:
    """A repeated prompt and a cold start, each with what it does to the figures on hover."""
    badges = []
    if view.freshness is not None and view.freshness.badge:
        kind = "answer" if view.freshness.cached_answer else "prefix"
        badges.append(
            f'<span class="ss-badge ss-warn-badge" data-fresh="{kind}" '
            f'title="{html.escape(view.freshness.explanation, quote=True)}">⚠ {view.freshness.badge}</span>'
        )
    if view.cold:
        badges.append(
            '<span class="ss-badge ss-warn-badge" data-cold="1" '
            f'title="{html.escape(COLD_HELP, quote=True)}">'
            "⚠ includes a cold start</span>"
        )
    return f"<div>{''.join(badges)}</div>" if badges else ""


def session_pane_html(session: LiveSession, show_rejected: bool) -> Callable[[PaneView], str]:
    """``pane_html`` with the session's mode, contention and each server's per-request format."""

    def draw(view: PaneView) -> str:
        pane = next(p for p in session.panes if p.spec.label == view.spec.label)
        return pane_html(
            view,
            show_rejected=show_rejected,
            timing=session.timing,
            contention=session.contention,
            spec_format=stream.spec_format(pane.snapshot()),
        )

    return draw


def stream_panes(session: LiveSession, draw: Callable[[PaneView], str]) -> None:
    """Draw every pane, then keep them current until the session is done streaming or replaying."""
    count = len(session.panes)
    per_row = 3 if count > 4 else count
    slots = [column.empty() for first in range(0, count, per_row) for column in st.columns(per_row)]
    shown: list[str | None] = [None] * count
    while True:
        # asked before the views are taken, so the last views drawn are those of the finished state
        active = not session.finished or session.replaying()
        for i, view in enumerate(session.views()):
            text = draw(view)
            if text != shown[i]:
                slots[i].html(text)
                shown[i] = text
        if not active:
            return
        drawn_at = time.monotonic()
        session.wait_for_change(IDLE_WAIT_S)
        # at most one redraw a frame: chunks due within it are drawn together, so the browser is never sent
        # redraws faster than it draws them (a queue of those delayed every token behind it)
        time.sleep(max(0.0, drawn_at + FRAME_S - time.monotonic()))
