"""``specscope import`` and ``specscope speedup``: the results store from the shell.

``import`` says which method label it took as the baseline. ``speedup --json`` gives each
figure with its 95% interval (``speedup_lo``/``speedup_hi``, ``speedup_interval`` says how it
was made; null bounds for a single run) and the run whose baseline it divides by
(``baseline_run_id``) and ``checks``, the hygiene checks its cell fails; with ``--best``, the best K is
the fastest of the cells no distorting check flags (``flagged_*`` name a higher figure left out for its
checks), ``tied_ks`` lists the K the best one cannot be told apart from, and a group without a matching
baseline is left out (said on stderr), since none of its K has a speedup. The text table names each row's
hardware, shows "–" where a value is not known, and with ``--best`` leaves out the baselines (1.000x by
definition). ``--by category`` or ``prompt_length`` gives per-prompt speedups by group (``--slower``: the
prompts slower than their baseline); ``--by response_format`` puts each setup's speedup free and constrained
side by side, and ``--by vllm_version`` each setup's speedup per vLLM version, changed or tied against the
version before.
``--json`` rows also carry, where they can be computed, ``ceiling`` (the roofline throughput, tok/s:
``specscope.engine.roofline``) with ``ceiling_share`` (or ``ceiling_note``: why none), ``k_ceiling`` (K + 1) and
``oracle_speedup`` (the speedup had every step drafted only what was accepted: ``specscope.analysis.oracle``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np
import pandas as pd

from specscope.analysis import explore, explore_text, intervals, limits, per_prompt, versions
from specscope.cli import layout
from specscope.engine import roofline
from specscope.errors import ConfigError
from specscope.results import hygiene, identity, importers, structured, tool_exports
from specscope.results.store import Store
from specscope.schema import BASELINE_METHOD

__all__ = ["register", "BY"]

# ``speedup --by DIMENSION``: (store, filters, as_json) -> the text to print, one function per dimension
JSON_FIELDS = (
    "source",
    "model",
    "draft_model",
    "method",
    "dataset",
    "hardware",
    "host",
    "vllm_version",
    "torch_version",
    "weights",
    "acceptance",
    "concurrency",
    "k",
    "speedup",
    "speedup_lo",
    "speedup_hi",
    "speedup_interval",
    "acceptance_length",
    "acceptance_rate",
    "output_throughput",
    "output_throughput_lo",
    "output_throughput_hi",
    "repeats",
    "baseline_throughput",
    "baseline_repeats",
    "baseline_run_id",
    "run_id",
    "response_format",
    "setup",
    "checks",
    "ceiling",
    "ceiling_share",
    "ceiling_note",
    "k_ceiling",
    "oracle_speedup",
)
# with --best: the K it cannot be told apart from, what every run of its point measured, and the higher figure a
# distorting check kept from being the best (its K, figure and checks)
BEST_JSON_FIELDS = (
    "tied_ks",
    "point_runs",
    "point_speedup",
    "point_speedup_lo",
    "point_speedup_hi",
    "flagged_k",
    "flagged_speedup",
    "flagged_speedup_lo",
    "flagged_speedup_hi",
    "flagged_checks",
)


def _column_map(text: str | None) -> dict[str, str] | None:
    if not text:
        return None
    pairs = {}
    for part in text.split(","):
        canonical, sep, theirs = part.partition("=")
        if not sep or not canonical.strip() or not theirs.strip():
            raise ConfigError(
                f"--map entry {part!r} is not canonical=column; e.g. --map model=Model,concurrency=Users."
            )
        pairs[canonical.strip()] = theirs.strip()
    return pairs


def _import(args: argparse.Namespace) -> int:
    overrides = {
        key: getattr(args, key)
        for key in ("method", "k", "draft_model", "hardware", "label", "dataset", "model", "concurrency")
        if getattr(args, key) is not None
    }
    for path in args.paths:
        result = importers.import_file(path, source=args.source, column_map=_column_map(args.map), overrides=overrides)
        print(f"imported {result.rows} rows from {path} ({result.format}) -> {result.path}")
        for note in result.notes:
            print(f"  {note}")
    return 0


def _clean(value):
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_clean(v) for v in value]
    if value is None or value is pd.NA or isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        return _clean(value.item())
    return value


# --by response_format: the rows of each setup free and constrained, and the columns the text table shows
SIDE_BY_SIDE = {
    "response_format": (
        structured.by_response_format,
        (
            "setup",
            "concurrency",
            "k",
            "format",
            "speedup",
            "acceptance_length",
            "valid_share",
            "max_itl_ms",
            "baseline_run_id",
        ),
    )
}
SIDE_BY_SIDE_JSON_FIELDS = ("format", "response_format", "valid_share", "max_itl_ms", "setup")


def _side_by_side(dimension: str):
    """A ``--by`` report: (store, filters, as_json) -> the text to print."""
    query, shown = SIDE_BY_SIDE[dimension]

    def report(store: Store, filters: dict, as_json: bool) -> str | list:
        frame = query(store, filters)
        if as_json:
            fields = JSON_FIELDS + tuple(
                f for f in SIDE_BY_SIDE_JSON_FIELDS if f in frame.columns and f not in JSON_FIELDS
            )
            return json.dumps([{f: _clean(rec.get(f)) for f in fields} for rec in frame.to_dict("records")], indent=1)
        if frame.empty:
            return [f"no setup was measured along {dimension}; `specscope bench --help` says how"]
        table = frame[list(shown)].assign(speedup=[intervals.value_text(r) for r in frame.to_dict("records")])
        return [table.round(3).rename(columns=lambda c: c.replace("_", " ").replace("itl", "ITL"))]

    return report


# --by DIMENSION: (store, filters, as_json) -> the text to print
BY = {
    "category": per_prompt.report_by_category,
    "prompt_length": per_prompt.report_by_prompt_length,
    "vllm_version": versions.speedup_by,
    **{dimension: _side_by_side(dimension) for dimension in SIDE_BY_SIDE},
}


def _speedup(args: argparse.Namespace) -> int:
    filters = {
        key: values
        for key in (
            "source",
            "model",
            "draft_model",
            "method",
            "dataset",
            "hardware",
            "vllm_version",
            "weights",
            "acceptance",
            "concurrency",
            "k",
            "run_id",
        )
        if (values := getattr(args, key))
    }
    if args.by or args.slower:
        report = (BY[args.by] if args.by else per_prompt.report_slower)(Store(), filters, args.json)
        print(report if args.json else layout.render(report, _width(args)))
        return 0
    db = Store()
    frame = db.speedup(filters, best=args.best)
    if args.best:
        unmatched = frame["speedup"].isna()
        if unmatched.any():  # no baseline to divide by: no K of the group can be called best
            print(
                layout.wrap(
                    f"specscope: {int(unmatched.sum())} group(s) have no matching baseline (method none, "
                    "same model, dataset, hardware, host, vLLM and torch versions, weights, output length, "
                    "temperature, concurrency and request rate) and are left out."
                ),
                file=sys.stderr,
            )
            frame = frame[~unmatched]
        frame = explore.with_point_means(frame, explore.speedup_vs_k(db, filters))
    frame = frame.assign(setup=identity.unique_labels(frame.to_dict("records")), checks=hygiene.cell_checks(frame))
    if args.json:  # the roofline throughput ceiling and the oracle bound, where they can be computed
        frame = limits.with_oracle(roofline.with_ceilings(frame), limits.oracle_cells(db, filters)).rename(
            columns={"ceiling_tok_s": "ceiling"}
        )
    fields = JSON_FIELDS + (BEST_JSON_FIELDS if args.best else ())
    if args.json:
        records = [{f: _clean(rec.get(f)) for f in fields} for rec in frame.to_dict("records")]
        print(json.dumps(records, indent=1))
        return 0
    if frame.empty:
        print("no rows match; `specscope import FILE` adds results")
        return 0
    if args.best:  # a baseline is 1.000x by definition: it is no best K of anything
        frame = frame[frame["method"] != BASELINE_METHOD]
    records = frame.to_dict("records")
    print(layout.fit_table(_speedup_table(frame, records, args.best, args.wide), _width(args)))
    return 0


def _speedup_table(frame: pd.DataFrame, records: list[dict], best: bool, wide: bool) -> pd.DataFrame:
    """The text table: each row's setup (its name says every key that separates it), K, concurrency and
    speedup; ``wide`` adds a column per key (vLLM, response format, weights, ...), the run always."""
    shown = ["setup"]
    if wide:
        shown += [
            "source",
            "model",
            "draft_model",
            "method",
            "dataset",
            "hardware",
            *(k for k in identity.varying(frame) if k not in ("source", "hardware", "run_id")),
        ]
    table = frame[[*shown, "concurrency", "k"]].rename(
        columns={
            k: identity.COLUMN_NAMES[k] for k in shown if k in identity.COLUMN_NAMES and k not in ("source", "hardware")
        }
    )
    table = table.assign(speedup=[intervals.value_text(r) for r in records])
    if "k_schedule" in frame:  # a schedule's server drafts K by batch size: its K column says so
        table["k"] = [f"{k} ({s})" if isinstance(s, str) and s else k for k, s in zip(frame["k"], frame["k_schedule"])]
    if "response format" in table:
        table["response format"] = [identity.format_name(v) for v in frame["response_format"]]
    baseline = {
        "baseline from": [
            "its run" if base == run else base for run, base in zip(frame["run_id"], frame["baseline_run_id"])
        ]
    }
    if best:
        return table.assign(
            tied=[explore_text.tie_text(r) for r in records],
            checks=[explore_text.checks_text(r) or "✓" for r in records],
            **{
                "left out": [explore_text.passed_over_text(r) for r in records],
                "measured by": [explore_text.point_runs_text(r) for r in records],
            },
            **baseline,
        )
    return table.assign(run=frame["run_id"], **baseline)


def _width(args: argparse.Namespace) -> int | None:
    """The table's width: the terminal's, or none with --wide."""
    return None if args.wide else layout.terminal_width()


def _given_help(field: str, what: str) -> str:
    """An import option's help, naming the tools' files that never state its field."""
    lacking = tool_exports.unstated(field)
    return f"set {what} on every imported row" + (f" ({lacking} does not state it)" if lacking else "")


def register(subparsers) -> None:
    """Add ``specscope import`` and ``specscope speedup``."""
    imp = subparsers.add_parser(
        "import",
        help=f"import benchmark results ({importers.known_formats()}, or CSV/Parquet with --map)",
        description=f"A benchmark tool's export ({tool_exports.names()}) does not say which "
        "speculative decoding the server ran: give it for the whole file, --method none for "
        "the baseline or e.g. --method ngram --k 4 (and --hardware). A value the file "
        "states wins; one that contradicts it is refused.",
    )
    imp.add_argument("paths", nargs="+", metavar="PATH")
    imp.add_argument("--source", help="source name for the imported rows")
    imp.add_argument("--map", help="column map canonical=column,... for foreign CSV/Parquet")
    for key in ("method", "draft-model", "hardware", "label", "dataset", "model"):
        imp.add_argument(f"--{key}", help=_given_help(key.replace("-", "_"), key.replace("-", "_")))
    imp.add_argument("--k", type=int, help=_given_help("k", "k (speculative tokens)"))
    imp.add_argument("--concurrency", type=int, help=_given_help("concurrency", "the concurrency"))
    imp.set_defaults(func=_import)

    sp = subparsers.add_parser("speedup", help="speedup over the matching baseline, per K and concurrency")
    for key in (
        "source",
        "model",
        "draft-model",
        "method",
        "dataset",
        "hardware",
        "vllm-version",
        "weights",
        "acceptance",
        "run-id",
    ):
        sp.add_argument(f"--{key}", action="append", help="filter (repeatable)")
    sp.add_argument("--concurrency", type=int, action="append", help="filter (repeatable)")
    sp.add_argument("--k", type=int, action="append", help="filter (repeatable)")
    sp.add_argument(
        "--best",
        action="store_true",
        help="keep the best K per source, model, draft, method, dataset, hardware, vLLM and torch "
        "versions, weights, acceptance and concurrency",
    )
    sp.add_argument(
        "--by",
        choices=sorted(BY),
        help="category, prompt_length: per-prompt speedup and acceptance by prompt category or "
        "prompt-length bucket (each prompt paired with its run's baseline); response_format: "
        "each setup's speedup free vs constrained, with intervals; vllm_version: each setup "
        "measured on two or more vLLM versions, its speedup per version with its 95%% interval, "
        "and whether it changed against the version before (the intervals apart) or tied",
    )
    sp.add_argument("--slower", action="store_true", help="list the prompts that ran slower than their baseline")
    sp.add_argument("--json", action="store_true", help="print a JSON array")
    sp.add_argument(
        "--wide",
        action="store_true",
        help="a column for every key that separates setups, and no "
        "column narrowed or left out to fit the terminal (160 columns where output is no terminal)",
    )
    sp.set_defaults(func=_speedup)
