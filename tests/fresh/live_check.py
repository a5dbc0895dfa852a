"""A Live stream through a running dashboard, as an operator would run it in Chromium: the baseline and ngram
demo servers side by side on one prompt, screenshots at 1600x1000 and 1280x800. For the fresh-machine checks
(docker-image.sh's FRESH_WHILE_UP); not part of CI.

    DASHBOARD_URL=http://127.0.0.1:8501 SPECSCOPE_HOME=/data python tests/fresh/live_check.py /tmp/shots

Reads the operator token from $SPECSCOPE_HOME/operator-token; prints what each pane shows and exits 1 when
a pane did not finish or ngram accepted no draft token.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for helpers
from helpers.live_page import choose_servers  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
METHODS = ("none", "ngram")  # the demo's baseline and ngram, by the names their state files give
PROMPT = (
    "Rename the variable `tmp` to `total` everywhere in this function and return the full function.\n\n"
    "def add_prices(items):\n    tmp = 0\n    for item in items:\n        tmp += item.price\n    return tmp\n"
)


def wait_idle(page, timeout: float = 120_000) -> None:
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=timeout)


def main(shots: Path) -> int:
    url = os.environ["DASHBOARD_URL"].rstrip("/")
    home = Path(os.environ["SPECSCOPE_HOME"])
    token = (home / "operator-token").read_text().strip()
    states = [json.loads(path.read_text()) for path in (home / "servers").glob("*.json")]
    servers = [next(state["name"] for state in states if state.get("method") == method) for method in METHODS]
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1600, "height": 1000}).new_page()
        page.goto(f"{url}/live?token={token}")
        wait_idle(page)
        choose_servers(page, wait_idle, servers, max_tokens=64)
        page.get_by_label("Prompt text").fill(PROMPT)
        page.get_by_label("Prompt text").press("Control+Enter")
        wait_idle(page)
        page.get_by_role("button", name="Start", exact=True).click()
        page.wait_for_function(
            """labels => labels.every(l => {
                const el = document.querySelector(`[data-pane='${l}']`);
                return el && el.textContent.includes('· done ·');
            })""",
            arg=servers,
            timeout=300_000,
        )
        wait_idle(page)
        page.screenshot(path=str(shots / "live-1600x1000.png"))
        page.set_viewport_size({"width": 1280, "height": 800})
        page.wait_for_timeout(1500)
        page.screenshot(path=str(shots / "live-1280x800.png"))
        accepted = {name: page.locator(f"[data-pane='{name}'] [data-kind='accepted']").count() for name in servers}
        tokens = {name: page.locator(f"[data-pane='{name}'] [data-metric='tokens'] b").inner_text() for name in servers}
        browser.close()
    print(f"[live] tokens {tokens}, accepted draft tokens {accepted}, screenshots in {shots}", file=sys.stderr)
    return 0 if accepted[servers[1]] > 0 else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/specscope-live-check")))
