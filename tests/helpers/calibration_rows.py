"""Result rows of a step-cost calibration and a real run, made from a known cost model, for tests."""

from __future__ import annotations

import json
from pathlib import Path

from specscope.results import writing

D0 = {1: 1.05, 4: 1.20}  # step cost intercept per concurrency
D1 = {1: 0.30, 4: 0.45}  # and per drafted token
BASE = {1: 20.0, 2: 35.0, 4: 60.0}  # baseline tok/s
REAL_RATES = [0.6, 0.4, 0.25, 0.15]  # the real drafter's acceptance by position
HELD_OUT = 21.0  # tok/s of the real drafter at K=3, concurrency 2 (a cell never calibrated)


def _row(source, method, k, conc, throughput, rates=None):
    al = 1.0 + sum(rates) if rates else None
    config = {"method": method, "num_speculative_tokens": k} if k else None
    if config and source == "calibration":
        config.update(rejection_sample_method="synthetic", synthetic_acceptance_rates=list(rates))
    return {
        "method_params": json.dumps(config) if config else None,
        "run_id": f"run-{source}",
        "source": source,
        "model": "m",
        "draft_model": "d" if k else None,
        "method": method,
        "k": k,
        "dataset": "set",
        "hardware": "cpu-2core",
        "host": "h",
        "output_len": 64,
        "temperature": 0.0,
        "concurrency": conc,
        "output_throughput": throughput,
        "status": "ok",
        "acceptance_length": al,
        "acceptance_rate": (al - 1.0) / k if k else None,
        "per_position_acceptance": list(rates) if rates else None,
    }


def sd_throughput(conc: int, k: int, rates: list[float]) -> float:
    """Throughput the cost model gives: baseline x tokens per step / (d0 + d1*K)."""
    return BASE[conc] * (1.0 + sum(rates)) / (D0[conc] + D1[conc] * k)


def write(directory: Path) -> None:
    """A calibration run (drafts accepted at 0.8^i, K 1, 2, 4 at concurrency 1 and 4) and a real run
    (K=4 at concurrency 1 on the cost model, K=3 at concurrency 2 measured at ``HELD_OUT``)."""
    synthetic = [_row("calibration", "none", 0, c, BASE[c]) for c in D0]
    synthetic += [
        _row(
            "calibration",
            "draft_model",
            k,
            c,
            sd_throughput(c, k, [0.8**i for i in range(1, k + 1)]),
            [0.8**i for i in range(1, k + 1)],
        )
        for c in D0
        for k in (1, 2, 4)
    ]
    real = [_row("specscope", "none", 0, c, BASE[c]) for c in (1, 2)]
    real += [
        _row("specscope", "draft_model", 4, 1, sd_throughput(1, 4, REAL_RATES), REAL_RATES),
        _row("specscope", "draft_model", 3, 2, HELD_OUT, REAL_RATES[:3]),
    ]
    writing.write_results(synthetic, run_id="run-calibration", directory=directory)
    writing.write_results(real, run_id="run-specscope", directory=directory)
