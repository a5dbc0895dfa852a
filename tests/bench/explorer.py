"""Time the Explorer's speedup-vs-K figure data at 1,000 and 1,000,000 result rows, in two shapes.

"repeats": one run measuring a fixed grid of cells (2 models x 33 method/K choices x 9
concurrencies = 594 cells, baseline included), the rows being repeats of those cells, so 1M
rows are about 1,700 repeats per cell. "runs": 300 runs of 3 repeats each, every run measuring
the first cells of a 1,188-cell grid (4 models), so 1M rows are 333,300 cells folded over runs
(1k rows: 166 runs of a baseline and one method).
Each store is written to a throwaway folder and loaded once (the load is printed, not timed
with the figure); then ``explore.speedup_vs_k`` is timed on every store, alternating, and the
medians reported, with the process's peak resident memory. Last line:
``explorer t_1k_s=<s> t_1m_s=<s> ratio=<t_1m/t_1k> t_1m_runs_s=<s> peak_gb=<GB>``
(targets: t_1m_s <= 0.5, t_1m_runs_s <= 0.5, ratio <= 15, peak_gb <= 2).
Run: .venv/bin/python tests/bench/explorer.py [--rows 1000000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from specscope.analysis import explore
from specscope.results import store, writing  # noqa: E402
from specscope.schema import RESULT_SCHEMA  # noqa: E402

METHODS = ["ngram", "suffix", "draft_model", "eagle3"]
KS = list(range(1, 9))
CONCS = [1, 2, 4, 8, 16, 32, 64, 128, 256]
CHOICES = [("none", 0)] + [(m, k) for m in METHODS for k in KS]  # 33, the baseline first
RUNS, RUN_REPEATS = 300, 3


def grid(models: int) -> dict[str, np.ndarray]:
    """Every (model, concurrency, method, K) cell, a concurrency's baseline before its methods."""
    cells = [(f"org/model-{m}", c, method, k) for m in range(models) for c in CONCS for method, k in CHOICES]
    model, conc, method, k = zip(*cells)
    return {
        "model": np.array(model),
        "concurrency": np.array(conc),
        "method": np.array(method),
        "k": np.array(k, dtype=np.int32),
    }


def rows(
    cells: dict[str, np.ndarray], cell: np.ndarray, run: np.ndarray, repeat: np.ndarray, rng: np.random.Generator
) -> pa.Table:
    n = len(cell)
    method, k, conc = cells["method"][cell], cells["k"][cell], cells["concurrency"][cell]
    base = 50.0 * conc**0.8
    gain = np.where(method == "none", 1.0, (1 + 0.25 * np.sqrt(k)) / (1 + 0.002 * conc * k))
    created = np.datetime64("2026-01-01T00:00", "us") + run.astype("timedelta64[m]")
    columns = {
        "run_id": pa.array([f"bench-{r:03d}" for r in range(RUNS)]).take(pa.array(run)),
        "created_at": pa.array(created).cast(pa.timestamp("us", tz="UTC")),
        "source": pa.array(["synthetic"] * n),
        "model": pa.array(cells["model"][cell]),
        "draft_model": pa.array(np.where(method == "draft_model", "org/draft", None)),
        "method": pa.array(method),
        "dataset": pa.array(["chat"] * n),
        "hardware": pa.array(["gpu"] * n),
        "k": pa.array(k),
        "concurrency": pa.array(conc),
        "repeat": pa.array(repeat.astype(np.int32)),
        "output_len": pa.array(np.full(n, 200)),
        "temperature": pa.array(np.zeros(n)),
        "output_throughput": pa.array(base * gain * rng.normal(1.0, 0.03, n)),
        "acceptance_length": pa.array(np.where(method == "none", np.nan, 1 + 0.6 * k**0.7)),
        "status": pa.array(["ok"] * n),
    }
    return writing.to_table(pa.table(columns), RESULT_SCHEMA)


def one_run(n: int, seed: int = 0) -> pa.Table:
    """One run: row i is repeat i // 594 of cell i % 594."""
    cells, index = grid(2), np.arange(n)
    size = len(cells["k"])
    return rows(cells, index % size, np.zeros(n, dtype=int), index // size, np.random.default_rng(seed))


def many_runs(n: int, seed: int = 1) -> pa.Table:
    """Up to 300 runs of 3 repeats, each run measuring the first n/900 cells of the grid (at least
    2, so a small store has runs of a baseline and one method): about ``n`` rows."""
    cells = grid(4)
    per_run = max(2, n // (RUNS * RUN_REPEATS))
    runs = max(1, min(RUNS, n // (RUN_REPEATS * per_run)))
    index = np.arange(runs * per_run * RUN_REPEATS)
    return rows(
        cells,
        (index // RUN_REPEATS) % per_run,
        index // (RUN_REPEATS * per_run),
        index % RUN_REPEATS,
        np.random.default_rng(seed),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the large stores")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    shapes = {
        "1k": (one_run, 1_000),
        "1m": (one_run, args.rows),
        "1k_runs": (many_runs, 1_000),
        "1m_runs": (many_runs, args.rows),
    }
    with tempfile.TemporaryDirectory() as tmp:
        stores = {}
        for label, (make, n) in shapes.items():
            folder = Path(tmp) / label
            table = make(n)
            for run in sorted(set(table.column("run_id").to_pylist())):
                mask = pc.equal(table.column("run_id"), run)
                writing.write_results(table.filter(mask), run_id=run, directory=folder)
            del table
            stores[label] = store.Store(result_dirs=[folder], request_dirs=[])
            t0 = time.perf_counter()
            count = stores[label].count()
            print(f"{label}: {count} rows, first load {time.perf_counter() - t0:.3f} s", flush=True)
        times = {label: [] for label in shapes}
        for _ in range(args.rounds):  # alternate so every store sees the same machine state
            for label, db in stores.items():
                t0 = time.perf_counter()
                explore.speedup_vs_k(db)
                times[label].append(time.perf_counter() - t0)
        for label, db in stores.items():
            frame = explore.speedup_vs_k(db)
            print(
                f"{label}: {len(frame)} figure points from {int(frame['repeats'].sum())} repeats, "
                f"median {statistics.median(times[label]):.4f} s, times {[round(t, 4) for t in times[label]]}"
            )
    median = {label: statistics.median(values) for label, values in times.items()}
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # kB on Linux
    print(
        f"explorer t_1k_s={median['1k']:.4f} t_1m_s={median['1m']:.4f} ratio={median['1m'] / median['1k']:.2f} "
        f"t_1m_runs_s={median['1m_runs']:.4f} peak_gb={peak_gb:.2f}"
    )


if __name__ == "__main__":
    main()
