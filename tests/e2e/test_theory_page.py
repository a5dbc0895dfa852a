"""The Theory page in a real Chromium: moving the alpha slider redraws the model curves."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from helpers.vega_charts import MARKS_JS

pytestmark = pytest.mark.e2e


def _model_curve(page) -> list[float]:
    """The model's speedup at K = 1, 2, ... as the chart draws it (a dot per K on the line)."""

    def curve():
        chart = next((c for c in page.evaluate(MARKS_JS, "point") if c["title"] == "Model: speedup vs K"), None)
        return (
            [float(m["speedup ×"]) for m in sorted(chart["marks"], key=lambda m: float(m["K (speculative tokens)"]))]
            if chart
            else []
        )

    deadline = time.monotonic() + 30
    while not (points := curve()):
        assert time.monotonic() < deadline, "the model's speedup chart drew no points"
        page.wait_for_timeout(200)
    return points


def test_moving_alpha_slider_redraws_curve(streamlit_server, page, wait_idle):
    page.goto(f"{streamlit_server.url}/theory")
    wait_idle(page)
    _open_expander(page, "Illustration: the model with values you pick")  # open already where nothing is fitted
    before = _model_curve(page)
    assert before[4] == pytest.approx((1 - 0.8**5) / 0.2 / 1.2)  # alpha 0.8, K 4, c 0.05

    slider = page.locator("input[type=range][aria-label='Acceptance rate α']")
    assert slider.input_value() == "0.8"
    slider.focus()
    for _ in range(20):
        slider.press("ArrowLeft")
    page.wait_for_function(
        "() => document.querySelector(\"input[type=range][aria-label='Acceptance rate α']\").value === '0.6'",
        timeout=10_000,
    )
    wait_idle(page)
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('[data-testid=stMetricValue]'))"
        ".some(el => el.textContent.trim() === '2.306')",
        timeout=30_000,
    )
    expected = (1 - 0.6**5) / 0.4 / 1.2
    deadline = time.monotonic() + 30  # the metric can land a redraw before the chart on a loaded machine
    while (after := _model_curve(page))[4] != pytest.approx(expected) and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    assert after != before
    assert after[4] == pytest.approx(expected)


# Streamlit's frontend probes /_stcore/health and /_stcore/host-config under the page's path
# first; those 404s are its own and expected.
HEALTH_404 = ("/_stcore/health", "/_stcore/host-config")

CHARTS_DRAWN_JS = """() => {
    const charts = document.querySelectorAll("[data-testid='stVegaLiteChart']");
    return charts.length >= 3 && Array.from(charts).every(c => c.querySelector('svg'));
}"""


def _own_errors(messages: list) -> list[str]:
    return [
        f"{text} @ {url}"
        for kind, text, url in messages
        if kind == "error" and not ("404" in text and any(p in url for p in HEALTH_404))
    ]


@pytest.mark.parametrize("width,height", [(1600, 1000), (1280, 800)])
def test_theory_page_logs_no_console_error(streamlit_factory, specscope_home, page, wait_idle, width, height):
    """On the bundled results (no file hidden), at demo sizes, picking another group included."""
    server = streamlit_factory(home=specscope_home)
    messages = []
    page.on("console", lambda m: messages.append((m.type, m.text, (m.location or {}).get("url", ""))))
    page.on("pageerror", lambda exc: messages.append(("error", str(exc), "")))
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server.url}/theory")
    wait_idle(page)
    page.wait_for_function(CHARTS_DRAWN_JS, timeout=60_000)
    page.screenshot(path=f"/tmp/demo-theory-theory-{width}x{height}.png", full_page=True)

    page.get_by_test_id("stSelectbox").filter(has_text="Group").locator("input").click()
    page.keyboard.type("suffix · code-editing")
    page.keyboard.press("Enter")
    # suffix's own advice, with its measured speedup: the deploy answer names suffix, so the page before the
    # choice (whose advice also has a measured speedup) cannot pass for it
    page.get_by_text(re.compile(r"^Deploy suffix with .*\d+\.\d+× \[[^\]]+\] measured")).first.wait_for(timeout=60_000)
    wait_idle(page)
    page.wait_for_function(CHARTS_DRAWN_JS, timeout=60_000)
    _open_expander(page, "The formulas behind this advice")
    expect(page.get_by_text("ΔAL > d1·S", exact=False).first).to_be_visible(timeout=30_000)
    page.screenshot(path=f"/tmp/demo-theory-suffix-{width}x{height}.png", full_page=False)
    wait_idle(page)
    assert _own_errors(messages) == []


def _open_expander(page, label: str, timeout_s: float = 60) -> None:
    """Opens the expander ``label`` and waits until it is open. Its content is in the page while it is closed, so
    text inside it marks nothing; a click that a redraw undid (the expander drawn anew, closed) is made again."""
    details = page.get_by_test_id("stExpander").filter(has_text=label).locator("details")
    details.wait_for(state="attached", timeout=timeout_s * 1000)
    deadline = time.monotonic() + timeout_s
    while not details.evaluate("el => el.open"):
        assert time.monotonic() < deadline, f"the expander {label!r} did not open in {timeout_s:g} s"
        details.locator("summary").click()
        for _ in range(20):  # up to 5 s for this click to open it before clicking again
            if details.evaluate("el => el.open"):
                break
            page.wait_for_timeout(250)
