"""Where speculation pays, per prompt: paired per-prompt speedups, by category and by prompt length.

Each request's own decode rate is its ``output_tokens / e2el`` (tokens per second as its user sees
them, time to first token included). A prompt's speedup in a method cell is the mean rate of its
requests there (repeats and cycled requests folded) over the mean rate of the same prompt's requests
in **the same run's baseline** at the same concurrency, with the same response formats and on the
same vLLM (PAIR_KEYS: the one place that says what must match), with a 95% Fieller interval when
both sides have two or more requests (``stats.ratio_intervals``). A group of prompts (a category, a
prompt-length bucket) reads the geometric mean of its prompts' speedups with a 95% t-interval on
their logs (so it stays above 0). A group of fewer than ``intervals.MIN_GROUP`` prompts has no
interval and its verdict is ``too few prompts``; a group whose interval holds 1 is a tie with the
baseline, which reads 1.000x. Acceptance is the mean of the prompts' per-request figures (null where
the server gave none), with an interval that stays inside what it measures
(``stats.bounded_mean_intervals``): acceptance length at least 1, acceptance rate within [0, 1].

Prompt-length buckets double from 64 prompt tokens (``<64``, ``64-127``, ... ``>=8192``), so a
set of short chat turns and one of long documents land in different buckets. Rows written
before requests recorded a ``category`` take it from the bundled set of the run's dataset by
prompt id; otherwise a prompt without one is ``uncategorised``.

    per_prompt.by(store, "category", {"run_id": ["sweep-cpu-smollm2-1a2b"]})
    per_prompt.slower(store)          # the prompts that ran slower than their baseline
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from specscope import formats, stats, ties
from specscope.analysis import intervals
from specscope.errors import ConfigError
from specscope.prompts import library
from specscope.results import identity
from specscope.results.store import Filters, Store
from specscope.schema import BASELINE_METHOD

__all__ = [
    "PAIR_KEYS",
    "VARIANT_SQL",
    "variant_label",
    "REQUEST_CELL_KEYS",
    "DIMENSIONS",
    "LENGTH_EDGES",
    "UNCATEGORISED",
    "per_prompt",
    "by",
    "runs",
    "group",
    "slower",
    "slower_rows",
    "length_bucket",
    "report_by_category",
    "report_by_prompt_length",
    "report_slower",
]

LEVEL = 0.95
# a request pairs with the baseline's of its prompt here; variant: the cell id after its concurrency, the
# same for a cell and its baseline (``-constrained`` with response formats, ``-vllm0.31.0`` on another vLLM)
PAIR_KEYS = ("run_id", "concurrency", "variant")
_CELL_SQL = "regexp_replace(q.cell_id, '-r[0-9]+$', '')"  # a request's cell, its repeat left out
VARIANT_SQL = f"regexp_extract({_CELL_SQL}, '-c[0-9]+(.*)$', 1)"  # of requests ``q``
REQUEST_CELL_KEYS = (*PAIR_KEYS, "cell", "method", "k")  # one method cell of a run (its repeats folded)
DIMENSIONS = {"category": "category", "prompt_length": "length_bucket"}
LENGTH_EDGES = (64, 128, 256, 512, 1024, 2048, 4096, 8192)  # prompt tokens; each bucket doubles
UNCATEGORISED = "uncategorised"
_OK_CELL = """EXISTS (SELECT 1 FROM results r WHERE r.run_id = q.run_id AND r.method = q.method
              AND r.k IS NOT DISTINCT FROM q.k AND r.concurrency IS NOT DISTINCT FROM q.concurrency
              AND coalesce(r.status, 'ok') = 'ok'{where})"""

# what a group's row holds about it: a summary frame's columns after its keys, and its JSON's
_GROUP_FIGURES = (
    "group",
    "prompts",
    "speedup",
    "speedup_lo",
    "speedup_hi",
    "verdict",
    "slower_prompts",
    "acceptance_length",
    "acceptance_length_lo",
    "acceptance_length_hi",
    "acceptance_rate",
    "acceptance_rate_lo",
    "acceptance_rate_hi",
)


def length_bucket(tokens) -> tuple[int, str]:
    """A prompt length's bucket: its order and its label (``64-127`` tokens)."""
    if tokens is None or pd.isna(tokens):
        return len(LENGTH_EDGES) + 1, "unknown"
    index = int(np.searchsorted(LENGTH_EDGES, int(tokens), side="right"))
    if index == 0:
        return 0, f"<{LENGTH_EDGES[0]}"
    if index == len(LENGTH_EDGES):
        return index, f"≥{LENGTH_EDGES[-1]}"
    return index, f"{LENGTH_EDGES[index - 1]}–{LENGTH_EDGES[index] - 1}"


def _sides_sql(where: str) -> str:
    """Per prompt of each ok cell: count, mean and variance of its successful requests' rates."""
    return f"""
        SELECT q.run_id, q.concurrency, {VARIANT_SQL} AS variant, {_CELL_SQL} AS cell, q.method, q.k, q.prompt_id,
               any_value(q.response_format) AS response_format,
               any_value(q.category) AS category, max(q.prompt_tokens) AS prompt_tokens,
               count(*) AS n, avg(1000.0 * q.output_tokens / q.e2el_ms) AS rate,
               var_samp(1000.0 * q.output_tokens / q.e2el_ms) AS var,
               avg(q.acceptance_rate) AS acceptance_rate, avg(q.acceptance_length) AS acceptance_length
        FROM requests q
        WHERE q.success AND q.e2el_ms > 0 AND q.output_tokens > 0
              AND {_OK_CELL.format(where=f" AND {where}" if where else "")}
        GROUP BY ALL"""


def per_prompt(db: Store, filters: Filters | None = None) -> pd.DataFrame:
    """One row per prompt of each speculative cell the filters keep (results columns, as
    ``Store.where``), paired with its run's baseline: ``speedup`` [``speedup_lo``, ``speedup_hi``]
    (Fieller; ``speedup_interval`` fieller, none or unbounded), ``requests`` and
    ``baseline_requests``, ``rate`` and ``baseline_rate`` (tokens/s), acceptance, ``category``,
    ``prompt_tokens`` and ``length_bucket``; the run's ``dataset``, ``model``, ``label``, ``output_len`` (the
    output tokens its requests asked for) and ``finished_at`` (its newest row's time)."""
    where, params = Store.where(filters)
    pair = " AND ".join(f"b.{k} IS NOT DISTINCT FROM m.{k}" for k in PAIR_KEYS)
    frame = db.query(
        f"""
        WITH m AS ({_sides_sql(where)}),
             b AS ({_sides_sql("")}),
             runs AS (SELECT run_id, any_value(dataset) AS dataset, any_value(model) AS model,
                             any_value(label) AS label, max(output_len) AS output_len,
                             max(created_at) AS finished_at FROM results GROUP BY run_id)
        SELECT m.* EXCLUDE (category, prompt_tokens, var), runs.dataset, runs.model, runs.label, runs.output_len,
               runs.finished_at,
               coalesce(m.category, b.category) AS category,
               coalesce(m.prompt_tokens, b.prompt_tokens) AS prompt_tokens, m.n AS requests, m.var,
               b.n AS baseline_requests, b.rate AS baseline_rate, b.var AS baseline_var
        FROM m JOIN b ON b.method = '{BASELINE_METHOD}' AND b.prompt_id = m.prompt_id AND {pair}
        LEFT JOIN runs ON runs.run_id = m.run_id
        WHERE m.method <> '{BASELINE_METHOD}'
        ORDER BY {", ".join(f"m.{k}" for k in REQUEST_CELL_KEYS)}, m.prompt_id""",
        [*params],
    ).drop(columns="n")
    low, high, how = stats.ratio_intervals(
        frame["rate"],
        frame["requests"],
        frame["var"],
        frame["baseline_rate"],
        frame["baseline_requests"],
        frame["baseline_var"],
        LEVEL,
        lower=0.0,
    )
    known = library.bundled_categories()
    categories = [
        c if isinstance(c, str) and c else known.get((d, p), UNCATEGORISED)
        for c, d, p in zip(frame["category"], frame["dataset"], frame["prompt_id"])
    ]
    buckets = [length_bucket(t) for t in frame["prompt_tokens"]]
    return frame.assign(
        speedup=frame["rate"] / frame["baseline_rate"],
        speedup_lo=low,
        speedup_hi=high,
        speedup_interval=how,
        category=categories,
        length_order=[o for o, _ in buckets],
        length_bucket=[label for _, label in buckets],
    ).drop(columns=["var", "baseline_var"])


def runs(rows: pd.DataFrame) -> list[str]:
    """The run ids of ``per_prompt`` rows, the newest first (its last cell's time), then by id."""
    finished = rows.groupby("run_id")["finished_at"].max()
    return (
        finished.reset_index()
        .sort_values(["finished_at", "run_id"], ascending=[False, True], kind="stable")["run_id"]
        .tolist()
    )


def _verdict(speedup: float, low: float, high: float) -> str:
    """``ties.outcome`` against the baseline (faster, slower or tie: the interval holds 1), or ``too few
    prompts`` (no interval)."""
    if pd.isna(low) or pd.isna(high):
        return intervals.TOO_FEW
    return ties.outcome(ties.Figure(speedup, low, high))


def _enough(counts: pd.Series) -> np.ndarray:
    """The counts of groups large enough for an interval, 0 for the others (no interval)."""
    return np.where(counts >= intervals.MIN_GROUP, counts, 0)


def by(db: Store, dimension: str, filters: dict | None = None) -> pd.DataFrame:
    """``group`` of the filters' ``per_prompt`` rows."""
    _column(dimension)  # an unknown dimension fails before the query
    return group(per_prompt(db, filters), dimension)


def _column(dimension: str) -> str:
    """The per-prompt column a dimension groups by; ConfigError for an unknown one."""
    if dimension not in DIMENSIONS:
        raise ConfigError(f"Per-prompt speedups group by {' or '.join(DIMENSIONS)}, not {dimension!r}.")
    return DIMENSIONS[dimension]


def group(rows: pd.DataFrame, dimension: str) -> pd.DataFrame:
    """Per method cell and ``group`` (a category, or a prompt-length bucket for ``prompt_length``)
    of ``per_prompt`` rows: ``prompts``, ``speedup`` (geometric mean of the prompts' speedups)
    [``speedup_lo``, ``speedup_hi``] (95% t-interval on the logs; none below ``intervals.MIN_GROUP``
    prompts), ``verdict`` (faster, slower, tie, too few prompts), ``slower_prompts``, acceptance
    length and rate with their bounded intervals (none below MIN_GROUP prompts with the figure);
    and each run's baseline at every concurrency and group, at 1.000x."""
    column = _column(dimension)
    names = ["dataset", "model", "label", *REQUEST_CELL_KEYS]
    if rows.empty:
        return pd.DataFrame(columns=[*names, *_GROUP_FIGURES])
    rows = rows.assign(
        group=rows[column],
        _log=np.log(rows["speedup"]),
        _slower=rows["speedup"] < 1.0,
        _order=rows["length_order"] if column == "length_bucket" else 0,
    )
    folded = (
        rows.groupby([*names, "_order", "group"], dropna=False, sort=True)
        .agg(
            prompts=("prompt_id", "count"),
            _mean_log=("_log", "mean"),
            _var_log=("_log", "var"),
            slower_prompts=("_slower", "sum"),
            acceptance_length=("acceptance_length", "mean"),
            _al_n=("acceptance_length", "count"),
            _al_var=("acceptance_length", "var"),
            acceptance_rate=("acceptance_rate", "mean"),
            _ar_n=("acceptance_rate", "count"),
            _ar_var=("acceptance_rate", "var"),
        )
        .reset_index()
    )
    low, high = stats.mean_intervals(_enough(folded["prompts"]), folded["_mean_log"], folded["_var_log"], LEVEL)
    al_low, al_high = stats.bounded_mean_intervals(
        _enough(folded["_al_n"]), folded["acceptance_length"], folded["_al_var"], LEVEL, lower=1.0
    )
    ar_low, ar_high = stats.bounded_mean_intervals(
        _enough(folded["_ar_n"]), folded["acceptance_rate"], folded["_ar_var"], LEVEL, lower=0.0, upper=1.0
    )
    folded = folded.assign(
        speedup=np.exp(folded["_mean_log"]),
        speedup_lo=np.exp(low),
        speedup_hi=np.exp(high),
        acceptance_length_lo=al_low,
        acceptance_length_hi=al_high,
        acceptance_rate_lo=ar_low,
        acceptance_rate_hi=ar_high,
    )
    folded["verdict"] = [
        _verdict(v, lo, hi) for v, lo, hi in zip(folded["speedup"], folded["speedup_lo"], folded["speedup_hi"])
    ]
    baselines = (
        folded.groupby(["dataset", "model", "label", *PAIR_KEYS, "_order", "group"], dropna=False)["prompts"]
        .max()
        .reset_index()
        .assign(
            cell=lambda f: [f"{BASELINE_METHOD}-k0-c{c}{v}" for c, v in zip(f["concurrency"], f["variant"])],
            method=BASELINE_METHOD,
            k=0,
            speedup=1.0,
            speedup_lo=1.0,
            speedup_hi=1.0,
            verdict="baseline",
            slower_prompts=0,
        )
    )
    out = pd.concat([baselines, folded], ignore_index=True)
    out["_sd"] = out["method"] != BASELINE_METHOD
    out = out.sort_values(["run_id", "concurrency", "_sd", "method", "k", "cell", "_order", "group"])
    return out[
        [*names, "group", *(c for c in out.columns if c not in (*names, "group") and not c.startswith("_"))]
    ].reset_index(drop=True)


def slower(db: Store, filters: Filters | None = None) -> pd.DataFrame:
    """``slower_rows`` of the filters' ``per_prompt`` rows."""
    return slower_rows(per_prompt(db, filters))


def slower_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The ``per_prompt`` rows that ran slower than their baseline (speedup below 1), slowest first,
    with ``within_noise``: their interval holds 1 (a tie, not a loss)."""
    rows = rows[rows["speedup"] < 1.0]
    rows = rows.assign(within_noise=(rows["speedup_hi"] >= 1.0).fillna(False).astype(bool))
    return rows.sort_values(["speedup", "run_id", "cell", "prompt_id"]).reset_index(drop=True)


def _json(frame: pd.DataFrame, columns: tuple[str, ...]) -> str:
    """The frame's ``columns`` as a JSON array (null for a missing number)."""
    return (
        frame[list(columns)]
        .astype(object)
        .where(frame[list(columns)].notna(), None)
        .to_json(orient="records", indent=1, force_ascii=False)
    )


def _cell(row) -> str:
    """``ngram K=4``, ``none``, with ``variant_label``."""
    name = row["method"] if row["method"] == BASELINE_METHOD else f"{row['method']} K={int(row['k'])}"
    return f"{name}{variant_label(row)}"


def variant_label(row) -> str:
    """`` constrained (json_schema)`` for a cell run with response formats, `` vLLM 0.31.0`` for one on
    another vLLM; ``""`` for neither."""
    variant = row.get("variant") or ""
    constrained = "-constrained" in variant and (formats.constrained_label(row.get("response_format")) or "constrained")
    vllm = re.search(r"-vllm(.+)$", variant)
    return "".join(f" {part}" for part in (constrained, vllm and identity.vllm_text(vllm.group(1))) if part)


_GROUP_JSON = ("run_id", "dataset", "model", "cell", "method", "k", "concurrency", *_GROUP_FIGURES)
_SLOWER_JSON = (
    "run_id",
    "dataset",
    "cell",
    "method",
    "k",
    "concurrency",
    "prompt_id",
    "category",
    "prompt_tokens",
    "length_bucket",
    "speedup",
    "speedup_lo",
    "speedup_hi",
    "within_noise",
    "requests",
    "baseline_requests",
    "acceptance_rate",
    "acceptance_length",
)


def _report(db: Store, dimension: str, filters: dict | None, as_json: bool) -> str | list:
    frame = by(db, dimension, filters)
    if as_json:
        return _json(frame, _GROUP_JSON)
    if frame.empty:
        return ["no per-prompt rows match: a run needs per-request rows of a baseline (none) and a method cell"]
    lines = [
        f"Per-prompt speedup by {dimension.replace('_', ' ')}: geometric mean over prompts of (request "
        "tok/s / the same prompt's in the run's baseline) [95% t-interval]; a baseline reads 1.000x."
    ]
    table = pd.DataFrame(
        {
            "run": frame["run_id"],
            "dataset": frame["dataset"],
            "cell": [_cell(r) for _, r in frame.iterrows()],
            "concurrency": frame["concurrency"],
            dimension: frame["group"],
            "prompts": frame["prompts"],
            "speedup": [_speedup_text(r) for _, r in frame.iterrows()],
            "verdict": frame["verdict"],
            "slower prompts": frame["slower_prompts"],
            "acceptance length": [
                intervals.text(
                    r["acceptance_length"],
                    r["acceptance_length_lo"],
                    r["acceptance_length_hi"],
                    digits=2,
                    why_none=_why_none(r),
                )
                for _, r in frame.iterrows()
            ],
        }
    )
    return [*lines, table]


def _speedup_text(row) -> str:
    if row["method"] == BASELINE_METHOD:
        return intervals.text(1.0, unit=intervals.TIMES, why_none="baseline")
    return intervals.text(
        row["speedup"], row["speedup_lo"], row["speedup_hi"], unit=intervals.TIMES, why_none=_why_none(row)
    )


def _why_none(row) -> str:
    """Why a group's figure has no interval (``2 prompts: too few for an interval``); '' when it has one."""
    return intervals.too_few(int(row["prompts"])) if row["prompts"] < intervals.MIN_GROUP else ""


def report_by_category(db: Store, filters: dict | None = None, as_json: bool = False) -> str | list:
    """``specscope speedup --by category``: ``by(db, "category")`` as JSON, or as prose and a table (a report
    ``specscope.cli.layout.render`` prints)."""
    return _report(db, "category", filters, as_json)


def report_by_prompt_length(db: Store, filters: dict | None = None, as_json: bool = False) -> str | list:
    """``specscope speedup --by prompt_length``: ``by(db, "prompt_length")`` as JSON or a report (prose and a
    table)."""
    return _report(db, "prompt_length", filters, as_json)


def report_slower(db: Store, filters: dict | None = None, as_json: bool = False) -> str | list:
    """``specscope speedup --slower``: the prompts slower than their baseline, as JSON or a report (prose and
    a table)."""
    frame = slower(db, filters)
    if as_json:
        return _json(frame, _SLOWER_JSON)
    if frame.empty:
        return ["no prompt ran slower than its baseline"]
    table = pd.DataFrame(
        {
            "run": frame["run_id"],
            "cell": [_cell(r) for _, r in frame.iterrows()],
            "concurrency": frame["concurrency"],
            "prompt": frame["prompt_id"],
            "category": frame["category"],
            "prompt tokens": frame["prompt_tokens"],
            "speedup": [
                intervals.text(r["speedup"], r["speedup_lo"], r["speedup_hi"], unit=intervals.TIMES)
                + (" tie (within noise)" if r["within_noise"] else "")
                for _, r in frame.iterrows()
            ],
            "acceptance length": frame["acceptance_length"].round(2),
        }
    )
    return [
        "Prompts slower than their run's baseline (request tok/s over the same prompt's baseline "
        "requests [95% Fieller interval]):",
        table,
    ]
