"""Two browser sessions on one dashboard share its cached work, yet each sees every change to
the results on its next rerun: an import made in one session, a run written by a sweep, a
deleted file."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from specscope.results import writing

pytestmark = pytest.mark.e2e

MODEL = "org/shared-session-model"


def _rows(model: str) -> list[dict]:
    base = {
        "source": "shared-test",
        "model": model,
        "dataset": "chat",
        "hardware": "CPU",
        "output_len": 64,
        "temperature": 0.0,
        "status": "ok",
    }
    return [
        {**base, "method": "none", "k": 0, "concurrency": 1, "output_throughput": 40.0},
        {**base, "method": "ngram", "k": 2, "concurrency": 1, "output_throughput": 60.0},
        {**base, "method": "ngram", "k": 4, "concurrency": 1, "output_throughput": 70.0},
    ]


HEADLINE = "[data-testid='stMarkdown']"  # the Explorer's headline sentence: "... · 123 result rows"
ROWS = re.compile(r"· ([\d,]+) result rows")
ROWS_JS = """n => Array.from(document.querySelectorAll("[data-testid='stMarkdown']")).some(m =>
    m.textContent.includes('· ' + n.toLocaleString('en-US') + ' result rows'))"""


def _result_rows(page) -> int:
    text = page.locator(HEADLINE).filter(has_text=ROWS).inner_text()
    return int(ROWS.search(text).group(1).replace(",", ""))


def _rerun(page, wait_idle, expected: int) -> None:
    """Rerun the script the way a user does (the R shortcut) and wait for the row count; a key
    press that lands while a run is still going is ignored by Streamlit, so press again."""
    for attempt in range(4):
        wait_idle(page)
        page.locator("h1").first.click()
        page.keyboard.press("r")
        try:
            page.wait_for_function(ROWS_JS, arg=expected, timeout=30_000)
            break
        except PlaywrightTimeout:
            if attempt == 3:
                raise
    wait_idle(page)


# Whether any drawn plotly trace names or labels ``text`` (trace names and category x values).
TRACES_MENTION_JS = """text => Array.from(document.querySelectorAll('.js-plotly-plot')).some(
    el => JSON.stringify((el.data || []).map(t => [t.name, t.x])).includes(text))"""


def test_new_runs_imports_and_deletions_reach_every_open_session(
    streamlit_server, browser, specscope_home, wait_idle, tmp_path
):
    sessions = [browser.new_context(viewport={"width": 1500, "height": 1000}).new_page() for _ in range(2)]
    try:
        for page in sessions:
            page.goto(streamlit_server.url)
            page.locator(HEADLINE).filter(has_text=ROWS).wait_for(timeout=60_000)
            wait_idle(page)
        bundled = _result_rows(sessions[0])
        assert _result_rows(sessions[1]) == bundled > 0

        # A sweep finishing elsewhere writes a new run into the home: both sessions see it on rerun.
        path = writing.write_results(_rows(MODEL), run_id="shared-run-1", directory=specscope_home / "results")
        for page in sessions:
            _rerun(page, wait_idle, bundled + 3)

        # An import made through the first session's sidebar shows in the second.
        upload = writing.write_results(_rows(MODEL + "-imported"), run_id="upload-1", directory=tmp_path)
        first, second = sessions
        first.get_by_text("Import results", exact=True).click()  # drawn once opened
        wait_idle(first)
        first.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(upload))
        wait_idle(first)
        first.get_by_role("button", name="Import", exact=True).click()
        first.get_by_text("Imported 3 rows", exact=False).wait_for(timeout=60_000)
        _rerun(second, wait_idle, bundled + 6)
        _rerun(first, wait_idle, bundled + 6)
        for page in sessions:
            page.get_by_role("tab", name="Speedup by method").click()
            page.wait_for_function(TRACES_MENTION_JS, arg="shared-session-model-imported", timeout=60_000)

        # Deleting the run's file takes its rows away in both sessions.
        path.unlink()
        for page in sessions:
            _rerun(page, wait_idle, bundled + 3)
    finally:
        for page in sessions:
            page.context.close()
