"""Every page in the navigation runs without an exception on an empty home, with no server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.app
APP = Path(__file__).resolve().parents[2] / "app"
PAGES = re.findall(r'st\.Page\("([^"]+)"', (APP / "main.py").read_text())


def test_navigation_lists_every_page_file():
    files = sorted(p.relative_to(APP).as_posix() for p in (APP / "views").glob("*.py"))
    assert sorted(PAGES) == files


@pytest.mark.parametrize("page", PAGES)
def test_page_runs_on_an_empty_home(page, specscope_home):
    at = AppTest.from_file(str(APP / "main.py"), default_timeout=90)
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    assert at.title or at.header or at.markdown, f"{page} rendered nothing"
