"""The Explorer's per-prompt section in a real Chromium on the bundled CPU runs: speedup and
acceptance by category and by prompt length are drawn for the mixed run, and on the code-editing
run "Open in Live" opens Live with the slowest prompt filled in. SPECSCOPE_SHOTS=<folder> also saves
the views as PNGs (1600x1000 and 1280x800)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from specscope.analysis import per_prompt
from specscope.results.store import Store
from ui.per_prompt import FOLDED

pytestmark = pytest.mark.e2e

SIZES = {"1600": {"width": 1600, "height": 1000}, "1280": {"width": 1280, "height": 800}}


def _shot(page, name: str) -> None:
    folder = os.environ.get("SPECSCOPE_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"))


@pytest.mark.parametrize("size", list(SIZES))
def test_the_explorer_draws_the_section_and_opens_a_slow_prompt_in_live(streamlit_server, browser, wait_idle, size):
    rows = per_prompt.per_prompt(Store())
    shown = rows[rows["run_id"] == per_prompt.runs(rows)[0]]  # the run the section opens on: the newest
    slowest = per_prompt.slower_rows(rows[rows["run_id"] == "specscope-cpu-code-editing"]).iloc[0]
    context = browser.new_context(viewport=SIZES[size])
    page = context.new_page()
    try:
        page.goto(streamlit_server.url)
        wait_idle(page, 120_000)
        heading = page.locator("[data-testid='stHeading']").filter(has_text="Where it pays, per prompt")
        heading.scroll_into_view_if_needed()
        page.locator("[data-testid='stExpander'] summary").filter(has_text=FOLDED).click()  # figures drawn once open
        wait_idle(page, 120_000)
        charts = page.locator("[data-testid='stPlotlyChart']").filter(has_text="by category")
        charts.nth(1).wait_for(timeout=60_000)  # plotly draws after the script ends
        assert charts.count() == 2  # speedup and acceptance length
        assert all(category in charts.first.inner_text() for category in set(shown["category"]))
        heading.evaluate("el => el.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(500)
        _shot(page, f"explorer-per-prompt-category-{size}")

        page.get_by_text("Prompt length (tokens)", exact=True).click()
        wait_idle(page, 120_000)
        lengths = page.locator("[data-testid='stPlotlyChart']").filter(has_text="by prompt length")
        lengths.nth(1).wait_for(timeout=60_000)
        assert lengths.count() == 2
        assert all(bucket in lengths.first.inner_text() for bucket in set(shown["length_bucket"]))
        page.locator("strong").filter(has_text="Slower than baseline").scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        _shot(page, f"explorer-per-prompt-length-{size}")

        run = page.locator("[data-testid='stSelectbox']").filter(
            has=page.locator("label").filter(has_text=re.compile("^Run$"))
        )
        run.click()
        page.keyboard.type("specscope-cpu-code-editing")  # the list shows a few runs at a time: filter it
        page.get_by_role("option").filter(has_text="specscope-cpu-code-editing").click()
        wait_idle(page, 120_000)
        page.locator("strong").filter(has_text="Slower than baseline").scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        _shot(page, f"explorer-per-prompt-slower-{size}")
        page.get_by_role("link", name="Open in Live").click()
        page.wait_for_function(
            "() => (document.querySelector('h1')?.innerText || '').startsWith('Live')", timeout=120_000
        )  # the new page, not the Explorer still idle before it goes
        wait_idle(page, 120_000)
        assert page.locator("h1").first.inner_text().startswith("Live")
        note = page.locator("[data-testid='stAlertContentInfo']").filter(has_text="is filled in")
        assert f"Prompt {slowest['prompt_id']} of '{slowest['dataset']}'" in note.inner_text()
        _shot(page, f"live-prefilled-{size}")
        chosen = page.locator("[data-testid='stSelectbox'] input").evaluate_all("els => els.map(e => e.value)")
        assert any(value.startswith(f"{slowest['prompt_id']}: ") for value in chosen), chosen
    finally:
        context.close()
