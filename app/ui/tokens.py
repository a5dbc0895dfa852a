"""A pane's tokens as HTML: colour plus a second cue for each provenance, a legend, hovers.

accepted draft = green, underlined; bonus (all drafts accepted) = blue, bold; correction =
amber, plain; target token of a step that drafted nothing = no colour; rejected draft =
red, struck through (shown where known, e.g. the ngram rebuild; a rejected space or line break
as ␣ or ↵, and ✕ for each rejected draft whose text the server did not send); a special token such as
``<|im_end|>`` = a small grey "end" mark, its text on hover, as the chat template hides it.
Hover shows the step number and logprob. Model text is untrusted: every piece is ``html.escape``d.
Pure functions, no Streamlit: the page passes the string to ``st.html``.
"""

from __future__ import annotations

import html
from collections.abc import Collection, Mapping, Sequence

from specscope.live.labels import ACCEPTED, BONUS, CORRECTION, TARGET, Step, Token

__all__ = ["STYLE", "legend_html", "tokens_html", "KIND_LABELS"]

REJECTED = "rejected"
KIND_LABELS = {
    ACCEPTED: "accepted draft",
    BONUS: "target: bonus",
    CORRECTION: "target: correction",
    TARGET: "target (no draft)",
    REJECTED: "rejected draft",
}

UNKNOWN_REJECTED = "a rejected draft token whose text the server did not send (it reports only how many)"
UNNAMED_REJECTED = "its text comes from its server once the answer ends"
WHITESPACE_REJECTED = "a rejected draft token that is whitespace: ␣ a space, ↵ a line break, ⇥ a tab"
_VISIBLE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥"})

STYLE = """<style>
.ss-pane{white-space:pre-wrap;overflow-wrap:anywhere;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:0.85rem;
 line-height:1.6;max-height:26rem;overflow-y:auto;padding:0.4rem;border:1px solid #8884;border-radius:6px}
.ss-tok{border-radius:3px}
.ss-accepted{background:#2e7d3233;text-decoration:underline;text-decoration-color:#2e7d32;
 text-decoration-thickness:2px;text-underline-offset:3px}
.ss-bonus{background:#1565c033;font-weight:700}
.ss-correction{background:#ef6c0033}
.ss-rejected{background:#c6282822;color:#c62828;text-decoration:line-through;opacity:0.8}
.ss-diverge{outline:2px solid #c62828;outline-offset:1px}
.ss-special{color:#888;font-size:0.7em;border:1px dotted #8888;padding:0 0.2em;margin-left:0.2em;cursor:help}
.ss-special::after{content:attr(data-mark)}
.ss-legend span{margin-right:0.8rem;padding:0 0.3rem;white-space:nowrap}
</style>"""


def _special(kind: str, text: str, last: bool, extra: str = "") -> str:
    """A special token: no text of its own (the chat template hides it), a mark with the text on hover."""
    mark, role = ("end", "marks the end of the answer") if last else ("special", "is a control token")
    title = f"{text}: a special token that {role}; the chat template hides it, it is not part of the text"
    return (
        f'<span class="ss-tok ss-special{extra}" data-kind="{kind}" data-special="1" data-mark="{mark}" '
        f'title="{html.escape(title, quote=True)}"></span>'
    )


def _span(kind: str, text: str, title: str, extra: str = "") -> str:
    classes = f"ss-tok ss-{kind}{extra}"
    return (
        f'<span class="{classes}" data-kind="{kind}" title="{html.escape(title, quote=True)}">'
        f"{html.escape(text, quote=True)}</span>"
    )


def _rejected(text: str, title: str) -> str:
    """A rejected draft; whitespace made visible (struck-through blanks would not show)."""
    if text and not text.strip():
        return _span(REJECTED, text.translate(_VISIBLE), f"{title} · {WHITESPACE_REJECTED}")
    return _span(REJECTED, text, title)


def legend_html() -> str:
    samples = "".join(_span(kind, label, label) for kind, label in KIND_LABELS.items())
    glyphs = (
        _span(REJECTED, "✕", UNKNOWN_REJECTED)
        + " rejected, text not sent "
        + _span(REJECTED, "␣ ↵", WHITESPACE_REJECTED)
        + " rejected space / line break "
    )
    special = (
        '<abbr class="ss-special" data-mark="end" title="a special token such as &lt;|im_end|&gt;; '
        'the chat template hides it"></abbr> special token (not part of the text)'
    )
    return f'<div class="ss-legend">{samples}{glyphs}{special}</div>'


def tokens_html(
    tokens: Sequence[Token],
    steps: Sequence[Step],
    *,
    show_rejected: bool = True,
    token_texts: Mapping[int, str] | None = None,
    divergence: int | None = None,
    special: Collection[int] = (),
) -> str:
    """One pane: tokens in order, each step's rejected drafts after its last token.

    ``token_texts`` names rejected token ids (their text is never streamed; one not named yet is a ✕, never
    its id); ``divergence``
    is the index of the first token that differs from the baseline pane; ``special`` the
    indices of special tokens.
    """
    texts = token_texts or {}
    ends = {step.start + step.size - 1: step for step in steps} if show_rejected else {}
    parts = ['<div class="ss-pane">']
    for i, token in enumerate(tokens):
        title = f"step {token.step} · {KIND_LABELS[token.kind]}"
        if token.logprob is not None:
            title += f" · logprob {token.logprob:.3f}"
        extra = ""
        if i == divergence:
            extra, title = " ss-diverge", title + " · first token that differs from the baseline"
        if i in special:
            parts.append(_special(token.kind, token.text, i == len(tokens) - 1, extra))
        else:
            parts.append(_span(token.kind, token.text, title, extra))
        step = ends.get(i)
        if step is not None and step.rejected_ids:
            for token_id in step.rejected_ids:
                if token_id in texts:
                    parts.append(_rejected(texts[token_id], f"step {step.index} · rejected draft (id {token_id})"))
                else:  # named by its server once the answer ends
                    parts.append(_span(REJECTED, "✕", f"step {step.index} · rejected draft: {UNNAMED_REJECTED}"))
        elif step is not None and step.rejected:
            parts.append(
                _span(
                    REJECTED,
                    "✕" * step.rejected,
                    f"step {step.index} · {step.rejected} rejected drafts: {UNKNOWN_REJECTED}",
                )
            )
    parts.append("</div>")
    return "".join(parts)
