"""Browser tests: ``streamlit run app/main.py`` as a subprocess (``tests/helpers/streamlit_server.py``), driven by
Debian's Chromium via Playwright.

Fixtures: ``streamlit_server`` (base URL; the server log is attached to failures), ``page``
(a Playwright page in headless /usr/bin/chromium), and ``wait_idle`` (a function ``wait_idle(page)``) which waits for
Streamlit's script to finish instead of sleeping.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from helpers.streamlit_server import MAIN, StreamlitServer

CHROMIUM = os.environ.get("SPECSCOPE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.e2e

try:  # a redraw on a loaded 2-core machine can take longer than Playwright's default 5 s for an expect
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
except ImportError:  # the browser tests skip without Playwright
    pass


@pytest.fixture
def streamlit_factory(tmp_path, request):
    """Start a streamlit server with a given home and env; each is stopped after the test."""
    servers: list[StreamlitServer] = []

    def start(
        home: Path | None = None, env: dict | None = None, entry: Path | None = None, address: str | None = "127.0.0.1"
    ) -> StreamlitServer:
        """``address`` None: the one the project's .streamlit/config.toml names."""
        home = home or tmp_path / "home"
        home.mkdir(parents=True, exist_ok=True)
        # the landing pages are computed by the tests that open them, not by every start (tests/app/test_warm.py
        # and tests/bench/dashboard.py measure warming)
        server = StreamlitServer(home, entry or MAIN, {"SPECSCOPE_WARM": "0", **(env or {})}, address)
        servers.append(server)
        # its default ceiling (300 s) is generous: a loaded machine (servers, a sweep, other browsers) can take
        # minutes to start Python and import the app
        server.wait_healthy()
        return server

    yield start
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for server in servers:
        if failed:
            print(f"--- streamlit log ({server.url}) ---\n{server.log()}")
        server.stop()


@pytest.fixture
def streamlit_server(streamlit_factory, specscope_home) -> StreamlitServer:
    return streamlit_factory(home=specscope_home)


@pytest.fixture(scope="module")
def browser():
    """One Chromium per test module: Playwright's sync API keeps an event loop running while it
    is open, which must not outlive the browser tests (later tests call asyncio.run)."""
    if not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None:
        pytest.skip(f"{CHROMIUM} is missing; install Debian's chromium (launchers/install.sh --test)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = context.new_page()
    yield page
    context.close()


def _wait_idle(page, timeout: float = 60_000) -> None:
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=timeout)


@pytest.fixture
def wait_idle():
    """``wait_idle(page)`` waits until Streamlit has finished running the script after the last action."""
    return _wait_idle


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.rep_call = report
