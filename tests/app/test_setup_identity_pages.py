"""AppTest of a setup's identity on the bundled vllm-cpu runs: the Runs table names each cell's vLLM and
response format where they differ, the Explorer's speedup-vs-K setups name their vLLM, and a point
folded over two runs opens into each run's figure."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from helpers.paths import DASHBOARD

pytestmark = pytest.mark.app


def _runs_table(at: AppTest, run_id: str):
    at.selectbox(key="runs_view").set_value(run_id).run()
    assert not at.exception, at.exception
    return at.table[0].value


def test_runs_table_names_vllm_and_format_where_cells_differ(page_env):
    at = AppTest.from_file(str(DASHBOARD), default_timeout=90).run()
    at.switch_page("views/runs.py").run()
    versions = _runs_table(at, "specscope-cpu-versions")
    assert list(versions.columns[:4]) == ["method", "K", "concurrency", "vLLM"]
    assert len(versions[["method", "vLLM"]].drop_duplicates()) == len(versions) == 4
    structured = _runs_table(at, "specscope-cpu-structured")
    assert "response format" in structured.columns and "vLLM" not in structured.columns
    assert set(structured["response format"]) == {"free", "constrained (json_schema)"}
    assert len(structured[["method", "K", "concurrency", "response format"]].drop_duplicates()) == len(structured)
    assert any("Run `specscope-cpu-structured` only" in c.value for c in at.caption)


def test_speedup_vs_k_setups_name_their_vllm_and_open_a_folded_point(page_env):
    at = AppTest.from_file(str(DASHBOARD), default_timeout=90).run()
    assert not at.exception, at.exception
    assert not [m for m in at.multiselect if m.label == "Setups"]  # the chooser waits for its expander
    at.session_state["explorer_k_setups_open"] = True
    at.run()
    setups = next(m for m in at.multiselect if m.label == "Setups")
    ours = [o for o in setups.options if " · ngram · code-editing · cpu-" in o]
    assert ours == ["SmolLM2-135M-Instruct · ngram · code-editing · cpu-2core @ bundled · vLLM 0.32.0"]
    setups.set_value([ours[0]]).run()
    at.session_state["explorer_k_runs_open"] = True
    at.run()
    assert not at.exception, at.exception
    runs = next(t.value for t in at.table if "run" in t.value.columns)
    assert sorted(runs["run"]) == ["specscope-cpu-code-editing", "specscope-cpu-versions"]
    assert sorted(runs["speedup (× its baseline, 95%)"].str[:6]) == ["1.516×", "1.658×"]
