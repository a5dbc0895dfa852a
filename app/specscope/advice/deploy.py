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

import pandas as pd

from specscope import formats
from specscope.advice import fitting
from specscope.advice.deploy_answer import Answer, Range, beats
from specscope.advice.fitting import FamilyFit
from specscope.advice.k_choice import Choice, choose, measured_at
from specscope.analysis import explore, intervals, verdict
from specscope.engine import vllms
from specscope.engine.k_schedule import SCHEDULE_KEY, KSchedule, from_best, parse
from specscope.errors import ConfigError, InputError
from specscope.results import hygiene, store
from specscope.schema import BASELINE_METHOD

__all__ = ["answer", "drafting_nothing", "from_results", "schedule_points"]

_RUN_KEYS = (
    "rejection_sample_method",
    "synthetic_acceptance_rates",
    "synthetic_acceptance_length",
    "num_speculative_tokens",
    SCHEDULE_KEY,
    "method",
)  # set per server, not the method's own options


def drafting_nothing(rows: pd.DataFrame) -> dict[int, float]:
    """Mean speedup per concurrency of the ``rows`` (a speedup frame) measured on schedule servers that draft 0
    at that concurrency's batch size (a schedule drafting 0 everywhere, or a K=0 range the load reached): what a
    K=0 range of a schedule delivers. It is no baseline: vLLM 0.26.0 still runs the drafter once a step there, and
    the target under the piecewise CUDA graphs it forces for any schedule on its V1 runner (0.512x on an H200)."""
    if rows.empty or "k_schedule" not in rows:
        return {}
    zero = rows[
        [
            isinstance(text, str) and parse(text).k_at(int(c)) == 0
            for text, c in zip(rows["k_schedule"], rows["concurrency"])
        ]
    ]
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


def schedule_points(
    fit: FamilyFit, ks: Sequence[int], max_batch: int, zero: dict[int, float], allow_zero: bool
) -> list[Choice]:
    """The choice at every batch size 1..``max_batch``. A K chosen without a measurement at its batch size
    never exceeds the K of the batch size before (a draft token's cost only grows with load, so a bounce
    back up is fit noise); measured choices stand as measured."""
    points: list[Choice] = []
    measured = {int(c): measured_at(fit, c) for c in fit.rows["concurrency"].unique() if float(c).is_integer()}
    for size in range(1, max_batch + 1):
        choice = choose(fit, size, ks, _between(zero, size) if zero else None, allow_zero, measured.get(size, {}))
        if not choice.measured_here and points and choice.k > points[-1].k:
            k = points[-1].k
            choice = Choice(
                size,
                k,
                choice.by_k.get(k, choice.speedup) if k else points[-1].speedup,
                fit.predict(k, size) if k else points[-1].predicted,
                None,
                choice.source,
                None,
                (),
                choice.by_k,
                choice.measured_by,
            )
        points.append(choice)
    return points


def _ranges(points: list[Choice], k_schedule: KSchedule, concs: list[int]) -> tuple[Range, ...]:
    out = []
    for r in k_schedule.ranges:
        inside = [p.concurrency for p in points[r.start - 1 : r.end] if p.measured_here]
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
    fixed = min(k for k in everywhere if k == best or beats(choices, best, k, margin) is None)
    others = {k: v for k, v in means.items() if k not in everywhere}
    if others and max(others.values()) > means[best] * (1.0 + margin):
        return min(others, key=lambda k: (-others[k], k))
    return fixed


def _left_out(fit: FamilyFit, choices: Sequence[Choice]) -> str:
    """`` Left out for their checks: K=4 at concurrency 4, 3.465× (Suffix cache carried over); ...``: the
    cells a distorting check kept from the fit that measured more than the answer's choice there."""
    said = []
    for row in fit.left_out.sort_values(["concurrency", "k"]).to_dict("records") if not fit.left_out.empty else []:
        choice = next((c for c in choices if c.concurrency == row["concurrency"]), None)
        if choice is not None and row["speedup"] <= choice.speedup:
            continue
        said.append(
            f"K={row['k']:.0f} at concurrency {row['concurrency']:g}, {intervals.value_text(row)} "
            f"({hygiene.titles(hygiene.distorting(hygiene.row_ids(row)))})"
        )
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
            speedup=("speedup", "mean"), speedup_lo=("speedup_lo", "min"), speedup_hi=("speedup_hi", "max")
        )[points]

    fixed = folded(fit.rows[fit.rows["train"]])
    text = (
        str(scheduled.sort_values("created_at")["k_schedule"].iloc[-1])
        if "created_at" in scheduled
        else str(scheduled["k_schedule"].iloc[-1])
    )
    mine = folded(scheduled[scheduled["k_schedule"] == text])
    return verdict.verdict_of(fitting.family_label(fit.keys), fit.keys["method"], text, mine, fixed)


def answer(
    fit: FamilyFit,
    concurrencies: Sequence[float] | None = None,
    ks: Sequence[int] | None = None,
    max_batch: int = 256,
    rows: pd.DataFrame | None = None,
    allow_zero: bool = True,
) -> Answer:
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
        where = ", ".join(
            f"{c.concurrency:g} (K={c.k} {c.speedup:.3f}× against K={fixed_k} {c.by_k.get(fixed_k, 1.0):.3f}×)"
            for c in moves
        )
        why = (
            f"The best K moves with load beyond noise at concurrency {where}, so a schedule beats any fixed K; "
            "measure it beside the fixed K (`specscope deploy`, or `bench --k-schedule auto`) before relying "
            "on its gain."
        )
    else:
        use = False
        why = (
            f"The best K does not move with load beyond noise (the fit's error {margin:.1%}, or the measured "
            f"intervals), so a fixed K = {fixed_k} is the simpler server."
            if fixed_k
            else "No K pays at these concurrencies."
        )
    base = {"method": fit.keys["method"], **_method_options(fit.rows)}
    if fit.keys.get("draft_model") and "model" not in base:
        base["model"] = fit.keys["draft_model"]
    if use:
        config = advised.speculative_config(base) if advised.max_k else None
    else:
        config = {**base, "num_speculative_tokens": fixed_k} if fixed_k else None
    zero_text = (
        "measured on a server drafting 0: " + ", ".join(f"{intervals.times(v)} at {c}" for c, v in sorted(zero.items()))
        if zero
        else "assumed 1.000× (as without speculation): no server drafting 0 was measured"
    )
    fixed_figures = tuple(c.by_k.get(fixed_k, 1.0) if fixed_k else 1.0 for c in choices)
    return Answer(
        fit.keys,
        choices,
        advised,
        _ranges(points, advised, measured_concs),
        fixed_k,
        fixed_figures,
        use,
        why,
        config,
        margin,
        fit.acceptance_source(),
        zero_text,
        _extrapolation_note(fit, measured_concs, max_batch),
        measured_schedule,
        _left_out(fit, choices),
    )


def _extrapolation_note(fit: FamilyFit, concs: Sequence[int], max_batch: int) -> str:
    """What the schedule rests on beyond the measured concurrencies, in one or two sentences."""
    outside = [
        f"{lo}-{hi}" if hi > lo else str(lo) for lo, hi in ((1, concs[0] - 1), (concs[-1] + 1, max_batch)) if hi >= lo
    ]
    held = fit.held_out_error()
    trust = (
        f"a fit that misses held-out points by a median {held:.1%}"
        if held is not None
        else f"a fit on {fit.fitted_points} point{'' if fit.fitted_points == 1 else 's'} (not validated)"
    )
    if not outside:
        return f"Every batch size lies within the measured concurrencies ({', '.join(map(str, concs))})."
    return (
        f"Measured at concurrency {', '.join(map(str, concs))} only: the K for batch sizes "
        f"{' and '.join(outside)} is not measured but extrapolated by {trust}. Measure the schedule "
        "beside every fixed K at those loads (`specscope deploy`, or `specscope bench ... --k-schedule auto`) "
        "before starting a server with it."
    )


def from_results(
    model: str, method: str, dataset: str | None = None, run_id: str | None = None, max_batch: int = 256
) -> KSchedule:
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
        raise ConfigError(
            f"No stored results of {model} with method {method}"
            + (f" on {dataset}" if dataset else "")
            + "; run a sweep first, or give the schedule itself."
        )
    try:
        fits = fitting.fit_families(frame)
    except InputError:  # drafts accepted at set rates only (a synthetic sweep): advise at those rates
        fits = fitting.fit_families(frame, engine_only=True)
    if len({f.keys.get("vllm_version") for f in fits}) > 1:  # one setup on several vLLMs: advise for this one's
        installed = vllms.installed_vllm()
        fits = [f for f in fits if installed and f.keys.get("vllm_version") == installed[1]] or fits
    if len(fits) > 1:
        names = "; ".join(
            f"{f.keys['dataset']} {formats.constrained_label(f.keys.get('response_format'))}".rstrip()
            + f" on {f.keys['hardware']}, vLLM {f.keys.get('vllm_version') or '?'}"
            for f in fits
        )
        raise ConfigError(f"Results of {len(fits)} setups match ({names}); pick one with --dataset.")
    return answer(fits[0], max_batch=max_batch, rows=stored).k_schedule
