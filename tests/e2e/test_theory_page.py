"""The Theory page in a real Chromium: moving the alpha slider redraws the model curves."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e

# y values of the first trace of the figure whose title holds `title` (Streamlit wraps it in <b>).
CURVE_JS = """title => {
    const el = Array.from(document.querySelectorAll('.js-plotly-plot')).find(
        el => el.layout && el.layout.title && (el.layout.title.text || '').includes(title));
    return el && el._fullData && el._fullData.length ? Array.from(el._fullData[0].y) : null; }"""


def _model_curve(page) -> list[float]:
    page.wait_for_function(CURVE_JS, arg="Model: speedup vs K", timeout=30_000)
    return page.evaluate(CURVE_JS, "Model: speedup vs K")


def test_moving_alpha_slider_redraws_curve(streamlit_server, page, wait_idle):
    page.goto(f"{streamlit_server.url}/theory")
    wait_idle(page)
    before = _model_curve(page)
    assert before[4] == pytest.approx((1 - 0.8 ** 5) / 0.2 / 1.2)     # alpha 0.8, K 4, c 0.05

    slider = page.locator("input[type=range][aria-label='Acceptance rate α']")
    assert slider.input_value() == "0.8"
    slider.focus()
    for _ in range(20):
        slider.press("ArrowLeft")
    page.wait_for_function("() => document.querySelector(\"input[type=range][aria-label='Acceptance "
                           "rate α']\").value === '0.6'", timeout=10_000)
    wait_idle(page)
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('[data-testid=stMetricValue]'))"
        ".some(el => el.textContent.trim() === '2.306')", timeout=30_000)
    after = _model_curve(page)
    assert after != before
    assert after[4] == pytest.approx((1 - 0.6 ** 5) / 0.4 / 1.2)
