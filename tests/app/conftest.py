"""Fixtures of the AppTest layer: a page run against a throwaway SpecScope home."""

from __future__ import annotations

import pytest
import streamlit as st

from helpers.paths import APP


@pytest.fixture
def page_env(specscope_home, monkeypatch, tmp_path):
    """A page file importable on its own (``ui`` on sys.path), an empty home and models folder,
    and Streamlit's caches cleared (the store is cached per process; each test has its own home)."""
    monkeypatch.syspath_prepend(str(APP))
    monkeypatch.setenv("SPECSCOPE_MODELS", str(tmp_path / "models"))
    st.cache_resource.clear()
    st.cache_data.clear()
    return specscope_home


@pytest.fixture
def no_bundled_results(monkeypatch, tmp_path):
    """Hide the bundled results, so a page sees only what the test put in the home."""
    monkeypatch.setenv("SPECSCOPE_DATA", str(tmp_path / "no-bundled-data"))
