"""Truth: do SpecScope's intervals predict a rerun? Two independent sweeps of the same cells.

Runs the same sweep twice on the CPU demo preset (``specscope bench`` machinery: fresh
servers, repeats interleaved, the baseline server alongside with its repeats spread over the
run). From run 1 alone, each speculative cell gets the 95% prediction interval of the speedup a
rerun with as many repeats will show (``stats.ratio_prediction_interval``: log-ratio of means,
Welch t); run 2's speedup (mean throughput over its repeats / mean baseline throughput of the
same run and concurrency) is then checked against it. Prints one line per cell, then the
hygiene checks the cells failed, then

    truth cells=<n> coverage=<fraction>

Resumable: both runs keep every finished cell under the SpecScope home (run ids
``truth-<tag>-1`` and ``truth-<tag>-2``); running the same command again measures only what is
missing. Budget on a 2-core machine shared with other work: 5 server starts (1-5 minutes
each, depending on the load) and 75 cells of 5 prompts x 16 tokens (10-20 s each) per run,
about 25 minutes per run.

    python tests/bench/truth.py                       # ngram and suffix, K=2,4 x c=1..5: 20 cells
    python tests/bench/truth.py --tag quick --methods ngram --k 2 --concurrency 1,4 --repeats 2
    python tests/bench/truth.py --report              # the figures from what both runs finished so far
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path

from helpers.paths import PROMPTS
from specscope import stats, sweep
from specscope.cli.bench import ProgressBar
from specscope.results import hygiene, store
from specscope.schema import BASELINE_METHOD


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


def run(args, index: int) -> str:
    """Run (or resume) sweep number ``index``; returns its run id."""
    run_id = f"truth-{args.tag}-{index}"
    spec = sweep.SweepSpec(
        preset=args.preset,
        methods=(BASELINE_METHOD, *args.methods),
        ks=args.k,
        concurrencies=args.concurrency,
        prompts=args.prompts,
        num_prompts=args.num_prompts,
        output_len=args.output_len,
        repeats=args.repeats,
        baseline_alongside=True,
        run_id=run_id,
    )
    started = time.monotonic()
    result = sweep.run_sweep(spec, sweep.PresetLauncher(args.preset), progress=ProgressBar())
    print(
        f"run {run_id}: {len(result.ran)} ran, {len(result.skipped)} finished earlier, {len(result.failed)} failed "
        f"in {time.monotonic() - started:.0f} s",
        flush=True,
    )
    for cell_id, reason in result.failed.items():
        print(f"  {cell_id}: {reason}", flush=True)
    return run_id


def throughputs(run_id: str) -> dict[tuple[str, int, int], list[float]]:
    """Per (method, K, concurrency): output throughput of every ok repeat."""
    out: dict[tuple[str, int, int], list[float]] = {}
    for entry in sweep.finished_cells(run_id).values():
        row = entry.row
        if row.get("status") == "ok" and row.get("output_throughput"):
            out.setdefault((row["method"], row["k"], row["concurrency"]), []).append(row["output_throughput"])
    return out


def wanted(args) -> list[tuple[str, int, int]]:
    return [(method, k, c) for method in args.methods for k in args.k for c in args.concurrency]


def sweep_arguments(parser: argparse.ArgumentParser, concurrency: tuple[int, ...]) -> None:
    """The arguments of a small CPU sweep of ngram and friends (this bench's and ``paired.py``'s)."""
    parser.add_argument("--preset", default="cpu-smollm2")
    parser.add_argument("--prompts", type=Path, default=PROMPTS / "code-editing.jsonl")
    parser.add_argument("--num-prompts", type=int, default=5)
    parser.add_argument("--output-len", type=int, default=16)
    parser.add_argument("--k", type=_ints, default=(2, 4))
    parser.add_argument("--concurrency", type=_ints, default=concurrency)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sweep_arguments(parser, (1, 2, 3, 4, 5))
    parser.add_argument("--methods", type=lambda t: tuple(m for m in t.split(",") if m), default=("ngram", "suffix"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tag", default="cpu", help="names the two runs, so a rerun resumes them")
    parser.add_argument(
        "--report", action="store_true", help="measure nothing: report on the cells both runs have finished so far"
    )
    args = parser.parse_args()
    args.prompts = args.prompts.resolve()

    if args.report:
        first, second = f"truth-{args.tag}-1", f"truth-{args.tag}-2"
    else:
        first, second = run(args, 1), run(args, 2)
    one, two = throughputs(first), throughputs(second)
    covered, cells, widths = 0, 0, []
    print("cell                 run1 speedup  95% prediction      run2 speedup  covered")
    for method, k, c in wanted(args):
        base1, base2 = one.get((BASELINE_METHOD, 0, c)), two.get((BASELINE_METHOD, 0, c))
        tps1, tps2 = one.get((method, k, c)), two.get((method, k, c))
        if not (base1 and base2 and tps1 and tps2):
            print(f"{method}-k{k}-c{c}: missing in a run, left out", flush=True)
            continue
        interval = stats.ratio_prediction_interval(tps1, base1)
        rerun = (sum(tps2) / len(tps2)) / (sum(base2) / len(base2))
        cells += 1
        hit = interval.covers(rerun)
        covered += hit
        if interval.bounded:
            widths.append(interval.half_width / interval.estimate)
            band = f"[{interval.low:.3f}, {interval.high:.3f}]"
        else:
            band = "no interval"
        print(
            f"{method}-k{k}-c{c}".ljust(20),
            f"{interval.estimate:12.3f}  {band:18}  {rerun:12.3f}  "
            f"{'yes' if hit else 'NO'}  (n={len(tps1)}/{len(base1)} vs {len(tps2)}/{len(base2)})",
            flush=True,
        )
    rows = store.Store().query("SELECT hygiene FROM results WHERE run_id IN (?, ?)", [first, second])
    flagged = Counter(check for text in rows["hygiene"] for check in hygiene.flagged_ids(text))
    print("hygiene flags over both runs: " + (", ".join(f"{k}={v}" for k, v in flagged.items()) or "none"))
    if widths:
        widths.sort()
        print(f"median relative half-width of the prediction intervals: {widths[len(widths) // 2]:.3f}")
    if not cells:
        sys.exit("truth: no cell was measured in both runs")
    print(f"truth cells={cells} coverage={covered / cells:.3f}")


if __name__ == "__main__":
    main()
