"""AppTest of the Explorer's "Against the limits" section: nothing drawn until its expander opens; then each
tab draws its table or figure: the cells against their ceilings with their oracle bound, the side effects,
the Pareto view and acceptance over the output; and the throughput tab draws each setup's roofline."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from helpers import per_step_run
from helpers.apptest_run import run_clean
from helpers.paths import DASHBOARD
from ui import limits_view

pytestmark = pytest.mark.app
EXPLORER = str(DASHBOARD)


def _titles(at: AppTest) -> list[str]:
    return [json.dumps(json.loads(c.proto.spec).get("layout", {}).get("title", "")) for c in at.get("plotly_chart")]


def test_the_limits_section_draws_each_tab_only_once_chosen(page_env, no_bundled_results):
    per_step_run.write_run()
    at = run_clean(AppTest.from_file(EXPLORER, default_timeout=120))
    assert limits_view.TITLE in [e.label for e in at.expander] and not at.get("plotly_chart")
    at.session_state["explorer_limits_open"] = True
    run_clean(at)
    table = next(d.value for d in at.dataframe if "oracle bound" in d.value.columns)
    ngram = table.iloc[0]  # cells with an oracle bound first
    assert ngram["setup"] == "Llama-3.1-8B-Instruct · ngram · d · 1xH100-80GB @ h"
    assert ngram["oracle bound"].endswith("×") and ngram["K+1 ceiling"] == "5"
    assert "of 1,042 tok/s (memory-bound)" in ngram["roofline share"]
    assert any("oracle bound" in t for t in _titles(at))
    assert at.selectbox(key="explorer_oracle_cell").value == "hand-made · ngram-k4-c1"
    at.session_state["explorer_limits_tabs"] = "Side effects"
    side = next(d.value for d in run_clean(at).dataframe if "TTFT p99" in d.value.columns)
    assert "1.50× (+50%)" in side["TTFT p99"].tolist()
    at.session_state["explorer_limits_tabs"] = "Pareto"
    assert any("Tokens/s per user vs tokens/s per GPU" in t for t in _titles(run_clean(at)))
    at.session_state["explorer_limits_tabs"] = "Acceptance over the output"
    assert any("Acceptance length over the output" in t for t in _titles(run_clean(at)))


def test_the_throughput_tab_draws_each_setups_roofline(page_env):
    at = run_clean(AppTest.from_file(EXPLORER, default_timeout=120))
    at.session_state["explorer_tabs"] = "Throughput vs concurrency"
    figure = json.loads(next(c.proto.spec for c in run_clean(at).get("plotly_chart")))
    ceilings = [t for t in figure["data"] if t["name"].endswith("roofline ceiling")]
    assert ceilings and all(t["line"]["dash"] == "dot" for t in ceilings)
    assert "dotted: each setup's roofline ceiling" in json.dumps(figure["layout"]["title"])
