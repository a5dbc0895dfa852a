"""Response formats: a prompt's answer constrained to a JSON schema, a regex or a choice list.

A prompt set's ``response_format`` field (a JSONL object, or the same JSON in a CSV cell) is one of

    {"type": "json_schema", "json_schema": {"name": "person", "schema": {...}}}   # OpenAI's form
    {"type": "regex", "regex": "\\\\d{4}-\\\\d{2}-\\\\d{2}"}
    {"type": "choice", "choice": ["yes", "no"]}

vLLM 0.32 takes a JSON schema in the request's ``response_format`` and a regex or a choice list
in its ``structured_outputs`` field. ``ResponseFormat.check`` says whether an answer is valid:
it parses and validates against the schema (jsonschema), matches the regex in full, or is one of
the choices; an answer cut by ``max_tokens`` says so.

    fmt = parse({"type": "choice", "choice": ["yes", "no"]})
    fmt.request_fields()            # {"structured_outputs": {"choice": ["yes", "no"]}}
    fmt.check("maybe", "stop")      # "is not one of the 2 choices"
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import jsonschema

__all__ = ["ResponseFormat", "SchemaProblems", "parse", "kinds_label", "KINDS", "FREE"]

KINDS = ("json_schema", "regex", "choice")
FREE = "none"  # the response_format of a request (and a cell) sent without one
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class ResponseFormat:
    """One format: its kind and its body (canonical JSON of the schema, the regex, or the choices)."""

    kind: str
    body: str
    name: str = "response"  # a JSON schema's name (OpenAI's json_schema.name)

    @property
    def value(self):
        """The schema (a dict), the regex (a string) or the choices (a list)."""
        return json.loads(self.body)

    def request_fields(self) -> dict:
        """The fields of an OpenAI-compatible request that ask vLLM for this format."""
        if self.kind == "json_schema":
            return {
                "response_format": {"type": "json_schema", "json_schema": {"name": self.name, "schema": self.value}}
            }
        return {"structured_outputs": {self.kind: self.value}}

    def as_record(self) -> dict:
        """The format as a prompt set writes it (``parse`` reads it back)."""
        if self.kind == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": self.name, "schema": self.value}}
        return {"type": self.kind, self.kind: self.value}

    def check(self, text: str, finish_reason: str | None = None) -> str | None:
        """None when ``text`` is a valid answer; else why not, in a few words."""
        problem = self._problem(text)
        if problem and finish_reason == "length":
            return "was cut by max_tokens before the format closed"
        return problem

    def _problem(self, text: str) -> str | None:
        value = self.value
        if self.kind == "choice":
            return None if text in value else f"is not one of the {len(value)} choices"
        if self.kind == "regex":
            return None if re.fullmatch(value, text) else "does not match the regex in full"
        try:
            document = json.loads(text)
        except ValueError as exc:
            return f"is not JSON ({str(exc)[:60]})"
        error = jsonschema.exceptions.best_match(
            jsonschema.validators.validator_for(value)(value).iter_errors(document)
        )
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path) or "the top level"
        return f"fails the schema at {where}: {error.message[:80]}"


def parse(value) -> ResponseFormat:
    """A ResponseFormat from a prompt set's ``response_format`` value (an object, or its JSON text);
    ValueError with one sentence on what is wrong and what to write (SchemaProblems: one for each way its
    JSON schema is not valid)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(
                'is not JSON; write an object such as {"type": "choice", "choice": ["yes", "no"]}'
            ) from None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind not in KINDS:
        raise ValueError(f"must be an object whose type is one of {', '.join(KINDS)}, not {kind!r:.40}")
    if kind == "json_schema":
        return _json_schema(value.get("json_schema"))
    if kind == "regex":
        pattern = value.get("regex")
        if not isinstance(pattern, str) or not pattern:
            raise ValueError("of type regex needs a non-empty 'regex' string")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"holds a regex that does not compile ({exc})") from None
        return ResponseFormat("regex", json.dumps(pattern))
    choices = value.get("choice")
    if not isinstance(choices, list) or not choices or not all(isinstance(c, str) and c for c in choices):
        raise ValueError("of type choice needs a 'choice' list of non-empty strings")
    return ResponseFormat("choice", json.dumps(choices))


def _json_schema(spec) -> ResponseFormat:
    if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
        raise ValueError('of type json_schema needs "json_schema": {"name": ..., "schema": {...}}')
    name = spec.get("name", "response")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError("needs a json_schema name of letters, digits, '_' or '-' (at most 64)")
    schema = spec["schema"]
    meta = jsonschema.validators.validator_for(schema)
    errors = sorted(meta(meta.META_SCHEMA).iter_errors(schema), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:  # every one of them, each where it is: a fix-one-upload-again loop finds the next only then
        raise SchemaProblems(
            [
                f"holds a JSON schema that is not valid at "
                f"{'/'.join(str(p) for p in e.absolute_path) or 'its top level'}: {e.message[:80]}"
                for e in errors
            ]
        )
    return ResponseFormat("json_schema", json.dumps(schema), name)  # key order kept: it orders the answer


class SchemaProblems(ValueError):
    """Every way a JSON schema is not valid, one sentence each (``messages``)."""

    def __init__(self, messages: list[str]):
        super().__init__("; ".join(messages))
        self.messages = messages


def is_constrained(value) -> bool:
    """Whether a row's ``response_format`` names a format (not ``none``, not unrecorded)."""
    return isinstance(value, str) and value not in ("", FREE)


def constrained_label(value) -> str:
    """``constrained (json_schema)`` for a row run with response formats, else ``""``."""
    return f"constrained ({value})" if is_constrained(value) else ""


def kinds_label(formats) -> str:
    """A cell's ``response_format``: the kinds of the formats it sent, sorted and comma-joined
    (``none`` when it sent none)."""
    kinds = sorted({f.kind for f in formats if f is not None})
    return ",".join(kinds) or FREE
