"""An operator stays an operator, in real Chromium, on a shared dashboard: after ``?token=`` a reload and
a second tab of the same browser are still operators (an HttpOnly, SameSite=Strict cookie holds a pass
signed with the token, never the token, and the address never shows the token again); rotating the
token or leaving operator mode makes every tab of that browser a viewer. Another browser stays a viewer.
Needs no vLLM server: the sidebar says the role.
"""

from __future__ import annotations

import time

import pytest

from specscope import access

pytestmark = pytest.mark.e2e

LEAVE = "Leave operator mode"
COOKIE = "specscope_operator"


@pytest.fixture
def shared_dashboard(streamlit_factory, specscope_home):
    return streamlit_factory(home=specscope_home, env={"SPECSCOPE_SHARE": "1"})


def _role(page, wait_idle) -> str:
    wait_idle(page)
    page.get_by_text("Operator token").or_(page.get_by_role("button", name=LEAVE)).first.wait_for(timeout=30_000)
    return "operator" if page.get_by_role("button", name=LEAVE).count() else "viewer"


def _cookie_is(context, present: bool, timeout_s: float = 30) -> bool:
    """Wait until the pass cookie is set (or cleared) by the page's same-origin POST; whether it is."""
    deadline = time.monotonic() + timeout_s
    while (COOKIE in {c["name"] for c in context.cookies()}) != present and time.monotonic() < deadline:
        time.sleep(0.1)
    return (COOKIE in {c["name"] for c in context.cookies()}) == present


def _open(context, url, wait_idle):
    page = context.new_page()
    page.goto(url)
    return page, _role(page, wait_idle)


def test_operator_survives_reload_and_new_tab_until_rotation(shared_dashboard, browser, wait_idle):
    url = f"{shared_dashboard.url}/servers"
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        first, role = _open(context, f"{url}?token={access.token()}", wait_idle)
        assert role == "operator" and "token=" not in first.url
        assert _cookie_is(context, present=True)  # the page's claim of the pass (a same-origin POST) landed

        first.reload()
        assert _role(first, wait_idle) == "operator" and "token=" not in first.url
        cookie = next(c for c in context.cookies() if c["name"] == COOKIE)
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and access.token() not in cookie["value"]
        second, role = _open(context, url, wait_idle)
        assert role == "operator"
        assert first.get_by_role("button", name="Start", exact=True).count() >= 1  # operator controls are drawn

        stranger = browser.new_context()  # another browser never had the pass
        try:
            assert _open(stranger, url, wait_idle)[1] == "viewer"
        finally:
            stranger.close()

        access.rotate()
        second.reload()
        assert _role(second, wait_idle) == "viewer"
        assert _open(context, url, wait_idle)[1] == "viewer"
    finally:
        context.close()


def test_leaving_operator_mode_leaves_in_every_tab(shared_dashboard, browser, wait_idle):
    url = f"{shared_dashboard.url}/servers"
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        first, role = _open(context, f"{url}?token={access.token()}", wait_idle)
        assert role == "operator" and _cookie_is(context, present=True)
        first.get_by_role("button", name=LEAVE).click()
        first.get_by_role("button", name=LEAVE).wait_for(state="detached", timeout=30_000)
        assert _role(first, wait_idle) == "viewer"
        assert _cookie_is(context, present=False)  # the page's clearing POST landed
        first.reload()
        assert _role(first, wait_idle) == "viewer"
        assert _open(context, url, wait_idle)[1] == "viewer"
    finally:
        context.close()
