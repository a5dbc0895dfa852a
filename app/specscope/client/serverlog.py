"""Why a vLLM server died: the root-cause line of its log, not only the last one.

A server that fails during startup usually ends its log with a generic line
(``RuntimeError: Engine core initialization failed. See root cause above.``); the cause is
earlier, often in another process's lines, e.g. a worker's
``Failed to import from vllm._C: ImportError('libnuma.so.1: cannot open shared object file ...')``.

    root_cause(text)   # the first exception a traceback or an ERROR line names (ValueError: Available memory
                       # on node 0 ...), or an out-of-memory or CUDA error line, or None
    last_error(text)   # the last line that mentions an error
    explain(text)      # one clause for a message: the root cause where the last error only says "see above",
                       # else the last error, and the root cause when it differs

vLLM prefixes its log lines with ``(Process pid=N) LEVEL MM-DD HH:MM:SS [file.py:line]``; that
prefix is dropped from what these return. Only ERROR-level lines, bare traceback lines and
warnings that carry an exception's repr count as causes, so advice such as the ulimit warning
(which quotes ``OSError: [Errno 24] Too many open files``) does not.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["root_cause", "last_error", "explain", "explain_file", "offset", "text_since", "cause_since"]

_PREFIX = re.compile(
    r"^(?:\([^)]*pid=\d+\)\s+)?(?:(DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+"
    r"\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]*\]\s*)?"
)
_EXCEPTIONS = (
    r"ImportError|ModuleNotFoundError|OSError|FileNotFoundError|PermissionError|"
    r"MemoryError|OutOfMemoryError"
)
_RAISED = re.compile(r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception):\s")  # a traceback's last line: ValueError: ...
# wrappers that only point at a cause logged before them, never a cause themselves
_WRAPPER = re.compile(
    r"Engine core initialization failed|Worker failed with error|See root cause above|"
    r"See stack trace \(above\)|"
    r"please check the stack trace above",
    re.IGNORECASE,
)
_REPR = re.compile(rf"\b(?:{_EXCEPTIONS})\(['\"]")  # repr(exc) inside a message
_MEMORY_OR_CUDA = re.compile(
    r"out of memory|Cannot allocate memory|\bCUDA error\b|"
    r"no CUDA-capable device|CUDA driver",
    re.IGNORECASE,
)
_LIMIT = 300
_REMEDIES = (  # a cause -> what to do about it
    (
        re.compile(r"InvalidCxxCompiler|No working C\+\+ compiler"),
        "torch.compile needs a C++ compiler and this machine has none: install g++ (the Docker image: build it with "
        "--build-arg EXTRA_PACKAGES=g++), or run eagerly (the preset's enforce_eager = true and "
        'TORCH_COMPILE_DISABLE = "1" in its [env])',
    ),
)


def _split(line: str) -> tuple[str | None, str]:
    match = _PREFIX.match(line)
    assert match is not None  # every part of _PREFIX is optional: it matches any line
    return match.group(1), line[match.end() :].strip()


def _is_cause(level: str | None, message: str) -> bool:
    if level in ("DEBUG", "INFO"):
        return False
    if level == "WARNING":
        return bool(_REPR.search(message))
    if _WRAPPER.search(message):
        return False
    return bool(_RAISED.match(message) or _REPR.search(message) or _MEMORY_OR_CUDA.search(message))


def root_cause(text: str) -> str | None:
    """The first line naming an exception (a traceback's ``SomeError: ...``, an ImportError's repr in a
    message) or an out-of-memory or CUDA error (prefix dropped); a wrapper that points above is none."""
    for line in text.splitlines():
        level, message = _split(line)
        if message and _is_cause(level, message):
            return message[:_LIMIT]
    return None


def last_error(text: str) -> str | None:
    """The last line that mentions an error (prefix dropped), or None."""
    for line in reversed(text.splitlines()):
        if "error" in line.lower():
            return _split(line)[1][:_LIMIT]
    return None


def explain(text: str) -> str:
    """The root cause where the last error line is a wrapper pointing above it (vLLM's "Engine core
    initialization failed. See root cause above."); else the last error line, followed by the root cause
    when that is a different line; then what to do, for a cause with a known remedy (``_REMEDIES``)."""
    last, cause = last_error(text), root_cause(text)
    if cause is None:
        return "no error line in the log" if last is None else last
    said = cause if last is None or cause == last or _WRAPPER.search(last) else f"{last}; root cause: {cause}"
    return "; ".join([said, *(remedy for pattern, remedy in _REMEDIES if pattern.search(said))])


def explain_file(path: str | Path, *, max_bytes: int = 4_000_000) -> str:
    """``explain`` of a log file's last ``max_bytes`` (a server log can grow large)."""
    try:
        with open(path, "rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - max_bytes))
            return explain(log.read().decode(errors="replace"))
    except OSError:
        return "its log could not be read"


def offset(path: str | Path | None) -> int | None:
    """The log's size now (where what the server logs next will start); None without a log to read."""
    try:
        return os.path.getsize(path) if path else None
    except OSError:
        return None


def text_since(path: str | Path | None, start: int | None, *, max_bytes: int = 4_000_000) -> str | None:
    """What the log gained after ``start`` (``offset``), at most its last ``max_bytes``; None where it cannot
    be read."""
    if not path or start is None:
        return None
    try:
        with open(path, "rb") as log:
            log.seek(max(start, os.path.getsize(path) - max_bytes))
            return log.read().decode(errors="replace")
    except OSError:
        return None


def cause_since(path: str | Path | None, start: int | None) -> str:
    """``Its log says: <root cause>.`` for what the log gained after ``start``; '' without one."""
    cause = root_cause(text_since(path, start) or "")
    return f"Its log says: {cause.rstrip('.')}." if cause else ""
