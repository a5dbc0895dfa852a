"""The Runs page under AppTest on a finished run with repeats: intervals, speedup bounds, hygiene badges,
and the repeats default for a small prompt set."""

from __future__ import annotations

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from helpers.paths import APP, DASHBOARD
from specscope import sweep
from specscope.results import writing

pytestmark = pytest.mark.app


@pytest.fixture
def finished_run(specscope_home, monkeypatch):
    """A run of the baseline and ngram K=4 at concurrency 4, three repeats each, written as a sweep does."""
    monkeypatch.syspath_prepend(str(APP))
    run_id = "sweep-cpu-smollm2-apptest"
    base = {
        "source": "specscope",
        "model": "SmolLM2-135M-Instruct",
        "dataset": "code-editing",
        "hardware": "cpu-2core",
        "output_len": 32,
        "concurrency": 4,
        "status": "ok",
        "error": None,
        "temperature": 0.0,
        "created_at": "2026-11-22T03:00:00+00:00",
        "request_rate": float("inf"),
        "completed": 8,
        "failed": 0,
        "warmups": 1,
        "wave_share": 1.0,
        "max_num_seqs": 8,
        "foreign_cpu": 0.0,
        "prior_requests": 0,
    }
    outputs = {"p1": "aa"}
    for repeat, (b, n) in enumerate([(40.0, 60.0), (42.0, 63.0), (41.0, 61.0)], start=1):
        for method, k, tps in (("none", 0, b), ("ngram", 4, n)):
            row = {**base, "method": method, "k": k, "repeat": repeat, "output_throughput": tps}
            sweep.save_cell(run_id, sweep.Cell(method, k, 4, repeat).cell_id, sweep.FinishedCell(row, [], outputs))
    sweep.write_run(run_id)
    return run_id


def test_cells_show_intervals_and_the_run_shows_its_hygiene(finished_run):
    at = AppTest.from_file(str(DASHBOARD), default_timeout=90).run()
    at.switch_page("views/runs.py").run()
    at.selectbox(key="runs_view").set_value(finished_run).run()
    assert not at.exception, at.exception
    assert at.number_input(key="runs_repeats").value == 3  # the bundled sample sets are small
    table = at.table[0].value
    none = table[table["method"] == "none"].iloc[0]
    ngram = table[table["method"] == "ngram"].iloc[0]
    assert none["repeats"] == 3 and none["tok/s [95%]"].startswith("41.0 [")
    assert none["speedup [95%]"] == "1.000× (baseline)"
    low, high = (float(x) for x in ngram["speedup [95%]"].split("[")[1].rstrip("]").split(", "))
    assert low < 184 / 123 < high  # mean 61.33 / mean 41.0
    assert ngram["checks"] == "⚠ waves"
    assert any("Synchronized waves (2 cells)" in w.value for w in at.warning)


def test_a_configured_ray_cluster_is_a_choice_and_a_dead_one_is_one_sentence(specscope_home, monkeypatch):
    """With RAY_ADDRESS set the sweep form offers the cluster; a sweep sent to a cluster that does not
    answer ends with the one-sentence reason, and nothing is measured."""
    pytest.importorskip("ray")
    monkeypatch.syspath_prepend(str(APP))
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")
    at = AppTest.from_file(str(DASHBOARD), default_timeout=90).run()
    at.switch_page("views/runs.py").run()
    where = at.radio(key="runs_where")
    assert where.options == ["This machine", "Ray cluster at 127.0.0.1:9"] and where.value == "This machine"
    assert at.checkbox(key="runs_alongside") is not None
    where.set_value("Ray cluster at 127.0.0.1:9").run()
    assert not [c for c in at.checkbox if c.key == "runs_alongside"]  # one task per group: no second server
    at.button[0].click().run()  # the form's submit button
    for _ in range(60):
        at.run()
        errors = [e.value for e in at.error if e.value.startswith("Sweep ")]
        if errors:
            break
    assert not at.exception, at.exception
    assert len(errors) == 1 and errors[0].endswith(
        ": No Ray cluster answers at 127.0.0.1:9; start one with `ray start --head` or give its address to --ray."
    )
    monkeypatch.delenv("RAY_ADDRESS")
    at = AppTest.from_file(str(DASHBOARD), default_timeout=90).run()
    at.switch_page("views/runs.py").run()
    assert not [r for r in at.radio if r.key == "runs_where"]
    st.cache_resource.clear()  # the failed job stays in this process's sweep registry otherwise


def test_invalid_constrained_answers_fail_the_hygiene_checks(specscope_home, monkeypatch):
    """A constrained cell half of whose answers broke their JSON schema (cut at the output length), in a run
    written before the check existed (its stored hygiene is empty): the Runs page flags it and never says
    that every check passed; the run chooser counts the table's cells and, apart, the measurements."""

    monkeypatch.syspath_prepend(str(APP))
    base = {
        "source": "specscope",
        "model": "SmolLM2-135M-Instruct",
        "dataset": "json-extraction",
        "k": 2,
        "hardware": "cpu-2core",
        "output_len": 32,
        "concurrency": 1,
        "status": "ok",
        "temperature": 0.0,
        "completed": 8,
        "failed": 0,
        "hygiene": "",
        "response_format": '{"type": "json_schema"}',
    }
    rows = [
        {
            **base,
            "method": method,
            "k": 0 if method == "none" else 2,
            "repeat": repeat,
            "output_throughput": value + repeat,
            "valid_share": share,
        }
        for repeat in (1, 2, 3)
        for method, value, share in (("none", 10.0, 1.0), ("ngram", 12.0, 0.5))
    ]
    writing.write_results(rows, run_id="sweep-json-32")
    at = AppTest.from_file(str(DASHBOARD), default_timeout=90).run()
    at.switch_page("views/runs.py").run()
    at.selectbox(key="runs_view").set_value("sweep-json-32").run()
    assert not at.exception, at.exception
    assert "sweep-json-32 (json-extraction, 2 cells, 6 measurements)" in at.selectbox(key="runs_view").options
    table = at.table[0].value
    assert table.set_index("method").loc["ngram", "checks"] == "⚠ invalid answers"
    assert table.set_index("method").loc["none", "checks"] == "✓"
    assert any("Invalid constrained answers (1 cell)" in w.value for w in at.warning)
    assert not any("every check passed" in s.value for s in at.success)


def test_a_run_without_per_request_rows_says_so_once(finished_run):
    """The issue: the default run (a bundled results file without its requests file) read "No per-prompt speedup
    yet: it needs the baseline and an SD cell" though it has both."""
    from ui import run_charts

    at = AppTest.from_file(str(DASHBOARD), default_timeout=90).run()
    at.switch_page("views/runs.py").run()
    at.selectbox(key="runs_view").set_value(finished_run).run()  # saved without request rows
    assert not at.exception, at.exception
    assert set(at.table[0].value["method"]) == {"none", "ngram"}  # both the baseline and a speculative cell
    assert [i.value for i in at.info].count(run_charts.NO_REQUESTS) == 1
    assert not at.get("plotly_chart") and not any("Where it pays" in h.value for h in at.subheader)
