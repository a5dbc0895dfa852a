"""Every page in the navigation runs without an exception on an empty home, with no server."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from helpers.paths import APP, DASHBOARD, VIEWS

pytestmark = pytest.mark.app
PAGES = list(dict.fromkeys(re.findall(r'st\.Page\("([^"]+)"', (DASHBOARD).read_text())))


def test_navigation_lists_every_page_file():
    files = sorted(p.relative_to(APP).as_posix() for p in (VIEWS).glob("*.py"))
    assert sorted(PAGES) == files


@pytest.mark.parametrize("page", PAGES)
def test_page_runs_on_an_empty_home(page, specscope_home):
    at = AppTest.from_file(str(DASHBOARD), default_timeout=90)
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    assert at.title or at.header or at.markdown, f"{page} rendered nothing"


@pytest.mark.parametrize("page", [p for p in PAGES if p.endswith(("explorer.py", "runs.py", "theory.py"))])
def test_a_store_location_that_is_not_s3_is_one_sentence_on_every_page_that_reads_results(
    page, specscope_home, monkeypatch
):
    monkeypatch.setenv("SPECSCOPE_STORE", "/srv/team-results")
    at = AppTest.from_file(str(DASHBOARD), default_timeout=90)
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == [
        "SPECSCOPE_STORE='/srv/team-results' is not an S3 location; write it as s3://bucket/prefix."
    ]
