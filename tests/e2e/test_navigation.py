"""The sidebar in a real Chromium: every page's icon is drawn from Streamlit's bundled icon font,
not from an emoji font that Debian's Chromium does not have (it drew empty boxes); and a deep link to a
page loads it without a failed request."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e

PAGES = ["Live", "Servers", "Prompt sets & runs", "Explorer", "Theory"]


def test_every_page_has_a_drawn_icon(streamlit_server, page, wait_idle):
    page.goto(streamlit_server.url)
    wait_idle(page)
    nav = page.locator("[data-testid='stSidebarNav']")
    for title in PAGES:
        link = nav.locator("a").filter(has_text=title)
        assert link.locator("[data-testid='stIconMaterial']").count() == 1, title
    page.wait_for_function("() => document.fonts.status === 'loaded'")
    fonts = page.evaluate("() => Array.from(document.fonts).filter(f => f.status === 'loaded').map(f => f.family)")
    assert any("Material Symbols" in family for family in fonts), fonts


def test_a_deep_link_finds_the_backend_without_a_404(streamlit_server, page, wait_idle):
    """Opened at /live or /theory, the frontend used to try /live/_stcore/health and /live/_stcore/host-config
    first (two 404s a link); the page now names the backend's root, so nothing fails."""
    failed = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    for path in ("/live", "/theory?setup=x"):
        page.goto(f"{streamlit_server.url}{path}")
        wait_idle(page)
    page.get_by_role("heading", name="Theory").wait_for(timeout=60_000)
    assert failed == []
