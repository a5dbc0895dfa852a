"""What the browser tests do on the Live page: choose servers and read a pane's answer."""

from __future__ import annotations


def choose_servers(page, wait_idle, names, max_tokens: int) -> None:
    """Pick ``names`` in Live's server box (in that order) and set the answer's length."""
    box = page.locator("[data-testid='stMultiSelect']").filter(has_text="Started or attached servers")
    for name in names:
        box.locator("input").click()
        page.get_by_role("option", name=name).click()
        wait_idle(page)
    page.keyboard.press("Escape")
    page.get_by_label("Max tokens").fill(str(max_tokens))
    page.get_by_label("Max tokens").press("Enter")
    wait_idle(page)


def pane_answer(page, label: str) -> str:
    """The pane's output text, rejected drafts left out."""
    return "".join(t.inner_text() for t in page.locator(f"[data-pane='{label}'] .ss-pane .ss-tok").all()
                   if t.get_attribute("data-kind") != "rejected")
