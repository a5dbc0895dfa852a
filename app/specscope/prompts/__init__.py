"""Prompt sets: the input a sweep or Live sends, parsed and checked (``sets``) and kept on disk (``library``:
uploaded and bundled sets). ``from specscope import prompts`` reads and checks a set."""

from specscope.prompts.sets import (
    FORMATS,
    MAX_BYTES,
    MAX_PROMPT_CHARS,
    MAX_PROMPTS,
    Prompt,
    PromptSet,
    load,
    parse,
    problems,
    set_name,
)

__all__ = [
    "Prompt",
    "PromptSet",
    "parse",
    "problems",
    "load",
    "set_name",
    "FORMATS",
    "MAX_BYTES",
    "MAX_PROMPTS",
    "MAX_PROMPT_CHARS",
]
