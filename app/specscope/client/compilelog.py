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

import re

from specscope.client import serverlog
from specscope.client.serverlog import offset

__all__ = ["RECOMPILE_LOGS", "compiled", "offset", "since"]

RECOMPILE_LOGS = {"TORCH_LOGS": "recompiles"}  # the environment that makes torch log each recompile
_EVENT = re.compile(
    r"Triton kernel JIT compilation during inference: (\S+?)\.?(?:\s|$)"
    r"|\[__recompiles\] Recompiling function (\S+)"
)
_MAX_BYTES = 4_000_000  # a cell's share of a log; a chattier log is read from its end


def compiled(text: str) -> list[str]:
    """The kernels and functions the log text says were compiled while serving, in order."""
    return [kernel or function for kernel, function in _EVENT.findall(text)]


def since(path: str | None, start: int | None) -> list[str] | None:
    """What the log says was compiled after ``start`` (``offset``); None where the log cannot be read."""
    text = serverlog.text_since(path, start, max_bytes=_MAX_BYTES)
    return None if text is None else compiled(text)
