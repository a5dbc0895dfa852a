"""K schedules: which K a server drafts at each batch size (vLLM's dynamic speculative decoding).

vLLM takes ``num_speculative_tokens_per_batch_size`` next to ``num_speculative_tokens`` (the
maximum): inclusive batch-size ranges ``[[1, 2, 4], [3, 8, 2], [9, 256, 1]]``, the first
starting at 1; batch sizes past the last range keep its K. SpecScope writes them as text
``1-2:4,3-8:2,9-256:1`` and checks them by vLLM's rules before a server is started.

This module is the schedule as a value (parsed, validated, and the speculative_config it becomes), low
in the house: launching a server needs it, and nothing here fits or advises (``specscope.advice.deploy`` does).

    k_schedule = parse("1-2:4,3-8:2,9-256:1", k_max=4)
    k_schedule.speculative_config({"method": "ngram", "prompt_lookup_max": 4})
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from specscope.engine import catalog
from specscope.errors import ConfigError

__all__ = ["KRange", "KSchedule", "parse", "validate", "from_best", "of_config", "runner_env", "SCHEDULE_KEY"]

SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?:(\d+)$")
# vLLM's V2 GPU model runner (its default for dense models) before 0.32.0 sizes the drafter's CUDA graphs for each K
# of a schedule by the target's rule: a drafter that drafts one token per step (EAGLE, EAGLE-3, MTP) gets
# K + 1 - K_max tokens per request, 0 at K_max - 1 (a ZeroDivisionError at start: vLLM 0.26.0, EAGLE-3, an H200)
# and fewer than 0 below (vLLM issue #48494). 0.32.0 sizes that drafter's graphs alone (read in its source; 0.31.0
# still has the old rule). Its V1 runner takes the schedule: the scheduler picks K per step and the proposer drafts
# that many, under piecewise CUDA graphs, which vLLM forces for a schedule there (read in 0.26.0's source).
_DRAFTER_GRAPHS_FIXED = (0, 32, 0)
_V1_RUNNER = {"VLLM_USE_V2_MODEL_RUNNER": "0"}


@dataclass(frozen=True)
class KRange:
    """Batch sizes ``start``..``end`` (inclusive) draft ``k`` tokens per step."""

    start: int
    end: int
    k: int


@dataclass(frozen=True)
class KSchedule:
    """Sorted, non-overlapping ranges from batch size 1; past the last range its K holds."""

    ranges: tuple[KRange, ...]

    @property
    def max_k(self) -> int:
        """The largest K the schedule drafts."""
        return max(r.k for r in self.ranges)

    @property
    def server_k(self) -> int:
        """The server's ``num_speculative_tokens``: the largest K, at least 1 (vLLM's minimum). A
        schedule drafting 0 everywhere is a speculative server that drafts nothing: what a K=0
        range costs."""
        return max(1, self.max_k)

    def k_at(self, batch_size: int) -> int:
        """K drafted at ``batch_size`` (gaps and the tail carry the previous range's K, as vLLM does)."""
        k = self.ranges[0].k
        for r in self.ranges:
            if r.start > batch_size:
                break
            k = r.k
        return k

    def as_vllm(self) -> list[list[int]]:
        """The ranges as vLLM's ``num_speculative_tokens_per_batch_size`` value."""
        return [[r.start, r.end, r.k] for r in self.ranges]

    def speculative_config(self, base: Mapping) -> dict:
        """``base`` (a method's speculative_config) with this schedule and its maximum K."""
        return {**base, "num_speculative_tokens": self.server_k, SCHEDULE_KEY: self.as_vllm()}

    def text(self) -> str:
        """The schedule as SpecScope writes it, e.g. ``1-2:4,3-8:2,9-256:1``."""
        return ",".join(f"{r.start}-{r.end}:{r.k}" if r.end != r.start else f"{r.start}:{r.k}" for r in self.ranges)


def validate(entries: Iterable[Sequence[int]], k_max: int | None = None) -> KSchedule:
    """A schedule from ``(start, end, K)`` entries, by vLLM's rules (positive ranges, start <= end,
    K >= 0, sorted without overlap, the first starting at 1) and K <= ``k_max`` when given."""
    ranges = []
    for entry in entries:
        if len(entry) != 3:
            raise ConfigError(f"Each schedule entry needs (first batch size, last batch size, K); got {list(entry)}.")
        start, end, k = (int(v) for v in entry)
        if start <= 0 or end <= 0:
            raise ConfigError(f"Batch sizes start at 1; the range {start}-{end} is not positive.")
        if start > end:
            raise ConfigError(f"The range {start}-{end} ends before it starts; write it as {end}-{start}.")
        if k < 0:
            raise ConfigError(f"K cannot be negative (range {start}-{end} has K={k}).")
        if k_max is not None and k > k_max:
            raise ConfigError(f"The range {start}-{end} drafts K={k}, more than the method's maximum {k_max}.")
        ranges.append(KRange(start, end, k))
    if not ranges:
        raise ConfigError("The schedule is empty; give at least one range, e.g. 1-256:2.")
    ranges.sort(key=lambda r: r.start)
    for before, after in zip(ranges, ranges[1:]):
        if after.start <= before.end:
            raise ConfigError(
                f"The ranges {before.start}-{before.end} and {after.start}-{after.end} overlap; "
                "each batch size may appear in one range only."
            )
    if ranges[0].start != 1:
        raise ConfigError(
            f"The first range must start at batch size 1 (it starts at {ranges[0].start}), so every batch size has a K."
        )
    return KSchedule(tuple(ranges))


def parse(text: str, k_max: int | None = None) -> KSchedule:
    """A schedule from ``1-2:4,3-8:2,9-256:1`` (``N:K`` for a single batch size)."""
    entries = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        match = _RANGE.match(part)
        if match is None:
            raise ConfigError(f"{part!r} is not a range; write FIRST-LAST:K, e.g. 1-2:4,3-8:2,9-256:1.")
        start, end, k = match.groups()
        entries.append((int(start), int(end or start), int(k)))
    return validate(entries, k_max)


def from_best(best: Mapping[int, int]) -> KSchedule:
    """Merge per-batch-size K (batch sizes 1..n, consecutive) into ranges."""
    sizes = sorted(best)
    if not sizes or sizes != list(range(1, len(sizes) + 1)):
        raise ConfigError("A schedule needs a K for every batch size from 1 up.")
    ranges: list[list[int]] = []
    for size in sizes:
        if ranges and ranges[-1][2] == best[size]:
            ranges[-1][1] = size
        else:
            ranges.append([size, size, best[size]])
    return validate(ranges)


def runner_env(k_schedule: KSchedule, kind: str, dist: str, version: str) -> dict[str, str]:
    """The environment a ``kind`` server drafting by ``k_schedule`` needs on this vLLM: its V1 model runner
    (``_V1_RUNNER``) where the V2 runner would fail to start it (#48494), else nothing."""
    below_max = any(r.k < k_schedule.server_k for r in k_schedule.ranges)
    fixed = catalog.version_tuple(version) >= _DRAFTER_GRAPHS_FIXED
    if dist != "vllm" or kind not in catalog.ONE_TOKEN_DRAFTERS or not below_max or fixed:
        return {}
    return dict(_V1_RUNNER)


def of_config(config: Mapping | None) -> str | None:
    """A server's schedule in text form, from its speculative_config (None for a fixed K)."""
    entries = (config or {}).get(SCHEDULE_KEY)
    return validate(entries).text() if entries else None
