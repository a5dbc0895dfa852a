"""The Runs page's sweep form in real Chromium at demo sizes: after uploading a 3-prompt set,
requests per cell read 3, and running servers can be picked for a sweep over concurrency.
Screenshots go to /tmp/demo-runs-runs-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.e2e


@pytest.fixture
def runs_app(streamlit_factory, specscope_home, metrics_url):
    """The app with one attached server (a local /health) in its list."""
    from specscope import launch
    from specscope.launch import registry

    registry.write_state(launch.ServerState(name="gpu-node", url=metrics_url, attached=True, method="speculative", k=3))
    server = streamlit_factory(home=specscope_home)
    yield f"{server.url}/runs"


def test_requests_follow_an_uploaded_set_and_servers_can_be_picked(runs_app, page, wait_idle, tmp_path):
    three = tmp_path / "three.jsonl"
    three.write_text('{"prompt": "one"}\n{"prompt": "two"}\n{"prompt": "three"}\n')
    requests = page.get_by_role("spinbutton", name="Requests per cell (0 = the whole set)")
    for width, height in ((1600, 1000), (1280, 800)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(runs_app)
        wait_idle(page)
        expect(requests).to_have_value("8")  # a bundled sample set: its size, capped at 8
        page.locator("[data-testid='stFileUploader'] input[type='file']").set_input_files(str(three))
        wait_idle(page)
        page.get_by_text("three.jsonl: 3 prompts").wait_for(timeout=30_000)
        expect(requests).to_have_value("3", timeout=30_000)
        page.get_by_text("2. Sweep").scroll_into_view_if_needed()
        page.screenshot(path=f"/tmp/demo-runs-runs-{width}.png")

    page.get_by_text("Servers already running").click()
    wait_idle(page)
    page.get_by_text("Servers (healthy ones; K is each server's own)").wait_for(timeout=30_000)
    wait_idle(page)
    page.locator("[data-testid='stMultiSelect'] input").click()
    page.keyboard.press("ArrowDown")
    page.get_by_text("gpu-node (speculative K=3)").wait_for(timeout=15_000)
    page.screenshot(path="/tmp/demo-runs-runs-servers.png")
