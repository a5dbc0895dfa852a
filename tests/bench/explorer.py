"""Time the Explorer's speedup-vs-K figure data at 1,000 and 1,000,000 result rows.

Writes synthetic canonical rows (a grid of setups x K x concurrency, repeated runs) to two
throwaway stores, loads each once, then times ``explore.speedup_vs_k`` on both, alternating,
and reports medians. Last line:
``explorer t_1k_s=<s> t_1m_s=<s> ratio=<t_1m/t_1k>`` (target: ratio <= 15).
Run: .venv/bin/python tests/bench/explorer.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "app"))

from specscope import explore, store  # noqa: E402

MODELS = [f"org/model-{i}" for i in range(8)]
METHODS = ["none", "ngram", "suffix", "draft_model", "eagle3"]
KS = list(range(1, 9))
CONCS = [1, 2, 4, 8, 16, 32, 64, 128, 256]


def synthetic(n: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    method = rng.choice(METHODS, n)
    k = np.where(method == "none", 0, rng.choice(KS, n)).astype(np.int32)
    conc = rng.choice(CONCS, n)
    base = 50.0 * conc ** 0.8
    gain = np.where(method == "none", 1.0, (1 + 0.25 * np.sqrt(k)) / (1 + 0.002 * conc * k))
    tput = base * gain * rng.normal(1.0, 0.03, n)
    columns = {
        "source": pa.array(["synthetic"] * n), "model": pa.array(rng.choice(MODELS, n)),
        "draft_model": pa.array(np.where(method == "draft_model", "org/draft", None)),
        "method": pa.array(method), "dataset": pa.array(["chat"] * n),
        "hardware": pa.array(["gpu"] * n), "k": pa.array(k), "concurrency": pa.array(conc),
        "output_len": pa.array(np.full(n, 200)), "temperature": pa.array(np.zeros(n)),
        "output_throughput": pa.array(tput),
        "acceptance_length": pa.array(np.where(method == "none", np.nan, 1 + 0.6 * k ** 0.7)),
        "status": pa.array(["ok"] * n),
    }
    return store.to_table(pa.table(columns), store.RESULT_SCHEMA)


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stores = {}
        for label, n in (("1k", 1_000), ("1m", 1_000_000)):
            folder = Path(tmp) / label
            store.write_results(synthetic(n), run_id=f"synthetic-{label}", directory=folder)
            stores[label] = store.Store(result_dirs=[folder], request_dirs=[])
            t0 = time.perf_counter()
            rows = stores[label].count()
            print(f"{label}: {rows} rows, first load {time.perf_counter() - t0:.3f}s")
        times = {"1k": [], "1m": []}
        for _ in range(7):  # alternate so both see the same machine state
            for label in ("1k", "1m"):
                times[label] += timed(lambda: explore.speedup_vs_k(stores[label]), 1)
        for label in ("1k", "1m"):
            frame = explore.speedup_vs_k(stores[label])
            print(f"{label}: {len(frame)} figure points, times {[round(t, 4) for t in times[label]]}")
        t1k, t1m = statistics.median(times["1k"]), statistics.median(times["1m"])
        print(f"explorer t_1k_s={t1k:.4f} t_1m_s={t1m:.4f} ratio={t1m / t1k:.2f}")


if __name__ == "__main__":
    main()
