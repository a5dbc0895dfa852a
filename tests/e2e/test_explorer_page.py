"""The Explorer in a real Chromium: import the Ruiz results through the page, find the 3.555 point."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.e2e

# The (x, y) points of every plotly trace as drawn (plotly's decoded full data).
TRACE_POINTS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(
    el => ({title: (el.layout && el.layout.title && el.layout.title.text) || '',
            points: (el._fullData || []).flatMap(t => Array.from(t.y || []).map(
                (y, i) => [t.x ? Array.from(t.x)[i] : null, y]))}))"""


def test_import_ruiz_and_find_headline_point(streamlit_server, page, wait_idle, ruiz_parquet):
    page.goto(streamlit_server.url)  # the Explorer is the default page
    wait_idle(page)
    page.get_by_text("No results yet", exact=False).or_(page.locator(".js-plotly-plot").first).wait_for()

    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(ruiz_parquet))
    wait_idle(page)
    page.get_by_role("button", name="Import", exact=True).click()
    wait_idle(page)
    page.get_by_text("Imported 262 rows", exact=False).wait_for(timeout=30_000)

    page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)
    # the figures drawn before the import stay on screen until the rerun replaces them
    deadline = time.monotonic() + 60
    while True:
        figures = page.evaluate(TRACE_POINTS_JS)
        speedup_vs_k = [f for f in figures if "Speedup vs K" in f["title"]]
        points = speedup_vs_k[0]["points"] if speedup_vs_k else []
        found = any(x == 8 and y is not None and round(y, 3) == 3.555 for x, y in points)
        if found or time.monotonic() > deadline:
            break
        page.wait_for_timeout(500)
    assert speedup_vs_k, f"no speedup-vs-K figure among {[f['title'] for f in figures]}"
    assert found, points[:20]
