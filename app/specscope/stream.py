"""Streaming client for a vLLM OpenAI-compatible server: I/O only.

One request, streamed, with ``logprobs`` (so every token arrives with its own text),
``return_token_ids`` and ``stream_options.include_usage`` (so the stream ends with a usage
chunk that, with ``--per-request-spec-decode-metrics``, carries the request's
``metrics.speculative_decoding``). :meth:`StreamClient.stream` yields one :class:`Chunk` per
SSE event with its arrival time; grouping into engine steps lives in ``steps.py``.

The client takes an ``httpx`` transport, so tests replay bytes recorded from real servers
through ``httpx.MockTransport``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

import httpx

from specscope import probe, sse
from specscope.errors import ServerUnreachable, StreamError

__all__ = ["GenerationRequest", "Chunk", "StreamClient", "request_body", "parse_event"]

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

    @property
    def path(self) -> str:
        """The endpoint this request goes to."""
        return "/v1/chat/completions" if self.chat else "/v1/completions"


@dataclass(frozen=True)
class Chunk:
    """One SSE event of a stream.

    ``arrival_s`` counts from the moment the request was sent. ``texts`` and ``logprobs``
    have one entry per token id. The final usage chunk has no tokens and carries ``usage``
    and, when the server reports it, ``spec_decoding`` (``metrics.speculative_decoding``).
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
    return body


def parse_event(data: bytes, arrival_s: float) -> Chunk | None:
    """Turn one SSE ``data:`` payload into a Chunk (None for ``[DONE]``)."""
    event = sse.decode(data)
    if event is sse.DONE:
        return None
    choices = event.get("choices") or []
    metrics = event.get("metrics") or {}
    if not choices:
        return Chunk(arrival_s=arrival_s, usage=event.get("usage"),
                     spec_decoding=metrics.get("speculative_decoding"))
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
    return Chunk(arrival_s=arrival_s, token_ids=token_ids, texts=texts, logprobs=values,
                 text=text, finish_reason=choice.get("finish_reason"),
                 prompt_token_ids=tuple(prompt_ids) if prompt_ids is not None else None,
                 usage=event.get("usage"), spec_decoding=metrics.get("speculative_decoding"))


class StreamClient:
    """Talks to one server at ``base_url`` (e.g. ``http://127.0.0.1:8000``)."""

    def __init__(self, base_url: str, *, transport: httpx.BaseTransport | None = None,
                 timeout: httpx.Timeout = _TIMEOUT):
        self.base_url = probe.base_url(base_url)
        self._http = httpx.Client(base_url=self.base_url, transport=transport, timeout=timeout)

    def __enter__(self) -> "StreamClient":
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
                    raise StreamError(f"{self.base_url} refused the request (HTTP {response.status_code}): "
                                      f"{sse.error_sentence(_json_or_text(response))}")
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
            raise StreamError(f"The stream from {self.base_url} ended after {received} tokens without "
                              "finishing; the server may have stopped.")
        except httpx.ConnectError as exc:
            raise ServerUnreachable(f"Nothing answers at {self.base_url}: {exc}. Start or attach the server first.") from exc
        except httpx.HTTPError as exc:
            raise StreamError(f"The stream from {self.base_url} broke after {received} tokens: "
                              f"{exc or type(exc).__name__}.") from exc


def _json_or_text(response: httpx.Response):
    try:
        return response.json()
    except ValueError:
        return response.text[:200]
