"""The oracle bound: the speedup if every step had drafted exactly what it would get accepted.

A speculative step of a request drafts ``d`` tokens and gets ``a`` of them accepted; it emits
``a + 1``. Had it drafted ``min(a, K)`` (what would be accepted, within the method's K), it would emit
the same tokens and waste no draft. What that saves depends on what a drafted token costs, so the bound
rests on a cost model, stated here and in README's "How the numbers are made":

- **A step costs a plain step times ``1 + c x drafted tokens``** (drafting a token and verifying it,
  whatever was accepted). No fixed cost of speculating is removed: the oracle still drafts, it only
  drafts no token that would be rejected.
- **c is fitted to the cell's own timing** (``per_token_cost``): the cell's mean step time (decode time
  over steps, from each request's per-step counts) over its run's baseline TPOT at the same concurrency
  is ``D = 1 + c x drafted per step``; at least 0. So a step costing what it cost measured, and the oracle
  step costing ``D - c x rejected drafts per step``: ``oracle speedup = measured speedup x D / D_oracle``.
- **What vLLM reports caps the bound.** Its per-step counts (``--per-request-spec-decode-metrics
  detailed``, ``per_step_accepted`` / ``per_step_drafted``) cannot say how many more a step that
  accepted all it drafted would have accepted: the oracle drafts what the method proposed, never more.
  Steps that drafted nothing are not in vLLM's arrays; they emit one token and cost a plain step.

SpecDecode-Bench's traces (Liu et al., arXiv 2601.11580) give, at every generated position, how many
tokens a step starting there would emit (``acc_len``, uncapped): there the oracle drafts ``min(acc_len - 1,
K)`` at each step, against a fixed K that drafts K at each (``trace_speedup``), under the same model with c
and a per-step drafting cost from their H100 simulator (``SIMULATOR_H100_8B``).

    oracle.cell_gain(requests, baseline_tpot_ms)          # D / D_oracle of one cell
    oracle.trace_speedup(acc_len, k=20, cost=SIMULATOR_H100_8B)   # None = oracle, else a fixed K
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from specscope.errors import InputError

__all__ = [
    "StepCost",
    "SIMULATOR_H100_8B",
    "Steps",
    "steps_of",
    "per_token_cost",
    "cell_gain",
    "request_gains",
    "trace_speedup",
    "read_trace",
    "trace_summary",
    "ORACLE_COLUMNS",
]


@dataclass(frozen=True)
class StepCost:
    """A speculative step's cost in plain steps: ``1 + per_token x drafted + per_step`` (a drafting pass)."""

    per_token: float
    per_step: float = 0.0

    def of(self, drafted) -> np.ndarray:
        """The cost of steps drafting ``drafted`` tokens each, in plain steps."""
        drafted = np.asarray(drafted, dtype=float)
        return 1.0 + self.per_token * drafted + np.where(drafted > 0, self.per_step, 0.0)


# SpecDecode-Bench's simulator (predictor.py) for Llama-3.1-8B on an H100 at batch 1: 5.89 ms a step plus
# 21.0 us per batched token; ngram's drafting ~0.6% of a verify step.
SIMULATOR_H100_8B = StepCost(per_token=0.021 / (5.89 + 0.021), per_step=0.006)


@dataclass(frozen=True)
class Steps:
    """One request's decode: its steps that drafted (``drafted``, ``accepted``) and those that did not."""

    drafted: np.ndarray
    accepted: np.ndarray
    plain: int  # steps without a draft: one token each

    @property
    def count(self) -> int:
        """Decode steps, with and without a draft."""
        return len(self.drafted) + self.plain

    @property
    def tokens(self) -> int:
        """Tokens the steps emitted: accepted drafts plus one of the target's per step."""
        return int(self.accepted.sum()) + len(self.accepted) + self.plain

    @property
    def wasted(self) -> int:
        """Draft tokens rejected."""
        return int((self.drafted - self.accepted).sum())


def steps_of(accepted: Sequence | None, drafted: Sequence | None, output_tokens) -> Steps | None:
    """A request's steps from vLLM's per-step arrays and its output length (the first token comes from
    prefill; the steps without a draft are the rest); None without arrays."""
    if accepted is None or drafted is None or len(accepted) != len(drafted) or not len(drafted):
        return None
    a, d = np.asarray(accepted, dtype=float), np.asarray(drafted, dtype=float)
    plain = max(int(output_tokens or 0) - 1 - int(a.sum() + len(a)), 0)
    return Steps(d, a, plain)


def per_token_cost(step_ratio: float, drafted_per_step: float) -> float:
    """c of ``D = 1 + c x drafted per step`` from a cell's step time over a plain step (``D``); at least 0."""
    if not drafted_per_step or not np.isfinite(step_ratio):
        return 0.0
    return max(0.0, (step_ratio - 1.0) / drafted_per_step)


def _decode_ms(row) -> float:
    return float(row["e2el_ms"]) - float(row["ttft_ms"])


def cell_gain(requests: pd.DataFrame, baseline_tpot_ms: float) -> dict | None:
    """A cell's oracle: ``gain`` (D / D_oracle), ``step_ratio`` (D), ``per_token_cost`` (c), ``tokens_per_step``,
    ``wasted_per_step`` and ``requests`` (those with per-step counts); None when none has them."""
    every = [
        (steps_of(r["per_step_accepted"], r["per_step_drafted"], r["output_tokens"]), _decode_ms(r))
        for r in requests.to_dict("records")
    ]
    found = [(s, ms) for s, ms in every if s is not None and s.count]
    if not found or not baseline_tpot_ms or not np.isfinite(baseline_tpot_ms):
        return None
    steps = sum(s.count for s, _ in found)
    ratio = sum(ms for _, ms in found) / steps / baseline_tpot_ms
    cost = per_token_cost(ratio, sum(float(s.drafted.sum()) for s, _ in found) / steps)
    wasted = sum(s.wasted for s, _ in found) / steps
    return {
        "gain": ratio / max(ratio - cost * wasted, 1e-9),
        "step_ratio": ratio,
        "per_token_cost": cost,
        "tokens_per_step": sum(s.tokens for s, _ in found) / steps,
        "wasted_per_step": wasted,
        "requests": len(found),
    }


def request_gains(requests: pd.DataFrame, baseline_tpot_ms: float, cost: float) -> pd.DataFrame:
    """Each request with per-step counts: its ``decode_speedup`` (the baseline's TPOT over its own), its
    ``oracle_speedup`` (that x D_r / D_r,oracle under the cell's c), ``tokens_per_step`` and ``wasted``."""
    rows = []
    for r in requests.to_dict("records"):
        s = steps_of(r["per_step_accepted"], r["per_step_drafted"], r["output_tokens"])
        if s is None or not s.count or not r.get("tpot_ms"):
            continue
        ratio = _decode_ms(r) / s.count / baseline_tpot_ms
        gain = ratio / max(ratio - cost * s.wasted / s.count, 1e-9)
        speedup = baseline_tpot_ms / float(r["tpot_ms"])
        rows.append(
            {
                "prompt_id": r["prompt_id"],
                "decode_speedup": speedup,
                "oracle_speedup": speedup * gain,
                "tokens_per_step": s.tokens / s.count,
                "wasted": s.wasted,
                "steps": s.count,
            }
        )
    return pd.DataFrame(
        rows, columns=["prompt_id", "decode_speedup", "oracle_speedup", "tokens_per_step", "wasted", "steps"]
    )


def trace_speedup(acc_len: Sequence[int], k: int, cost: StepCost, fixed: bool = False) -> float:
    """Speedup over plain decoding of one traced request: each step starting at position i emits
    ``min(acc_len[i], K + 1)`` tokens, drafting what it would get accepted (the oracle) or K (``fixed``)."""
    acc = np.asarray(acc_len, dtype=int)
    if not len(acc):
        raise InputError("The trace has no generated positions.")
    i, cost_sum = 0, 0.0
    while i < len(acc):
        emitted = int(min(acc[i], k + 1))
        cost_sum += float(cost.of(k if fixed else emitted - 1))
        i += emitted
    return len(acc) / cost_sum


def read_trace(path: Path, method: str = "ngram") -> list[list[int]]:
    """Each request's ``acc_len`` for ``method`` (``ngram`` or ``eagle``) from a SpecDecode-Bench
    ``combined_<dataset>.jsonl``; requests whose trace is shorter than their output are left out."""
    out = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise InputError(f"Cannot read the trace file {path}: {exc}.") from exc
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
            acc = (record.get(f"acc_{method}") or {}).get("acc_len") or []
        except (ValueError, AttributeError) as exc:
            raise InputError(f"{Path(path).name} line {number} is not a SpecDecode-Bench record.", line=number) from exc
        if acc and len(acc) == len(record.get("generated_token_ids") or ()):
            out.append([int(v) for v in acc])
    return out


def trace_summary(
    traces: Iterable[Sequence[int]], ks: Sequence[int], k_max: int, cost: StepCost = SIMULATOR_H100_8B
) -> dict:
    """Mean speedup over the traced requests: the oracle within ``k_max`` and each fixed K of ``ks``."""
    traces = list(traces)
    fixed = {k: float(np.mean([trace_speedup(t, k, cost, fixed=True) for t in traces])) for k in ks}
    best = max(fixed, key=fixed.__getitem__)
    return {
        "requests": len(traces),
        "oracle": float(np.mean([trace_speedup(t, k_max, cost) for t in traces])),
        "fixed": fixed,
        "best_k": best,
        "best_fixed": fixed[best],
    }


ORACLE_COLUMNS = ("oracle_gain", "oracle_requests", "step_ratio", "per_token_cost", "wasted_per_step")
