"""The Explorer in a real Chromium: import the Ruiz results through the page, find the 3.555 point; a run with repeats draws its intervals."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

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


# Each trace's error bars as drawn (null where a trace has none).
ERROR_BARS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(
    el => ({title: (el.layout && el.layout.title && el.layout.title.text) || '',
            bars: (el._fullData || []).map(t => t.error_y && t.error_y.visible
                                                 ? Array.from(t.error_y.array || []) : null)}))"""
REPEATED_RUN = Path(__file__).resolve().parents[1] / "captures" / "cpu-repeats-code-editing.parquet"


def test_a_run_with_repeats_shows_its_intervals(streamlit_server, page, wait_idle, specscope_home):
    run_id = REPEATED_RUN.stem
    (specscope_home / "results").mkdir(exist_ok=True)
    shutil.copy(REPEATED_RUN, specscope_home / "results" / f"{run_id}.parquet")
    page.goto(f"{streamlit_server.url}/?run_id={run_id}")
    wait_idle(page, timeout=180_000)
    page.get_by_text(f"Showing run {run_id} only").wait_for(timeout=180_000)
    page.wait_for_function("""() => Array.from(document.querySelectorAll('.js-plotly-plot')).some(
        el => ((el.layout && el.layout.title && el.layout.title.text) || '').includes('Speedup vs K'))""",
                           timeout=120_000)
    figures = {f["title"]: f["bars"] for f in page.evaluate(ERROR_BARS_JS)}
    matches = [bars for title, bars in figures.items() if "Speedup vs K" in title]
    assert len(matches) == 1, list(figures)
    vs_k = matches[0]
    drawn = [b for bars in vs_k if bars for b in bars]
    assert drawn and all(b > 0 for b in drawn), figures
    # the best-K table is a canvas grid; its caption and the headline metric are text
    text = page.locator("[data-testid='stMain']").inner_text()
    assert "speedups carry a 95% interval." in text and "single runs" not in text
    best = page.locator("[data-testid='stMetric']").filter(has_text="Best speedup").inner_text()
    assert " ± " in best and "95% interval over repeats" in best


def _streamlit_404(message) -> bool:
    """Streamlit's own health and host-config probes, which may answer 404 while it starts."""
    return "404" in message.text and "/_stcore/" in (message.location or {}).get("url", "")


# Per figure: its title, how many points it draws, and its x range as laid out.
FIGURES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(el => ({
    title: (el.layout && el.layout.title && el.layout.title.text) || '',
    points: (el._fullData || []).reduce((n, t) => n + (t.y ? Array.from(t.y).length : 0), 0),
    xrange: el._fullLayout && el._fullLayout.xaxis ? Array.from(el._fullLayout.xaxis.range) : null}))"""
# Each tab and the title its figure starts with.
TABS = {"Speedup by method": "Speedup by method", "Speedup vs concurrency": "Speedup vs concurrency",
        "Acceptance length vs K": "Acceptance length vs K", "Throughput vs concurrency": "Output throughput",
        "Tail latency vs concurrency": "Tail latency", "Per-position acceptance": "Per-position acceptance"}


def test_explorer_draws_every_figure_without_console_errors_at_demo_sizes(streamlit_server, page, wait_idle):
    errors = []
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" and not _streamlit_404(m)
            else None)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    for width, height in ((1600, 1000), (1280, 800)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(streamlit_server.url)  # the Explorer, on the bundled results
        wait_idle(page, timeout=120_000)
        page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
        page.screenshot(path=f"/tmp/demo-explorer-top-{width}x{height}.png")
        for name, title in TABS.items():
            page.get_by_role("tab", name=name).click()
            wait_idle(page, timeout=120_000)
            deadline = time.monotonic() + 60
            figures = page.evaluate(FIGURES_JS)
            while not any(title in f["title"] for f in figures):
                assert time.monotonic() < deadline, (name, [f["title"] for f in figures])
                page.wait_for_timeout(300)
                figures = page.evaluate(FIGURES_JS)
            page.wait_for_timeout(300)  # let plotly finish drawing before the next tab
            text = page.locator("[data-testid='stMain']").inner_text()
            assert not re.search(r"\bnan\b", text, re.I), f"a NaN reached the page under {name}"
            if name == "Speedup by method":
                page.screenshot(path=f"/tmp/demo-explorer-by-method-{width}x{height}.png", full_page=True)
                by_method = [f for f in figures if "Speedup by method" in f["title"]]
                assert by_method and by_method[0]["points"] > 0 and by_method[0]["xrange"] != [-1, 6], by_method
    assert errors == []


# The K-schedule figure's traces: name, dash and points.
SCHEDULE_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).filter(
    el => ((el.layout && el.layout.title && el.layout.title.text) || '').includes('K schedule')).flatMap(
    el => (el._fullData || []).map(t => ({name: t.name, dash: t.line && t.line.dash,
                                           y: Array.from(t.y || [])})))"""


def test_explorer_draws_a_schedule_curve(streamlit_server, page, wait_idle, specscope_home):
    """Rows of the captured run's K=4 server written again as the schedule 1-4:4, which drafts
    exactly K=4 at the run's batch sizes (1 and 4): a schedule curve beside the fixed K."""
    import pyarrow.parquet as pq

    from specscope.store import write_results

    rows = pq.read_table(REPEATED_RUN).to_pylist()
    scheduled = [{**r, "k_schedule": "1-4:4", "run_id": "schedule-e2e"} for r in rows if r["k"] == 4]
    write_results([{**r, "run_id": "schedule-e2e"} for r in rows] + scheduled,
                  run_id="schedule-e2e", directory=specscope_home / "results")
    page.goto(f"{streamlit_server.url}/?run_id=schedule-e2e")
    wait_idle(page, timeout=180_000)
    page.get_by_text("K schedule vs fixed K", exact=True).first.wait_for(timeout=120_000)
    page.wait_for_function(f"() => ({SCHEDULE_JS})().length > 0", timeout=60_000)
    traces = {t["name"]: t for t in page.evaluate(SCHEDULE_JS)}
    assert traces["schedule 1-4:4"]["dash"] == "dash" and traces["K=4"]["dash"] == "solid", traces
    assert traces["schedule 1-4:4"]["y"] == pytest.approx(traces["K=4"]["y"], rel=1e-9)
    assert "K=2" in traces
    # verified: the schedule only ties the best single K (it is K=4), so the verdict keeps that K
    assert page.get_by_text("Deploy K=2 rather than the schedule 1-4:4, the simpler server").count() == 1


def test_the_sources_table_is_drawn_only_once_opened(streamlit_server, page, wait_idle):
    """The landing page loads no table scripts ahead of its headline; the table is there when asked for."""
    page.goto(streamlit_server.url)
    wait_idle(page)
    page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    sources = page.locator("[data-testid='stExpander']").filter(has_text="Where the bundled results come from")
    assert sources.locator("[data-testid='stDataFrame']").count() == 0
    sources.get_by_text("Where the bundled results come from").click()
    wait_idle(page)
    sources.locator("[data-testid='stDataFrame']").wait_for(timeout=60_000)
