"""The load generator: one cell of a benchmark (a prompt set at one concurrency on one server).

It follows ``vllm bench serve`` (DOMAIN.md section 4): requests go out in the set's order
(cycled when ``num_prompts`` is larger), at ``request_rate`` (Poisson, ``inf`` = all at once)
behind a ``max_concurrency`` semaphore; each asks for ``output_len`` tokens with EOS ignored
at temperature 0 (``LoadSpec``). A constrained cell (``LoadSpec.structured``) sends each prompt's response
format (``specscope.formats``) without ignoring EOS, so an answer ends where its format closes, at most
the ``output_len`` asked, as a free request (an answer cut before its format closes is invalid and
says so). Each request's timings and the cell's figures are a ``CellResult`` (``client.cell_result``).
SD counters come from ``/metrics`` deltas around the run; per-request SD figures through
``stream.spec_decode_stats``, which reads both vLLM formats (``metrics.speculative_decoding`` on the final
usage chunk with ``--per-request-spec-decode-metrics``, per-choice ``speculative_decoding_stats`` with
``--per-request-spec-decode-stats``); each request row names the format it came from.

Warm-up requests send a fixed prompt that is not in the set, so they fill no cache the
measured requests could hit (prefix cache, suffix decoding's response cache); a constrained cell's
carry the response formats its prompts will send, one request per format at least, so no grammar
is compiled inside the measurement. A cell also reads the prefix-cache counters around the measurement
(the hygiene checks' hit rate).

    spec = LoadSpec(base_url="http://127.0.0.1:8000", max_concurrency=4, output_len=64)
    cell = run_sync(run_load(spec, prompt_set, progress=print))
    row = cell.row()   # what it measured, as result columns (the sweep adds model, method, K, ...)
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, replace

import httpx
import numpy as np

from specscope import formats
from specscope.client import metrics, probe, sse, stream
from specscope.client.cell_result import CellResult, RequestResult
from specscope.client.load_spec import DEFAULT_OUTPUT_LEN, LoadSpec
from specscope.client.progress import Progress, ProgressEvent
from specscope.errors import InputError, ServerError, SpecScopeError, UsageError
from specscope.prompts import Prompt, PromptSet

__all__ = ["ServerInfo", "run_load", "run_sync", "server_info", "warmup_prompts"]

# Warm-ups send this, never a prompt of the set, so no cache carries a measured prompt over.
_WARMUP_PROMPT = Prompt(
    prompt_id="warmup", line=0, messages=(("user", "Count from one to twenty in words, separated by commas."),)
)


@dataclass(frozen=True)
class ServerInfo:
    """What a running server says about itself: served model, vLLM version, context length."""

    model: str
    vllm_version: str | None
    max_model_len: int | None


def server_info(base_url: str, timeout: float = 10.0) -> ServerInfo:
    """The served model name, vLLM version and context length of a running server."""
    data = probe.models(base_url, timeout)[0]
    return ServerInfo(data["id"], probe.vllm_version(base_url, timeout), data.get("max_model_len"))


def _format_of(spec: LoadSpec, prompt: Prompt) -> formats.ResponseFormat | None:
    return prompt.response_format if spec.structured else None


def _payload(spec: LoadSpec, model: str, prompt: Prompt) -> tuple[str, dict]:
    max_tokens = spec.output_len or prompt.output_tokens or DEFAULT_OUTPUT_LEN
    common = {
        "model": model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": spec.temperature,
    }
    response_format = _format_of(spec, prompt)
    if response_format is not None:  # the answer ends where its format closes, or at max_tokens (invalid)
        common.update(response_format.request_fields())
    elif spec.ignore_eos:
        common["ignore_eos"] = True
    if spec.endpoint == "chat":
        return f"{spec.root}/v1/chat/completions", {
            **common,
            "messages": prompt.chat_messages(),
            "max_completion_tokens": max_tokens,
        }
    return f"{spec.root}/v1/completions", {
        **common,
        "prompt": prompt.text,
        "max_tokens": max_tokens,
        "repetition_penalty": 1.0,
    }


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{exc.__class__.__name__}: {text[0][:200]}" if text else exc.__class__.__name__


async def _one_request(client: httpx.AsyncClient, spec: LoadSpec, model: str, prompt: Prompt) -> RequestResult:
    url, payload = _payload(spec, model, prompt)
    result = RequestResult(
        prompt_id=prompt.prompt_id, category=prompt.category, response_format=_format_of(spec, prompt)
    )
    start = time.perf_counter()
    result.start_time = last = start
    first = True
    text_key = "delta" if spec.endpoint == "chat" else None
    try:
        async with client.stream("POST", url, json=payload) as response:
            if response.status_code != 200:
                body = (await response.aread()).decode(errors="replace")
                result.error = f"HTTP {response.status_code}: {body[:300]}"
                return result
            async for line in response.aiter_lines():
                data = sse.data_of(line)
                if data is None:
                    continue
                now = time.perf_counter()
                chunk = sse.decode(data)
                if chunk is sse.DONE:
                    continue
                figures = stream.spec_decode_stats(chunk)
                if figures is not None:
                    result.spec_decode = figures
                if chunk.get("choices"):
                    choice = chunk["choices"][0]
                    piece = (choice.get("delta") or {}).get("content") if text_key else choice.get("text")
                    result.text += piece or ""
                    result.finish_reason = choice.get("finish_reason") or result.finish_reason
                    if first:
                        result.ttft, first = now - start, False
                    else:
                        result.itl.append(now - last)
                    last = now
                elif chunk.get("usage"):
                    usage = chunk["usage"]
                    result.output_tokens = usage.get("completion_tokens") or 0
                    result.prompt_tokens = usage.get("prompt_tokens") or 0
        if first:
            result.error = "The stream ended without any token."
            return result
        if not result.output_tokens:
            result.error = "The stream ended before its usage summary; the server may have stopped."
            return result
        result.latency = last - start
        result.success = True
    except SpecScopeError as exc:
        result.error = str(exc)[:300]
    except (httpx.HTTPError, ValueError) as exc:
        result.error = _short(exc)
    return result


def _schedule(spec: LoadSpec, count: int) -> list[float]:
    """Delays between request arrivals (vLLM's get_request: gamma with shape = burstiness)."""
    if math.isinf(spec.request_rate):
        return [0.0] * count
    rng = np.random.default_rng(spec.seed)
    theta = 1.0 / (spec.request_rate * spec.burstiness)
    return [float(x) for x in rng.gamma(shape=spec.burstiness, scale=theta, size=count)]


def _snapshot(spec: LoadSpec, model: str) -> metrics.MetricsSnapshot | None:
    try:
        return metrics.scrape(spec.root, model_name=model)
    except ServerError:
        return None


def warmup_prompts(spec: LoadSpec, chosen: Sequence[Prompt]) -> list[Prompt]:
    """The ``spec.warmups`` unmeasured requests sent before a cell: the fixed warm-up prompt, carrying in a
    constrained cell each response format the measured prompts will send (at least one request per format,
    so every grammar is compiled before the measurement, as a measured request would need it)."""
    if spec.warmups <= 0:
        return []
    kinds = list(dict.fromkeys(_format_of(spec, p) for p in chosen)) if spec.structured else [None]
    return [
        replace(_WARMUP_PROMPT, prompt_id=f"warmup-{i}", response_format=kinds[i % len(kinds)])
        for i in range(max(spec.warmups, len(kinds)))
    ]


async def run_load(
    spec: LoadSpec,
    prompt_set: PromptSet,
    progress: Progress | None = None,
    *,
    cell: str = "",
    cells_done: int = 0,
    cells_total: int = 0,
    measuring: Callable[[], object] | None = None,
) -> CellResult:
    """Run one cell and return its requests, wall time and SD counter delta; ``measuring`` is called once
    its warm-ups are answered, right before the measured requests."""
    if not prompt_set.prompts:
        raise InputError("The prompt set is empty.")
    count = spec.num_prompts or len(prompt_set.prompts)
    chosen = [prompt_set.prompts[i % len(prompt_set.prompts)] for i in range(count)]
    model = spec.model or (await asyncio.to_thread(server_info, spec.root)).model
    limits = httpx.Limits(max_connections=spec.max_concurrency + 4, max_keepalive_connections=spec.max_concurrency + 4)
    timeout = httpx.Timeout(spec.timeout_s, connect=10.0)
    done = 0

    def report(stage="request", message=""):
        if progress is not None:
            progress(ProgressEvent(stage, cell, cells_done, cells_total, done, count, message))

    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        for warm in warmup_prompts(spec, chosen):
            await _one_request(client, spec, model, warm)
        if measuring is not None:
            measuring()
        before = await asyncio.to_thread(_snapshot, spec, model)
        semaphore = asyncio.Semaphore(spec.max_concurrency)

        async def limited(prompt: Prompt) -> RequestResult:
            nonlocal done
            async with semaphore:
                result = await _one_request(client, spec, model, prompt)
            done += 1
            report()
            return result

        report(message=f"{count} requests")
        started = time.perf_counter()
        tasks = []
        for prompt, delay in zip(chosen, _schedule(spec, count)):
            if delay:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(limited(prompt)))
        results = await asyncio.gather(*tasks)
        duration = time.perf_counter() - started
    after = await asyncio.to_thread(_snapshot, spec, model)
    sd_delta = None
    if before is not None and after is not None and (before.spec_decode or after.spec_decode):
        try:
            sd_delta = metrics.delta(before, after)
        except ServerError:
            sd_delta = None
    alive = after is not None or await asyncio.to_thread(probe.healthy, spec.root, 5.0)
    hit_rate = metrics.prefix_cache_hit_rate(before, after) if before and after else None
    return CellResult(spec, list(results), duration, sd_delta, server_alive=alive, prefix_cache_hit_rate=hit_rate)


def run_sync(coroutine: Coroutine):
    """Run a coroutine from synchronous code (the CLI, a Streamlit script thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    raise UsageError("run_sync was called inside a running event loop; await the coroutine instead.")
