"""A Live pane's figures: ``vllm bench serve``'s TTFT, TPOT (the first token left out) and ITL (the gap
between chunks), acceptance from the steps or the server's own counters, speedups against the baseline
pane, the lossless check, and the interval over repeated runs of one prompt."""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from specscope import stats
from specscope.client import metrics
from specscope.client.stream import Chunk, GenerationRequest
from specscope.live.labels import Provenance

__all__ = [
    "PaneMetrics",
    "Repeats",
    "RunHistory",
    "MIN_REPEATS",
    "pane_metrics",
    "decode_and_ttft",
    "answer_problem",
    "compare_lossless",
    "special_tokens",
    "with_counters",
]

MIN_REPEATS = 3  # finished runs of one prompt on the same servers before their interval is shown


@dataclass(frozen=True)
class PaneMetrics:
    """A pane's figures so far (``vllm bench serve`` definitions), speedup against the baseline pane."""

    tokens: int = 0
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    itl_ms: float | None = None
    tokens_per_s: float | None = None
    acceptance_length: float | None = None
    acceptance_rate: float | None = None
    per_position: tuple[float, ...] = ()
    speedup: float | None = None  # end to end: tok/s over the baseline's (TTFT included)
    decode_speedup: float | None = None  # decode alone: the baseline's TPOT over this pane's
    ttft_decides: bool = False  # the TTFT difference outweighs the decode difference


@dataclass(frozen=True)
class Repeats:
    """One pane's figures over the finished runs of one prompt on the same servers and settings."""

    speedups: tuple[float, ...]
    decode_speedups: tuple[float, ...]
    cached: int = 0  # of the runs, those whose server reused cached work (badged)

    @property
    def count(self) -> int:
        """How many runs finished."""
        return len(self.speedups)

    def interval(self, decode: bool = False) -> tuple[float, float, float] | None:
        """(geometric mean, low, high): a 95% t-interval on the log scale, so it stays above 0;
        None below ``MIN_REPEATS`` runs."""
        logs = [math.log(v) for v in (self.decode_speedups if decode else self.speedups) if v > 0]
        if len(logs) < MIN_REPEATS:
            return None
        found = stats.mean_interval(logs)
        if found.low is None or found.high is None:
            return None
        return math.exp(found.estimate), math.exp(found.low), math.exp(found.high)


class RunHistory:
    """The finished runs of each setup (prompt, settings, servers, mode), kept for one dashboard session."""

    def __init__(self) -> None:
        self._runs: dict[str, dict[str, list[tuple[float, float | None, bool]]]] = {}
        self._lock = threading.Lock()

    def record(self, key: str, figures: dict[str, PaneMetrics], cached: Iterable[str] = ()) -> None:
        """One finished run: each pane's end-to-end and decode speedup; ``cached``: the panes whose
        server reused cached work."""
        cached = set(cached)
        with self._lock:
            runs = self._runs.setdefault(key, {})
            for label, m in figures.items():
                if m.speedup is not None:
                    runs.setdefault(label, []).append((m.speedup, m.decode_speedup, label in cached))

    def repeats(self, key: str, label: str) -> Repeats | None:
        """A pane's runs of the setup ``key`` so far, None before the first."""
        with self._lock:
            runs = list(self._runs.get(key, {}).get(label, []))
        if not runs:
            return None
        return Repeats(
            tuple(e for e, _, _ in runs), tuple(d for _, d, _ in runs if d is not None), sum(c for _, _, c in runs)
        )


def pane_metrics(chunks: list[Chunk], provenance: Provenance) -> PaneMetrics:
    """Latency and acceptance figures of the chunks received so far."""
    timed = [c for c in chunks if c.token_ids]
    count = sum(len(c.token_ids) for c in timed)
    if not timed:
        return PaneMetrics()
    first, last = timed[0].arrival_s, timed[-1].arrival_s
    gaps = [b.arrival_s - a.arrival_s for a, b in zip(timed, timed[1:])]
    drafting = [s for s in provenance.steps if s.drafted]
    drafted = sum(s.drafted or 0 for s in drafting)
    accepted = sum(s.accepted for s in drafting)
    depth = max((s.drafted or 0 for s in drafting), default=0)
    return PaneMetrics(
        tokens=count,
        ttft_ms=first * 1000,
        tpot_ms=(last - first) / (count - 1) * 1000 if count > 1 else None,
        itl_ms=sum(gaps) / len(gaps) * 1000 if gaps else None,
        tokens_per_s=count / last if last > 0 else None,
        acceptance_length=1 + accepted / len(drafting) if drafting else None,
        acceptance_rate=accepted / drafted if drafted else None,
        per_position=tuple(sum(1 for s in drafting if s.accepted > i) / len(drafting) for i in range(depth)),
    )


def decode_and_ttft(base: PaneMetrics, pane: PaneMetrics) -> dict[str, Any]:
    """The decode speedup (TPOT ratio) and whether TTFT decides the end-to-end figure: its difference,
    spread over the output tokens, outweighs the difference in decode time per token."""
    if not (
        base.tpot_ms
        and pane.tpot_ms
        and base.tokens
        and pane.tokens
        and base.ttft_ms is not None
        and pane.ttft_ms is not None
    ):
        return {}
    ttft_gap = abs(base.ttft_ms / base.tokens - pane.ttft_ms / pane.tokens)
    decode_gap = abs(base.tpot_ms * (base.tokens - 1) / base.tokens - pane.tpot_ms * (pane.tokens - 1) / pane.tokens)
    return {"decode_speedup": base.tpot_ms / pane.tpot_ms, "ttft_decides": ttft_gap > decode_gap}


def with_counters(
    provenance: Provenance, figures: PaneMetrics, counted: metrics.SpecDecodeDelta
) -> tuple[Provenance, PaneMetrics]:
    """A chunk-estimated pane's figures from the server's own counters over its request (/metrics before and
    after; only this request ran on the server): acceptance length and rate, per-position rates, and each step's
    drafted count where every step drafted alike."""
    if not counted.num_drafts:
        return provenance, figures
    per_step = counted.draft_tokens / counted.num_drafts
    steps = [
        replace(s, drafted=int(per_step)) if s.drafted is None and s.index and per_step.is_integer() else s
        for s in provenance.steps
    ]
    note = (
        f"Acceptance from the server's /metrics over this request: {counted.num_drafts} drafting steps, "
        f"{counted.draft_tokens} tokens drafted, {counted.accepted_tokens} accepted."
    )
    return (
        replace(provenance, steps=steps, notes=[*provenance.notes, note]),
        replace(
            figures,
            acceptance_length=counted.acceptance_length,
            acceptance_rate=counted.acceptance_rate,
            per_position=tuple(counted.per_position_rates or ()),
        ),
    )


def answer_problem(request: GenerationRequest, chunks: list[Chunk]) -> str | None:
    """For a request with a response format: "" when the streamed answer follows it, else why not
    (one sentence); None for a request without one."""
    answer_format = request.answer_format
    if answer_format is None:
        return None
    finish = next((c.finish_reason for c in reversed(chunks) if c.finish_reason), None)
    problem = answer_format.check("".join(c.text for c in chunks), finish)
    return f"The answer {problem}." if problem else ""


def compare_lossless(baseline: list[int], other: list[int], complete: bool) -> tuple[bool | None, int | None]:
    """(equal?, first differing index) of two greedy outputs; None while undecided."""
    for i, (a, b) in enumerate(zip(baseline, other)):
        if a != b:
            return False, i
    if not complete:
        return None, None
    if len(baseline) != len(other):
        return False, min(len(baseline), len(other))
    return True, None


_SPECIAL_SHAPE = re.compile(r"<[^<>\s]{1,40}>")


def special_tokens(chunks: Iterable[Chunk]) -> frozenset[int]:
    """Indices of the output tokens that are special, e.g. ``<|im_end|>`` or ``</s>``: shaped
    like a tag and left out of the text the server detokenised, as the chat template leaves them out."""
    found, index = set(), 0
    for chunk in chunks:
        for text in chunk.texts or ("",) * len(chunk.token_ids):
            if _SPECIAL_SHAPE.fullmatch(text) and text not in chunk.text:
                found.add(index)
            index += 1
    return frozenset(found)
