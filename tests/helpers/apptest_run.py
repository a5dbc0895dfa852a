"""AppTest helper shared by the page tests."""

from __future__ import annotations

from typing import Any

from streamlit.testing.v1 import AppTest


def run_clean(at: Any) -> AppTest:
    """Run the script once (``at`` an AppTest, or a widget whose value was just set) and fail on any
    exception it raised; returns the AppTest."""
    at = at.run()
    assert not at.exception, at.exception
    return at
