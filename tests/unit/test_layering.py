"""The library holds the logic and the pages stay thin: checked on the source text."""

from __future__ import annotations

import re

import pytest

from helpers.paths import APP, VIEWS

PAGE_FILES = sorted((VIEWS).glob("*.py"))
LIBRARY_FILES = sorted((APP / "specscope").rglob("*.py"))
FORBIDDEN_IN_PAGES = re.compile(
    r"^\s*(import|from)\s+(requests|httpx|subprocess|duckdb|asyncio|aiohttp|socket)\b", re.M
)


@pytest.mark.parametrize("path", PAGE_FILES, ids=lambda p: p.name)
def test_pages_do_no_io_of_their_own(path):
    text = path.read_text()
    assert not FORBIDDEN_IN_PAGES.search(text), f"{path.name} imports I/O; call the library instead"
    assert not re.search(r"\b(SELECT|INSERT|CREATE)\s+", text), f"{path.name} holds SQL"


@pytest.mark.parametrize("path", LIBRARY_FILES, ids=lambda p: p.relative_to(APP).as_posix())
def test_library_never_imports_streamlit(path):
    assert not re.search(r"^\s*(import|from)\s+streamlit\b", path.read_text(), re.M)


@pytest.mark.parametrize(
    "path", [p for p in LIBRARY_FILES if p.name != "__init__.py"], ids=lambda p: p.relative_to(APP).as_posix()
)
def test_library_modules_say_what_they_own(path):
    text = path.read_text()
    assert text.lstrip().startswith('"""'), f"{path.name} has no module docstring"
    assert "__all__" in text, f"{path.name} has no __all__"
