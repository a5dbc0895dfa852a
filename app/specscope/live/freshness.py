"""Fresh prompts on Live: whether a server reused earlier work for this request, and a prompt variant.

A request is flattered by what its server actually reuses, and the badges follow exactly that:

- suffix decoding drafts from the answers it produced before, whatever prompt asked for them: a reworded
  prompt with the same answer reads 100% acceptance. ``AnswerLog`` keeps the token ids of the answers
  SpecScope streamed from each server process (a server is its URL and its start time from /metrics, so
  a restart starts a clean log; in ``home()/answers-seen.json``), and ``answer_overlap`` is the share of
  a new answer that lies in runs of ``OVERLAP_RUN`` tokens an earlier answer also holds;
- the prefix cache skips the prefill of prompt tokens it holds: the share of the request's prompt tokens
  that were prefix-cache hits (vLLM's /metrics counters before and after the request), which also
  counts prompts sent by anyone else.

A variant (``variant``) changes the prompt's first tokens, so no prefix cache holds it; its answer
stays close to the original's, so for suffix decoding only a restart gives a fresh comparison.

    log = AnswerLog()
    key = server_key(url, metrics.scrape(url))
    fresh = Freshness(drafts_from_answers=True, answer_overlap=answer_overlap(ids, log.answers(key)),
                      prefix_hit_rate=0.9)
    fresh.badge     # 'repeated answer: cached drafts'
    log.add(key, ids)
    advice(answers=["suffix"], prefix=[], restartable=["suffix"])   # what to say, and whether a variant helps
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from specscope import files, settings
from specscope.client.metrics import MetricsSnapshot
from specscope.engine.catalog import ANSWER_DRAFTERS
from specscope.results import hygiene

__all__ = [
    "Freshness",
    "AnswerLog",
    "server_key",
    "variant",
    "base_prompt",
    "drafts_from_answers",
    "advice",
    "answer_overlap",
    "CACHED_DRAFTS",
    "PREFIX_CACHED",
    "OVERLAP_RUN",
    "ANSWER_OVERLAP_LIMIT",
]

CACHED_DRAFTS = "repeated answer: cached drafts"
PREFIX_CACHED = "prefix cache hit"
OVERLAP_RUN = 8  # tokens in a row an earlier answer must hold for them to count as seen
ANSWER_OVERLAP_LIMIT = 0.5  # more of the answer than this was seen before: suffix drafts from the cache
_MARK = re.compile(r"^\(variant \d+\) ")
_KEEP_SERVERS = 50  # server processes remembered
_KEEP_ANSWERS = 200  # answers remembered per server process
_KEEP_TOKENS = 4096  # tokens kept of each answer


def drafts_from_answers(method: str, speculative_config: dict[str, Any] | None) -> bool:
    """Whether the method drafts from answers it cached earlier (suffix decoding)."""
    return method in ANSWER_DRAFTERS or (speculative_config or {}).get("method") in ANSWER_DRAFTERS


def server_key(url: str, snapshot: MetricsSnapshot | None) -> str:
    """One server process: its URL and the second it started (its URL alone when /metrics is silent)."""
    started = snapshot.started_at if snapshot is not None else None
    return url.rstrip("/") if started is None else f"{url.rstrip('/')}@{started:.0f}"


def base_prompt(prompt: str) -> str:
    """The prompt without its variant mark."""
    return _MARK.sub("", prompt)


def variant(prompt: str) -> str:
    """The prompt with new first tokens, so no prefix cache holds it: ``(variant 1) ...``, and the
    next number for a prompt that is a variant already."""
    mark = _MARK.match(prompt)
    number = int(mark.group(0).split()[1].rstrip(")")) + 1 if mark else 1
    return f"(variant {number}) {base_prompt(prompt)}"


def answer_overlap(answer: Sequence[int], earlier: Iterable[Sequence[int]], run: int = OVERLAP_RUN) -> float | None:
    """Share of ``answer``'s tokens inside a run of ``run`` tokens (the whole answer, if shorter) that an
    earlier answer also holds; None for an empty answer."""
    answer = list(answer)
    if not answer:
        return None
    run = min(run, len(answer))
    seen = {tuple(old[i : i + run]) for old in earlier for i in range(len(old) - run + 1)}
    covered = [False] * len(answer)
    for i in range(len(answer) - run + 1):
        if tuple(answer[i : i + run]) in seen:
            covered[i : i + run] = [True] * run
    return sum(covered) / len(answer)


@dataclass(frozen=True)
class Freshness:
    """What a pane's server reused for its request, and what to call it."""

    drafts_from_answers: bool = False  # the method drafts from earlier answers (suffix)
    answer_overlap: float | None = None  # share of this answer an earlier answer of its server held
    prefix_hit_rate: float | None = None  # share of its prompt tokens that were prefix-cache hits

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Freshness:
        """From a recording's entry (older recordings carry keys no longer kept)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    @property
    def cached_answer(self) -> bool:
        """Suffix decoding drafted from an answer it had produced before."""
        return self.drafts_from_answers and (self.answer_overlap or 0.0) > ANSWER_OVERLAP_LIMIT

    @property
    def prefix_cached(self) -> bool:
        """Most of the prompt's tokens were prefix-cache hits."""
        return (self.prefix_hit_rate or 0.0) > hygiene.PREFIX_CACHE_LIMIT

    @property
    def repeated(self) -> bool:
        """Cached work flatters the pane's figures."""
        return self.cached_answer or self.prefix_cached

    @property
    def badge(self) -> str | None:
        """The pane's badge text, None when nothing cached flatters it."""
        return CACHED_DRAFTS if self.cached_answer else PREFIX_CACHED if self.prefix_cached else None

    @property
    def explanation(self) -> str:
        """What the reuse does to the pane's figures (what was measured, then what to do)."""
        parts = []
        if self.cached_answer:
            parts.append(
                f"{self.answer_overlap:.0%} of this answer repeats an answer this server produced "
                "before: suffix decoding drafts from its cached answers, so acceptance and speedup read "
                "far higher than for a new answer (a reworded prompt does not help; restart the server "
                "for a fair comparison)."
            )
        if self.prefix_hit_rate is not None:
            parts.append(
                f"{self.prefix_hit_rate:.0%} of its prompt tokens came from the prefix cache"
                + (
                    ", so TTFT reads lower than for a new prompt; run a variant of the prompt for a fair comparison."
                    if self.prefix_cached
                    else "."
                )
            )
        return " ".join(parts)


class AnswerLog:
    """The token ids of the answers SpecScope streamed from each server process, in
    ``home()/answers-seen.json`` (not beside the servers' state files, which are every ``*.json`` of
    ``servers_dir()``)."""

    _lock = threading.Lock()

    def __init__(self) -> None:
        self.path = settings.home() / "answers-seen.json"

    def _read(self) -> dict[str, list[list[int]]]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def answers(self, key: str) -> list[list[int]]:
        """The answers the server process ``key`` streamed before."""
        return [a for a in self._read().get(key, []) if isinstance(a, list)]

    def add(self, key: str, answer: Sequence[int]) -> None:
        """Remember an answer the server produced."""
        if not answer:
            return
        with self._lock:
            data = self._read()
            kept = data.pop(key, [])
            data[key] = (kept + [list(answer)[:_KEEP_TOKENS]])[-_KEEP_ANSWERS:]
            data = dict(list(data.items())[-_KEEP_SERVERS:])
            files.write_atomic(self.path, json.dumps(data))


def advice(answers: Sequence[str], prefix: Sequence[str], restartable: Sequence[str]) -> tuple[str, bool]:
    """What Live says over panes that reused cached work, and whether to offer a prompt variant: ``answers``
    drafted from cached answers (suffix), ``prefix`` took their prompt from the prefix cache, ``restartable``
    the servers SpecScope can restart. A variant helps only where the prefix cache was hit: suffix's cache
    ignores the prompt's wording, and only a restart empties it."""
    said = (
        [
            f"{', '.join(answers)} drafted from answers its server produced before (suffix decoding caches "
            "answers, whatever the prompt's wording)"
        ]
        if answers
        else []
    ) + ([f"{', '.join(prefix)} took most of the prompt from the prefix cache"] if prefix else [])
    fixes = (
        ["restart the suffix servers"]
        if restartable
        else [f"restart {', '.join(answers)} where it runs"]
        if answers
        else []
    ) + (["run a variant of the prompt"] if prefix else [])
    return (
        f"{'; '.join(said)}: cached work flatters the figures (hover the badges). For a fair comparison, "
        f"{' or '.join(fixes)}."
    ), bool(prefix)
