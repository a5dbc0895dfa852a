"""Acceptance over the output: acceptance length against the generated-token index, so decay shows.

vLLM's per-step counts (``per_step_accepted`` / ``per_step_drafted`` of each request, in order) place
every drafting step at the index of the first token it emits: ``1 + sum(accepted + 1)`` of the steps
before it (token 0 comes from prefill). Steps that drafted nothing are not in vLLM's arrays: where a
request has such steps (ngram and suffix draft only where they find a match) its indices count only the
tokens of drafting steps, so they read early, and ``placed`` says so (False) for the cell.

The output is cut into equal bins (``bin_width``: a power of two, about 16 bins over the longest output);
a bin's acceptance length is the mean, over the requests with a drafting step starting in it, of each
one's ``1 +`` mean accepted there, with a 95% interval over those requests (``stats.bounded_mean_intervals``,
at least 1). A cell's ``decay`` is its last bin's AL over its first's.

    curve(requests)                   # one cell's bins
    curves(store, {"run_id": [...]})  # every cell with per-step counts
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from specscope import stats
from specscope.analysis.per_prompt import VARIANT_SQL
from specscope.results.store import Store
from specscope.schema import BASELINE_METHOD

__all__ = ["step_positions", "bin_width", "curve", "curves", "CURVE_COLUMNS"]

Filters = Mapping[str, Sequence] | None
CURVE_COLUMNS = ("start", "end", "acceptance_length", "al_lo", "al_hi", "steps", "requests")


def step_positions(accepted: Sequence[int], output_tokens: int | None = None) -> tuple[np.ndarray, bool]:
    """The generated index at which each drafting step starts, and whether every step is placed (no step
    without a draft hides between them: ``1 + sum(accepted + 1) >= output_tokens``)."""
    a = np.asarray(accepted, dtype=int)
    starts = 1 + np.concatenate([[0], np.cumsum(a + 1)[:-1]]) if len(a) else np.zeros(0, dtype=int)
    placed = output_tokens is None or 1 + int((a + 1).sum()) >= int(output_tokens)
    return starts, placed


def bin_width(longest: int, bins: int = 16) -> int:
    """A power of two (at least 8) that cuts ``longest`` tokens into about ``bins`` bins."""
    return max(8, 1 << max(0, int(np.ceil(np.log2(max(longest, 1) / bins)))))


def curve(requests: pd.DataFrame, width: int | None = None) -> tuple[pd.DataFrame, bool]:
    """One cell's bins (CURVE_COLUMNS) from its requests (``per_step_accepted``, ``output_tokens``), and
    whether every step was placed."""
    per_request, placed_all = [], True
    for r in requests.to_dict("records"):
        accepted = r.get("per_step_accepted")
        if accepted is None or not len(accepted):
            continue
        starts, placed = step_positions(accepted, r.get("output_tokens"))
        placed_all &= placed
        per_request.append((starts, np.asarray(accepted, dtype=float)))
    if not per_request:
        return pd.DataFrame(columns=list(CURVE_COLUMNS)), placed_all
    width = width or bin_width(max(int(s.max()) for s, _ in per_request))
    rows: dict[int, list[tuple[float, int]]] = {}  # bin -> per request (mean accepted, steps)
    for starts, accepted in per_request:
        for b in np.unique(starts // width):
            chosen = accepted[starts // width == b]
            rows.setdefault(int(b), []).append((float(chosen.mean()), len(chosen)))
    out = []
    for b in sorted(rows):
        means = np.array([m for m, _ in rows[b]])
        steps = np.array([n for _, n in rows[b]])
        al = 1.0 + float(means.mean())
        low, high = stats.bounded_mean_intervals(
            len(means), al, means.var(ddof=1) if len(means) > 1 else np.nan, lower=1.0
        )
        out.append(
            {
                "start": b * width,
                "end": (b + 1) * width,
                "acceptance_length": al,
                "al_lo": float(low[0]),
                "al_hi": float(high[0]),
                "steps": int(steps.sum()),
                "requests": len(means),
            }
        )
    return pd.DataFrame(out, columns=list(CURVE_COLUMNS)), placed_all


def curves(store: Store, filters: Filters = None) -> pd.DataFrame:
    """Every speculative cell with per-step counts: its bins, with the cell's run, method, K, concurrency,
    variant, model, hardware and dataset, ``placed`` and ``decay`` (last bin's AL over the first's)."""
    where, params = store.where(filters)
    requests = store.query(
        f"""
        SELECT q.run_id, q.method, q.k, q.concurrency, {VARIANT_SQL} AS variant,
               regexp_replace(q.cell_id, '-r[0-9]+$', '') AS cell, q.output_tokens, q.per_step_accepted,
               any_value(r.model) OVER (PARTITION BY q.run_id) AS model,
               any_value(r.hardware) OVER (PARTITION BY q.run_id) AS hardware,
               any_value(r.dataset) OVER (PARTITION BY q.run_id) AS dataset
        FROM requests q JOIN (SELECT DISTINCT run_id, method, k, concurrency, model, hardware, dataset
                              FROM results r WHERE coalesce(r.status, 'ok') = 'ok' AND {where}) r
             ON r.run_id = q.run_id AND r.method = q.method AND r.k IS NOT DISTINCT FROM q.k
                AND r.concurrency IS NOT DISTINCT FROM q.concurrency
        WHERE q.success AND q.method <> '{BASELINE_METHOD}' AND len(q.per_step_accepted) > 0""",
        params,
    )
    keys = ["run_id", "model", "hardware", "dataset", "method", "k", "concurrency", "variant", "cell"]
    frames = []
    for key, group in requests.groupby(keys, dropna=False, sort=True):
        bins, placed = curve(group)
        if bins.empty:
            continue
        decay = bins["acceptance_length"].iloc[-1] / bins["acceptance_length"].iloc[0]
        frames.append(bins.assign(**dict(zip(keys, key)), placed=placed, decay=decay))
    if not frames:
        return pd.DataFrame(columns=[*keys, *CURVE_COLUMNS, "placed", "decay"])
    return pd.concat(frames, ignore_index=True)[[*keys, *CURVE_COLUMNS, "placed", "decay"]]
