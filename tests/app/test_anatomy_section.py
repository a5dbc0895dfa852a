"""AppTest of "Where a step goes" on the Explorer and Theory pages: drawn only when its expander opens; then a
stacked bar per method and K of the chosen setup (verify, draft, overhead in ms with their shares), the
measured D(K) on the right axis, the speedup beside, and the parts' table. The results are a baseline, ngram
and draft_model at K=2 and 4, and the draft model alone, 3 repeats each (the cells `specscope anatomy
--measure` runs)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from streamlit.testing.v1 import AppTest

from helpers.apptest_run import run_clean
from helpers.paths import DASHBOARD, VIEWS
from specscope import settings
from specscope.results.writing import write_results

pytestmark = pytest.mark.app
EXPLORER = str(DASHBOARD)  # the Explorer is its first page
THEORY = str(VIEWS / "theory.py")


T0 = dt.datetime(2026, 11, 26, tzinfo=dt.UTC)


def _write_runs() -> None:
    """98 decode tokens a request pair; ngram drafts on 40 of its 50 steps, draft_model on all 49."""

    def row(method, k, tpot, tput, model="SmolLM2-135M-Instruct", **extra):
        return {
            "created_at": T0,
            "source": "specscope",
            "model": model,
            "method": method,
            "k": k,
            "dataset": "copy",
            "hardware": "cpu-2core",
            "host": "h",
            "vllm_version": "0.32.0",
            "torch_version": "2.13.0+cpu",
            "weights": "real",
            "acceptance": None if k == 0 else "real",
            "temperature": 0.0,
            "output_len": 48,
            "concurrency": 1,
            "mean_tpot_ms": tpot,
            "output_throughput": tput,
            "total_output_tokens": 100,
            "completed": 2,
            "status": "ok",
            **extra,
        }

    runs = {"anatomy": [], "anatomy-drafter": []}
    for n in range(3):
        wobble = 1 + 0.02 * n
        runs["anatomy"] += [
            row("none", 0, 70.0 * wobble, 14.0 / wobble),
            *(
                row(
                    "ngram",
                    k,
                    55.0 * wobble,
                    17.0 / wobble,
                    accepted_tokens=48,
                    num_drafts=40,
                    draft_tokens=40 * k,
                    acceptance_length=2.2,
                )
                for k in (2, 4)
            ),
            *(
                row(
                    "draft_model",
                    k,
                    (60.0 + 25 * k) * wobble,
                    9.0 / wobble,
                    draft_model="/m/draft-24L",
                    accepted_tokens=49,
                    num_drafts=49,
                    draft_tokens=49 * k,
                    acceptance_length=2.0,
                )
                for k in (2, 4)
            ),
        ]
        runs["anatomy-drafter"].append(row("none", 0, 40.0 * wobble, 24.0 / wobble, model="draft-24L"))
    for run, rows in runs.items():
        for i, r in enumerate(rows):
            r.update(run_id=run, repeat=i // (len(rows) // 3) + 1)
        write_results(rows, run_id=run, directory=settings.results_dir())


def _figure(at: AppTest) -> dict:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    found = [s for s in specs if "Where a step goes" in json.dumps(s.get("layout", {}).get("title", ""))]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("page, key", [(EXPLORER, "explorer"), (THEORY, "theory")])
def test_the_step_anatomy_opens_with_its_parts_of_the_cpu_draft_model(page_env, no_bundled_results, page, key):
    _write_runs()
    at = run_clean(AppTest.from_file(page, default_timeout=120))
    assert f"{key}_anatomy_setup" not in [s.key for s in at.selectbox]  # drawn once opened
    at.session_state[f"{key}_anatomy_open"] = True
    run_clean(at)
    setups = at.selectbox(key=f"{key}_anatomy_setup")
    assert setups.options == ["SmolLM2-135M-Instruct · cpu-2core · vLLM 0.32.0 · copy · concurrency 1 (run anatomy)"]
    figure = _figure(at)
    parts = {trace["name"]: trace for trace in figure["data"] if trace["type"] == "bar" and trace.get("name")}
    for name in ("verify (target over K+1 tokens)", "draft (K passes of the drafter)", "overhead (the rest)"):
        assert name in parts
    draft = parts["draft (K passes of the drafter)"]
    assert "draft_model K=2" in draft["x"] and "draft_model K=4" in draft["x"]
    assert all(t.endswith("%") for t, y in zip(draft["text"], draft["y"]) if y is not None)
    lines = [t for t in figure["data"] if t["type"] == "scatter" and t["name"].startswith("D(K)")]
    assert {t["name"] for t in lines} == {"D(K), draft_model", "D(K), ngram"} and all(t["yaxis"] == "y2" for t in lines)
    speedup = next(t for t in figure["data"] if t["type"] == "bar" and t.get("name") == "speedup")
    assert speedup["xaxis"] == "x2" and all(h for h in speedup["hovertext"])
    table = next(d.value for d in at.dataframe if "method, K" in d.value.columns)
    assert list(table["method, K"]) == ["draft_model K=2", "draft_model K=4", "ngram K=2", "ngram K=4"]
    assert table["overhead"].str.contains("ms").all()
