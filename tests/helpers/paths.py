"""The checkout's folders and files the tests, benchmarks and helpers read, named once so a test that moves
between folders keeps finding them."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
APP = REPO / "app"
DASHBOARD = APP / "dashboard.py"  # streamlit's entry for AppTest: the Explorer is its first page
VIEWS = APP / "views"
DATA = REPO / "data"  # bundled results, prompt sets and their schema
PROMPTS = DATA / "prompts"
DOCS = REPO / "docs"
LAUNCHERS = REPO / "launchers"
CAPTURES = TESTS / "captures"  # bytes and files captured from real servers and tools
BENCH = TESTS / "bench"
SHARED_DATA = REPO.parent / "shared" / "data"  # reference data beside the checkout, never committed
