"""The sidebar in a real Chromium: every page's icon is drawn from Streamlit's bundled icon font,
not from an emoji font that Debian's Chromium does not have (it drew empty boxes)."""

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
