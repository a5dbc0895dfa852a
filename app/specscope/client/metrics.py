"""Speculative-decoding counters from a vLLM server's Prometheus ``/metrics``: snapshots and deltas.

    before = scrape("http://127.0.0.1:8000")      # or parse(text) on captured text
    ...                                            # run the requests
    after = scrape("http://127.0.0.1:8000")
    d = delta(before, after)
    d.acceptance_rate, d.acceptance_length, d.per_position_rates
    d.as_row()   # the canonical-row columns: num_drafts, draft_tokens, accepted_tokens, ...

``parse`` uses prometheus_client's text parser and sums each counter over its label sets
(``engine``, ``model_name``), optionally keeping one ``model_name``. A server without
speculative decoding has no ``vllm:spec_decode_*`` series: its snapshot has
``spec_decode=False`` and zero counts. ``delta`` is pure. Definitions (DOMAIN.md section 1):
acceptance rate = accepted / draft tokens; acceptance length = 1 + accepted / drafts;
per-position rate i = accepted at position i / drafts. With no drafts in the window the
rates are ``None`` (nothing was drafted, so there is nothing to rate). Counts are only the
run's own if nothing else used the server between the snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from specscope.client import probe
from specscope.errors import ServerError, ServerUnreachable
from specscope.schema import ResultRow

__all__ = [
    "MetricsSnapshot",
    "SpecDecodeDelta",
    "parse",
    "scrape",
    "delta",
    "prefix_cache_hit_rate",
    "since_start",
    "server_columns",
]

_DRAFTS = "vllm:spec_decode_num_drafts"
_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
_ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
_GENERATED = "vllm:generation_tokens"
_PROMPT = "vllm:prompt_tokens"
_PREFIX_QUERIES = "vllm:prefix_cache_queries"
_PREFIX_HITS = "vllm:prefix_cache_hits"
_FINISHED = "vllm:request_success"
_RUNNING = "vllm:num_requests_running"


@dataclass(frozen=True)
class MetricsSnapshot:
    """Counter values at one moment (summed over engines)."""

    spec_decode: bool
    num_drafts: float = 0.0
    num_draft_tokens: float = 0.0
    num_accepted_tokens: float = 0.0
    accepted_per_position: tuple[float, ...] = ()
    generation_tokens: float = 0.0
    prompt_tokens: float = 0.0
    prefix_cache_queries: float = 0.0  # prompt tokens looked up in the prefix cache
    prefix_cache_hits: float = 0.0  # of those, tokens found cached
    requests_finished: float = 0.0  # requests the server has answered since it started
    requests_running: float = 0.0  # requests in flight now (a gauge)
    started_at: float | None = None  # epoch second of the server's first counter (its start)


@dataclass(frozen=True)
class SpecDecodeDelta:
    """What happened between two snapshots."""

    num_drafts: int
    draft_tokens: int
    accepted_tokens: int
    generation_tokens: int
    acceptance_rate: float | None
    acceptance_length: float | None
    per_position_rates: tuple[float, ...] | None

    def as_row(self) -> ResultRow:
        """The columns of the canonical result row that come from /metrics."""
        return {
            "num_drafts": self.num_drafts,
            "draft_tokens": self.draft_tokens,
            "accepted_tokens": self.accepted_tokens,
            "acceptance_rate": self.acceptance_rate,
            "acceptance_length": self.acceptance_length,
            "per_position_acceptance": list(self.per_position_rates) if self.per_position_rates is not None else None,
        }


def parse(text: str, model_name: str | None = None) -> MetricsSnapshot:
    """Read the SD counters out of Prometheus exposition text."""
    totals: dict[str, float] = {}
    per_position: dict[int, float] = {}
    seen_spec = False
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as exc:
        raise ServerError(f"The /metrics text is not valid Prometheus exposition ({exc}).") from exc
    created: list[float] = []
    for family in families:
        for sample in family.samples:
            if model_name is not None and sample.labels.get("model_name", model_name) != model_name:
                continue
            if sample.name.startswith("vllm:") and sample.name.endswith("_created"):
                created.append(sample.value)
            if sample.name == _RUNNING:
                totals[_RUNNING] = totals.get(_RUNNING, 0.0) + sample.value
            if not sample.name.endswith("_total"):
                continue
            name = sample.name.removesuffix("_total")
            if name.startswith("vllm:spec_decode_"):
                seen_spec = True
            if name == _PER_POS:
                position = int(sample.labels["position"])
                per_position[position] = per_position.get(position, 0.0) + sample.value
            elif name in (
                _DRAFTS,
                _DRAFT_TOKENS,
                _ACCEPTED,
                _GENERATED,
                _PROMPT,
                _PREFIX_QUERIES,
                _PREFIX_HITS,
                _FINISHED,
            ):
                totals[name] = totals.get(name, 0.0) + sample.value
    positions = tuple(per_position.get(i, 0.0) for i in range(max(per_position, default=-1) + 1))
    return MetricsSnapshot(
        spec_decode=seen_spec,
        num_drafts=totals.get(_DRAFTS, 0.0),
        num_draft_tokens=totals.get(_DRAFT_TOKENS, 0.0),
        num_accepted_tokens=totals.get(_ACCEPTED, 0.0),
        accepted_per_position=positions,
        generation_tokens=totals.get(_GENERATED, 0.0),
        prompt_tokens=totals.get(_PROMPT, 0.0),
        prefix_cache_queries=totals.get(_PREFIX_QUERIES, 0.0),
        prefix_cache_hits=totals.get(_PREFIX_HITS, 0.0),
        requests_finished=totals.get(_FINISHED, 0.0),
        requests_running=totals.get(_RUNNING, 0.0),
        started_at=min(created, default=None),
    )


def scrape(
    url: str, *, model_name: str | None = None, timeout: float = 5.0, client: httpx.Client | None = None
) -> MetricsSnapshot:
    """GET ``<url>/metrics`` (``url`` is the server's base URL, with or without ``/v1``)."""
    base = probe.base_url(url)
    try:
        response = probe.read(f"{base}/metrics", timeout, client=client)
        response.raise_for_status()
    except httpx.HTTPStatusError as exc:
        raise ServerError(f"{base}/metrics answered HTTP {exc.response.status_code}; is this a vLLM server?") from exc
    except httpx.HTTPError as exc:
        raise ServerUnreachable(
            f"Could not read {base}/metrics ({exc.__class__.__name__}); check that the server is running."
        ) from exc
    return parse(response.text, model_name=model_name)


def prefix_cache_hit_rate(before: MetricsSnapshot, after: MetricsSnapshot) -> float | None:
    """Share of prompt tokens served from the prefix cache between two snapshots (None: no lookups)."""
    queries = after.prefix_cache_queries - before.prefix_cache_queries
    if queries <= 0:
        return None
    return max(0.0, after.prefix_cache_hits - before.prefix_cache_hits) / queries


def delta(before: MetricsSnapshot, after: MetricsSnapshot) -> SpecDecodeDelta:
    """The counts and rates of the window between two snapshots of the same server."""
    drafts = after.num_drafts - before.num_drafts
    draft_tokens = after.num_draft_tokens - before.num_draft_tokens
    accepted = after.num_accepted_tokens - before.num_accepted_tokens
    generated = after.generation_tokens - before.generation_tokens
    if min(drafts, draft_tokens, accepted, generated) < 0:
        raise ServerError(
            "The server's counters went backwards between the two snapshots; "
            "it probably restarted, so measure the run again."
        )
    width = max(len(before.accepted_per_position), len(after.accepted_per_position))
    padded_before = before.accepted_per_position + (0.0,) * (width - len(before.accepted_per_position))
    padded_after = after.accepted_per_position + (0.0,) * (width - len(after.accepted_per_position))
    per_position = [a - b for a, b in zip(padded_after, padded_before)]
    if drafts <= 0:
        return SpecDecodeDelta(0, int(draft_tokens), int(accepted), int(generated), None, None, None)
    return SpecDecodeDelta(
        num_drafts=int(drafts),
        draft_tokens=int(draft_tokens),
        accepted_tokens=int(accepted),
        generation_tokens=int(generated),
        acceptance_rate=accepted / draft_tokens if draft_tokens else None,
        acceptance_length=1.0 + accepted / drafts,
        per_position_rates=tuple(p / drafts for p in per_position),
    )


def since_start(snapshot: MetricsSnapshot) -> SpecDecodeDelta:
    """The server's counters since it started (a delta from all zeros)."""
    return delta(MetricsSnapshot(spec_decode=snapshot.spec_decode), snapshot)


def server_columns(url: str, timeout: float = 2.0) -> dict:
    """A server's speculative-decoding figures since it started, for a table of servers.

    Keys: ``acceptance rate``, ``acceptance length``, ``drafts``, ``requests``, ``running``; values
    are None when the server has no speculative decoding, has not drafted yet, or /metrics
    cannot be read.
    """
    empty = dict.fromkeys(("acceptance rate", "acceptance length", "drafts", "requests", "running"))
    try:
        snapshot = scrape(url, timeout=timeout)
    except ServerError:
        return empty
    totals = since_start(snapshot)
    spec = snapshot.spec_decode
    return {
        "acceptance rate": totals.acceptance_rate if spec else None,
        "acceptance length": totals.acceptance_length if spec else None,
        "drafts": totals.num_drafts if spec else None,
        "requests": int(snapshot.requests_finished),
        "running": int(snapshot.requests_running),
    }
