"""The closed loop: from nothing measured to the configuration to deploy, verified, with few servers.

1. **Step cost.** The baseline and each method at a few K (``probe_ks``) at every concurrency, with repeats.
   Drafts are accepted at the chosen acceptance curve's per-position rates where the vLLM accepts drafts
   synthetically (a GPU), else by the drafter itself (a CPU; or ``acceptance="measured"``). Where this vLLM
   runs a schedule on another model runner than a fixed K (``schedule.runner_env``), a schedule drafting a
   probe K at the measured loads (``runner_probe``) prices that runner.
2. **Prediction** (``deploy_plan``). Every method x K x concurrency from that cost and the acceptance (the
   curve's AL(K), or the probes' measured per-position rates): the fit's best K at each concurrency, the K
   schedule they make (priced on its runner), and the best single K. The plan (what verifies it) is kept in
   the run's folder, so a rerun resumes it.
3. **Verification.** The best method's predicted best K at each concurrency and its best single K (its
   strongest fixed-K rivals), and a schedule server where the best K moves with load, in the same run with
   the same repeats; cells step 1 measured are saved, not measured again.
4. **The answer** (``deploy_outcome``) from everything measured (``deploy.answer``: measured beats
   modelled): the speculative_config to deploy, its measured speedup per concurrency with intervals, each
   prediction's error, the schedule against the best fixed K, and where the time went.

    outcome = run(Request("shape-llama31-8b-shared", ("eagle3",), (1, 4, 16, 64), Path("prompts.jsonl"),
                          acceptance="eagle3-kimi-k2.5", probe_ks=(2, 5)), progress=print)
    print(outcome.report())
"""

from __future__ import annotations

import time
from collections import Counter

from specscope import prompts, sweep
from specscope.advice import priors
from specscope.client.progress import Progress
from specscope.engine import presets
from specscope.engine.k_schedule import parse, runner_env
from specscope.errors import ConfigError
from specscope.launch.host import installed_vllm
from specscope.loop.deploy_outcome import Outcome, outcome_of
from specscope.loop.deploy_plan import Request, acceptance_curve, plan_of, runner_probe
from specscope.schema import BASELINE_METHOD
from specscope.sweep.run import Stop

__all__ = ["report", "run"]


def _spec(
    request: Request, run_id: str, methods: tuple[str, ...], rates: tuple[float, ...], k_schedule: str | None = None
) -> sweep.SweepSpec:
    return sweep.SweepSpec(
        preset=request.preset,
        methods=methods,
        ks=(),
        concurrencies=request.concurrencies,
        prompts=request.prompts.resolve(),
        num_prompts=request.num_prompts,
        per_concurrency=request.per_concurrency,
        output_len=request.output_len,
        repeats=request.repeats,
        run_id=run_id,
        label=f"deploy {run_id}",
        k_schedule=k_schedule,
        synthetic_rates=rates,
    )


def _setup(request: Request) -> tuple[str, priors.Curve | None, tuple[float, ...], int, tuple[str, ...]]:
    """The loop's run id, acceptance curve, synthetic rates (where this vLLM takes them), the schedule's last
    batch size and the probe groups."""
    preset = presets.get_preset(request.preset)
    max_batch = request.max_batch or int(preset.engine_args.get("max_num_seqs", 256))
    curve = acceptance_curve(request.acceptance)
    rates = tuple(curve.rates(max(request.ks))) if curve is not None and installed_vllm().synthetic else ()
    probes = tuple(f"{m}:{'/'.join(map(str, sorted(set(request.probe_ks))))}" for m in request.methods)
    run_id = request.run_id or _spec(request, "", (BASELINE_METHOD, *probes), rates).resolved_run_id(
        prompts.load(request.prompts).sha256
    ).replace("sweep-", "deploy-", 1)
    return run_id, curve, rates, max_batch, probes


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


def run(
    request: Request,
    progress: Progress | None = None,
    stop: Stop = None,
    options: sweep.LaunchOptions = sweep.LaunchOptions(),
    say=print,
    spent: Counter | None = None,
) -> Outcome | None:
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
            raise ConfigError(
                f"{len(result.failed)} cells failed ({next(iter(result.failed.values()))}); what was "
                "measured is saved: fix the cause and run the same command to resume."
            )
        return len(result.ran) + len(result.skipped) == len(sweep.resolve(spec).cells)

    priced = _probe_needed(request, max_batch)
    if not measure(
        _spec(request, run_id, (BASELINE_METHOD, *probes), rates, priced),
        "1/3 step cost: the baseline and "
        + ", ".join(probes)
        + (f", and the schedule {priced} to price a schedule's model runner" if priced else ""),
    ):
        return None
    plan = plan_of(request, run_id, curve, max_batch)
    say(
        f"2/3 predicted: {plan.method} (mean {plan.methods[plan.method]:.3f}× at its best K); best K by "
        f"concurrency {plan.best_k}; best single K {plan.fixed_k}"
        + (f"; schedule {plan.schedule}" if plan.schedule else "; K does not move with load")
    )
    rivals = f"{plan.method}:{'/'.join(map(str, plan.verify_ks))}"
    if not measure(
        _spec(request, run_id, (BASELINE_METHOD, rivals), rates, plan.schedule),
        f"3/3 verify: {rivals}" + (f" and the schedule {plan.schedule}" if plan.schedule else ""),
    ):
        return None
    # Counter's stubs count in int; this one adds up float seconds beside the servers' count
    spent["wall"] += time.monotonic() - began  # type: ignore[assignment]
    seconds: dict[str, float] = {k: v for k, v in spent.items() if k != "servers"}
    return outcome_of(request, run_id, curve, max_batch, plan, seconds, int(spent["servers"]))
