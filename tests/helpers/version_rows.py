"""Results of setups measured on two vLLM versions, each over its own baseline: ngram changed (1.50x ->
2.00x, tight repeats), suffix tied (1.50x -> 1.52x, wide repeats), eagle single runs (no interval),
and mtp measured on one version only (left out of the versions view)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from specscope.results.writing import write_results

T0 = dt.datetime(2026, 11, 25, tzinfo=dt.UTC)


def rows(version: str, baseline: list[float], methods: dict[str, list[float]], host: str = "h") -> list[dict]:
    """One row per repeat of the baseline and each method on ``version`` (a single sample: no repeat index)."""
    out = []
    for name, samples in {"none": baseline, **methods}.items():
        for i, tput in enumerate(samples):
            out.append(
                {
                    "created_at": T0,
                    "source": "specscope",
                    "model": "m",
                    "method": name,
                    "k": 0 if name == "none" else 4,
                    "dataset": "code-editing",
                    "hardware": "cpu-2core",
                    "host": host,
                    "vllm_version": version,
                    "torch_version": "2.13.0+cpu",
                    "weights": "real",
                    "acceptance": None if name == "none" else "real",
                    "temperature": 0.0,
                    "output_len": 64,
                    "concurrency": 1,
                    "repeat": i + 1 if len(samples) > 1 else None,
                    "output_throughput": tput,
                    "status": "ok",
                }
            )
    return out


def write(folder: Path) -> Path:
    """Write the runs into ``folder`` (one Parquet file each) and return it."""
    runs = {
        "old": rows("0.31.0", [10.0, 10.0, 10.0], {"ngram": [14.9, 15.0, 15.1], "suffix": [12.0, 15.0, 18.0]}),
        "new": rows("0.32.0", [10.0, 10.0, 10.0], {"ngram": [19.9, 20.0, 20.1], "suffix": [12.2, 15.2, 18.2]}),
        "single": rows("0.31.0", [10.0], {"eagle": [13.0]}, host="g")
        + rows("0.32.0", [10.0], {"eagle": [12.0]}, host="g"),
        "one": rows("0.32.0", [50.0, 50.0], {"mtp": [60.0, 61.0]}, host="other"),
    }
    for run, found in runs.items():
        for row in found:
            row["run_id"] = run
        write_results(found, run_id=run, directory=folder)
    return folder
