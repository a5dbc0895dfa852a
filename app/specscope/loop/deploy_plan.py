"""Step 2 of the closed loop (``deploy_run``): what it is asked (``Request``) and the plan that chooses what
step 3 serves to verify: every method x K x concurrency predicted from step 1's step cost and the acceptance,
each concurrency's best K, the K schedule they make (priced on its runner) and the best single K; the plan is
kept in the run's folder, so a rerun resumes it."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from specscope import files, sweep
from specscope.advice import fitting, priors
from specscope.client.load_spec import DEFAULT_OUTPUT_LEN
from specscope.engine.k_schedule import from_best, parse, validate
from specscope.errors import ConfigError
from specscope.results.store import Store
from specscope.schema import BASELINE_METHOD

__all__ = ["Request", "Plan", "acceptance_curve", "runner_probe", "plan_of"]

PLAN_FILE = "deploy-plan.json"


VERIFY_MARGIN = 0.03  # predicted gain over the best single K that earns a rival its own server


@dataclass(frozen=True)
class Request:
    """What the loop measures: a preset's methods at these concurrencies, with an acceptance source."""

    preset: str
    methods: tuple[str, ...]
    concurrencies: tuple[int, ...]
    prompts: Path
    acceptance: str = "measured"  # "measured" (the drafter's own), a published curve's name, or "run:RUN_ID"
    probe_ks: tuple[int, ...] = (2, 4)
    ks: tuple[int, ...] = tuple(range(1, 9))  # the K the answer chooses among
    repeats: int = 2
    num_prompts: int | None = None
    per_concurrency: int | None = None
    output_len: int = DEFAULT_OUTPUT_LEN
    run_id: str | None = None
    max_batch: int | None = None  # the schedule's last batch size (default: the preset's max_num_seqs)

    def __post_init__(self):
        if BASELINE_METHOD in self.methods or not self.methods:
            raise ConfigError(
                "Give the speculative methods to compare, e.g. --methods eagle3,draft_model; the "
                "baseline is measured anyway."
            )
        if len(set(self.probe_ks)) < 2:
            raise ConfigError(
                "The step cost needs two probe K at least (e.g. --probe-k 2,4): a line through one point has no slope."
            )
        if self.repeats < 2:
            raise ConfigError("The loop verifies with repeats: give --repeats 2 or more.")


@dataclass
class Plan:
    """Step 2's prediction for the best method and what step 3 serves to verify it."""

    method: str
    predicted: dict[str, float]  # "K@concurrency" (K 0: the schedule) -> predicted speedup
    best_k: dict[str, int]  # concurrency -> the fit's best K there
    fixed_k: int  # the best single K by predicted mean
    schedule: str | None  # served where the best K moves with load
    verify_ks: list[int]
    methods: dict[str, float] = field(default_factory=dict)  # each method's predicted mean speedup
    runner_price: dict[str, float] = field(default_factory=dict)  # concurrency -> the schedule's runner's factor

    @classmethod
    def load(cls, path: Path) -> Plan | None:
        """The plan kept by an earlier run of the same loop, if any."""
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None


def acceptance_curve(source: str) -> priors.Curve | None:
    """The curve ``source`` names: None for "measured" (each family's own), a published prior, or the
    measured per-position rates of another run ("run:RUN_ID")."""
    if source == "measured":
        return None
    if not source.startswith("run:"):
        return priors.named(source)
    run_id = source.removeprefix("run:")
    rows = Store().speedup({"run_id": [run_id]})
    rates = fitting.fit_families(rows)[0].measured_rates if not rows.empty else []
    if not rates:
        raise ConfigError(f"Run {run_id} has no per-position acceptance to take as the acceptance curve.")
    return priors.from_rates(source, f"measured per-position acceptance of run {run_id}", rates)


def _fits(
    run_id: str, curve: priors.Curve | None, probe_ks: Sequence[int] | None = None
) -> tuple[list[fitting.FamilyFit], pd.DataFrame]:
    """The run's families with ``curve``'s acceptance, and the run's rows; with ``probe_ks``, fitted on step
    1's fixed-K cells alone (the baseline and the probes), so the plan is the same whatever step 3 has
    measured since."""
    frame = Store().speedup({"run_id": [run_id]})
    fitted = frame
    if probe_ks is not None:
        fitted = frame[frame["k_schedule"].isna() & ((frame["method"] == BASELINE_METHOD) | frame["k"].isin(probe_ks))]
    fits = fitting.fit_families(fitted, engine_only=True)
    return [f.with_acceptance(curve) for f in fits], frame


def runner_probe(request: Request, max_batch: int) -> str | None:
    """The schedule step 1 prices a schedule's model runner with: the smallest probe K of 2 or more at every
    measured concurrency (the largest too where a batch larger than it is allowed), one fewer above. None
    where no such schedule fits (a probe K of 1 alone, or one batch size)."""
    k = min((k for k in request.probe_ks if k >= 2), default=None)
    top = max(request.concurrencies)
    end = top if top < max_batch else top - 1
    if k is None or end < 1 or end >= max_batch:
        return None
    return validate([[1, end, k], [end + 1, max_batch, k - 1]]).text()


def _runner_price(fit: fitting.FamilyFit, frame: pd.DataFrame, request: Request, max_batch: int) -> dict[str, float]:
    """Per concurrency, ``runner_probe``'s measured speedup over the same K's on the default runner (that K's
    step 1 cells, else the fit's prediction where the probe drafts an unprobed K): what the schedule's runner
    costs. Step 1's cells alone, so a plan made again from the rows is the one made then. Empty where the probe
    was not measured."""
    probe = runner_probe(request, max_batch)
    if probe is None:
        return {}
    rows = fitting.family_rows(frame, fit.keys)
    scheduled = rows[rows["k_schedule"] == probe]
    fixed = rows[rows["k_schedule"].isna() & rows["k"].isin(request.probe_ks)]
    k_schedule, price = parse(probe), {}
    for c in request.concurrencies:
        mine = scheduled[scheduled["concurrency"] == c]["speedup"]
        if mine.empty:
            continue
        k = k_schedule.k_at(c)
        theirs = fixed[(fixed["concurrency"] == c) & (fixed["k"] == k)]["speedup"]
        price[str(c)] = float(mine.mean()) / (float(theirs.mean()) if not theirs.empty else fit.predict(k, c))
    return price


def _best(by_k: dict[int, float]) -> int:
    return min(by_k, key=lambda k: (-by_k[k], k))


def _plan(fits: list[fitting.FamilyFit], frame: pd.DataFrame, request: Request, max_batch: int) -> Plan:
    """The fit's own view (no measurement outvotes it here: it chooses what to serve): per method its best
    K at each concurrency and best single K; the method with the best mean; its schedule where K moves,
    predicted at its runner's measured price (``frame``'s probe schedule, where step 1 measured one)."""
    by_method = {}
    for fit in fits:
        predicted = {(k, c): fit.predict(k, c) for k in request.ks for c in request.concurrencies}
        means = {k: statistics.mean(predicted[(k, c)] for c in request.concurrencies) for k in request.ks}
        by_method[fit.keys["method"]] = (fit, predicted, means)
    method = max(by_method, key=lambda m: max(by_method[m][2].values()))
    fit, predicted, means = by_method[method]
    best_k = {c: _best({k: predicted[(k, c)] for k in request.ks}) for c in request.concurrencies}
    sizes: dict[int, int] = {}
    for size in range(1, max_batch + 1):  # a larger batch never drafts more (the cost of a draft only grows)
        k = _best({k: fit.predict(k, size) for k in request.ks})
        sizes[size] = min(k, sizes[size - 1]) if size > 1 else k
    advised = from_best(sizes)
    k_schedule = advised.text() if len({r.k for r in advised.ranges}) > 1 else None  # a constant one is a fixed K
    fixed_k = _best(means)
    # a K whose predicted gain over the best single K is inside the prediction's own error is not worth a server
    rivals = {k for c, k in best_k.items() if predicted[(k, c)] >= predicted[(fixed_k, c)] * (1 + VERIFY_MARGIN)}
    verify = sorted({fixed_k, *rivals})
    kept = {f"{k}@{c}": v for (k, c), v in predicted.items()}
    price = _runner_price(fit, frame, request, max_batch) if k_schedule else {}
    if k_schedule:
        kept.update(_schedule_predicted(fit, sizes.__getitem__, request.concurrencies, max_batch, price))
    return Plan(
        method,
        kept,
        {str(c): k for c, k in best_k.items()},
        fixed_k,
        k_schedule,
        verify,
        {m: max(v[2].values()) for m, v in by_method.items()},
        price,
    )


def _schedule_predicted(
    fit: fitting.FamilyFit,
    k_at: Callable[[int], int],
    concurrencies: Sequence[int],
    max_batch: int,
    price: dict[str, float],
) -> dict[str, float]:
    """A schedule's predicted speedup per concurrency (``0@c``): the K it drafts at that batch size, at the
    fixed K's step cost times its runner's measured price there."""
    return {f"0@{c}": fit.predict(k_at(min(c, max_batch)), c) * price.get(str(c), 1.0) for c in concurrencies}


def plan_of(request: Request, run_id: str, curve: priors.Curve | None, max_batch: int) -> Plan:
    """Step 2: the plan kept in the run's folder, else made from step 1's cells (and kept)."""
    path = sweep.run_dir(run_id) / PLAN_FILE
    plan = Plan.load(path)
    if plan is None:
        plan = _plan(*_fits(run_id, curve, request.probe_ks), request, max_batch)
        if sweep.run_dir(run_id).is_dir():
            files.write_atomic(path, json.dumps(asdict(plan), indent=1))
    return plan
