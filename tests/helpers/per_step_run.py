"""A hand-made run whose requests carry vLLM's per-step counts: a baseline and ngram K=4 at concurrency 1,
two repeats each, on Llama-3.1-8B on an H100 (so it has a roofline). Each ngram request drafts 4 at each of 4
steps and gets 4, 0, 0, 1 accepted, one step drafting nothing; each step takes 12.56 ms against the baseline's
10 ms, so a drafted token costs 8% of a plain step and the oracle gains 1.256 / 1.08.

    write_run()            # into the home's results and requests folders
"""

from __future__ import annotations

from specscope.results import writing

RUN = "hand-made"
ORACLE_GAIN = 1.256 / 1.08
CELL = {
    "run_id": RUN,
    "source": "specscope",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "hardware": "1xH100-80GB",
    "host": "h",
    "dataset": "d",
    "response_format": "none",
    "output_len": 11,
    "temperature": 0.0,
    "status": "ok",
    "total_input_tokens": 100,
    "completed": 2,
    "total_output_tokens": 22,
}


def _request(method, k, cell, accepted=None, drafted=None, decode_ms=100.0, ttft=20.0):
    return {
        "run_id": RUN,
        "cell_id": cell,
        "prompt_id": "p1",
        "method": method,
        "k": k,
        "concurrency": 1,
        "success": True,
        "output_tokens": 11,
        "prompt_tokens": 50,
        "ttft_ms": ttft,
        "e2el_ms": ttft + decode_ms,
        "tpot_ms": decode_ms / 10,
        "per_step_accepted": accepted,
        "per_step_drafted": drafted,
    }


def write_run() -> None:
    """Write the run's result and request rows into the SpecScope home."""
    rows, requests = [], []
    for repeat in (1, 2):
        rows.append(
            {
                **CELL,
                "method": "none",
                "k": 0,
                "concurrency": 1,
                "repeat": repeat,
                "output_throughput": 100.0 + repeat,
                "mean_ttft_ms": 20.0,
                "p99_ttft_ms": 30.0,
                "mean_tpot_ms": 10.0,
                "prefix_cache_hit_rate": 0.0,
            }
        )
        rows.append(
            {
                **CELL,
                "method": "ngram",
                "k": 4,
                "concurrency": 1,
                "repeat": repeat,
                "output_throughput": 150.0 + repeat,
                "mean_ttft_ms": 25.0,
                "p99_ttft_ms": 45.0,
                "mean_tpot_ms": 6.28,
                "prefix_cache_hit_rate": 0.25,
                "draft_tokens": 32,
                "accepted_tokens": 10,
                "acceptance_length": 2.25,
            }
        )
        requests += [
            _request("none", 0, f"none-k0-c1-r{repeat}"),
            _request("ngram", 4, f"ngram-k4-c1-r{repeat}", [4, 0, 0, 1], [4, 4, 4, 4], 5 * 12.56),
        ]
    writing.write_results(rows, run_id=RUN)
    writing.write_requests(requests, run_id=RUN)
