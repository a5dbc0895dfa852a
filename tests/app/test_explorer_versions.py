"""AppTest of the Explorer's vLLM versions section: a setup measured on two versions shows its speedup
per version, a change where the intervals are apart and a tie where they overlap; without such a setup
the section is not drawn."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from helpers import version_rows
from helpers.apptest_run import run_clean
from helpers.paths import DASHBOARD
from specscope import settings

pytestmark = pytest.mark.app
PAGE = str(DASHBOARD)  # the Explorer is its first page


def test_versions_section_flags_a_change_and_a_tie(page_env, no_bundled_results):
    version_rows.write(settings.results_dir())
    at = run_clean(AppTest.from_file(PAGE, default_timeout=60))
    assert "vLLM versions" in [h.value for h in at.subheader]
    # the landing page says how many setups changed; the table, verdicts and figure wait for the expander
    assert [w.value for w in at.warning] == [
        "3 setup(s) measured on several vLLM versions: 1 of them changed speed between two versions "
        "(95% intervals apart)."
    ]
    assert not at.get("plotly_chart") and not at.dataframe and not at.selectbox
    at.session_state["explorer_versions_open"] = True
    run_clean(at)
    setups = at.selectbox(key="explorer_versions_setup")
    assert len(setups.options) == 3  # ngram, suffix, eagle; mtp ran on one version only
    ngram = next(o for o in setups.options if " · ngram · " in o)
    setups.select(ngram)
    run_clean(at)
    warning = [w.value for w in at.warning][1:]
    assert len(warning) == 1 and "vLLM 0.31.0 → 0.32.0 at K=4, concurrency 1: 1.500× [" in warning[0]
    assert "A real change: faster" in warning[0]
    suffix = next(o for o in setups.options if " · suffix · " in o)
    at.selectbox(key="explorer_versions_setup").select(suffix)
    run_clean(at)
    assert len(at.warning) == 1 and any("A tie: within noise" in i.value for i in at.info)
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [p["x"] for p in figure["data"]] == [["vLLM 0.31.0", "vLLM 0.32.0"]]
    hover = figure["data"][0]["hovertext"]
    assert hover[0].startswith("vLLM 0.31.0 (torch 2.13.0+cpu): 1.500× [") and hover[1].startswith("vLLM 0.32.0")


def test_no_versions_section_without_a_setup_on_two_versions(page_env, no_bundled_results):
    rows = version_rows.rows("0.32.0", [10.0, 10.0], {"ngram": [15.0, 15.5]})
    for row in rows:
        row["run_id"] = "only"
    from specscope.results.writing import write_results

    write_results(rows, run_id="only", directory=settings.results_dir())
    at = run_clean(AppTest.from_file(PAGE, default_timeout=60))
    assert "vLLM versions" not in [h.value for h in at.subheader]
