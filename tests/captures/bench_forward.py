"""Write ``bench_forward_eagle3_*.json``: `vllm bench forward --output-json` files laid out as vLLM 0.33.0's
writer lays them out (vllm/benchmarks/forward/main.py:258-266 and 288-290; run_case's dict, main.py:219-224;
capture.py's result keys, 111-115, 154-156, 242-254, 290-303; speculator.py:74-87), for
tests/unit/advice/test_forward_prior.py. vLLM 0.33.0 needs a GPU, so these are not timings: each forward time
comes from a cost model, the target 5890 us + 21.0 us per batched token + 0.0393 us per KV token (SpecDecode-Bench's
H100 figures for Llama-3.1-8B) and an EAGLE-3 drafter 700 us per drafted token, its samples spread 0.2% around it.

    python tests/captures/bench_forward.py tests/captures
"""

import json
import math
import sys

import numpy as np


def target(reqs):
    """The target's forward time (us) over a batch of (query_len, kv_len, drafts) requests."""
    return 5890 + 21.0 * sum(q for q, _, _ in reqs) + 0.0393 * sum(kv for _, kv, _ in reqs)


def latency(median, seed, iters=4, samples=2):
    """``latency_us`` as capture.py's _time writes it, of iters x samples replays around ``median``."""
    rng = np.random.default_rng(seed)
    arr = np.round(median * (1 + rng.normal(0, 0.002, iters * samples)), 2)
    med = float(np.median(arr))
    sm = np.median(arr.reshape(samples, -1), axis=1)
    return {
        "timer": "graph_events",
        "median": med,
        "sample_spread_pct": float(100 * (sm.max() - sm.min()) / med),
        "mean": float(arr.mean()),
        "std": float(arr.std()),
        "min": float(arr.min()),
        "p90": float(np.percentile(arr, 90)),
        "count": len(arr),
        "samples_us": [round(float(t), 2) for t in arr],
    }


def case(name, reqs, drafter_k, seed):
    """reqs: (query_len, kv_len, drafts) per request; drafter_k: the runner's K when its drafter is timed."""
    lookahead = drafter_k + 1 if drafter_k else 0
    blocks = 1 + sum(math.ceil((kv + lookahead) / 16) for _, kv, _ in reqs)
    us = target(reqs) + (700.0 * drafter_k if drafter_k else 0.0)
    tokens = sum(q for q, _, _ in reqs)
    rank = {
        "num_tokens": tokens,
        "kv_blocks": blocks,
        "routing": "real",
        "num_local_tokens": tokens,
        "num_tokens_after_padding": tokens,
        "batch_order": [f"bench-{i}" for i in range(len(reqs))],
        "timing_scope": "target_and_drafter" if drafter_k else "target_only",
        "eager_repeat": {"max_abs": 0.0, "relative_rms": 0.0},
        "graph_vs_eager": {"max_abs": 0.0078125, "relative_rms": 0.0011},
        "graph_deterministic": True,
        "finite": True,
        "state_reset_bytes": 2 * 32 * len(reqs) * 3 * 16 * 8 * 128 * 2,
    }
    if drafter_k:
        rank["drafter"] = {
            "method": "eagle3",
            "acceptance": "all",
            "num_draft_tokens": drafter_k,
            "output_shape": [len(reqs), drafter_k],
            "graph_matches_eager": True,
            "valid_token_ids": True,
        }
    rank["latency_us"] = latency(us, seed)
    return {
        "case": name,
        "requests": [{"query_len": q, "kv_len": kv, "num_draft_tokens": d, "chunked": False} for q, kv, d in reqs],
        "median_us": rank["latency_us"]["median"],
        "ranks": [rank],
    }


def many(n, q, kv, d):
    """n equal requests."""
    return [(q, kv, d)] * n


out = sys.argv[1] if len(sys.argv) > 1 else "tests/captures"
# --speculative-config '{"method": "eagle3", ..., "num_speculative_tokens": 3}' --exclude-drafter
alone = [
    case("plain1", many(1, 1, 4096, 0), 0, 1),
    case("verify1", many(1, 4, 4096, 3), 0, 2),
    case("plain8", many(8, 1, 4096, 0), 0, 3),
    case("verify8", many(8, 4, 4096, 3), 0, 4),
    case("verify8k1", many(8, 2, 4096, 1), 0, 5),
    case("prefill", many(1, 8192, 8192, 0), 0, 6),
]
# the same server with its drafter timed (K=3), and one of num_speculative_tokens 1
k3 = [
    case("verify1", many(1, 4, 4096, 3), 3, 7),
    case("verify8", many(8, 4, 4096, 3), 3, 8),
    case("verify8k1", many(8, 2, 4096, 1), 3, 9),
]
k1 = [case("verify8k1", many(8, 2, 4096, 1), 1, 10)]
for name, cases in (("exclude_drafter", alone), ("k3", k3), ("k1", k1)):
    with open(f"{out}/bench_forward_eagle3_{name}.json", "w") as f:
        json.dump(cases, f, indent=2)
