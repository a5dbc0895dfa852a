"""The smaller things a newcomer trips on, in real Chromium (no vLLM server needed):

- the prompt upload states one size limit (its label's; the drop zone's own line, the server's larger
  limit, is hidden);
- a file of a type SpecScope cannot read, or one over the size limit (the browser used to refuse it with
  only a red chip), gets one sentence, and the last file's problems go;
- a JSON schema with three errors is reported with all three;
- the Explorer's best speedup names the hardware and model it was measured on (the bundled rows span
  CPU and GPU).
"""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.e2e


def test_runs_upload_states_one_limit_and_answers_every_file(streamlit_server, page, wait_idle, tmp_path):
    page.goto(f"{streamlit_server.url}/runs")
    wait_idle(page)
    uploader = page.locator("[data-testid='stFileUploader']").first
    uploader.wait_for(timeout=60_000)
    assert re.search(r"at most 10 MB", uploader.inner_text()) and "per file" not in uploader.inner_text()

    schema = {
        "type": "object",
        "properties": {"age": {"type": "integr"}, "name": {"maxLength": -1}},
        "required": "name",
    }
    bad = tmp_path / "people.jsonl"
    bad.write_text(
        json.dumps(
            {
                "prompt": "Extract the person.",
                "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}},
            }
        )
        + "\n"
    )
    upload = uploader.locator("input[type='file']")
    upload.set_input_files(str(bad))
    wait_idle(page)
    page.get_by_text("people.jsonl has 3 problems").wait_for(timeout=30_000)
    problems = page.locator("[data-testid='stTable']").filter(has=page.locator("th", has_text="field"))
    rows = problems.locator("tbody tr")  # the problems' table, not the runs' below it
    assert rows.count() == 3 and "properties/age/type" in rows.nth(0).inner_text(), problems.inner_text()
    pdf = tmp_path / "slides.pdf"
    pdf.write_bytes(b"%PDF-1.4 not a prompt set")
    upload.set_input_files(str(pdf))
    wait_idle(page)
    page.wait_for_timeout(1000)
    assert page.get_by_text("SpecScope reads prompt sets from").count() == 1  # the new file is answered
    assert page.get_by_text("people.jsonl has 3 problems").count() == 0  # the old file's error is gone

    upload.set_input_files(str(bad))
    wait_idle(page)
    page.get_by_text("people.jsonl has 3 problems").wait_for(timeout=30_000)
    big = tmp_path / "big.jsonl"
    line = json.dumps({"prompt": "y" * 1000}) + "\n"
    big.write_text(line * int(11.5e6 / len(line)))
    upload.set_input_files(str(big))
    wait_idle(page)
    page.get_by_text("the file is 11.5 MB; the limit is 10 MB").wait_for(timeout=60_000)
    assert page.get_by_text("people.jsonl has 3 problems").count() == 0
    page.screenshot(path="/tmp/newcomer-upload-over-the-limit.png")


def test_the_best_speedup_names_its_hardware_and_model(streamlit_server, page, wait_idle):
    page.goto(streamlit_server.url)
    wait_idle(page, timeout=180_000)
    headline = page.locator("[data-testid='stMarkdown']").filter(has_text="Best speedup")
    headline.wait_for(timeout=180_000)
    assert re.search(r"Best speedup \S+× .* on \S.* · \S", headline.inner_text()), headline.inner_text()
