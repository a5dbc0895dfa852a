"""How far a tool's output throughput could move from request to request: its sample size and variance,
from the per-request records the export holds, so the store gives the cell a 95% interval.

At a fixed concurrency ``c`` the benchmark keeps ``c`` requests in flight, so (Little's law) its output
throughput is about ``c * sum(tokens) / sum(latency)``, a ratio of sums over the requests. Its standard
error (delta method) comes from the residuals ``tokens_i - R * latency_i``: linearised, request ``i``
counts as ``T * (1 + (tokens_i - R * latency_i) / (R * mean latency))``, whose mean is ``T`` and whose
sample variance over ``n`` is the squared standard error. ``T`` is the file's own throughput, so the
estimate is the tool's and only the relative spread comes from the requests. It covers how requests
differ (prompts, acceptance, lengths), not how a rerun on a busier machine would differ.

    throughput_spread([32, 32, 30], [0.41, 0.45, 0.39], concurrency=2, throughput=118.1)  # -> (3, var)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["throughput_spread"]


def throughput_spread(
    tokens: Sequence[float | None], latencies_s: Sequence[float | None], concurrency, throughput
) -> tuple[int, float] | tuple[None, None]:
    """(requests, variance of their linearised throughputs) for a cell at a fixed concurrency; (None,
    None) without a concurrency, a throughput, or two requests with output and time."""
    if concurrency is None or not throughput or throughput <= 0:
        return None, None
    pairs = [(float(t), float(s)) for t, s in zip(tokens, latencies_s) if t is not None and s is not None and s > 0]
    if len(pairs) < 2:
        return None, None
    out, time = np.array(pairs).T
    ratio = out.sum() / time.sum()
    if ratio <= 0:
        return None, None
    linear = throughput * (1.0 + (out - ratio * time) / (ratio * time.mean()))
    return len(pairs), float(linear.var(ddof=1))
