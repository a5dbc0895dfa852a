"""The speedups, intervals and best-K ties the store and the Explorer give, pinned to 1e-9.

``speedups_before.json`` holds what SpecScope computed from per-sample lists (commit 53cba9c,
before the folds moved to per-cell sufficient statistics), over the bundled results and the
synthetic store of ``tests/helpers/repeats_store.py``. It was written by running this file as a script
with that commit's library::

    git archive 53cba9c app | tar -x -C /tmp/old
    SPECSCOPE_DATA=$PWD/data PYTHONPATH=/tmp/old/app:tests .venv/bin/python \
        tests/unit/analysis/test_speedup_numbers.py --write

Any later change to the maths must give the same numbers, or say why and rewrite the file. (The
bundled GPU rows' ``draft_model`` was later renamed from the folder it was served from to the model's
name, ``shape-Qwen3-1.7B``; only that key changed in the file, no number. Later still, a point measured
by several runs that each have repeats stopped reading a t-interval over the runs' speedups (one degree
of freedom for two runs) and combines each run's own figure and spread, ``stats.combined_ratios``: the
file was rewritten with ``--write``, and only the four synthetic points folded over two such runs moved.
Then ties took one rule, ``specscope.ties``: two figures tie when the gap of their logs is within t times its
standard error, no longer whenever their intervals overlap; rewritten with ``--write``, only ``tied_ks`` of five
best-K rows lost K that are faster or slower beyond noise by that rule, no number moved.
Then a cell measured in the same rounds as its own run's baseline took a paired interval (the per-round log
ratios, t on rounds - 1) in place of Fieller's, and a point over several runs took the random-effects term's
degrees of freedom into the Welch-Satterthwaite sum instead of jumping to the runs' less one: rewritten with
``--write``. No bundled number moved (the pinned CPU run measured each cell's repeats back to back, so it does
not pair); in the synthetic store only bounds moved, of the cells measured in their run's baseline's rounds
(``speedup_interval`` paired) and of the points that fold them, and the speedups of two points combined over
runs of which one is paired (each run's weight is its paired spread); tied K follow the bounds. The synthetic
store gained an imported run (run-g), where the Fieller cases, clipped at 0 and unbounded, still arise.)
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from helpers import repeats_store  # noqa: E402
from specscope import settings
from specscope.analysis import explore
from specscope.results import store  # noqa: E402

FIXTURE = Path(__file__).resolve().parent / "speedups_before.json"
PINNED = (
    "gpu-llama31-8b-eagle3-synthetic",
    "gpu-qwen3-32b-ruiz-replay",
    "pace-sd-lab",
    "specscope-cpu-code-editing",
    "vllm-sd-guide",
)  # the bundled results files the numbers were pinned on
KEYS = [
    "run_id",
    "label",
    "source",
    "model",
    "draft_model",
    "method",
    "dataset",
    "hardware",
    "host",
    "temperature",
    "concurrency",
    "k",
    "k_schedule",
    "curve",
]
NUMBERS = [
    "speedup",
    "speedup_lo",
    "speedup_hi",
    "output_throughput",
    "output_throughput_lo",
    "output_throughput_hi",
    "baseline_throughput",
    "baseline_repeats",
    "acceptance_length",
    "repeats",
    "runs",
    "al_min",
    "al_max",
    "concurrencies",
]
TEXTS = ["speedup_interval", "baseline_run_id", "tied_ks"]


def _records(frame: pd.DataFrame) -> list[dict]:
    keys = [c for c in KEYS if c in frame]
    frame = frame.sort_values(keys, na_position="first", kind="stable")
    columns = [c for c in [*keys, *NUMBERS, *TEXTS] if c in frame]
    out = []
    for row in frame[columns].to_dict("records"):
        clean = {}
        for name, value in row.items():
            if name == "tied_ks":
                value = [v if isinstance(v, str) else int(v) for v in value]
            elif value is None or (not isinstance(value, (str, list)) and pd.isna(value)):
                value = None
            elif name in NUMBERS or name in ("temperature", "concurrency", "k"):
                value = float(value)
            clean[name] = value
        out.append(clean)
    return out


def _figures(db: store.Store) -> dict[str, list[dict]]:
    return {
        "cells": _records(db.speedup()),
        "best": _records(db.speedup(best=True)),
        "vs_k": _records(explore.speedup_vs_k(db)),
        "curves": _records(explore.curves_vs_concurrency(db)),
        "acceptance": _records(explore.acceptance_vs_k(db)),
    }


def current() -> dict[str, dict[str, list[dict]]]:
    """Every pinned figure of both stores, as the code computes it now."""
    with tempfile.TemporaryDirectory() as tmp:
        synthetic = store.Store(result_dirs=[repeats_store.write_store(Path(tmp))], request_dirs=[])
        pinned = Path(tmp) / "bundled"
        pinned.mkdir()
        for name in PINNED:
            shutil.copy(settings.bundled_data_dir() / "results" / f"{name}.parquet", pinned)
        bundled = store.Store(result_dirs=[pinned], request_dirs=[])
        return {"bundled": _figures(bundled), "synthetic": _figures(synthetic)}


def _same(before, now, where: str) -> None:
    if isinstance(before, float) and isinstance(now, float):
        assert math.isclose(before, now, rel_tol=1e-9, abs_tol=1e-9), f"{where}: {before!r} became {now!r}"
    else:
        assert before == now, f"{where}: {before!r} became {now!r}"


def _same_rows(before: list[dict], now: list[dict], where: str) -> None:
    assert len(now) == len(before), f"{where}: {len(before)} rows became {len(now)}"
    for i, (old, new) in enumerate(zip(before, now)):
        assert old.keys() == new.keys(), f"{where} row {i}: columns changed"
        for column, value in old.items():
            _same(value, new[column], f"{where} row {i} {column}")


@pytest.mark.parametrize("name", ["bundled", "synthetic"])
def test_numbers_are_those_of_the_per_sample_maths(name):
    before = json.loads(FIXTURE.read_text())[name]
    now = current()[name]
    for figure, rows in before.items():
        _same_rows(rows, now[figure], f"{name}/{figure}")


@pytest.mark.parametrize(
    "filters",
    [{"method": ["ngram"], "host": ["h1"]}, {"run_id": ["run-c"]}, {"status": ["ok"], "concurrency": [4, 16]}],
)
def test_filtered_points_are_the_points_of_the_filtered_cells(tmp_path, filters):
    """Filters pick cells after each found its baseline (run-c divides by run-b's)."""
    db = store.Store(result_dirs=[repeats_store.write_store(tmp_path)], request_dirs=[])
    every = explore.speedup_vs_k(db)
    picked = explore.speedup_vs_k(db, filters)
    assert not picked.empty
    if "run_id" in filters:  # one run: its cells as they are
        cells = db.speedup(filters)
        cells = cells[(cells["method"] != "none") & cells["k_schedule"].isna()]
        every = cells.assign(runs=1)[list(picked.columns[:-1])]
        every = every.assign(setup=[explore.setup_label(r) for r in every.to_dict("records")])
    for column, values in filters.items():
        if column in every and column != "run_id":
            every = every[every[column].isin(values)]
    _same_rows(_records(every), _records(picked), str(filters))


def test_no_interval_reaches_below_zero(tmp_path):
    db = store.Store(result_dirs=[repeats_store.write_store(tmp_path)], request_dirs=[])
    cells = db.speedup()
    for column in ("speedup_lo", "output_throughput_lo"):
        assert (cells[column].dropna() >= 0).all()
    noisy = cells[cells["method"] == "suffix"].iloc[0]  # noisy in paired rounds: the log scale keeps it above 0
    assert 0.0 < noisy["speedup_lo"] < noisy["speedup"] and noisy["speedup_interval"] == "paired"
    imported = cells[(cells["run_id"] == "run-g") & (cells["concurrency"] == 1) & (cells["method"] == "ngram")].iloc[0]
    assert imported["speedup_lo"] == 0.0 and imported["speedup_interval"] == "fieller"  # below 0: clipped
    points = explore.speedup_vs_k(db)
    assert (points["speedup_lo"].dropna() >= 0).all()


def test_the_synthetic_store_reaches_every_interval_case():
    cases = {row["speedup_interval"] for row in json.loads(FIXTURE.read_text())["synthetic"]["cells"]}
    assert {"paired", "fieller", "none", "unbounded", "baseline"} <= cases


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    FIXTURE.write_text(json.dumps(current()) + "\n")
    print(f"wrote {FIXTURE}")
