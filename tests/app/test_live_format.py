"""The Live page under AppTest: a prompt from a set with response formats keeps its format (a
checkbox), and a typed format is checked, its problem one sentence."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from helpers.paths import VIEWS

pytestmark = pytest.mark.app

PAGE = VIEWS / "live.py"


def run(target) -> AppTest:
    at = target.run()
    assert not at.exception, at.exception
    return at


def test_a_prompt_with_a_schema_keeps_it_and_a_typed_format_is_checked(page_env):
    at = run(AppTest.from_file(str(PAGE), default_timeout=60))
    at = run(at.radio(key="live_prompt_source").set_value("From a prompt set"))
    chosen = next(p for p in at.selectbox(key="live_prompt_set").options if "json-extraction" in p)
    at = run(at.selectbox(key="live_prompt_set").set_value(chosen))
    keep = at.checkbox(key="live_keep_format")
    assert keep.value is True and "json schema" in keep.label
    assert any('"json_schema"' in c.value for c in at.code)
    at = run(at.radio(key="live_prompt_source").set_value("Typed"))
    assert not [c for c in at.checkbox if c.key == "live_keep_format"]
    at = run(at.text_input(key="live_format_text").set_value('{"type": "regex", "regex": "("}'))
    assert [e.value for e in at.error] == [
        "The response format holds a regex that does not compile (missing ), unterminated subpattern at position 0); "
        "the prompt runs without one until it is fixed."
    ]
    at = run(at.text_input(key="live_format_text").set_value('{"type": "choice", "choice": ["yes", "no"]}'))
    assert not at.error
