"""Token HTML: every provenance has a class and a second cue, and model text stays text."""

from __future__ import annotations

import html
import re

from helpers.html_tags import parsed
from helpers.paths import CAPTURES
from specscope.client.stream import parse_event
from specscope.live.labels import Step, Token
from specscope.live.ngram import NgramConfig
from specscope.live.steps import label_steps
from ui.tokens import STYLE, legend_html, tokens_html


def capture_provenance():
    events = [e for e in (CAPTURES / "ngram_chat_500.sse").read_bytes().split(b"\n\n") if e.startswith(b"data:")]
    chunks = [c for c in (parse_event(e[5:].strip(), 0.0) for e in events) if c is not None]
    return label_steps(chunks, NgramConfig(k=4, prompt_lookup_min=2, prompt_lookup_max=4, max_model_len=2048))


def test_every_token_becomes_one_span_with_step_and_logprob_in_its_title():
    result = capture_provenance()
    tags = parsed(tokens_html(result.tokens, result.steps, show_rejected=False))
    spans = [a for t, a in tags.tags if t == "span"]
    assert len(spans) == len(result.tokens)
    assert [a["data-kind"] for a in spans] == [t.kind for t in result.tokens]
    assert spans[5]["title"].startswith(f"step {result.tokens[5].step} · ")
    assert f"logprob {result.tokens[5].logprob:.3f}" in spans[5]["title"]
    assert tags.text == "".join(t.text for t in result.tokens)


def test_rejected_tokens_follow_their_step_and_toggle_off():
    result = capture_provenance()
    rejected = sum(len(s.rejected_ids) for s in result.steps)
    shown = parsed(tokens_html(result.tokens, result.steps, token_texts={t.id: t.text for t in result.tokens}))
    kinds = [a["data-kind"] for t, a in shown.tags if t == "span"]
    assert kinds.count("rejected") == rejected > 0
    hidden = parsed(tokens_html(result.tokens, result.steps, show_rejected=False))
    assert "rejected" not in [a["data-kind"] for t, a in hidden.tags if t == "span"]


def test_each_kind_has_colour_and_a_second_cue():
    assert "text-decoration:underline" in STYLE.split(".ss-accepted")[1].split("}")[0]
    assert "font-weight:700" in STYLE.split(".ss-bonus")[1].split("}")[0]
    assert "line-through" in STYLE.split(".ss-rejected")[1].split("}")[0]
    legend = [a["data-kind"] for t, a in parsed(legend_html()).tags if t == "span"]
    assert legend == ["accepted", "bonus", "correction", "target", "rejected", "rejected", "rejected"]
    assert "✕" in legend_html() and "␣ ↵" in legend_html()  # the glyphs of rejected drafts are explained


def test_rejected_whitespace_is_visible_and_explained():
    tokens = [Token(id=1, text="a", logprob=None, step=0, kind="target", arrival_s=0.0)]
    steps = [Step(index=0, start=0, size=1, drafted=2, accepted=0, arrival_s=0.0, rejected_ids=(7, 8))]
    markup = tokens_html(tokens, steps, token_texts={7: " ", 8: "\n"})
    spans = re.findall(r'data-kind="rejected" title="([^"]*)">([^<]*)</span>', markup)
    assert [text for _, text in spans] == ["␣", "↵"] and all("whitespace" in title for title, _ in spans)


def test_model_text_with_markup_stays_text():
    payloads = ["<script>window.pwned=1</script>", '<img src=x onerror="window.pwned=1">', '" onmouseover="x']
    tokens = [Token(id=i, text=p, logprob=-0.5, step=i, kind="target", arrival_s=0.0) for i, p in enumerate(payloads)]
    steps = [Step(index=0, start=0, size=1, drafted=2, accepted=0, arrival_s=0.0, rejected_ids=(7, 8))]
    markup = tokens_html(tokens, steps, token_texts={7: "<b>x</b>", 8: "</div><script>1</script>"})
    tags = parsed(markup)
    assert {t for t, _ in tags.tags} == {"div", "span"}
    assert all("onerror" not in a and "onmouseover" not in a for _, a in tags.tags)
    assert "<script>window.pwned=1</script>" in tags.text and "<b>x</b>" in tags.text
    assert html.escape("<img", quote=True) in markup


def test_first_divergence_is_marked():
    tokens = [Token(id=i, text=str(i), logprob=None, step=i, kind="target", arrival_s=0.0) for i in range(3)]
    tags = parsed(tokens_html(tokens, [], divergence=1))
    spans = [a for t, a in tags.tags if t == "span"]
    assert "ss-diverge" in spans[1]["class"] and "differs from the baseline" in spans[1]["title"]
    assert "ss-diverge" not in spans[0]["class"]


def test_special_tokens_show_a_mark_with_their_text_on_hover():
    tokens = [
        Token(id=i, text=t, logprob=None, step=i, kind="target", arrival_s=0.0)
        for i, t in enumerate(["Hi", "<|im_start|>", "<|im_end|>"])
    ]
    tags = parsed(tokens_html(tokens, [], special={1, 2}))
    assert tags.text == "Hi"
    marks = [a for t, a in tags.tags if a.get("data-special")]
    assert [a["data-mark"] for a in marks] == ["special", "end"]
    assert "<|im_end|>" in marks[1]["title"] and "hides it" in marks[1]["title"]
    assert ".ss-special::after{content:attr(data-mark)}" in STYLE
