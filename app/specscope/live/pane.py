"""One Live pane: a server's stream of one request, filled by a worker thread and read by the page.

Before it streams, a pane whose server has answered nothing yet is warmed with unmeasured requests of the
run's shape (``specscope.client.warmup``), a kept server that sleeps is woken, and the pane learns whether
its server saw the prompt before (``specscope.live.freshness``): a cached prompt reads faster than a new one.
A pane whose server dies or errors keeps what it received and shows the error; the others carry on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from specscope import procfs
from specscope.client import metrics, warmup
from specscope.client.stream import Chunk, GenerationRequest, StreamClient
from specscope.engine.catalog import LIVE_REBUILT
from specscope.errors import SpecScopeError
from specscope.launch import kept
from specscope.launch.registry import read_states
from specscope.live import freshness, token_names
from specscope.live.figures import PaneMetrics, Repeats, pane_metrics, with_counters
from specscope.live.freshness import Freshness
from specscope.live.labels import Provenance
from specscope.live.ngram import NgramConfig
from specscope.live.spec import PaneSpec, host_port
from specscope.live.steps import StepTracker

__all__ = ["PaneView", "Pane"]


@dataclass
class PaneView:
    """What a pane shows at one moment."""

    spec: PaneSpec
    provenance: Provenance
    metrics: PaneMetrics
    token_texts: dict[int, str]
    error: str | None
    done: bool
    lossless: bool | None = None
    divergence: int | None = None
    lossless_note: str | None = None  # why the check does not apply (synthetic acceptance)
    t0: float | None = None  # wall-clock second the chunks' arrival_s count from (None: not started)
    special: frozenset[int] = frozenset()  # indices of special tokens (``special_tokens``)
    warming: bool = False  # its server is being warmed up (nothing measured yet)
    cold: bool = False  # its server had answered nothing before this request: a cold start
    freshness: Freshness | None = None  # whether its server saw the prompt before
    invalid_reason: str | None = None  # why a finished answer breaks the request's response format
    valid: bool | None = None  # whether it follows it (None: no format, or not finished)
    repeats: Repeats | None = None  # this setup's finished runs of the same prompt, this one included


class Pane:
    """One server's stream: filled by a worker thread, read by the UI at any time."""

    def __init__(self, spec: PaneSpec, request: GenerationRequest):
        self.spec = spec
        self.request = request
        self.chunks: list[Chunk] = []
        self.error: str | None = None
        self.done = False
        self.token_texts: dict[int, str] = {}  # rejected drafts the server named once the answer ended
        self.tokenizer: Path | None = None  # its server's tokenizer, where on this machine (``token_names``)
        self.max_model_len: int | None = None
        self.started_at: float | None = None  # wall clock when the request was sent
        self.warming = False
        self.cold = False
        self.freshness: Freshness | None = None
        self._server: tuple[str, metrics.MetricsSnapshot] | None = None  # key and /metrics before the request
        self.counted: metrics.SpecDecodeDelta | None = None  # the server's SD counters over this request
        self.on_change: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self._view: tuple[int, tuple[Provenance, PaneMetrics]] | None = None

    def ngram_config(self) -> NgramConfig | None:
        """The ngram settings that rebuild this server's drafts exactly, if it runs ngram."""
        config = self.spec.speculative_config
        if not config or config.get("method") not in LIVE_REBUILT:
            return None
        return NgramConfig.from_speculative_config(config, self.max_model_len)

    def _snapshot(self, transport: httpx.BaseTransport | None) -> metrics.MetricsSnapshot | None:
        try:
            with httpx.Client(transport=transport) as client:
                return metrics.scrape(self.spec.url, timeout=3.0, client=client)
        except SpecScopeError:
            return None

    def prepare(self, transport: httpx.BaseTransport | None = None) -> None:
        """Warm the server if it has answered nothing yet (with this request's shape; a pane on a
        given ``transport``, recorded streams, is not warmed), and find out whether it saw the prompt."""
        if transport is None:
            self._wake()
            self.tokenizer = token_names.tokenizer_of(self.spec.url)
            token_names.decode_each(self.tokenizer, ())  # loaded now, not while the answer streams
        before = self._snapshot(transport)
        if transport is None and (before is None or before.requests_finished == 0):
            self.warming = True
            self._notify()
            warmup.warm_up(
                self.spec.url,
                output_len=self.request.max_tokens,
                prompt_chars=len(self.request.prompt),
                chat=self.request.chat,
                temperature=self.request.temperature,
            )
            before = self._snapshot(transport)
            self.warming = False
        self.cold = before is not None and before.requests_finished == 0
        suffix = freshness.drafts_from_answers(self.spec.method, self.spec.speculative_config)
        if before is not None:
            self._server = (freshness.server_key(self.spec.url, before), before)
            self.freshness = Freshness(drafts_from_answers=suffix)

    def _wake(self) -> None:
        """A kept server of SpecScope's that sleeps (a sweep's, on a GPU) is woken before it is used."""
        host, port = host_port(self.spec.url)
        for state in read_states():
            if not state.attached and host_port(state.url) == (host, port) and procfs.alive(state.pid, state.pgid):
                try:
                    kept.wake(state)
                except SpecScopeError as exc:
                    self.error = f"{self.spec.label} sleeps and did not wake: {exc}"
                return

    def _after(self, transport: httpx.BaseTransport | None) -> None:
        """What the server reused: the prefix-cache hits of this request's prompt (/metrics before and
        after), and for suffix decoding how much of the answer it had produced before; the answer is
        then logged for its server."""
        server = self._server
        after = self._snapshot(transport) if server is not None else None
        if server is None or after is None or self.freshness is None:
            return
        key, before = server
        if self.spec.speculative and after.spec_decode:
            try:
                self.counted = metrics.delta(before, after)
            except SpecScopeError:
                self.counted = None
        answer = [i for c in self.snapshot() for i in c.token_ids]
        log = freshness.AnswerLog()
        overlap = freshness.answer_overlap(answer, log.answers(key)) if self.freshness.drafts_from_answers else None
        self.freshness = replace(
            self.freshness, prefix_hit_rate=metrics.prefix_cache_hit_rate(before, after), answer_overlap=overlap
        )
        log.add(key, answer)

    def run(self, transport: httpx.BaseTransport | None = None) -> None:
        """Stream to the end; any failure becomes the pane's error, keeping what arrived."""
        try:
            with StreamClient(self.spec.url, transport=transport) as client:
                info = client.model_info()
                self.max_model_len = info.get("max_model_len")
                request = GenerationRequest(**{**asdict(self.request), "model": self.request.model or info["id"]})
                self.started_at = time.time()
                for chunk in client.stream(request):
                    with self._lock:
                        self.chunks.append(chunk)
                    self._notify()
                self._name_rejected_tokens(client)
            self._after(transport)
        except SpecScopeError as exc:
            self.error = str(exc)
        except Exception as exc:  # a pane must never take the others down
            self.error = f"{self.spec.label} failed: {type(exc).__name__}: {exc}"
        finally:
            self.done = True
            self._notify()

    def _notify(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def _name_rejected_tokens(self, client: StreamClient) -> None:
        if self.ngram_config() is None:
            return
        provenance = self.view_chunks(self.chunks)[0]
        known = {t.id for t in provenance.tokens}
        wanted = {i for s in provenance.steps for i in s.rejected_ids} - known
        self.token_texts = client.detokenize(sorted(wanted))

    def named(self, provenance: Provenance) -> dict[int, str]:
        """The text of every token id of ``provenance`` known so far: its tokens', then its rejected drafts' (the
        server's names once the answer ended, else the tokenizer's, where it is on this machine)."""
        texts = {t.id: t.text for t in provenance.tokens} | self.token_texts
        unnamed = {i for step in provenance.steps for i in step.rejected_ids} - texts.keys()
        return texts | token_names.decode_each(self.tokenizer, unnamed) if unnamed else texts

    def snapshot(self, until_s: float | None = None) -> list[Chunk]:
        """The chunks received so far (up to ``until_s`` into the stream when given)."""
        with self._lock:
            chunks = list(self.chunks)
        return chunks if until_s is None else [c for c in chunks if c.arrival_s <= until_s]

    def view_chunks(self, chunks: list[Chunk]) -> tuple[Provenance, PaneMetrics]:
        """Provenance and metrics of ``chunks`` (a prefix of this pane's chunks); the last one is kept,
        so redrawing a pane that received nothing new costs nothing."""
        last = self._view
        if last is not None and last[0] == len(chunks):
            return last[1]
        tracker = StepTracker(self.ngram_config(), self.spec.speculative, self.spec.exact_labels_hint())
        for chunk in chunks:
            tracker.add(chunk)
        provenance = tracker.provenance()
        figures = pane_metrics(chunks, provenance)
        if provenance.source == "chunks" and self.counted is not None and len(chunks) == len(self.chunks) and self.done:
            provenance, figures = with_counters(provenance, figures, self.counted)
        result = (provenance, figures)
        self._view = (len(chunks), result)
        return result

    def to_dict(self) -> dict[str, Any]:
        """The pane as JSON-ready values, for a recording."""
        return {
            "spec": asdict(self.spec),
            "request": asdict(self.request),
            "error": self.error,
            "max_model_len": self.max_model_len,
            "token_texts": {str(k): v for k, v in self.token_texts.items()},
            "cold": self.cold,
            "freshness": asdict(self.freshness) if self.freshness else None,
            "counted": asdict(self.counted) if self.counted else None,
            "chunks": [asdict(c) for c in self.snapshot()],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pane:
        """A finished pane from a recording's entry."""
        pane = cls(PaneSpec(**data["spec"]), GenerationRequest(**data["request"]))
        pane.error = data.get("error")
        pane.max_model_len = data.get("max_model_len")
        pane.token_texts = {int(k): v for k, v in (data.get("token_texts") or {}).items()}
        pane.cold = bool(data.get("cold"))
        pane.freshness = Freshness.from_dict(data["freshness"]) if data.get("freshness") else None
        counted = data.get("counted")
        if counted:
            per_position = counted.get("per_position_rates")
            pane.counted = metrics.SpecDecodeDelta(
                **{**counted, "per_position_rates": None if per_position is None else tuple(per_position)}
            )
        for raw in data["chunks"]:
            raw = dict(raw)
            for key in ("token_ids", "texts", "logprobs"):
                raw[key] = tuple(raw.get(key) or ())
            if raw.get("prompt_token_ids") is not None:
                raw["prompt_token_ids"] = tuple(raw["prompt_token_ids"])
            pane.chunks.append(Chunk(**raw))
        pane.done = True
        return pane
