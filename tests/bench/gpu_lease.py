"""A GPU lease well spent: how much of it measures something, the old way and the new.

One sweep of 4 servers x 2 concurrencies on the Llama-3.1-8B shape (dummy weights, drafts accepted
synthetically at a mean length of 3.0, K=4, preset ``shape-llama31-8b-shared``), run two ways on the
same machine, each in its own SpecScope home (so each starts with an empty compile cache):

Every cell is measured ``--repeats`` times (default 2, the fewest that give an interval), in interleaved
rounds as every SpecScope sweep with repeats runs.

- ``old``: as sweeps ran before servers could sleep (``bench --no-sleep``): each server started when
  its cells come, one after the other, and stopped after them.
- ``new``: servers start together as memory allows, sleep between their cells and wake for them;
  on a node of several GPUs, each GPU slot runs its own lane of servers.
- ``woken``: the same cell (EAGLE-3 K=4, c=1, over the baseline) measured 3 times on fresh servers and
  3 times after each server slept (level 1) and woke, with 95% intervals: does waking change what is
  measured?
- ``second``: after ``new``, in its home, the same sweep again under another run id: its servers are the ones
  ``new`` kept for the lease (a GPU sweep's servers stay after it, asleep where memory is needed), so it should
  spend almost none of its time starting servers.
- ``report``: the figures, from what the phases wrote.

A phase that would run past ``--budget`` seconds stops before its next server start and resumes when
run again (the sweep keeps its cells); its wall time adds up. Without a GPU every phase but ``report``
prints why it skipped and exits 0. Last line of ``report``:
``gpu_lease gpus=<n> cells=<n> repeats=<n> old_wall_s=<s> new_wall_s=<s> ratio=<new/old> start_s=<s> measure_s=<s>
share=<measure/wall>`` (start_s, measure_s and share of the new way), then, after ``second``,
``gpu_pool second_sweep_start_share=<start/wall of the second sweep>``.

Run (GPU machine): python tests/bench/gpu_lease.py --phase new --home /root/lease; ... --phase report
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path

from helpers.paths import DATA
from specscope import prompts, settings, stats, sweep
from specscope.cli.bench import ProgressBar
from specscope.client import sleepmode, warmup
from specscope.client.load import run_load, run_sync
from specscope.client.load_spec import LoadSpec
from specscope.client.progress import ProgressEvent
from specscope.engine import provenance
from specscope.launch import gpus

PROMPTS = DATA / "prompts" / "code-editing.jsonl"
PRESET = "shape-llama31-8b-shared"
METHODS = ("none", "ngram", "eagle3", "draft_model")
START_S = 170.0  # a server start on the 8B shape takes about this long: no new start past the budget's end


progress = ProgressBar(sys.stdout, stamped=True)


def lease_spec(way: str, repeats: int) -> sweep.SweepSpec:
    return sweep.SweepSpec(
        preset=PRESET,
        methods=METHODS,
        ks=(4,),
        concurrencies=(1, 16),
        prompts=PROMPTS,
        num_prompts=8,
        per_concurrency=4,
        output_len=128,
        warmups=1,
        repeats=repeats,
        synthetic_length=((0, 3.0),),
        run_id=f"gpu-lease-{way}-r{repeats}",
    )


def _record(home: Path, entry: dict) -> None:
    path = home / "lease.json"
    entries = json.loads(path.read_text()) if path.exists() else []
    path.write_text(json.dumps([*entries, entry], indent=1))


def sweep_phase(way: str, home: Path, budget: float, repeats: int) -> None:
    """One way's sweep (resumed where an earlier command of the same way stopped)."""
    began = time.monotonic()
    plan = sweep.resolve(lease_spec(way, repeats))
    launcher = sweep.launcher_for(plan.spec, sweep.LaunchOptions(sleep_mode=way != "old"))
    finished = set(sweep.finished_cells(plan.run_id))
    seen: list[str] = []

    def tracked(event: ProgressEvent) -> None:
        if event.stage in ("cell_done", "cell_failed", "cell_skipped"):
            seen.append(event.cell)
        progress(event)

    def out_of_time() -> bool:
        """Before a cell: stop only where it needs a server start that would end past the budget."""
        ahead = [cell for cell in plan.cells if cell.cell_id not in finished and cell.cell_id not in seen]
        starts = not seen or not ahead or ahead[0].group not in {c.group for c in plan.cells if c.cell_id in seen}
        return starts and time.monotonic() - began + START_S > budget

    result = sweep.run_sweep(plan, launcher, progress=tracked, stop=out_of_time)
    wall = time.monotonic() - began
    lanes = len(launcher.lanes())
    print(
        f"{way}: {len(result.ran)} ran, {len(result.skipped)} finished earlier, {len(result.failed)} failed "
        f"in {wall:.0f} s; "
        f"{sweep.run.time_split(result.seconds, lanes)}"
    )
    for cell_id, reason in result.failed.items():
        print(f"  {cell_id}: {reason}")
    _record(
        home,
        {
            "way": way,
            "wall_s": wall,
            "ran": len(result.ran),
            "failed": len(result.failed),
            "seconds": result.seconds,
            "lanes": lanes,
            "gpus": len(gpus.visible()),
            "repeats": repeats,
            "hardware": provenance.hardware_label(),
        },
    )


def _measure(url: str, prompt_set: prompts.PromptSet) -> dict:
    load = LoadSpec(base_url=url, num_prompts=8, max_concurrency=1, output_len=128, warmups=1)
    return run_sync(run_load(load, prompt_set)).row()


def woken_phase(home: Path, rounds: int = 3) -> None:
    """The same cell on fresh servers, then after each sleep and wake of both."""
    launcher = sweep.PresetLauncher(PRESET, synthetic=sweep.Synthetic(lengths=((0, 3.0),)), starts_at_once=2)
    prompt_set = prompts.load(PROMPTS)
    started = launcher.start_many([("none", 0, {}), ("eagle3", 4, {})])
    failed = [str(s) for s in started if not isinstance(s, sweep.RunningServer)]
    if failed:
        raise SystemExit(f"woken: a server did not start: {failed}")
    base, method = started
    try:
        for server in started:
            warmup.warm_up(server.url, concurrency=1, output_len=128, live=False)
        figures: dict[str, list[dict]] = {"fresh": [], "woken": []}
        for _ in range(rounds):
            figures["fresh"].append(
                {"base": _measure(base.url, prompt_set), "method": _measure(method.url, prompt_set)}
            )
        for _ in range(rounds):
            times = {}
            for server in started:
                began = time.monotonic()
                sleepmode.fall_asleep(server.url, level=1)
                asleep = time.monotonic()
                sleepmode.wake_up(server.url)
                times[server.url] = (asleep - began, time.monotonic() - asleep)
                warmup.warm_up(server.url, concurrency=1, output_len=128, live=False)
            figures["woken"].append(
                {
                    "base": _measure(base.url, prompt_set),
                    "method": _measure(method.url, prompt_set),
                    "sleep_wake_s": list(times.values()),
                }
            )
    finally:
        for server in started:
            launcher.stop(server)
    _record(home, {"way": "woken", "figures": figures, "hardware": provenance.hardware_label()})
    _woken_report(figures)


def _woken_report(figures: dict) -> None:
    for kind in ("fresh", "woken"):
        rows = figures[kind]
        speed = stats.ratio_interval(
            [r["method"]["output_throughput"] for r in rows], [r["base"]["output_throughput"] for r in rows]
        )
        tpot = stats.mean_interval([r["method"]["median_tpot_ms"] for r in rows])
        base_tpot = stats.mean_interval([r["base"]["median_tpot_ms"] for r in rows])
        print(
            f"woken {kind}: EAGLE-3 K=4 c=1 speedup {speed.estimate:.3f}x [{speed.low:.3f}, {speed.high:.3f}]; "
            f"TPOT {tpot.estimate:.2f} ms [{tpot.low:.2f}, {tpot.high:.2f}], baseline TPOT "
            f"{base_tpot.estimate:.2f} ms [{base_tpot.low:.2f}, {base_tpot.high:.2f}] ({len(rows)} rounds)"
        )
    cycles = [pair for r in figures["woken"] for pair in r["sleep_wake_s"]]
    if cycles:
        print(
            f"woken: fell asleep in {min(c[0] for c in cycles):.2f}-{max(c[0] for c in cycles):.2f} s, woke in "
            f"{min(c[1] for c in cycles):.2f}-{max(c[1] for c in cycles):.2f} s (level 1)"
        )


def report(home: Path, repeats: int) -> None:
    entries = json.loads((home / "lease.json").read_text())
    ways = {}
    for way in ("old", "new"):
        runs = [e for e in entries if e["way"] == way and e.get("repeats", 1) == repeats]
        if runs:
            seconds: dict[str, float] = {}
            for e in runs:
                for key, value in e["seconds"].items():
                    seconds[key] = seconds.get(key, 0.0) + value
            ways[way] = {
                "wall": sum(e["wall_s"] for e in runs),
                "cells": sum(e["ran"] for e in runs),
                "seconds": seconds,
                "gpus": runs[-1]["gpus"],
                "lanes": runs[-1]["lanes"],
                "hardware": runs[-1]["hardware"],
            }
            print(
                f"{way}: {ways[way]['cells']} cells in {ways[way]['wall']:.0f} s over {len(runs)} command(s) on "
                f"{ways[way]['hardware']}; {sweep.run.time_split(seconds, ways[way]['lanes'])}"
            )
    for e in entries:
        if e["way"] == "woken":
            _woken_report(e["figures"])
    second = [e for e in entries if e["way"] == "second" and e.get("repeats", 1) == repeats]
    if second:
        wall = sum(e["wall_s"] for e in second)
        start = sum(e["seconds"].get("start", 0.0) for e in second)
        print(f"gpu_pool second_sweep_start_share={start / wall:.3f} second_wall_s={wall:.0f} start_s={start:.0f}")
    if "old" in ways and "new" in ways:
        old, new = ways["old"], ways["new"]
        start, measure = new["seconds"].get("start", 0.0), new["seconds"].get("measure", 0.0)
        print(
            f"gpu_lease gpus={new['lanes']} cells={new['cells']} repeats={repeats} old_wall_s={old['wall']:.0f} "
            f"new_wall_s={new['wall']:.0f} ratio={new['wall'] / old['wall']:.3f} start_s={start:.0f} "
            f"measure_s={measure:.0f} share={measure / new['wall']:.3f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phase", choices=("old", "new", "second", "woken", "report"), required=True)
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("SPECSCOPE_LEASE", "/tmp/specscope-lease")))
    parser.add_argument(
        "--repeats",
        type=int,
        default=2,
        help="measurements of every cell, in interleaved rounds (default %(default)s: an interval)",
    )
    parser.add_argument("--budget", type=float, default=560.0, help="seconds this command may measure for")
    args = parser.parse_args()
    args.home.mkdir(parents=True, exist_ok=True)
    if args.phase == "report":
        report(args.home, args.repeats)
        return 0
    if not gpus.visible():
        print(f"gpu_lease: skipped, no GPU here ({provenance.hardware_label()}); run it on a GPU machine")
        return 0
    os.environ["SPECSCOPE_MODELS"] = str(settings.models_dir())  # the shapes, wherever the home moves
    os.environ["SPECSCOPE_HOME"] = str(args.home / ("new" if args.phase == "second" else args.phase))
    if args.phase == "woken":
        woken_phase(args.home)
    else:
        sweep_phase(args.phase, args.home, args.budget, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
