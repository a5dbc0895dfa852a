"""AppTest of the Explorer page: bundled data shows, filters narrow, a bad upload is one sentence."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from helpers.apptest_run import run_clean
from helpers.paths import DASHBOARD
from helpers.vega_charts import charts
from specscope.results import importers

pytestmark = pytest.mark.app
MAIN = str(DASHBOARD)


def _headline(at: AppTest) -> str:
    [line] = [m.value for m in at.markdown if " result rows" in m.value]
    return line


def _rows(at: AppTest) -> int:
    return int(re.search(r"\*\*([\d,]+)\*\* result rows", _headline(at)).group(1).replace(",", ""))


def test_bundled_results_show_without_any_server(specscope_home):
    at = run_clean(AppTest.from_file(MAIN, default_timeout=60))
    assert _rows(at) > 0
    assert _headline(at).startswith("Best speedup **")
    # the best speedup says where it was measured; the caption names its setup, K and concurrency
    assert re.search(r"95% interval over repeats on \S.* · \S", _headline(at)), _headline(at)
    assert any(c.value.startswith("Best: ") and "concurrency" in c.value for c in at.caption)
    # the chart under it is a real drafter's too (the bundled H100 shapes, faster, accept synthetically)
    [title] = [" ".join(t) if isinstance(t := spec["title"]["text"], list) else t for spec in charts(at)]
    # (the best K-sweep setup by its top point: suffix's 1.578x over ngram's 1.570x folded over two runs)
    assert "· code-editing" in title and "cpu-2core @ bundled" in title and "synthetic" not in title, title


def test_the_landing_page_draws_no_chooser_table_or_code_until_opened(specscope_home):
    """What a viewer does not open loads nothing ahead of the first figure: the setups chooser, the
    per-prompt run chooser and table and the other sections wait for their expanders (the K schedule's
    verdicts too: tests/e2e/test_explorer_page.py)."""
    at = run_clean(AppTest.from_file(MAIN, default_timeout=60))
    assert len(at.get("vega_lite_chart")) == 1 and not at.metric  # the headline is text: no metric scripts
    assert not at.selectbox and not at.multiselect and not at.dataframe and not at.code and not at.radio
    assert not at.get("plotly_chart") and not at.get("download_button")
    closed = [e.label for e in at.expander]
    assert any(label.startswith("Setups: 1 of ") for label in closed), closed
    assert any(label.startswith("By category and prompt length") for label in closed), closed
    assert "Download this figure (HTML)" in closed
    assert f"Download the {_rows(at)} result rows (CSV, Parquet)" in closed
    assert any(label.startswith("Where the bundled results come from (") for label in closed), closed
    assert not [c for c in at.caption if c.value.startswith("Bundled results: ")]  # inside that expander


def test_the_downloads_are_there_once_opened(specscope_home):
    at = run_clean(AppTest.from_file(MAIN, default_timeout=60))
    at.session_state["explorer_dl_rows_open"] = True
    at.session_state["explorer_dl_speedup_vs_k_open"] = True
    run_clean(at)
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Download figure (HTML)", "Download rows (CSV)", "Download rows (Parquet)"], labels


def test_filter_on_imported_results(specscope_home, ruiz_parquet):
    importers.import_file(ruiz_parquet)
    at = run_clean(AppTest.from_file(MAIN, default_timeout=60))
    assert not [m for m in at.multiselect if m.key.startswith("explorer_f_")]  # drawn once opened
    at.session_state["explorer_filters_open"] = True
    run_clean(at)
    at.multiselect(key="explorer_f_source").select("ruiz-2026")
    at.multiselect(key="explorer_f_method").select("eagle3")
    run_clean(at)
    assert _rows(at) == 96
    assert _headline(at).startswith("Best speedup **2.946×**")
    # closed again, the expander keeps the choices (and says how many)
    at.session_state["explorer_filters_open"] = False
    run_clean(at)
    assert _rows(at) == 96
    assert [e.label for e in at.expander if e.label.startswith("Filters")] == ["Filters (2 active)"]


def test_empty_store_says_what_to_do(specscope_home, monkeypatch, tmp_path):
    monkeypatch.setenv("SPECSCOPE_DATA", str(tmp_path / "none"))
    at = run_clean(AppTest.from_file(MAIN, default_timeout=60))
    assert any("No results yet" in i.value for i in at.info)
