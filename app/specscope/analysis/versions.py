"""The same setup's speedup on several vLLM versions: did upgrading vLLM change it?

A setup here is ``SETUP_KEYS`` without the vLLM and torch versions (same source, model, draft,
method, dataset, hardware, host, weights and acceptance), at one concurrency and K. Each version's
speedup divides by that version's own baseline (the versions are baseline-match keys), with its
95% interval. Two versions next to each other (oldest first) differ for real only where the one tie
rule (``specscope.ties``) tells them apart; else they tie, and a version without an interval (one run)
cannot be told apart from the other.

    per_version(store)   # one row per (setup, concurrency, K, vLLM) of setups measured on 2+ versions
    changes(frame)       # one row per neighbouring pair of versions: changed (faster/slower), tie, unknown
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from specscope.analysis import explore, intervals
from specscope.analysis.verdict import bounded, compare_speedups
from specscope.engine.catalog import version_tuple
from specscope.results.store import Store
from specscope.schema import SETUP_KEYS, VERSION_KEYS

__all__ = [
    "SAME_SETUP",
    "per_version",
    "changes",
    "verdict",
    "table",
    "speedup_by",
    "JSON_FIELDS",
    "CHANGED",
    "TIE",
    "UNKNOWN",
]

SAME_SETUP = tuple(key for key in SETUP_KEYS if key not in VERSION_KEYS)  # equal across the versions compared
CHANGED, TIE, UNKNOWN = "changed", "tie", "no interval"
JSON_FIELDS = (
    "setup",
    *SAME_SETUP,
    "concurrency",
    "k",
    *VERSION_KEYS,
    "speedup",
    "speedup_lo",
    "speedup_hi",
    "repeats",
    "runs",
    "run_ids",
    "verdict",
    "direction",
)
_COLUMNS = [
    *SAME_SETUP,
    "concurrency",
    "k",
    *VERSION_KEYS,
    "speedup",
    "speedup_lo",
    "speedup_hi",
    "output_throughput",
    "acceptance_length",
    "repeats",
    "runs",
    "run_ids",
]


def _version_order(version) -> tuple:
    return version_tuple(version) if isinstance(version, str) else ()


def per_version(store: Store, filters: Mapping[str, Sequence] | None = None) -> pd.DataFrame:
    """Speedup with its 95% interval per (setup, concurrency, K, vLLM version), for the setups measured
    on two or more vLLM versions; ``setup`` names the setup without its version, ``version`` the vLLM
    (with its torch where one vLLM version was measured with two), oldest version first."""
    points = store.speedup_points(filters, ["acceptance_length"], fixed_k=True)
    points = points[points["vllm_version"].notna()] if not points.empty else points
    if points.empty:
        return pd.DataFrame(columns=[*_COLUMNS, "setup", "version"])
    group = [*SAME_SETUP, "concurrency", "k"]
    versions = points.groupby(group, dropna=False)["vllm_version"].transform("nunique")
    points = points[versions >= 2]
    if points.empty:
        return pd.DataFrame(columns=[*_COLUMNS, "setup", "version"])
    points = points.assign(_order=[_version_order(v) for v in points["vllm_version"]])
    points = points.sort_values([*group, "_order", "torch_version"], kind="stable", na_position="first")
    labels = [explore.setup_label(row) for row in points[list(SAME_SETUP)].to_dict("records")]
    # a vLLM version measured with two torches (or one not stated) names its torch
    twice = points.groupby([*group, "vllm_version"], dropna=False)["vllm_version"].transform("size") > 1
    named = [
        f"{v} (torch {t if isinstance(t, str) else '?'})" if dup else v
        for v, t, dup in zip(points["vllm_version"], points["torch_version"], twice)
    ]
    return points[_COLUMNS].assign(setup=labels, version=named).reset_index(drop=True)


def verdict(before: Mapping, after: Mapping) -> str:
    """``changed`` where the tie rule tells the two apart, ``tie`` where it does not, ``no interval``
    where either has none (a single run)."""
    return _compare(before, after)[0]


def _compare(before: Mapping, after: Mapping) -> tuple[str, str]:
    """``verdict`` and its direction (``faster``/``slower`` where it changed, else ``""``), as the
    deploy verdict compares two speedups (``specscope.analysis.verdict.compare_speedups``)."""
    if not (bounded(before) and bounded(after)):
        return UNKNOWN, ""
    direction = compare_speedups(after, before)[0]
    return (TIE, "") if direction == "tie" else (CHANGED, direction)


def _pairs(frame: pd.DataFrame):
    """(index before, index after) of each version and the one before it, per setup, concurrency and K."""
    for _, points in frame.groupby(["setup", "concurrency", "k"], sort=False, dropna=False):
        yield from zip(points.index, points.index[1:])


def changes(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per setup, concurrency and K and each version next to the one before it (``frame`` from
    ``per_version``): both speedups with intervals, the ratio, and the ``verdict`` (``direction``
    ``faster``/``slower`` where it changed)."""
    columns = [
        "setup",
        "concurrency",
        "k",
        "from_version",
        "to_version",
        "from_speedup",
        "to_speedup",
        "ratio",
        "verdict",
        "direction",
    ]
    rows = []
    for i, j in _pairs(frame):
        before, after = frame.loc[i].to_dict(), frame.loc[j].to_dict()
        result, direction = _compare(before, after)
        rows.append(
            {
                "setup": after["setup"],
                "concurrency": after["concurrency"],
                "k": after["k"],
                "from_version": before["version"],
                "to_version": after["version"],
                "from_speedup": intervals.value_text(before),
                "to_speedup": intervals.value_text(after),
                "ratio": after["speedup"] / before["speedup"] if before["speedup"] else np.nan,
                "verdict": result,
                "direction": direction,
            }
        )
    return pd.DataFrame(rows, columns=columns)


def table(store: Store, filters: Mapping[str, Sequence] | None = None) -> pd.DataFrame:
    """``specscope speedup --by vllm_version``: each setup's speedup per version with its interval and,
    from the second version on, whether it changed against the version before it (``verdict``)."""
    frame = per_version(store, filters)
    out = frame.assign(
        speedup_text=[intervals.value_text(row) for row in frame.to_dict("records")], verdict="", direction=""
    )
    for i, j in _pairs(frame):
        out.loc[j, ["verdict", "direction"]] = _compare(frame.loc[i], frame.loc[j])
    return out


def speedup_by(store: Store, filters: Mapping[str, Sequence] | None = None, as_json: bool = False) -> str | list:
    """What ``specscope speedup --by vllm_version`` prints: ``table`` as a JSON array, or as a report (a table,
    then each run of a figure folded over several runs) that ``specscope.cli.layout.render`` prints."""
    frame = table(store, filters)
    if as_json:
        return json.dumps(json.loads(frame[list(JSON_FIELDS)].to_json(orient="records")), indent=1)
    if frame.empty:
        return ["no setup has speedups on two or more vLLM versions for these filters"]
    shown = (
        frame[["setup", "concurrency", "k", "version"]]
        .rename(columns={"version": "vllm"})
        .assign(speedup=frame["speedup_text"], change=(frame["verdict"] + " " + frame["direction"]).str.strip())
    )
    folded = frame[frame["runs"] > 1]
    if folded.empty:
        return [shown]
    keys = [*SAME_SETUP, "concurrency", "k", *VERSION_KEYS]
    runs = explore.point_runs(store, filters).merge(folded[[*keys, "version"]], on=keys)
    lines = [
        f"  vLLM {r['version']}, K={r['k']:.0f}, concurrency {r['concurrency']:.0f}: run {r['run_id']} "
        f"{intervals.value_text(r)}"
        for r in runs.to_dict("records")
    ]
    return [shown, "Each run of a figure that is a mean of several runs:", *lines]
