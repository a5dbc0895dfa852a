"""AppTest of the Explorer's constrained-vs-free section: drawn when a run measured a setup both ways,
with each side's speedup over its own baseline, the valid share, and per-request gaps (escaped)."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from helpers.paths import VIEWS
from specscope import settings
from specscope.results import writing

pytestmark = pytest.mark.app
PAGE = str(VIEWS / "explorer.py")
HOSTILE = '<img src=x onerror="alert(1)">'


def _row(method, k, fmt, repeat, tput):
    return {
        "source": "specscope",
        "model": "m",
        "dataset": "json-extraction",
        "hardware": "cpu",
        "host": "h",
        "output_len": 32,
        "temperature": 0.0,
        "concurrency": 1,
        "method": method,
        "k": k,
        "response_format": fmt,
        "repeat": repeat,
        "output_throughput": tput,
        "status": "ok",
        "acceptance_length": None if method == "none" else 1.4,
        "max_itl_ms": 90.0 + repeat,
        "valid_share": None if fmt == "none" else 1.0,
    }


@pytest.fixture
def measured(page_env, no_bundled_results):
    rows = [
        _row(m, k, f, r, base + r)
        for r in (1, 2, 3)
        for m, k, f, base in (
            ("none", 0, "none", 10.0),
            ("none", 0, "json_schema", 5.0),
            ("ngram", 4, "none", 11.0),
            ("ngram", 4, "json_schema", 4.0),
        )
    ]
    writing.write_results(rows, run_id="run-s")
    writing.write_requests(
        [
            {
                "cell_id": "ngram-k4-c1-constrained-r1",
                "prompt_id": HOSTILE,
                "method": "ngram",
                "k": 4,
                "concurrency": 1,
                "success": True,
                "output_tokens": 30,
                "response_format": "json_schema",
                "valid": True,
                "max_itl_ms": 4200.0,
                "mean_itl_ms": 80.0,
            }
        ],
        run_id="run-s",
    )
    assert settings.results_dir().is_dir()


def test_constrained_and_free_show_side_by_side(measured):
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    assert "Constrained vs free (structured output)" in [h.value for h in at.subheader]
    assert not at.get("plotly_chart")  # drawn once opened
    at.session_state["explorer_structured_open"] = True
    at.run()
    assert not at.exception, at.exception
    table = next(d.value for d in at.dataframe if "speedup constrained (95%)" in d.value.columns)
    ngram = table[table["setup"].str.contains("ngram")].iloc[0]
    assert ngram["speedup free (95%)"].startswith("1.083×")  # 13 / 12 over the free baseline
    assert ngram["speedup constrained (95%)"].startswith("0.857×")  # 6 / 7 over the constrained one
    assert ngram["valid constrained answers"] == "100%"
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    gaps = next(c for c in charts if "inter-token gap" in json.dumps(c["layout"].get("title", "")))
    hover = json.dumps([t.get("hovertext") for t in gaps["data"]])
    assert "4200 ms" in hover and "&lt;img" in hover and "<img" not in hover
