"""What a vLLM server compiled while a cell ran: stalls its warm-up did not pay for.

A server compiles while it starts; what it compiles later holds every request in flight until the
compiler is done (1-2 s for each torch.compile graph on an H200, vLLM 0.26.0). Two kinds of log line
say so: vLLM's kernel JIT monitor (``Triton kernel JIT compilation during inference: <kernel>``) and
torch's recompile log, which SpecScope turns on for the servers it starts (``TORCH_LOGS=recompiles``:
``Recompiling function <name> in <file>``).

    mark = offset(state.log_path)              # before the cell: the log's size
    ...                                        # the cell
    since(state.log_path, mark)                # ["update_num_computed_tokens_for_batch_change"]: what compiled
    compiled(text)                             # the same, from log text
"""

from __future__ import annotations

import os
import re

__all__ = ["RECOMPILE_LOGS", "compiled", "offset", "since"]

RECOMPILE_LOGS = {"TORCH_LOGS": "recompiles"}  # the environment that makes torch log each recompile
_EVENT = re.compile(r"Triton kernel JIT compilation during inference: (\S+?)\.?(?:\s|$)"
                    r"|\[__recompiles\] Recompiling function (\S+)")
_MAX_BYTES = 4_000_000  # a cell's share of a log; a chattier log is read from its end


def compiled(text: str) -> list[str]:
    """The kernels and functions the log text says were compiled while serving, in order."""
    return [kernel or function for kernel, function in _EVENT.findall(text)]


def offset(path: str | None) -> int | None:
    """The log's size now (where a cell's lines will start); None without a log to read."""
    try:
        return os.path.getsize(path) if path else None
    except OSError:
        return None


def since(path: str | None, start: int | None) -> list[str] | None:
    """What the log says was compiled after ``start`` (``offset``); None where the log cannot be read."""
    if not path or start is None:
        return None
    try:
        with open(path, "rb") as log:
            log.seek(max(start, os.path.getsize(path) - _MAX_BYTES))
            return compiled(log.read().decode(errors="replace"))
    except OSError:
        return None
