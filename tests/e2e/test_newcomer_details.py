"""The smaller things a newcomer trips on, in real Chromium (no vLLM server needed):

- the prompt upload's label and its drop zone state the same size limit;
- a file of a type SpecScope cannot read gets one sentence, and the last file's problems go;
- the Explorer's best speedup names the hardware and model it was measured on (the bundled rows span
  CPU and GPU).
"""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.e2e


def test_runs_upload_agrees_on_its_limit_and_answers_every_file(streamlit_server, page, wait_idle, tmp_path):
    page.goto(f"{streamlit_server.url}/runs")
    wait_idle(page)
    uploader = page.locator("[data-testid='stFileUploader']").first
    uploader.wait_for(timeout=60_000)
    label = re.search(r"at most (\d+) MB", uploader.inner_text())
    zone = re.search(r"(\d+)\s*MB per file", uploader.inner_text())
    assert label and zone and label.group(1) == zone.group(1), uploader.inner_text()

    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"prompt": "fine"}\n{"prompt": 42}\n')
    upload = uploader.locator("input[type='file']")
    upload.set_input_files(str(bad))
    wait_idle(page)
    page.get_by_text("broken.jsonl has 1 problem").wait_for(timeout=30_000)
    pdf = tmp_path / "slides.pdf"
    pdf.write_bytes(b"%PDF-1.4 not a prompt set")
    upload.set_input_files(str(pdf))
    wait_idle(page)
    page.wait_for_timeout(1000)
    assert page.get_by_text("slides.pdf has 1 problem").count() == 1  # the new file is answered
    assert page.get_by_text("broken.jsonl has 1 problem").count() == 0  # the old file's error is gone


def test_the_best_speedup_names_its_hardware_and_model(streamlit_server, page, wait_idle):
    page.goto(streamlit_server.url)
    wait_idle(page, timeout=180_000)
    headline = page.locator("[data-testid='stMarkdown']").filter(has_text="Best speedup")
    headline.wait_for(timeout=180_000)
    assert re.search(r"Best speedup \S+× .* on \S.* · \S", headline.inner_text()), headline.inner_text()

