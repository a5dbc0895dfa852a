"""K schedules: which K a server drafts at each batch size (vLLM's dynamic speculative decoding).

vLLM takes ``num_speculative_tokens_per_batch_size`` next to ``num_speculative_tokens`` (the
maximum): inclusive batch-size ranges ``[[1, 2, 4], [3, 8, 2], [9, 256, 1]]``, the first
starting at 1; batch sizes past the last range keep its K. SpecScope writes them as text
``1-2:4,3-8:2,9-256:1`` and checks them by vLLM's rules before a server is started.

``advise_schedule`` turns a fitted family into a schedule: at every batch size up to
``max_batch`` the K with the best speedup (measured where the family has measured points at
that concurrency, predicted elsewhere), K=0 where no K pays, merged into ranges.

    schedule = parse("1-2:4,3-8:2,9-256:1", k_max=4)
    schedule.speculative_config({"method": "ngram", "prompt_lookup_max": 4})
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specscope import intervals
from specscope.errors import ConfigError

if TYPE_CHECKING:  # only for the annotation: launch imports this module, and needs no pandas
    from specscope.advisor import FamilyFit

__all__ = ["KRange", "KSchedule", "ScheduledPoint", "parse", "validate", "from_best", "advise_schedule",
           "from_results", "drafting_nothing", "SCHEDULE_KEY"]

SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?:(\d+)$")


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
        return ",".join(f"{r.start}-{r.end}:{r.k}" if r.end != r.start else f"{r.start}:{r.k}"
                        for r in self.ranges)


@dataclass(frozen=True)
class ScheduledPoint:
    """The schedule's choice at one batch size and where its speedup comes from."""

    batch_size: int
    k: int
    speedup: float
    measured: bool


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
            raise ConfigError(f"The ranges {before.start}-{before.end} and {after.start}-{after.end} overlap; "
                              "each batch size may appear in one range only.")
    if ranges[0].start != 1:
        raise ConfigError(f"The first range must start at batch size 1 (it starts at {ranges[0].start}), "
                          "so every batch size has a K.")
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


def drafting_nothing(rows) -> dict[int, float]:
    """Mean speedup per concurrency of the ``rows`` (a speedup frame) measured on servers whose
    schedule drafts 0 at every batch size: what a K=0 range of a schedule delivers."""
    if rows.empty or "k_schedule" not in rows:
        return {}
    zero = rows[rows["k_schedule"].map(lambda text: isinstance(text, str) and parse(text).max_k == 0)]
    return {int(c): float(v) for c, v in zero.groupby("concurrency")["speedup"].mean().items()}


def _at(measured: Mapping[int, float], size: int) -> float:
    """``measured`` (by concurrency) at a batch size: linear in log2 between neighbours, held past the ends."""
    sizes = sorted(measured)
    lower = max((c for c in sizes if c <= size), default=sizes[0])
    upper = min((c for c in sizes if c >= size), default=sizes[-1])
    if lower == upper:
        return measured[lower]
    t = (math.log2(size) - math.log2(lower)) / (math.log2(upper) - math.log2(lower))
    return measured[lower] + t * (measured[upper] - measured[lower])


def advise_schedule(fit: FamilyFit, ks: Sequence[int] | None = None, max_batch: int = 256,
                    allow_zero: bool = True, zero: Mapping[int, float] | None = None
                    ) -> tuple[KSchedule, list[ScheduledPoint]]:
    """The best K at each batch size 1..``max_batch``: measured where every candidate K was measured
    at that concurrency (training rows only), predicted elsewhere.

    A predicted K never exceeds the K before it (the cost of a draft token only grows with
    load, so a bounce back up is fit noise); measured choices stand as measured. With
    ``allow_zero`` (the installed vLLM accepts it) a range drafts 0 where that beats every K.
    ``zero`` is what drafting 0 measured on a speculative server, by concurrency
    (``drafting_nothing``); without it, drafting 0 is assumed to run as fast as no speculation
    (1.0x), which a speculative server may not. Without ``allow_zero``, the smallest K where none pays.
    """
    ks = sorted({int(k) for k in ks}) if ks else sorted({int(k) for k in fit.rows["k"]})
    means = fit.rows[fit.rows["train"]].groupby(["concurrency", "k"])["speedup"].mean()
    measured: dict[int, dict[int, float]] = {}
    for (conc, k), speedup in means.items():
        if float(conc).is_integer():
            measured.setdefault(int(conc), {})[int(k)] = float(speedup)
    points = []
    for size in range(1, max_batch + 1):
        here = measured.get(size, {})
        from_measure = all(k in here for k in ks)
        by_k = {k: here[k] if from_measure else fit.predict(k, float(size)) for k in ks}
        nothing = _at(zero, size) if zero else 1.0
        k = max(by_k, key=lambda key: (by_k[key], -key))
        speedup = by_k[k]
        if allow_zero and nothing > speedup:
            k, speedup = 0, nothing
        elif speedup < 1.0 and not allow_zero:
            k, speedup = ks[0], by_k[ks[0]]
        if not from_measure and points and k > points[-1].k:
            # a larger batch never drafts more (not even after 0): fit noise must not make K bounce back
            k = points[-1].k
            speedup = by_k[k] if k else nothing
        points.append(ScheduledPoint(size, k, float(speedup), from_measure))
    return from_best({p.batch_size: p.k for p in points}), points


def from_results(model: str, method: str, dataset: str | None = None, max_batch: int = 256) -> KSchedule:
    """The schedule advised from the stored results of ``model`` and ``method`` (and ``dataset``);
    ConfigError when none match or several families (datasets, hardware) would need a choice."""
    from specscope import advisor, formats, store  # pandas and DuckDB only when a schedule is fitted

    filters = {"model": [model], "method": [method], **({"dataset": [dataset]} if dataset else {})}
    stored = store.Store().speedup(filters)
    frame = stored[stored["k_schedule"].isna()]  # fixed-K cells only: a schedule is what is advised
    if frame.empty or (frame["method"] == method).sum() == 0:
        raise ConfigError(f"No stored results of {model} with method {method}"
                          + (f" on {dataset}" if dataset else "") + "; run a sweep first, or give the schedule itself.")
    fits = advisor.fit_families(frame)
    if len({f.keys.get("vllm_version") for f in fits}) > 1:  # one setup on several vLLMs: advise for this one's
        from specscope import catalog

        installed = catalog.installed_vllm()
        fits = [f for f in fits if installed and f.keys.get("vllm_version") == installed[1]] or fits
    if len(fits) > 1:
        names = "; ".join(f"{f.keys['dataset']} {formats.constrained_label(f.keys.get('response_format'))}".rstrip()
                          + f" on {f.keys['hardware']}, vLLM {f.keys.get('vllm_version') or '?'}" for f in fits)
        raise ConfigError(f"Results of {len(fits)} setups match ({names}); pick one with --dataset.")
    return advise_schedule(fits[0], max_batch=max_batch, zero=drafting_nothing(_family_of(stored, fits[0])))[0]


def _family_of(rows, fit: FamilyFit):
    """The ``rows`` of ``fit``'s family (its model, method, draft, dataset and hardware)."""
    from specscope import advisor  # pandas only when a schedule is fitted

    return advisor.family_rows(rows, fit.keys)


def advice(fit: FamilyFit, ks: Sequence[int] | None = None, max_batch: int = 256, rows=None) -> dict:
    """The advised schedule of one family as shown and printed: its text, the exact
    speculative_config (None when speculation pays nowhere), the batch sizes whose K was measured,
    per range its K and whether that K was measured, predicted by the fit between measured
    concurrencies, or extrapolated past them, and what drafting 0 was taken to cost. ``extrapolated``
    and ``note``: whether batch sizes lie outside the measured concurrencies, and a sentence saying
    so (with whether the fit was validated), so no one starts a server on it unmeasured. ``rows``
    (a speedup frame) may hold the family's servers that drafted 0 (``drafting_nothing``); without
    them drafting 0 is assumed as fast as no speculation."""
    zero = drafting_nothing(_family_of(rows, fit)) if rows is not None else {}
    advised, points = advise_schedule(fit, ks=ks, max_batch=max_batch, zero=zero)
    measured = sorted({p.batch_size for p in points if p.measured})
    concs = sorted(int(c) for c in fit.rows["concurrency"].unique())
    measured_text = f"{concs[0]}-{concs[-1]}" if len(concs) > 1 else str(concs[0])
    ranges = []
    for r in advised.ranges:
        inside = [p.batch_size for p in points if r.start <= p.batch_size <= r.end and p.measured]
        outside = r.end > concs[-1] or r.start < concs[0]
        source = (f"measured at {', '.join(map(str, inside))}" + (
            "; predicted between" if len(inside) < r.end - r.start + 1 else "") if inside else "predicted by the fit")
        ranges.append({"batch sizes": f"{r.start}-{r.end}" if r.end != r.start else str(r.start), "K": r.k,
                       "source": source + (f"; extrapolated past the measured concurrencies ({measured_text})"
                                           if outside else "")})
    config = None if advised.max_k == 0 else advised.speculative_config({"method": fit.keys["method"]})
    zero_text = ("measured on a server drafting 0: "
                 + ", ".join(f"{intervals.times(v)} at {c}" for c, v in sorted(zero.items()))
                 if zero else "assumed 1.000× (as without speculation): no server drafting 0 was measured")
    return {"family": fit.keys, "schedule": advised.text(), "speculative_config": config,
            "measured_batch_sizes": measured, "measured_concurrencies": concs, "ranges": ranges,
            "drafting_zero": zero_text, "versus_fixed": _versus_fixed(fit, points),
            "extrapolated": concs[0] > 1 or concs[-1] < max_batch, "note": _extrapolation_note(fit, concs, max_batch)}


def _extrapolation_note(fit: FamilyFit, concs: Sequence[int], max_batch: int) -> str:
    """What the schedule rests on beyond the measured concurrencies, in one or two sentences."""
    outside = [f"{lo}-{hi}" if hi > lo else str(lo) for lo, hi in ((1, concs[0] - 1), (concs[-1] + 1, max_batch))
               if hi >= lo]
    held = fit.held_out_error()
    trust = (f"a fit that misses held-out points by a median {held:.1%}" if held is not None else
             f"a fit on {fit.fitted_points} point{'' if fit.fitted_points == 1 else 's'} (not validated)")
    if not outside:
        return f"Every batch size lies within the measured concurrencies ({', '.join(map(str, concs))})."
    return (f"Measured at concurrency {', '.join(map(str, concs))} only: the K for batch sizes "
            f"{' and '.join(outside)} is not measured but extrapolated by {trust}. Measure the schedule "
            "beside every fixed K at those loads (`specscope bench ... --k-schedule auto`) before starting a "
            "server with it.")


def _versus_fixed(fit: FamilyFit, points: Sequence[ScheduledPoint]) -> dict | None:
    """Over the batch sizes where every K was measured: the schedule's mean speedup (its choice at
    each) against the best single K's. None without such batch sizes."""
    sizes = [p.batch_size for p in points if p.measured]
    if not sizes:
        return None
    train = fit.rows[fit.rows["train"] & fit.rows["concurrency"].isin(sizes)]
    by_k = train.groupby(["concurrency", "k"])["speedup"].mean().groupby("k").mean()  # each size weighs the same
    k = int(by_k.idxmax())
    schedule_mean = sum(points[size - 1].speedup for size in sizes) / len(sizes)
    return {"batch_sizes": sizes, "best_fixed_k": k, "fixed": float(by_k.max()), "schedule": schedule_mean,
            "gain": schedule_mean / float(by_k.max())}


def of_config(config: Mapping | None) -> str | None:
    """A server's schedule in text form, from its speculative_config (None for a fixed K)."""
    entries = (config or {}).get(SCHEDULE_KEY)
    return validate(entries).text() if entries else None

