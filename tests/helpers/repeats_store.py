"""A small results store with repeats that exercises every path of the speedup maths.

Runs with their own baselines measured in the same rounds (paired intervals), a run that falls back to
another run's baseline, two baseline cells of one run under the same conditions (pooled), rows without a
repeat index, a noisy baseline and a noisy cell in paired rounds (the paired interval stays above 0), an
imported run whose cells carry their requests' spread (unpaired: a noisy baseline's unbounded Fieller set,
a noisy cell's Fieller low end clipped at 0), missing and failed measurements, K schedules, per-position
acceptance and a second host. Deterministic.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np

from specscope.results import writing

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _rows(
    run: str,
    hour: int,
    rng: np.random.Generator,
    *,
    host: str = "h1",
    baseline: bool = True,
    repeats: tuple[int, ...] = (3, 4, 5),
    noisy_base: bool = False,
    no_repeat: bool = False,
) -> list[dict]:
    rows = []
    choices = [("none", 0, None)] if baseline else []
    choices += [("ngram", k, None) for k in (1, 2, 4)] + [("eagle3", k, None) for k in (2, 4)]
    choices += [("ngram", 4, "1-2:4,3-256:1")]
    for conc in (1, 4, 16):
        base = 40.0 * conc**0.8
        for method, k, k_schedule in choices:
            gain = 1.0 if method == "none" else (1 + 0.2 * np.sqrt(k)) / (1 + 0.01 * conc * k)
            count = 1 if no_repeat else int(rng.choice(repeats))
            for rep in range(count):
                spread = 0.9 if (noisy_base and method == "none" and conc == 4) else 0.04
                tput = base * gain * max(0.02, rng.normal(1.0, spread))
                rows.append(
                    {
                        "created_at": T0 + dt.timedelta(hours=hour, minutes=rep),
                        "source": "synthetic",
                        "model": "org/m",
                        "draft_model": "org/d" if method == "eagle3" else None,
                        "method": method,
                        "k": k,
                        "k_schedule": k_schedule,
                        "hardware": "cpu",
                        "host": host,
                        "dataset": "chat",
                        "temperature": 0.0,
                        "output_len": 128,
                        "concurrency": conc,
                        "repeat": None if no_repeat else rep,
                        "output_throughput": tput,
                        "acceptance_length": None if method == "none" else 1 + 0.5 * k**0.7 + rng.normal(0, 0.05),
                        "p99_tpot_ms": 20.0 + rng.normal(0, 1),
                        "per_position_acceptance": None
                        if method == "none"
                        else [round(0.8 ** (i + 1) + rng.normal(0, 0.01), 4) for i in range(k)],
                        "status": "ok",
                    }
                )
    return rows


def _imported() -> list[dict]:
    """A benchmark tool's single run on a third host: one row per cell with its requests' spread, no rounds."""
    rows = []
    for conc, (base_var, ngram_var) in {1: (4.0, 10000.0), 4: (90000.0, 9.0)}.items():
        for method, k, tput, var in (("none", 0, 40.0 * conc, base_var), ("ngram", 2, 52.0 * conc, ngram_var)):
            rows.append(
                {
                    "created_at": T0 + dt.timedelta(hours=6),
                    "source": "synthetic",
                    "model": "org/m",
                    "method": method,
                    "k": k,
                    "hardware": "cpu",
                    "host": "h3",
                    "dataset": "chat",
                    "temperature": 0.0,
                    "output_len": 128,
                    "concurrency": conc,
                    "output_throughput": tput,
                    "output_throughput_n": 12,
                    "output_throughput_var": var,
                    "status": "ok",
                }
            )
    return rows


def write_store(folder: Path) -> Path:
    """Write the runs into ``folder`` (one Parquet file each) and return it."""
    rng = np.random.default_rng(27)
    runs = {
        "run-a": _rows("run-a", 0, rng),
        "run-b": _rows("run-b", 1, rng, repeats=(2, 3)),
        "run-c": _rows("run-c", 2, rng, baseline=False),  # divides by the newest baseline (run-b)
        "run-d": _rows("run-d", 3, rng, no_repeat=True),  # published style: every row a cell
        "run-e": _rows("run-e", 4, rng, host="h2", noisy_base=True, repeats=(3,)),
        "run-f": _rows("run-f", 5, rng, host="h2", repeats=(1, 2)),
    }
    # run-b measured its baseline twice under the same conditions (two labels): pooled
    runs["run-b"] += [
        {**row, "label": "again", "output_throughput": row["output_throughput"] * 1.03}
        for row in runs["run-b"]
        if row["method"] == "none" and row["repeat"] in (0, 1)
    ]
    # a noisy cell whose Fieller low end reaches below 0, a missing figure and a failed cell
    runs["run-a"] += [
        {**runs["run-a"][1], "method": "suffix", "k": 8, "k_schedule": None, "repeat": i, "output_throughput": v}
        for i, v in enumerate((2.0, 90.0, 3.0))
    ]
    runs["run-a"] += [{**runs["run-a"][1], "repeat": 9, "output_throughput": None}]
    runs["run-f"] += [
        {**runs["run-f"][1], "k": 8, "status": "failed", "error": "server died", "output_throughput": None}
    ]
    runs["run-g"] = _imported()
    for run, rows in runs.items():
        writing.write_results(rows, run_id=run, directory=folder)
    return folder
