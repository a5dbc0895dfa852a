"""What a setup is called: one place that names the keys telling one measured setup from another.

Two rows that differ in any of ``IDENTITY_KEYS`` (vLLM and torch version, response format, dummy
weights, synthetic acceptance, hardware, host, source, run) are two setups or two runs, never one;
every page, plot, CLI line and JSON record that shows a number names its setup here, so two rows
never read alike, and a figure folded over several runs says so (``folded_text``).

    setup_label(row)                 # 'SmolLM2-135M-Instruct · ngram · code-editing · cpu-2core · vLLM 0.32.0'
    unique_labels(rows)              # setup_label, plus torch, source, host or run where two would read alike
    varying(frame)                   # the identity columns whose value differs between a frame's rows
    folded_text(2)                   # 'mean of 2 runs'
    keyed(frame, ("method", "k"))    # frame with a missing key written as "", so rows group on it
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeGuard

import pandas as pd

from specscope import formats
from specscope.engine import provenance
from specscope.results import tool_exports
from specscope.schema import BASELINE_METHOD

__all__ = [
    "IDENTITY_KEYS",
    "COLUMN_NAMES",
    "setup_label",
    "unique_labels",
    "key_text",
    "varying",
    "format_name",
    "folded_text",
    "vllm_text",
    "keyed",
]

# the keys that separate rows, in the order a label names them after model, method and dataset
IDENTITY_KEYS = (
    "response_format",
    "hardware",
    "host",
    "vllm_version",
    "torch_version",
    "weights",
    "acceptance",
    "source",
    "run_id",
)
# how a table heads each key when it shows it as a column
COLUMN_NAMES = {
    "response_format": "response format",
    "hardware": "hardware",
    "host": "host",
    "vllm_version": "vLLM",
    "torch_version": "torch",
    "weights": "weights",
    "acceptance": "acceptance",
    "source": "source",
    "run_id": "run",
}
# keys unique_labels adds, in this order, where two labels still read alike
_TIEBREAKERS = ("torch_version", "source", "host", "run_id")


def _known(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and value != ""


def vllm_text(value) -> str:
    """``vLLM 0.32.0``; '' where the version was not recorded."""
    return f"vLLM {value}" if _known(value) else ""


def format_name(value) -> str:
    """``free``, ``constrained (json_schema)`` or ``not recorded`` for a row's ``response_format``."""
    if formats.is_constrained(value):
        return formats.constrained_label(value)
    return "free" if value == formats.FREE else "not recorded"


def key_text(key: str, value) -> str:
    """One identity key as a label names it (``vLLM 0.32.0``, ``torch 2.9.0+cpu``, ``run sweep-1``); ''
    where it has no value."""
    if not _known(value):
        return ""
    return {
        "vllm_version": vllm_text(value),
        "torch_version": f"torch {value}",
        "source": f"source {value}",
        "host": f"host {value}",
        "run_id": f"run {value}",
        "response_format": format_name(value),
        "weights": f"{value} weights",
        "acceptance": f"{value} acceptance",
    }.get(key, str(value))


def setup_label(row: Mapping, omit: Sequence[str] = ()) -> str:
    """A setup's name: ``model · method (draft) · dataset · constrained (json_schema) · hardware @ host ·
    vLLM 0.32.0 · dummy weights, synthetic acceptance · via guidellm``, leaving out what a row does not record and the
    keys in ``omit`` (a view comparing vLLM versions leaves out ``vllm_version``)."""
    model = str(row.get("model") or "?").split("/")[-1]
    method = row.get("method") or "?"
    draft = row.get("draft_model")
    if _known(draft):
        method = f"{method} ({draft.split('/')[-1]})"
    host = row.get("host") if "host" not in omit else None
    where = row.get("hardware") if "hardware" not in omit else None
    if _known(host):
        where = f"{where or '?'} @ {host.split(':')[0] if host.startswith('bundled:') else host}"
    constrained = formats.constrained_label(row.get("response_format")) if "response_format" not in omit else ""
    version = vllm_text(row.get("vllm_version")) if "vllm_version" not in omit else ""
    marks = provenance.marks({k: v for k, v in row.items() if k not in omit})
    tool = tool_exports.MARKS.get(row.get("source", ""))  # rows imported from a benchmark tool say which
    parts = [model, method, row.get("dataset"), constrained, where, version, marks, tool and f"via {tool}"]
    return " · ".join(str(p) for p in parts if _known(p))


def unique_labels(rows: Sequence[Mapping], omit: Sequence[str] = (), label=setup_label) -> list[str]:
    """``label`` of each row; where two rows read alike but differ in an identity key the label leaves
    out (torch, source, full host, run), that key is added to both; rows equal in every one of them
    keep one label (they are one setup)."""
    labels = [label(r, omit) if label is setup_label else label(r) for r in rows]
    for key in _TIEBREAKERS:
        if key in omit:
            continue
        values: dict[str, set] = {}
        for text, row in zip(labels, rows):
            values.setdefault(text, set()).add(row.get(key) if _known(row.get(key)) else None)
        labels = [
            f"{text} · {key_text(key, row.get(key)) or key.replace('_', ' ') + ' not recorded'}"
            if len(values[text]) > 1
            else text
            for text, row in zip(labels, rows)
        ]
    return labels


def varying(frame: pd.DataFrame, keys: Sequence[str] = IDENTITY_KEYS) -> list[str]:
    """The identity columns of ``frame`` that hold two or more values (a missing value counts as one):
    the columns a table must show so that no two of its rows read alike. ``acceptance`` counts over the
    speculative rows only (a baseline drafts nothing, so it has no acceptance kind to differ in)."""
    found = []
    for key in (k for k in keys if k in frame.columns):
        values = frame[key]
        if key == "acceptance" and "method" in frame.columns:
            values = values[frame["method"] != BASELINE_METHOD]
        if values.astype(object).where(values.notna(), None).nunique(dropna=False) > 1:
            found.append(key)
    return found


def folded_text(runs) -> str:
    """``mean of 2 runs`` for a figure folded over several runs; '' for one run."""
    try:
        n = int(runs)
    except (TypeError, ValueError):
        return ""
    return f"mean of {n} runs" if n > 1 else ""


def keyed(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """``frame`` with a missing key (NaN or None, or no such column) in the ``keys`` columns written as "",
    so rows group and compare on them."""
    return frame.assign(**{k: frame[k].astype(object).where(frame[k].notna(), "") if k in frame else "" for k in keys})
