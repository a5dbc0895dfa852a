"""What to deploy: one answer per family, measured first, the model filling only what was not measured.

``answer`` is the one place it is computed; the Theory page, ``specscope advise`` (and ``--schedule``),
the Explorer, ``serve --k-schedule auto``, a sweep's ``auto`` schedule cells and ``specscope deploy`` show it:

- at each concurrency asked for (the measured ones by default), the K ``k_choice.choose`` picks: the
  fastest measured K, a tie within noise going to the smaller K; a K nobody measured only where the fit
  predicts it beyond its own error; K=0 where nothing pays;
- over batch sizes 1..``max_batch``, those choices as a K schedule of ranges, each saying whether its K
  was measured, predicted between measured concurrencies, or extrapolated past them;
- the best single K over the concurrencies (the fixed K), and whether a schedule is worth its server:
  only where the choice beats the fixed K beyond noise at some concurrency; else the fixed K, saying so;
- a schedule measured beside the fixed K (``verdict``) decides over the model: measured beats modelled;
- the ``speculative_config`` to deploy, with the method's own options from the measured rows.

    found = answer(fit, rows=frame)        # fit: a fitting.FamilyFit; frame: Store.speedup rows
    print(found.sentence(), json.dumps(found.config))
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from specscope import formats, ties
from specscope.advice import fitting
from specscope.advice.fitting import FamilyFit
from specscope.advice.k_choice import Choice, choose, measured_at, pooled_tie
from specscope.analysis import explore, intervals, verdict
from specscope.engine import vllms
from specscope.engine.k_schedule import SCHEDULE_KEY, KSchedule, from_best, parse
from specscope.errors import ConfigError, InputError
from specscope.results import hygiene, store
from specscope.schema import BASELINE_METHOD

__all__ = ["Range", "Answer", "answer", "drafting_nothing", "from_results", "schedule_points"]

_RUN_KEYS = ("rejection_sample_method", "synthetic_acceptance_rates", "synthetic_acceptance_length",
             "num_speculative_tokens", SCHEDULE_KEY, "method")  # set per server, not the method's own options


@dataclass(frozen=True)
class Range:
    """Batch sizes ``start``..``end`` draft ``k``; ``source``: how that K was found, in words."""

    start: int
    end: int
    k: int
    source: str

    def text(self) -> str:
        """``1-4`` or ``8``."""
        return f"{self.start}-{self.end}" if self.end != self.start else str(self.start)


@dataclass(frozen=True)
class Answer:
    """One family's answer: the K at each concurrency, the schedule those make, the fixed K, which to
    deploy and why, and the speculative_config."""

    keys: dict
    choices: tuple[Choice, ...]          # at each concurrency asked for
    k_schedule: KSchedule                # the choice at every batch size 1..max_batch
    ranges: tuple[Range, ...]            # the schedule's ranges with where each K comes from
    fixed_k: int                         # the best single K over the concurrencies (0: none pays)
    fixed: tuple[float, ...]             # its figure at each concurrency (measured where it was)
    use_schedule: bool
    why: str                             # schedule or fixed K, in a sentence
    config: dict | None                  # the speculative_config to deploy; None: run without speculation
    margin: float                        # the fit's error: what "beyond noise" means for predictions
    acceptance: str                      # where AL(K) comes from
    drafting_zero: str                   # what a K=0 range was taken to cost
    note: str                            # what the schedule rests on past the measured concurrencies
    measured_schedule: verdict.Verdict | None = None
    left_out: str = ""                   # higher figures a distorting check kept out, and why

    @property
    def method(self) -> str:
        """The family's method."""
        return str(self.keys.get("method"))

    @property
    def extrapolated(self) -> bool:
        """Whether some batch size's K lies outside the measured concurrencies."""
        return any("extrapolated" in r.source for r in self.ranges)

    @property
    def deploy(self) -> str:
        """``K=2``, ``schedule 1-4:5,5-256:3`` or ``no speculation``."""
        if self.use_schedule:
            return f"schedule {self.k_schedule.text()}"
        return f"K={self.fixed_k}" if self.fixed_k else "no speculation"

    def at(self, concurrency: float) -> Choice | None:
        """The choice at one of the answer's concurrencies."""
        return next((c for c in self.choices if c.concurrency == concurrency), None)

    def sentence(self) -> str:
        """The answer in one or two sentences, with the deployed configuration's figure at each concurrency
        and where it comes from; "Deploy" only where it beats the baseline beyond noise (``ties``)."""
        figures = "; ".join(f"{c.concurrency:g}: {_figure(c, None if self.use_schedule else self.fixed_k)}"
                            for c in self.choices)
        name = f"the K schedule {self.k_schedule.text()}" if self.use_schedule else f"K = {self.fixed_k}"
        faster = self.against_baseline()[ties.FASTER]
        head = ("Do not deploy speculative decoding here" if not self.config else
                f"Deploy {self.method} with {name}" if self.gain == "everywhere" else
                f"Deploy {self.method} with {name} for loads like concurrency {_concs(faster)}, where it beats the "
                "baseline beyond noise" if self.gain == "somewhere" else
                f"Nothing measured shows a gain from {self.method} with {name}" if self.gain == "nowhere" else
                f"Single runs suggest {self.method} with {name}, but no interval tells it from the baseline: "
                "measure it with repeats before deploying it")
        return f"{head} (by concurrency, {figures}).{self._against_baseline()} {self.why}{self.left_out}"

    def against_baseline(self) -> dict[str, list[Choice]]:
        """The concurrencies where the deployed configuration was measured, by how its figure reads against the
        baseline under the one rule (``ties.outcome``): FASTER, SLOWER, TIE and NO_INTERVAL."""
        found: dict[str, list[Choice]] = {ties.FASTER: [], ties.SLOWER: [], ties.TIE: [], ties.NO_INTERVAL: []}
        for c in self.choices:
            m = c.measured_by.get(self.k_at(c.concurrency))
            if m is not None and self.config:
                found[m.against_baseline()].append(c)
        return found

    @property
    def gain(self) -> str:
        """``everywhere``: the deployed configuration beats the baseline beyond noise at every concurrency it was
        measured at; ``somewhere``; ``nowhere`` (ties or loses wherever measured); ``unmeasured`` (no figure with
        an interval: single runs, or predicted only)."""
        found = self.against_baseline()
        measured = sum(len(v) for k, v in found.items() if k != ties.NO_INTERVAL)
        if not measured:
            return "unmeasured"
        return ("everywhere" if len(found[ties.FASTER]) == measured else
                "somewhere" if found[ties.FASTER] else "nowhere")

    def _against_baseline(self) -> str:
        """`` K = 4 ties the baseline within noise at concurrency 1, 4 (about 6 repeats would tell) ...``:
        where the deployed configuration does not beat the baseline beyond noise ('' where it does everywhere)."""
        found = self.against_baseline()
        name = f"The schedule {self.k_schedule.text()}" if self.use_schedule else f"K = {self.fixed_k}"
        said = []
        if found[ties.TIE]:
            tell = ties.telling([m.repeats_to_tell() for c in found[ties.TIE]
                                 if (m := c.measured_by.get(self.k_at(c.concurrency)))])
            said.append(f"ties the baseline within noise at concurrency {_concs(found[ties.TIE])}"
                        + (f" ({tell})" if tell else ""))
        if found[ties.SLOWER]:
            said.append(f"is slower than the baseline beyond noise at concurrency {_concs(found[ties.SLOWER])}")
        if found[ties.NO_INTERVAL]:
            said.append(f"was measured once at concurrency {_concs(found[ties.NO_INTERVAL])} (no interval)")
        return f" {name} {'; it '.join(said)}." if said else ""

    def k_at(self, concurrency: float) -> int:
        """The K the deployed configuration drafts at a concurrency (as its batch size); 0: none."""
        return self.k_schedule.k_at(max(1, int(concurrency))) if self.use_schedule else self.fixed_k

    def deployed(self, choice: Choice) -> dict:
        """The deployed K's figure at one of the answer's concurrencies: ``k``, ``speedup``, ``speedup_lo``,
        ``speedup_hi`` (the interval where that K was measured there), ``source`` (measured, predicted,
        extrapolated, or no speculation) and ``why`` in a sentence."""
        k = self.k_at(choice.concurrency)
        measured = choice.measured_by.get(k)
        source = ("measured" if measured else "no speculation" if not k else
                  "predicted" if choice.source == "measured" else choice.source)
        return {"k": k, "source": source,
                "speedup": measured.speedup if measured else choice.by_k.get(k, 1.0) if k else 1.0,
                "speedup_lo": measured.lo if measured else None, "speedup_hi": measured.hi if measured else None,
                "why": f"this concurrency {alone}" if (alone := self.alone(choice.concurrency)) else choice.sentence()}

    def here(self, concurrency: float) -> str | None:
        """At one of the answer's concurrencies where the deployed fixed K is not the K that concurrency alone
        would pick: what the deployed K reads there, then that pick and why the fixed K stands (None where
        they agree, or the answer is a schedule: the concurrency's own answer then says it all)."""
        alone = self.alone(concurrency)
        choice = self.at(concurrency)
        if alone is None or choice is None:
            return None
        return f"deploy K = {self.fixed_k} here too ({_figure(choice, self.fixed_k)}). This concurrency {alone}"

    def alone(self, concurrency: float) -> str | None:
        """``alone would pick K = 2 (...), ...``: the K one concurrency alone would pick where the deployed fixed
        K differs, and why the fixed K stands over all of them (None where they agree)."""
        choice = self.at(concurrency)
        if choice is None or self.use_schedule or not self.fixed_k or choice.k == self.fixed_k:
            return None
        pick = f"K = {choice.k} ({_figure_value(choice, choice.k)})" if choice.k else "no speculation"
        if choice.faster(choice.k, self.fixed_k, self.margin):
            return f"alone would pick {pick}: {self.why}"
        return f"alone would pick {pick}, tied with K = {self.fixed_k} within noise; {self._over_all(choice.k)}."

    def _over_all(self, k: int) -> str:
        """Why the fixed K stands against ``k``, a K tied with it at some concurrency, over all of them."""
        why = None
        if k and all(self.fixed_k in c.measured_by and k in c.measured_by for c in self.choices):
            why = _beats(self.choices, self.fixed_k, k, self.margin)
        return why or "one K for every load is the simpler server"

    def schedule_sentence(self) -> str:
        """What the K-by-batch-size view deploys, in a sentence: the schedule, or the fixed K beside the
        schedule the choices would make, or no speculation."""
        text, last = self.k_schedule.text(), self.ranges[-1].end if self.ranges else 1
        if self.use_schedule:
            return f"Deploy the K schedule {text} (batch sizes 1-{last})."
        if self.fixed_k:
            return (f"Deploy the fixed K = {self.fixed_k} at every batch size: the best K does not move with load "
                    f"beyond noise. Following each batch size's own best K would read {text} (the ranges "
                    "below), a schedule not worth a server of its own.")
        return "Speculation pays at no batch size: run the server without it."

    def as_dict(self) -> dict:
        """The answer as JSON-ready values (``specscope advise --json``)."""
        return {"family": self.keys, "deploy": self.deploy, "speculative_config": self.config,
                "sentence": self.sentence(), "why": self.why, "fixed_k": self.fixed_k, "gain": self.gain,
                "schedule": self.k_schedule.text(), "use_schedule": self.use_schedule,
                "concurrencies": [{"concurrency": c.concurrency, "k": c.k, "source": c.source,
                                   "speedup": round(c.speedup, 4), "predicted": round(c.predicted, 4),
                                   "measured": None if c.measured is None else round(c.measured.speedup, 4),
                                   "measured_lo": None if c.measured is None else c.measured.lo,
                                   "measured_hi": None if c.measured is None else c.measured.hi,
                                   "fastest_measured_k": c.fastest, "tied_ks": list(c.tied),
                                   "fixed_k_speedup": round(f, 4), "why": c.sentence()}
                                  for c, f in zip(self.choices, self.fixed)],
                "ranges": [{"batch sizes": r.text(), "K": r.k, "source": r.source} for r in self.ranges],
                "margin": round(self.margin, 4), "acceptance": self.acceptance, "drafting_zero": self.drafting_zero,
                "extrapolated": self.extrapolated, "note": self.note,
                "measured_schedule": None if self.measured_schedule is None else self.measured_schedule.sentence(),
                "left_out": self.left_out.strip()}


def _concs(choices: Sequence[Choice]) -> str:
    """``1, 4``: the concurrencies of ``choices``."""
    return ", ".join(f"{c.concurrency:g}" for c in choices)


def _figure(choice: Choice, k: int | None = None) -> str:
    """K's figure at the choice's concurrency (the choice's own K when ``k`` is None), e.g. ``K=4 1.587×
    [1.175, 2.016] measured``."""
    k = choice.k if k is None else k
    return f"K={k} {_figure_value(choice, k)}" if k else "no speculation"


def _figure_value(choice: Choice, k: int) -> str:
    """``_figure`` without the K: ``1.587× [1.175, 2.016] measured`` or ``1.210× predicted``."""
    measured = choice.measured_by.get(k)
    if measured is not None:
        return measured.text() + " measured"
    return f"{choice.by_k.get(k, choice.predicted):.3f}× " + ("predicted" if choice.source == "measured"
                                                              else choice.source)


def drafting_nothing(rows: pd.DataFrame) -> dict[int, float]:
    """Mean speedup per concurrency of the ``rows`` (a speedup frame) measured on schedule servers that draft 0
    at that concurrency's batch size (a schedule drafting 0 everywhere, or a K=0 range the load reached): what a
    K=0 range of a schedule delivers. It is no baseline: vLLM 0.26.0 still runs the drafter once a step there, and
    the target under the piecewise CUDA graphs it forces for any schedule on its V1 runner (0.512x on an H200)."""
    if rows.empty or "k_schedule" not in rows:
        return {}
    zero = rows[[isinstance(text, str) and parse(text).k_at(int(c)) == 0
                 for text, c in zip(rows["k_schedule"], rows["concurrency"])]]
    return {int(c): float(v) for c, v in zero.groupby("concurrency")["speedup"].mean().items()}


def _between(measured: dict[int, float], size: int) -> float:
    """``measured`` (by concurrency) at a batch size: linear in log2 between neighbours, held past the ends."""
    sizes = sorted(measured)
    lower = max((c for c in sizes if c <= size), default=sizes[0])
    upper = min((c for c in sizes if c >= size), default=sizes[-1])
    if lower == upper:
        return measured[lower]
    t = (math.log2(size) - math.log2(lower)) / (math.log2(upper) - math.log2(lower))
    return measured[lower] + t * (measured[upper] - measured[lower])


def schedule_points(fit: FamilyFit, ks: Sequence[int], max_batch: int, zero: dict[int, float],
                    allow_zero: bool) -> list[Choice]:
    """The choice at every batch size 1..``max_batch``. A K chosen without a measurement at its batch size
    never exceeds the K of the batch size before (a draft token's cost only grows with load, so a bounce
    back up is fit noise); measured choices stand as measured."""
    points: list[Choice] = []
    measured = {int(c): measured_at(fit, c) for c in fit.rows["concurrency"].unique() if float(c).is_integer()}
    for size in range(1, max_batch + 1):
        choice = choose(fit, size, ks, _between(zero, size) if zero else None, allow_zero, measured.get(size, {}))
        if not choice.measured_here and points and choice.k > points[-1].k:
            k = points[-1].k
            choice = Choice(size, k, choice.by_k.get(k, choice.speedup) if k else points[-1].speedup,
                            fit.predict(k, size) if k else points[-1].predicted, None, choice.source,
                            None, (), choice.by_k, choice.measured_by)
        points.append(choice)
    return points


def _ranges(points: list[Choice], k_schedule: KSchedule, concs: list[int]) -> tuple[Range, ...]:
    out = []
    for r in k_schedule.ranges:
        inside = [p.concurrency for p in points[r.start - 1:r.end] if p.measured_here]
        if inside:
            source = "measured at " + ", ".join(f"{c:g}" for c in inside)
            if len(inside) < r.end - r.start + 1:
                source += "; predicted between"
        else:
            source = "predicted by the fit"
        if r.end > concs[-1] or r.start < concs[0]:
            source += f"; extrapolated past the measured concurrencies ({_span(concs)})"
        out.append(Range(r.start, r.end, r.k, source))
    return tuple(out)


def _span(concs: Sequence[int]) -> str:
    return f"{concs[0]}-{concs[-1]}" if len(concs) > 1 else str(concs[0])


def _fixed_k(choices: Sequence[Choice], ks: Sequence[int], margin: float) -> int:
    """The single K to deploy over the concurrencies, by ``k_choice.choose``'s rule on the mean figure: among
    the K measured at every one of them, the best mean, or the smallest K whose mean ties it within noise
    (``k_choice.pooled_tie``: the concurrencies' intervals pooled, so a gain at every load adds up; points
    without a standard error to pool tie where the best beats them beyond noise nowhere); a K not measured
    everywhere only where its mean beats that by more than the fit's error; 0 where no K pays."""
    means = {k: sum(c.by_k[k] for c in choices) / len(choices) for k in ks}
    everywhere = [k for k in ks if all(k in c.measured_by for c in choices)]
    if all(c.k == 0 for c in choices) and max(means.values()) <= 1.0:
        return 0
    if not everywhere:
        return min(means, key=lambda k: (-means[k], k))
    best = min(everywhere, key=lambda k: (-means[k], k))
    fixed = min(k for k in everywhere if k == best or _beats(choices, best, k, margin) is None)
    others = {k: v for k, v in means.items() if k not in everywhere}
    if others and max(others.values()) > means[best] * (1.0 + margin):
        return min(others, key=lambda k: (-others[k], k))
    return fixed


def _beats(choices: Sequence[Choice], a: int, b: int, margin: float) -> str | None:
    """Why K=``a`` beats K=``b`` over the concurrencies (both measured at each of them), in words; None where
    they tie by the one rule pooled over the concurrencies (``k_choice.pooled_tie``, so a gain at every load adds
    up). Single runs have no interval: their points are compared, and the words say so."""
    mine, theirs = [c.measured_by[a] for c in choices], [c.measured_by[b] for c in choices]
    pooled = pooled_tie(mine, theirs)
    if pooled is False:
        means = [sum(m.speedup for m in ms) / len(ms) for ms in (mine, theirs)]
        if means[0] > means[1]:
            return (f"over the measured concurrencies together K = {a} is faster beyond noise ({means[0]:.3f}× "
                    f"against {means[1]:.3f}× on average, their intervals pooled)")
        return None
    if pooled is None:  # single runs: nothing to pool, the points as measured (said, never called beyond noise)
        means = [sum(m.speedup for m in ms) / len(ms) for ms in (mine, theirs)]
        if means[0] > means[1]:
            return (f"K = {a} measured more on average ({means[0]:.3f}× against {means[1]:.3f}×; single runs, "
                    "so points compared, no interval)")
    return None


def _left_out(fit: FamilyFit, choices: Sequence[Choice]) -> str:
    """`` Left out for their checks: K=4 at concurrency 4, 3.465× (Suffix cache carried over); ...``: the
    cells a distorting check kept from the fit that measured more than the answer's choice there."""
    said = []
    for row in fit.left_out.sort_values(["concurrency", "k"]).to_dict("records") if not fit.left_out.empty else []:
        choice = next((c for c in choices if c.concurrency == row["concurrency"]), None)
        if choice is not None and row["speedup"] <= choice.speedup:
            continue
        said.append(f"K={row['k']:.0f} at concurrency {row['concurrency']:g}, {intervals.value_text(row)} "
                    f"({hygiene.titles(hygiene.distorting(hygiene.row_ids(row)))})")
    return f" Left out for their checks (measure them again): {'; '.join(said)}." if said else ""


def _method_options(rows: pd.DataFrame) -> dict:
    """The method's own speculative_config options from the family's rows (e.g. ngram's lookup sizes, a
    draft's tensor-parallel size), without what is set per server (K, schedule, synthetic acceptance)."""
    for text in rows.get("method_params", pd.Series(dtype=object)).dropna():
        try:
            params = json.loads(text)
        except ValueError:
            continue
        if isinstance(params, dict):
            return {k: v for k, v in params.items() if k not in _RUN_KEYS}
    return {}


def _measured_schedule(fit: FamilyFit, rows: pd.DataFrame | None) -> verdict.Verdict | None:
    """A schedule of this family measured beside its fixed K, judged by ``verdict`` (the latest schedule
    where several were measured)."""
    if rows is None or "k_schedule" not in rows:
        return None
    family = fitting.family_rows(rows, fit.keys)
    scheduled = family[family["k_schedule"].notna() & (family["method"] != BASELINE_METHOD)]
    if scheduled.empty:
        return None
    points = ["concurrency", "k", "speedup", "speedup_lo", "speedup_hi"]

    def folded(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.groupby(["concurrency", "k"], as_index=False).agg(
            speedup=("speedup", "mean"), speedup_lo=("speedup_lo", "min"), speedup_hi=("speedup_hi", "max"))[points]

    fixed = folded(fit.rows[fit.rows["train"]])
    text = str(scheduled.sort_values("created_at")["k_schedule"].iloc[-1]) if "created_at" in scheduled else \
        str(scheduled["k_schedule"].iloc[-1])
    mine = folded(scheduled[scheduled["k_schedule"] == text])
    return verdict.verdict_of(fitting.family_label(fit.keys), fit.keys["method"], text, mine, fixed)


def answer(fit: FamilyFit, concurrencies: Sequence[float] | None = None, ks: Sequence[int] | None = None,
           max_batch: int = 256, rows: pd.DataFrame | None = None, allow_zero: bool = True) -> Answer:
    """The family's answer at ``concurrencies`` (default: its measured ones) among ``ks`` (default 1..its
    largest measured K), its schedule over batch sizes 1..``max_batch``. ``rows`` (a speedup frame) may hold
    the family's schedule servers: one drafting 0 says what a K=0 range costs (else it is taken as the
    baseline's 1.0×), another measured beside the fixed K decides between them."""
    ks = sorted({int(k) for k in ks}) if ks else list(range(1, int(fit.rows["k"].max()) + 1))
    measured_concs = sorted(int(c) for c in fit.rows["concurrency"].unique())
    concs = sorted({float(c) for c in concurrencies}) if concurrencies else [float(c) for c in measured_concs]
    zero = drafting_nothing(fitting.family_rows(rows, fit.keys)) if rows is not None else {}
    choices = tuple(choose(fit, c, ks, _between(zero, int(c)) if zero else None, allow_zero) for c in concs)
    margin = fit.margin
    fixed_k = _fixed_k(choices, ks, margin)
    points = schedule_points(fit, ks, max_batch, zero, allow_zero)
    advised = from_best({int(p.concurrency): p.k for p in points})  # batch sizes
    moves = [c for c in choices if c.faster(c.k, fixed_k, margin)]
    measured_schedule = _measured_schedule(fit, rows)
    if measured_schedule is not None:
        use = measured_schedule.deploy_schedule
        if use:
            advised = parse(measured_schedule.k_schedule)
        why = f"Measured beats modelled: {measured_schedule.sentence(None if use else fixed_k)}"
    elif moves and len({p.k for p in points}) > 1:
        use = True
        where = ", ".join(f"{c.concurrency:g} (K={c.k} {c.speedup:.3f}× against K={fixed_k} "
                          f"{c.by_k.get(fixed_k, 1.0):.3f}×)" for c in moves)
        why = (f"The best K moves with load beyond noise at concurrency {where}, so a schedule beats any fixed K; "
               "measure it beside the fixed K (`specscope deploy`, or `bench --k-schedule auto`) before relying "
               "on its gain.")
    else:
        use = False
        why = (f"The best K does not move with load beyond noise (the fit's error {margin:.1%}, or the measured "
               f"intervals), so a fixed K = {fixed_k} is the simpler server." if fixed_k else
               "No K pays at these concurrencies.")
    base = {"method": fit.keys["method"], **_method_options(fit.rows)}
    if fit.keys.get("draft_model") and "model" not in base:
        base["model"] = fit.keys["draft_model"]
    if use:
        config = advised.speculative_config(base) if advised.max_k else None
    else:
        config = {**base, "num_speculative_tokens": fixed_k} if fixed_k else None
    zero_text = ("measured on a server drafting 0: " + ", ".join(f"{intervals.times(v)} at {c}"
                                                                   for c, v in sorted(zero.items()))
                 if zero else "assumed 1.000× (as without speculation): no server drafting 0 was measured")
    fixed_figures = tuple(c.by_k.get(fixed_k, 1.0) if fixed_k else 1.0 for c in choices)
    return Answer(fit.keys, choices, advised, _ranges(points, advised, measured_concs), fixed_k, fixed_figures,
                  use, why, config, margin, fit.acceptance_source(), zero_text,
                  _extrapolation_note(fit, measured_concs, max_batch), measured_schedule, _left_out(fit, choices))


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
            "beside every fixed K at those loads (`specscope deploy`, or `specscope bench ... --k-schedule auto`) "
            "before starting a server with it.")


def from_results(model: str, method: str, dataset: str | None = None, run_id: str | None = None,
                 max_batch: int = 256) -> KSchedule:
    """The schedule answered from the stored results of ``model`` and ``method`` (and ``dataset``), for a
    sweep's or a server's ``auto`` schedule: a sweep's ``run_id`` answers from that run's own fixed-K cells
    where it has some (measured on this machine, this runner), else from every stored run. ConfigError when
    none match or several families (datasets, hardware) would need a choice."""
    filters = {"model": [model], "method": [method], **({"dataset": [dataset]} if dataset else {})}
    stored = explore.cells_with_points(store.Store(), filters)
    if run_id and ((stored["run_id"] == run_id) & stored["k_schedule"].isna()).any():
        stored = stored[stored["run_id"] == run_id]
    frame = stored[stored["k_schedule"].isna()]  # fixed-K cells only: a schedule is what is advised
    if frame.empty or (frame["method"] == method).sum() == 0:
        raise ConfigError(f"No stored results of {model} with method {method}"
                          + (f" on {dataset}" if dataset else "") + "; run a sweep first, or give the schedule itself.")
    try:
        fits = fitting.fit_families(frame)
    except InputError:  # drafts accepted at set rates only (a synthetic sweep): advise at those rates
        fits = fitting.fit_families(frame, engine_only=True)
    if len({f.keys.get("vllm_version") for f in fits}) > 1:  # one setup on several vLLMs: advise for this one's
        installed = vllms.installed_vllm()
        fits = [f for f in fits if installed and f.keys.get("vllm_version") == installed[1]] or fits
    if len(fits) > 1:
        names = "; ".join(f"{f.keys['dataset']} {formats.constrained_label(f.keys.get('response_format'))}".rstrip()
                          + f" on {f.keys['hardware']}, vLLM {f.keys.get('vllm_version') or '?'}" for f in fits)
        raise ConfigError(f"Results of {len(fits)} setups match ({names}); pick one with --dataset.")
    return answer(fits[0], max_batch=max_batch, rows=stored).k_schedule
