"""The per-prompt section under AppTest: the Explorer on the bundled CPU run, the Runs page on a run
of two categories, and Live prefilled from a slow prompt's link."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from helpers.paths import DASHBOARD, VIEWS
from specscope import sweep
from specscope.analysis import per_prompt, run_results
from specscope.results.store import Store
from ui.common import plain

pytestmark = pytest.mark.app


def _run(target) -> AppTest:
    at = target.run()
    assert not at.exception, at.exception
    return at


def _slow_table(at: AppTest):
    """The slower-than-baseline table (AppTest keeps no dataframe's key)."""
    return next(d.value for d in at.dataframe if "within noise" in d.value.columns)


def _links(at: AppTest) -> list:
    return [e.proto for e in at.get("page_link")]


def test_the_explorer_shows_the_bundled_runs_by_category_and_length_and_their_slow_prompts(page_env):
    at = _run(AppTest.from_file(str(DASHBOARD), default_timeout=120))
    db = Store()
    rows = per_prompt.per_prompt(db)
    runs = per_prompt.runs(rows)
    # the newest run with per-request rows, as the sentence says (it named the run of most categories)
    listed = run_results.list_runs(db)
    newest = next(r for r in listed["run_id"] if r in set(rows["run_id"]))
    assert runs[0] == newest and newest != listed["run_id"].iloc[-1]
    # folded: a sentence on that run; its chooser, figures and table wait for the expander to open
    assert not at.radio and not at.selectbox and not at.get("page_link")
    dataset = rows.loc[rows["run_id"] == newest, "dataset"].iloc[0]
    assert any(f"Run {plain(newest)} ({plain(dataset)}, the newest of {len(runs)})" in m.value for m in at.markdown)
    at.session_state["explorer_per_prompt_open"] = True
    _run(at)
    assert at.selectbox(key="explorer_per_prompt_run").value == runs[0]
    _run(at.selectbox(key="explorer_per_prompt_run").set_value("specscope-cpu-mixed"))
    assert at.radio(key="explorer_per_prompt_by").value == "category"
    assert per_prompt.slower_rows(rows[rows["run_id"] == "specscope-cpu-mixed"]).empty
    assert any(s.value == "No prompt ran slower than its baseline." for s in at.success)

    _run(at.selectbox(key="explorer_per_prompt_run").set_value("specscope-cpu-code-editing"))
    slow = _slow_table(at)
    expected = per_prompt.slower_rows(rows[rows["run_id"] == "specscope-cpu-code-editing"])
    assert slow["prompt"].tolist() == expected["prompt_id"].tolist() and len(slow) > 0
    assert set(slow["within noise"]) <= {"tie", "slower"} and set(slow["category"]) == {"coding"}
    link = next(p for p in _links(at) if p.label == "Open in Live")
    first = expected.iloc[0]
    assert f"prompt_id={first['prompt_id']}" in link.query_string and f"method={first['method']}" in link.query_string
    at.radio(key="explorer_per_prompt_by").set_value("prompt_length")
    _run(at)
    assert at.radio(key="explorer_per_prompt_by").value == "prompt_length"


@pytest.fixture
def two_category_run(page_env):
    """A run of the baseline and ngram K=4 at concurrency 1 over a coding and a chat prompt; the chat
    prompt runs slower than its baseline."""
    run_id = "sweep-cpu-smollm2-categories"
    row = {
        "source": "specscope",
        "model": "SmolLM2-135M-Instruct",
        "dataset": "mixed",
        "concurrency": 1,
        "status": "ok",
        "created_at": "2026-11-25T03:00:00+00:00",
        "output_throughput": 10.0,
        "output_len": 32,
    }
    for method, k, times in (
        ("none", 0, {"code-01": 1000.0, "chat-01": 1000.0}),
        ("ngram", 4, {"code-01": 500.0, "chat-01": 1100.0}),
    ):
        cell = sweep.Cell(method, k, 1)
        requests = [
            {
                "cell_id": cell.cell_id,
                "prompt_id": prompt_id,
                "category": prompt_id.split("-")[0].replace("code", "coding"),
                "method": method,
                "k": k,
                "concurrency": 1,
                "success": True,
                "prompt_tokens": 30,
                "output_tokens": 16,
                "e2el_ms": ms,
            }
            for prompt_id, ms in times.items()
        ]
        sweep.save_cell(run_id, cell.cell_id, sweep.FinishedCell({**row, "method": method, "k": k}, requests))
    sweep.write_run(run_id)
    return run_id


def test_the_runs_page_shows_the_run_by_category_with_its_slow_prompt(two_category_run):
    at = _run(AppTest.from_file(str(DASHBOARD), default_timeout=120))
    at.switch_page("views/runs.py")
    _run(at)
    _run(at.selectbox(key="runs_view").set_value(two_category_run))
    slow = _slow_table(at)
    assert slow["prompt"].tolist() == ["chat-01"] and slow["category"].tolist() == ["chat"]
    assert slow["speedup [95%]"].tolist() == ["0.909× (1 run: no interval)"]
    assert any("Slower than baseline** (1 prompt-cell pairs" in m.value for m in at.markdown)
    link = next(p for p in _links(at) if p.label == "Open in Live")
    assert "dataset=mixed" in link.query_string and "k=4" in link.query_string
    assert "max_tokens=32" in link.query_string  # Live asks for the run's own output length


def test_live_opens_with_the_slow_prompt_filled_in(page_env, monkeypatch):
    from streamlit.elements.lib import policies

    warned: list[str] = []  # Streamlit's Session State warning, logged with a 30-line stack (the issue)
    monkeypatch.setattr(policies._LOGGER, "warning", lambda message, *args, **kwargs: warned.append(message % args))
    at = AppTest.from_file(str(VIEWS / "live.py"), default_timeout=60)
    at.query_params.update(
        {"dataset": "mixed", "prompt_id": "chat-02", "method": "ngram", "k": "4", "max_tokens": "32"}
    )
    _run(at)
    assert warned == []
    assert at.number_input(key="live_max_tokens").value == 32  # what the sweep asked, not Live's 128
    assert at.radio(key="live_prompt_source").value == "From a prompt set"
    assert at.selectbox(key="live_prompt_item").value.prompt_id == "chat-02"
    assert at.selectbox(key="live_prompt_set").value.name == "mixed.jsonl"
    assert any(
        "Prompt chat-02 of 'mixed' with the sweep's 32 max tokens is filled in; start the baseline and "
        "ngram K=4" in i.value
        for i in at.info
    )
    at.radio(key="live_prompt_source").set_value("Typed")  # the user's own choice is kept on later runs
    _run(at)
    assert at.radio(key="live_prompt_source").value == "Typed"
    assert AppTest.from_file(str(VIEWS / "live.py")).run().number_input(key="live_max_tokens").value == 128
    assert warned == []

    missing = AppTest.from_file(str(VIEWS / "live.py"), default_timeout=60)
    missing.query_params.update({"dataset": "gone", "prompt_id": "[x](http://e.vil)", "method": "ngram", "k": "4"})
    _run(missing)  # a link's text is shown as typed, never as a link
    assert any(r"Prompt \[x\]\(http\://e.vil\) of set 'gone' is in no prompt set here" in i.value for i in missing.info)


def test_live_picks_the_baseline_and_the_method_at_the_links_k(page_env):
    from specscope.live import PaneSpec
    from ui.per_prompt import _pick_servers

    launched = {
        "base": PaneSpec("base", "u0", "none"),
        "ng2": PaneSpec("ng2", "u1", "ngram", {"method": "ngram", "num_speculative_tokens": 2}),
        "ng4": PaneSpec("ng4", "u2", "ngram", {"method": "ngram", "num_speculative_tokens": 4}),
        "sfx": PaneSpec("sfx", "u3", "suffix"),
    }
    assert _pick_servers(launched, "ngram", "4") == ["base", "ng4"]
    assert _pick_servers(launched, "ngram", "3") == ["base", "ng2"]  # no server at that K: the method's first
    assert _pick_servers(launched, "eagle", "4") == ["base"]
