"""The load generator: one cell of a benchmark (a prompt set at one concurrency on one server).

It follows ``vllm bench serve`` (DOMAIN.md section 4): requests go out in the set's order
(cycled when ``num_prompts`` is larger), at ``request_rate`` (Poisson, ``inf`` = all at once)
behind a ``max_concurrency`` semaphore; each asks for ``output_len`` tokens with EOS ignored
at temperature 0. A constrained cell (``LoadSpec.structured``) sends each prompt's response format
(``specscope.formats``) without ignoring EOS, so an answer ends where its format closes, at most
the ``output_len`` asked, as a free request (an answer cut before its format closes is invalid and
says so); each answer is checked (``valid``). Per request: TTFT (first content chunk), ITL (gaps between chunks), TPOT
((E2EL - TTFT) / (tokens - 1)), E2EL (last content chunk) and the longest ITL (a stall). Throughput = output tokens of
successful requests / wall time of the run. SD counters come from ``/metrics`` deltas around
the run; per-request SD figures through ``stream.spec_decode_stats``, which reads both vLLM
formats (``metrics.speculative_decoding`` on the final usage chunk with
``--per-request-spec-decode-metrics``, per-choice ``speculative_decoding_stats`` with
``--per-request-spec-decode-stats``); each request row names the format it came from.

Warm-up requests send a fixed prompt that is not in the set, so they fill no cache the
measured requests could hit (prefix cache, suffix decoding's response cache); a constrained cell's
carry the response formats its prompts will send, one request per format at least, so no grammar
is compiled inside the measurement. A cell also
records what the hygiene checks need (``specscope.results.hygiene``): the prefix-cache hit rate
during the measurement and the share of requests that started in synchronized waves.

    spec = LoadSpec(base_url="http://127.0.0.1:8000", max_concurrency=4, output_len=64)
    cell = run_sync(run_load(spec, prompt_set, progress=print))
    row = cell.row(method="ngram", k=4, dataset=prompt_set.name, ...)   # canonical row
    rows = cell.request_rows(cell_id="ngram-k4-c4", method="ngram", k=4)
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import httpx
import numpy as np

from specscope import formats
from specscope.client import metrics, probe, sse, stream
from specscope.errors import ConfigError, InputError, ServerError, SpecScopeError, UsageError
from specscope.prompts import Prompt, PromptSet

__all__ = ["LoadSpec", "RequestResult", "CellResult", "Stage", "ProgressEvent", "Progress", "ServerInfo",
           "run_load", "run_sync", "server_info", "warmup_prompts", "DEFAULT_OUTPUT_LEN"]

DEFAULT_OUTPUT_LEN = 128
_WAVE_GAP_S = 0.005
# Warm-ups send this, never a prompt of the set, so no cache carries a measured prompt over.
_WARMUP_PROMPT = Prompt(prompt_id="warmup", line=0,
                        messages=(("user", "Count from one to twenty in words, separated by commas."),))


Stage = Literal["cell_start", "request", "cell_done", "cell_failed", "cell_skipped", "server", "sweep_done"]


@dataclass(frozen=True)
class ProgressEvent:
    """What a progress bar needs: where the sweep is and a one-line message."""

    stage: Stage
    cell: str = ""
    cells_done: int = 0
    cells_total: int = 0
    requests_done: int = 0
    requests_total: int = 0
    message: str = ""
    remaining_s: float | None = None  # a sweep's estimate of the time it still needs

    @property
    def remaining(self) -> str:
        """The estimate in words, e.g. 'about 4 min left' ('' without one)."""
        if self.remaining_s is None or self.stage == "sweep_done":
            return ""
        seconds = max(self.remaining_s, 1.0)
        return f"about {seconds:.0f} s left" if seconds < 90 else f"about {seconds / 60:.0f} min left"

    @property
    def fraction(self) -> float:
        """Overall progress 0..1 (finished cells plus the share of the current one)."""
        if not self.cells_total:
            return self.requests_done / self.requests_total if self.requests_total else 0.0
        within = self.requests_done / self.requests_total if self.requests_total else 0.0
        if self.stage in ("cell_done", "cell_failed", "cell_skipped", "sweep_done"):
            within = 0.0
        return min(1.0, (self.cells_done + within) / self.cells_total)


Progress = Callable[[ProgressEvent], None]


@dataclass(frozen=True)
class LoadSpec:
    """How to load one server (``vllm bench serve`` flags in brackets)."""

    base_url: str                          # [--base-url]
    model: str | None = None               # [--model] served name; None = the server's first model
    num_prompts: int | None = None         # [--num-prompts] None = every prompt of the set once
    max_concurrency: int = 1               # [--max-concurrency]
    request_rate: float = math.inf         # [--request-rate]
    burstiness: float = 1.0                # [--burstiness]
    output_len: int | None = DEFAULT_OUTPUT_LEN  # [--custom-output-len]; None = each prompt's output_tokens
    temperature: float = 0.0               # [--temperature]
    ignore_eos: bool = True                # [--ignore-eos]
    endpoint: Literal["chat", "completions"] = "chat"
    warmups: int = 0                       # [--num-warmups] sent before the counters are read
    seed: int = 0                          # [--seed]
    timeout_s: float = 1800.0
    structured: bool = False               # send each prompt's response format (a constrained cell)

    def __post_init__(self):
        if self.max_concurrency < 1:
            raise ConfigError("Concurrency must be at least 1.")
        if self.num_prompts is not None and self.num_prompts < 1:
            raise ConfigError("The number of prompts must be at least 1.")
        if self.output_len is not None and self.output_len < 1:
            raise ConfigError("The output length must be at least 1 token.")
        if not self.request_rate > 0:
            raise ConfigError("The request rate must be positive (inf sends all requests at once).")
        if self.endpoint not in ("chat", "completions"):
            raise ConfigError("The endpoint must be 'chat' or 'completions'.")

    @property
    def root(self) -> str:
        """The server's base URL without a trailing ``/v1``."""
        return probe.base_url(self.base_url)


@dataclass
class RequestResult:
    """One request's outcome and timings (seconds, as vLLM's RequestFuncOutput)."""

    prompt_id: str
    category: str | None = None
    success: bool = False
    error: str = ""
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)
    latency: float = 0.0
    start_time: float = 0.0
    text: str = ""
    spec_decode: dict | None = None
    finish_reason: str | None = None
    response_format: formats.ResponseFormat | None = None  # the format it was sent with, if any

    @property
    def invalid_reason(self) -> str | None:
        """Why the answer breaks its format, one sentence (a failed request has no answer); None when
        valid or free."""
        if self.response_format is None:
            return None
        if not self.success:
            return "No answer: the request failed."
        problem = self.response_format.check(self.text, self.finish_reason)
        return f"The answer {problem}." if problem else None

    @property
    def valid(self) -> bool | None:
        """Whether the answer follows its format; None for a request sent without one."""
        return None if self.response_format is None else self.invalid_reason is None

    @property
    def max_itl_ms(self) -> float | None:
        """The longest gap between two streamed chunks (a stall), ms."""
        return max(self.itl) * 1000 if self.itl else None

    @property
    def text_sha256(self) -> str:
        """Hash of the generated text (what a lossless check compares)."""
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def tpot(self) -> float | None:
        """Time per output token after the first (None with one token or less)."""
        if self.output_tokens <= 1:
            return None
        return (self.latency - self.ttft) / (self.output_tokens - 1)


def _stats(values_s: list[float]) -> dict[str, float | None]:
    if not values_s:
        return {"mean": None, "median": None, "p99": None}
    array = np.asarray(values_s) * 1000.0
    return {"mean": float(array.mean()), "median": float(np.median(array)),
            "p99": float(np.percentile(array, 99))}


@dataclass
class CellResult:
    """The requests of one cell, the run's wall time and the /metrics delta."""

    spec: LoadSpec
    requests: list[RequestResult]
    duration_s: float
    spec_delta: metrics.SpecDecodeDelta | None
    server_alive: bool = True
    prefix_cache_hit_rate: float | None = None

    @property
    def wave_share(self) -> float | None:
        """Share of requests that started within 5 ms of another (lockstep waves); None for one stream."""
        if self.spec.max_concurrency < 2 or len(self.requests) < 2:
            return None
        starts = sorted(r.start_time for r in self.requests)
        together = sum(1 for i, t in enumerate(starts)
                       if (i > 0 and t - starts[i - 1] < _WAVE_GAP_S)
                       or (i + 1 < len(starts) and starts[i + 1] - t < _WAVE_GAP_S))
        return together / len(starts)

    @property
    def ok(self) -> list[RequestResult]:
        """The requests that succeeded."""
        return [r for r in self.requests if r.success]

    @property
    def status(self) -> tuple[str, str | None]:
        """("ok", None) or ("failed", reason)."""
        failed = [r for r in self.requests if not r.success]
        if not self.server_alive:
            reason = failed[0].error if failed else "the server stopped answering"
            return "failed", f"The server stopped answering during the run ({reason})."
        if not self.ok:
            return "failed", f"Every request failed; first error: {failed[0].error}" if failed else "No requests ran."
        return "ok", None

    @property
    def valid_share(self) -> float | None:
        """Share of the constrained requests whose answer follows its format (failed ones count as
        not valid); None when the cell sent no format."""
        checked = [r.valid for r in self.requests if r.valid is not None]
        return sum(checked) / len(checked) if checked else None

    def row(self, **labels: Any) -> dict:
        """The canonical result row of this cell; ``labels`` fill model, method, k, dataset, ..."""
        ok = self.ok
        total_output = sum(r.output_tokens for r in ok)
        status, error = self.status
        row: dict[str, Any] = {
            "num_prompts": len(self.requests), "temperature": self.spec.temperature,
            "output_len": self.spec.output_len, "concurrency": self.spec.max_concurrency,
            "request_rate": self.spec.request_rate, "duration_s": self.duration_s,
            "completed": len(ok), "failed": len(self.requests) - len(ok),
            "total_input_tokens": sum(r.prompt_tokens for r in ok),
            "total_output_tokens": total_output,
            "request_throughput": len(ok) / self.duration_s if self.duration_s else None,
            "output_throughput": total_output / self.duration_s if self.duration_s else None,
            "status": status, "error": error, "warmups": self.spec.warmups,
            "prefix_cache_hit_rate": self.prefix_cache_hit_rate, "wave_share": self.wave_share,
            "response_format": formats.kinds_label(r.response_format for r in self.requests),
            "valid_share": self.valid_share,
            "max_itl_ms": max((r.max_itl_ms for r in ok if r.max_itl_ms is not None), default=None),
        }
        series = {"ttft": [r.ttft for r in ok], "tpot": [r.tpot for r in ok if r.tpot is not None],
                  "itl": [gap for r in ok for gap in r.itl], "e2el": [r.latency for r in ok]}
        for metric, values in series.items():
            for stat, value in _stats(values).items():
                row[f"{stat}_{metric}_ms"] = value
        if self.spec_delta is not None:
            row.update(self.spec_delta.as_row())
        row.update(labels)
        return row

    def request_rows(self, *, cell_id: str, method: str, k: int) -> list[dict]:
        """Per-request rows (REQUEST_SCHEMA) with per-request SD figures when the server gave them."""
        rows = []
        for r in self.requests:
            sd = r.spec_decode or {}
            tpot = r.tpot
            rows.append({
                "cell_id": cell_id, "prompt_id": r.prompt_id, "category": r.category, "method": method, "k": k,
                "concurrency": self.spec.max_concurrency, "success": r.success,
                "error": r.error or None, "prompt_tokens": r.prompt_tokens,
                "output_tokens": r.output_tokens,
                "ttft_ms": r.ttft * 1000 if r.success else None,
                "tpot_ms": tpot * 1000 if r.success and tpot is not None else None,
                "mean_itl_ms": float(np.mean(r.itl)) * 1000 if r.itl else None,
                "e2el_ms": r.latency * 1000 if r.success else None,
                "num_drafts": sd.get("num_spec_steps"), "draft_tokens": sd.get("num_draft_tokens"),
                "accepted_tokens": sd.get("num_accepted_draft_tokens"),
                "acceptance_rate": sd.get("draft_acceptance_rate"),
                "acceptance_length": sd.get("mean_acceptance_length"),
                "spec_decode_format": sd.get("format"),
                "response_format": r.response_format.kind if r.response_format else formats.FREE,
                "valid": r.valid, "invalid_reason": r.invalid_reason, "max_itl_ms": r.max_itl_ms,
                "per_step_accepted": sd.get("per_step_accepted"), "per_step_drafted": sd.get("per_step_drafted"),
            })
        return rows


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
    common = {"model": model, "stream": True, "stream_options": {"include_usage": True},
              "temperature": spec.temperature}
    response_format = _format_of(spec, prompt)
    if response_format is not None:  # the answer ends where its format closes, or at max_tokens (invalid)
        common.update(response_format.request_fields())
    elif spec.ignore_eos:
        common["ignore_eos"] = True
    if spec.endpoint == "chat":
        return f"{spec.root}/v1/chat/completions", {
            **common, "messages": prompt.chat_messages(), "max_completion_tokens": max_tokens}
    return f"{spec.root}/v1/completions", {
        **common, "prompt": prompt.text, "max_tokens": max_tokens, "repetition_penalty": 1.0}


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{exc.__class__.__name__}: {text[0][:200]}" if text else exc.__class__.__name__


async def _one_request(client: httpx.AsyncClient, spec: LoadSpec, model: str,
                       prompt: Prompt) -> RequestResult:
    url, payload = _payload(spec, model, prompt)
    result = RequestResult(prompt_id=prompt.prompt_id, category=prompt.category,
                           response_format=_format_of(spec, prompt))
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
    return [replace(_WARMUP_PROMPT, prompt_id=f"warmup-{i}", response_format=kinds[i % len(kinds)])
            for i in range(max(spec.warmups, len(kinds)))]


async def run_load(spec: LoadSpec, prompt_set: PromptSet, progress: Progress | None = None,
                   *, cell: str = "", cells_done: int = 0, cells_total: int = 0,
                   measuring: Callable[[], object] | None = None) -> CellResult:
    """Run one cell and return its requests, wall time and SD counter delta; ``measuring`` is called once
    its warm-ups are answered, right before the measured requests."""
    if not prompt_set.prompts:
        raise InputError("The prompt set is empty.")
    count = spec.num_prompts or len(prompt_set.prompts)
    chosen = [prompt_set.prompts[i % len(prompt_set.prompts)] for i in range(count)]
    model = spec.model or (await asyncio.to_thread(server_info, spec.root)).model
    limits = httpx.Limits(max_connections=spec.max_concurrency + 4,
                          max_keepalive_connections=spec.max_concurrency + 4)
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
    return CellResult(spec, list(results), duration, sd_delta, server_alive=alive,
                      prefix_cache_hit_rate=hit_rate)


def run_sync(coroutine: Coroutine):
    """Run a coroutine from synchronous code (the CLI, a Streamlit script thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    raise UsageError("run_sync was called inside a running event loop; await the coroutine instead.")
