"""AppTest of "Where a step goes" on the Explorer and Theory pages, over the bundled results: drawn only
when its expander opens; then a stacked bar per method and K of the chosen setup (verify, draft, overhead
in ms with their shares), the measured D(K) on the right axis, the speedup beside, and the parts' table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.app
APP = Path(__file__).resolve().parents[2] / "app"
EXPLORER = str(APP / "dashboard.py")  # the Explorer is its first page
THEORY = str(APP / "views" / "theory.py")


def _run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, at.exception
    return at


def _figure(at: AppTest) -> dict:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    found = [s for s in specs if "Where a step goes" in json.dumps(s.get("layout", {}).get("title", ""))]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("page, key", [(EXPLORER, "explorer"), (THEORY, "theory")])
def test_the_step_anatomy_opens_with_its_parts_of_the_cpu_draft_model(page_env, page, key):
    at = _run(AppTest.from_file(page, default_timeout=120))
    assert f"{key}_anatomy_setup" not in [s.key for s in at.selectbox]  # drawn once opened
    at.session_state[f"{key}_anatomy_open"] = True
    _run(at)
    setups = at.selectbox(key=f"{key}_anatomy_setup")
    cpu = next(o for o in setups.options if o.startswith("SmolLM2-135M-Instruct · cpu-2core · vLLM 0.32.0"))
    assert setups.value == cpu  # the setup whose every part was measured comes first
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
    table = at.dataframe(key=f"{key}_anatomy_table").value
    assert list(table["method, K"]) == ["draft_model K=2", "draft_model K=4", "ngram K=2", "ngram K=4"]
    assert table["overhead"].str.contains("ms").all()
