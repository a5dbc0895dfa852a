"""Result rows of one run with a K schedule beside the fixed K, for tests."""

from __future__ import annotations

SCHEDULE = "1-2:4,3-256:1"


def row(method: str, k: int, concurrency: int, throughput: float, repeat: int, k_schedule: str | None = None) -> dict:
    """A finished cell of run ``r1`` (model m, dataset d, cpu, host h, 64 tokens, greedy)."""
    return {
        "run_id": "r1",
        "source": "specscope",
        "model": "m",
        "method": method,
        "k": k,
        "k_schedule": k_schedule,
        "dataset": "d",
        "hardware": "cpu",
        "host": "h",
        "output_len": 64,
        "temperature": 0.0,
        "concurrency": concurrency,
        "repeat": repeat,
        "status": "ok",
        "output_throughput": throughput,
    }
