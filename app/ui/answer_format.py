"""The Live page's response format: a prompt set's own (on by default), or one typed for a typed prompt."""

from __future__ import annotations

import json

import streamlit as st

from specscope import formats
from specscope.prompts import Prompt

__all__ = ["from_prompt", "editor"]

EXAMPLE = '{"type": "choice", "choice": ["yes", "no"]}'


def _text(answer_format: formats.ResponseFormat) -> str:
    return json.dumps(answer_format.as_record())


def from_prompt(prompt: Prompt) -> str | None:
    """The prompt's response format (JSON) when the user keeps it on, else None."""
    answer_format = prompt.response_format
    if answer_format is None:  # Live offers this only for a prompt that has one
        return None
    kind = answer_format.kind.replace("_", " ")
    keep = st.checkbox(
        f"Constrain the answers to the prompt's {kind}",
        True,
        key="live_keep_format",
        help="Each server is asked for an answer that follows the prompt's response format; "
        "each pane says whether its finished answer does.",
    )
    if keep:
        with st.expander("The response format"):
            st.code(json.dumps(answer_format.as_record(), indent=1), language="json")
    return _text(answer_format) if keep else None


def editor() -> str | None:
    """A typed response format (JSON schema, regex or choice list), checked; None when empty or wrong."""
    typed = st.text_input(
        "Response format (optional)",
        key="live_format_text",
        placeholder=EXAMPLE,
        help='A JSON schema {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}}, '
        'a regex {"type": "regex", "regex": "..."} or a choice list; each pane says whether '
        "its answer follows it.",
    )
    if not typed.strip():
        return None
    try:
        return _text(formats.parse(typed))
    except ValueError as exc:
        st.error(f"The response format {exc}; the prompt runs without one until it is fixed.", icon="⚠️")
        return None
