"""Schedule rows in the store: cells of their own beside the fixed K=max rows, and old files load."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.scheduled_rows import SCHEDULE
from helpers.scheduled_rows import row as _row
from specscope.results.store import Store
from specscope.results.writing import write_results
from specscope.schema import RESULT_SCHEMA


def _rows() -> list[dict]:
    rows = []
    for r, jitter in ((1, -1.0), (2, 0.0), (3, 1.0)):
        for c, base, k1, k4, sched in ((1, 100, 130, 160, 161), (4, 200, 230, 150, 240)):
            rows += [
                _row("none", 0, c, base + jitter, r),
                _row("ngram", 1, c, k1 + jitter, r),
                _row("ngram", 4, c, k4 + jitter, r),
                _row("ngram", 4, c, sched + jitter, r, SCHEDULE),
            ]
    return rows


def test_schedule_rows_stay_apart_from_fixed_k_max(tmp_path):
    write_results(_rows(), run_id="r1", directory=tmp_path)
    frame = Store(result_dirs=[tmp_path], request_dirs=[]).speedup()
    k4 = frame[frame["k"] == 4].assign(kind=lambda f: f["k_schedule"].fillna("fixed"))
    speedup = k4.set_index(["kind", "concurrency"])["speedup"].round(3).to_dict()
    assert len(frame) == 8 and set(frame["repeats"]) == {3}
    assert speedup == {("fixed", 1): 1.6, (SCHEDULE, 1): 1.61, ("fixed", 4): 0.75, (SCHEDULE, 4): 1.2}


def test_best_k_names_the_schedule_where_it_wins_or_ties(tmp_path):
    write_results(_rows(), run_id="r1", directory=tmp_path)
    best = Store(result_dirs=[tmp_path], request_dirs=[]).speedup(best=True)
    best = best[best["method"] == "ngram"].set_index("concurrency")
    # at c=1 the schedule (161) and K=4 (160) overlap; at c=4 the schedule (240) beats K=1 (230)
    assert {best.loc[1, "k_schedule"], best.loc[4, "k_schedule"]} == {SCHEDULE}
    assert best.loc[1, "tied_ks"] == [4] and best.loc[4, "tied_ks"] == []


def test_files_without_the_column_still_load(tmp_path):
    old = pa.schema([f for f in RESULT_SCHEMA if f.name != "k_schedule"])
    rows = [{k: v for k, v in row.items() if k != "k_schedule"} for row in _rows() if row["k_schedule"] is None]
    pq.write_table(pa.Table.from_pylist(rows, schema=old), tmp_path / "old.parquet")
    frame = Store(result_dirs=[tmp_path], request_dirs=[]).speedup()
    assert len(frame) == 6 and frame["k_schedule"].isna().all()


def test_explorer_draws_the_schedule_as_its_own_curve(tmp_path):
    from specscope.analysis import explore, explore_text
    from ui import charts

    write_results(_rows(), run_id="r1", directory=tmp_path)
    store = Store(result_dirs=[tmp_path], request_dirs=[])
    curves = explore.curves_vs_concurrency(store)
    assert sorted(set(curves["curve"])) == ["K=1", "K=4", f"schedule {SCHEDULE}"]
    assert (explore.speedup_vs_k(store).groupby(["k", "concurrency"]).size() == 1).all()  # no K=4 fold
    fig = charts.schedule_vs_concurrency(curves, curves["setup"].iloc[0])
    [drawn] = [t for t in fig.data if t.name == f"schedule {SCHEDULE}"]
    assert drawn.line.dash == "dash" and list(drawn.y) == pytest.approx([1.61, 1.2], abs=1e-3)
    table = explore_text.best_k_table(explore.best_k(store))
    assert f"schedule {SCHEDULE} (max 4)" in set(table["K (draft tokens)"])
    assert "tied with K 4 (within noise)" in set(table["tied (within noise)"])


def test_the_advisor_fits_fixed_k_rows_only(tmp_path):
    """A schedule's rows carry its maximum K; fitted as K=4 they would lift K=4 at concurrency 4."""
    from specscope.advice import fitting

    rows = [{**row, "acceptance_length": 1.0 + 0.4 * row["k"] if row["k"] else None} for row in _rows()]
    write_results(rows, run_id="r1", directory=tmp_path)
    [fit] = fitting.fit_families(Store(result_dirs=[tmp_path], request_dirs=[]).speedup())
    assert fit.rows["k_schedule"].isna().all() and len(fit.rows) == 4


def test_the_runs_table_tells_a_schedule_cell_from_the_fixed_k_one(tmp_path):
    """The issue's two identical "ngram 4 1 3" lines: the schedule cell and the fixed K=4 one of each
    concurrency read apart by a K schedule column (the baseline drafts nothing: a dash)."""
    from specscope.analysis import run_results
    from ui import run_table

    write_results(_rows(), run_id="r1", directory=tmp_path)
    cells = run_results.cell_table(Store(result_dirs=[tmp_path], request_dirs=[]), "r1")
    table = run_table.display_table(cells)
    shown = table[["method", "K", "K schedule", "concurrency"]].astype(str).agg(" ".join, axis=1).tolist()
    assert shown == [
        "none 0 – 1",
        "none 0 – 4",
        "ngram 1 fixed 1",
        "ngram 1 fixed 4",
        "ngram 4 fixed 1",
        "ngram 4 fixed 4",
        f"ngram 4 {SCHEDULE} 1",
        f"ngram 4 {SCHEDULE} 4",
    ]
    assert len(set(shown)) == len(shown)
    plain = run_table.display_table(cells[cells["k_schedule"].isna()])
    assert "K schedule" not in plain  # a run without a schedule keeps its table as it was
