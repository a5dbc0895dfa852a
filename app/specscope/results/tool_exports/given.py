"""What a benchmark tool's export does not say, given once for the whole file, checked against what it does.

A guidellm or AIPerf export measures a server without naming the speculative decoding behind it, nor
the hardware. The user gives those once (``specscope import FILE --method ngram --k 4 --hardware cpu``,
or the Explorer's import form); nothing is guessed. A value the file states wins, and a given value
that contradicts it is refused with one sentence.

    settle("benchmarks.json", "model", stated="HuggingFaceTB/SmolLM2-135M-Instruct", given=None)
    speculation("benchmarks.json", {"method": "ngram", "k": 4}, "guidellm")   # -> ("ngram", 4)
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import httpx

from specscope import access
from specscope.errors import InputError
from specscope.schema import BASELINE_METHOD

__all__ = ["settle", "speculation", "remote_host", "OPTIONS"]

# The command-line option of each field a user may give for a whole file.
OPTIONS = {
    "method": "--method",
    "k": "--k",
    "draft_model": "--draft-model",
    "hardware": "--hardware",
    "label": "--label",
    "dataset": "--dataset",
    "model": "--model",
    "concurrency": "--concurrency",
}


def _same(stated, given) -> bool:
    if isinstance(stated, (int, float)) and isinstance(given, (int, float)):
        return math.isclose(float(stated), float(given))
    return str(stated).strip() == str(given).strip()


def settle(name: str, field: str, stated, given):
    """The value of ``field`` for a file's rows: the file's when it states one (a given value must agree),
    else the given one, else None."""
    if given is None or (isinstance(given, str) and not given.strip()):
        return stated
    if stated is None:
        return given
    if not _same(stated, given):
        raise InputError(
            f"{name} states {field} {stated!r}, but {OPTIONS.get(field, field)} gives {given!r}; "
            f"leave {OPTIONS.get(field, field)} out (the file's value is used) or import the file "
            "that was measured that way.",
            field=field,
        )
    return stated


def speculation(
    name: str, given: Mapping, tool: str, *, drafted: bool = False, least_k: int | None = None
) -> tuple[str, int | None]:
    """The (method, K) of a file's server, from ``given``: ``drafted`` says the file reports drafts
    (so the server speculated), ``least_k`` the smallest K its figures allow (the drafts a step proposed
    on average, or accepted at most)."""
    method, k = given.get("method"), given.get("k")
    if not method or not str(method).strip():
        raise InputError(
            f"{name} is a {tool} export, which does not say which speculative decoding the server "
            "ran; give it for the whole file: --method none for the baseline, or e.g. --method "
            "ngram --k 4 (the Explorer's import form asks the same).",
            field="method",
        )
    method = str(method).strip()
    if method == BASELINE_METHOD:
        if drafted:
            raise InputError(
                f"{name} reports speculative decoding (drafted tokens), but --method none says the "
                "server ran none; give the method it ran, e.g. --method ngram --k 4.",
                field="method",
            )
        if k not in (None, 0):
            raise InputError(f"--k {k} with --method none: a baseline drafts no tokens; leave --k out.", field="k")
        return method, 0
    if k is not None and least_k is not None and int(k) < least_k:
        raise InputError(
            f"{name} reports steps with {least_k} draft tokens or more, more than --k {k} allows; "
            "give the K the server ran with.",
            field="k",
        )
    return method, None if k is None else int(k)


def remote_host(url: str | None) -> str | None:
    """The host of a benchmarked server's URL when it is another machine; None for loopback, which says
    only that the tool ran beside the server, not which machine that was."""
    try:
        host = httpx.URL(url).host if url else None
    except (httpx.InvalidURL, TypeError):
        return None
    return None if not host or access.is_this_machine(host) else host
