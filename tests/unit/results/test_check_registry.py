"""Every registered hygiene check (``hygiene.CHECKS``) is whole and wired: its predicate fires on its own example
and not on its passing one, it has a title, explanation and badge, and every view that lists checks knows it: the
sweep's and an import's flags, the Runs table's badges and counts, the store's check bits, the Explorer's best-K
rows and their "checks" column (a distorting check keeps its cell from being the best K, a condition does not),
and the README's list of what distorts a figure and what describes its conditions. A new check is one ``Check``
entry, examples included; these tests then cover it."""

from __future__ import annotations

import copy
import datetime as dt
import re
from pathlib import Path

import pandas as pd
import pytest

from helpers.paths import REPO
from specscope.analysis import explore, explore_text
from specscope.results import hygiene, writing
from specscope.results.store import Store
from ui import run_table

CHECKS = list(hygiene.CHECKS.values())
README = REPO / "README.md"
WHAT = {"distorts": "distort the cell's figure", "conditions": "describe its conditions"}


@pytest.mark.parametrize("check", CHECKS, ids=[c.id for c in CHECKS])
def test_each_check_is_described(check):
    assert check.title and check.badge and len(check.explanation) > 40
    assert hygiene.CHECKS[check.id] is check and check.on in ("sweep", "figures", "run")


@pytest.mark.parametrize("check", CHECKS, ids=[c.id for c in CHECKS])
def test_each_check_fires_on_its_example_and_not_on_the_passing_one(check):
    assert check.fails(copy.deepcopy(check.trips)), f"{check.id}: its predicate does not fire on its example"
    assert not check.fails(copy.deepcopy(check.passes)), f"{check.id}: its predicate fires on its passing example"
    if check.on == "run":  # the sweep judges a run's rows together
        marked = hygiene.mark_drift(copy.deepcopy(check.trips))
        assert all(check.id in hygiene.flagged_ids(r.get("hygiene")) for r in marked)
        assert not any(
            check.id in hygiene.flagged_ids(r.get("hygiene")) for r in hygiene.mark_drift(copy.deepcopy(check.passes))
        )
        return
    assert check.id in hygiene.flags(check.trips, repeats=3)
    assert check.id not in hygiene.flags(check.passes, repeats=3)
    assert (check.id in hygiene.row_flags(check.trips)) == (check.on == "figures")  # imports meet figure checks
    if check.reread:  # a stored row written before the check existed is judged by its columns
        assert hygiene.row_ids({**check.trips, "hygiene": ""}) == [check.id]
        assert hygiene.cell_checks(pd.DataFrame([{**check.trips, "hygiene": None}])) == [[check.id]]


@pytest.mark.parametrize("check", CHECKS, ids=[c.id for c in CHECKS])
def test_the_runs_table_shows_each_checks_badge_and_counts_it(check):
    cells = pd.DataFrame(
        [
            {
                "method": "ngram",
                "k": 4,
                "concurrency": 1,
                "status": "ok",
                "repeats": 3,
                "output_throughput": 50.0,
                "hygiene": check.id,
            }
        ]
    )
    assert run_table.display_table(cells)["checks"].tolist() == [f"⚠ {check.badge}"]
    assert run_table.hygiene_counts(cells) == {c.id: int(c is check) for c in CHECKS}


def _sweep(directory: Path, check_id: str) -> Store:
    """Baseline, ngram K=2 at 1.3x (clean) and K=4 at 2.0x that fails ``check_id``, 3 rounds at concurrency 1."""
    rows = [
        {
            "created_at": dt.datetime(2026, 12, 7, tzinfo=dt.UTC),
            "run_id": "sweep",
            "source": "specscope",
            "model": "m",
            "method": method,
            "k": k,
            "hardware": "cpu-2core",
            "host": "box",
            "dataset": "d",
            "temperature": 0.0,
            "output_len": 32,
            "concurrency": 1,
            "repeat": repeat,
            "status": "ok",
            "hygiene": check_id if k == 4 else "",
            "output_throughput": 40.0 * speedup * factor,
            "acceptance_length": 2.0 if k else None,
        }
        for method, k, speedup in (("none", 0, 1.0), ("ngram", 2, 1.3), ("ngram", 4, 2.0))
        for repeat, factor in enumerate((0.98, 1.0, 1.02), start=1)
    ]
    writing.write_results(rows, run_id="sweep", directory=directory)
    return Store(result_dirs=[directory], request_dirs=[])


@pytest.mark.parametrize("check", CHECKS, ids=[c.id for c in CHECKS])
def test_the_explorer_keeps_distorting_checks_from_the_best_k_and_shows_every_badge(check, tmp_path):
    [best] = explore.by_concurrency(_sweep(tmp_path, check.id)).query("method == 'ngram'").to_dict("records")
    if check.distorts:  # the clean K=2 is the best K; the flagged K=4 is shown beside it with its check
        assert best["k"] == 2 and best["flagged_k"] == 4 and list(best["flagged_checks"]) == [check.id]
        assert f"⚠ {check.badge}" in explore_text.passed_over_text(best)
    else:  # a condition is shown beside the figure, never left out
        assert best["k"] == 4 and list(best["checks"]) == [check.id] and pd.isna(best["flagged_k"])
        assert explore_text.checks_text(best) == f"⚠ {check.badge}"


def test_the_readme_lists_each_check_as_distorting_or_a_condition():
    """README's **Checks travel.** names every check's id, the distorting ones before "or describes its conditions"."""
    [text] = re.findall(r"\*\*Checks travel\.\*\*(.*?)\n- \*\*", README.read_text(), re.S)
    distorts, conditions = text.split("or describes its conditions", 1)
    named = {"distorts": set(re.findall(r"`(\w+)`", distorts)), "conditions": set(re.findall(r"`(\w+)`", conditions))}
    for check in CHECKS:
        side, other = ("distorts", "conditions") if check.distorts else ("conditions", "distorts")
        assert check.id in named[side] and check.id not in named[other], (
            f"README's **Checks travel.** does not list `{check.id}` among the checks that {WHAT[side]}"
        )
