"""Server-sent events as vLLM streams them: ``data: {json}`` lines, ended by ``data: [DONE]``.

    data = sse.data_of(line)           # the payload of a ``data:`` line, None for any other line
    event = sse.decode(data)           # its JSON object, or sse.DONE for ``[DONE]``

An event that is not a JSON object, or that reports an error instead of choices, raises StreamError.
"""

from __future__ import annotations

import enum
import json
from typing import Final, Literal

from specscope.errors import StreamError

__all__ = ["DONE", "data_of", "decode", "error_sentence"]


class _Done(enum.Enum):
    """The ``[DONE]`` marker that ends a stream (one member, so ``event is DONE`` narrows an event's type)."""

    DONE = "[DONE]"


DONE: Final = _Done.DONE


def error_sentence(payload) -> str:
    """The message of an OpenAI-style error body (``{"error": {"message": ...}}`` or a bare one)."""
    error = payload.get("error", payload) if isinstance(payload, dict) else payload
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)


def data_of(line: str | bytes) -> bytes | None:
    """The payload of one ``data:`` line, stripped; None for comments, ``event:`` lines and blanks."""
    raw = line.encode() if isinstance(line, str) else line
    return raw[5:].strip() if raw.startswith(b"data:") else None


def decode(data: bytes) -> dict | Literal[_Done.DONE]:
    """The JSON object of one event's payload; ``DONE`` for ``[DONE]``."""
    if data == b"[DONE]":
        return DONE
    try:
        event = json.loads(data)
    except ValueError as exc:
        raise StreamError(f"The server sent a stream event that is not JSON: {data[:80]!r}.") from exc
    if not isinstance(event, dict):
        raise StreamError(f"The server sent a stream event that is not a JSON object: {data[:80]!r}.")
    if ("error" in event and "choices" not in event) or event.get("object") == "error":
        raise StreamError(f"The server reported an error mid-stream: {error_sentence(event)}")
    return event
