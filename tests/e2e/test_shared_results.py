"""The Explorer in a real Chromium shows a run that another SpecScope home wrote to the shared
S3 store (a real SeaweedFS server)."""

from __future__ import annotations

import shutil

import pytest

from helpers.paths import CAPTURES
from helpers.vega_charts import MARKS_JS
from specscope.results import shared

pytestmark = [pytest.mark.e2e, pytest.mark.cluster]

RUN = CAPTURES / "cpu-repeats-code-editing.parquet"  # a real CPU sweep


def test_the_explorer_shows_a_run_another_home_put_in_the_shared_store(
    shared_store, s3_server, streamlit_factory, tmp_path, monkeypatch, page, wait_idle
):
    writer = tmp_path / "writer"
    monkeypatch.setenv("SPECSCOPE_HOME", str(writer))
    (writer / "results").mkdir(parents=True)
    shutil.copy(RUN, writer / "results" / RUN.name)
    assert shared.publish(RUN.stem) is None

    reader = tmp_path / "reader"
    assert not (reader / "results" / RUN.name).exists()
    server = streamlit_factory(home=reader, env={**s3_server.env(), "SPECSCOPE_STORE": shared_store})
    page.goto(f"{server.url}/?run_id={RUN.stem}")
    wait_idle(page, timeout=120_000)
    page.get_by_text(f"Showing run {RUN.stem} only.").wait_for(timeout=60_000)
    page.get_by_text(f"Results shared with the team in {shared_store}", exact=False).wait_for()
    page.locator("[data-testid='stVegaLiteChart'] svg").first.wait_for(timeout=60_000)
    assert [m for chart in page.evaluate(MARKS_JS, "point") for m in chart["marks"] if m.get("speedup ×")], server.log()
    assert page.get_by_text("Nothing answers").count() == 0
