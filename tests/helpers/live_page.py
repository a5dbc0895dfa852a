"""What the browser tests do on the Live page: choose servers and read a pane's answer."""

from __future__ import annotations

import re
import time

from playwright.sync_api import TimeoutError as PlaywrightTimeout


def chosen_servers(page, at_least: int = 0, timeout_ms: int = 10_000) -> list[str]:
    """The servers chosen in Live's server box, in order; waits up to ``timeout_ms`` for ``at_least`` of them
    (the box draws its tags a moment after the script is idle)."""
    box = page.locator("[data-testid='stMultiSelect']").filter(has_text="Started or attached servers")
    box.wait_for(timeout=timeout_ms)
    for _ in range(timeout_ms // 250):
        chosen = box.locator("[data-tag] span[title]").all_inner_texts()
        if len(chosen) >= at_least:
            return chosen
        page.wait_for_timeout(250)
    return chosen


def choose_servers(page, wait_idle, names, max_tokens: int, timeout_s: float = 180) -> None:
    """Pick ``names`` in Live's server box (in that order; the servers Live chose itself are cleared first) and
    set the answer's length. A click the box's redraw took from under the mouse (a rerun on a loaded machine
    detaches the tag it aimed at) is tried again on the box as it is then; a box that refuses clicks for 45 s
    (its tags drawn without Remove buttons: the page disables its widgets while it has lost its server) starts
    over on the page reloaded, for ``timeout_s`` in all."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _choose(page, wait_idle, names, min(deadline, time.monotonic() + 45))
            break
        except PlaywrightTimeout:
            if time.monotonic() > deadline:
                raise
            page.reload()
            wait_idle(page)
    assert chosen_servers(page, at_least=len(names)) == list(names), chosen_servers(page)
    page.get_by_label("Max tokens").fill(str(max_tokens))
    page.get_by_label("Max tokens").press("Enter")
    wait_idle(page)


def _choose(page, wait_idle, names, deadline: float) -> None:
    box = page.locator("[data-testid='stMultiSelect']").filter(has_text="Started or attached servers")

    def again(click) -> None:
        while True:
            try:
                click()
                return
            except PlaywrightTimeout:
                if time.monotonic() > deadline:
                    raise
                page.keyboard.press("Escape")
                wait_idle(page)

    while chosen_servers(page, timeout_ms=1_000):  # the servers Live chose itself
        again(lambda: box.get_by_role("button", name=re.compile("^Remove ")).first.click(timeout=5_000))
        wait_idle(page)
    for name in names:

        def pick(name=name) -> None:
            if name not in chosen_servers(page, timeout_ms=1_000):
                box.locator("input").click(timeout=5_000)
                page.get_by_role("option", name=name).click(timeout=5_000)

        again(pick)
        wait_idle(page)
    page.keyboard.press("Escape")


def pane_answer(page, label: str) -> str:
    """The pane's output text, rejected drafts left out."""
    return "".join(
        t.inner_text()
        for t in page.locator(f"[data-pane='{label}'] .ss-pane .ss-tok").all()
        if t.get_attribute("data-kind") != "rejected"
    )
