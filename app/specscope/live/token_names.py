"""The text of a rejected draft token while its answer still streams.

The stream names only the tokens the target kept; a rejected ngram draft is a token of the prompt or of the
answer so far. One of the answer's is named by the stream itself; one of the prompt's by the server's own
tokenizer where it is on this machine (a server SpecScope launched from a local model folder), decoded one
token at a time as the server's ``/detokenize`` does, which names every rejected token once the answer ends
(``Pane``). A server elsewhere leaves its prompt's tokens unnamed until then.

    path = tokenizer_of("http://127.0.0.1:8002")     # its model folder's tokenizer.json, or None
    decode_each(path, [16207])                        # {16207: " squares"}
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from specscope import procfs
from specscope.launch.registry import read_states
from specscope.live.spec import host_port

__all__ = ["tokenizer_of", "decode_each"]


def tokenizer_of(url: str) -> Path | None:
    """The tokenizer.json of the server at ``url`` when SpecScope launched it here from a model folder."""
    where = host_port(url)
    for state in read_states():
        if state.attached or host_port(state.url) != where or not procfs.alive(state.pid, state.pgid):
            continue
        found = Path(state.model_path or "") / "tokenizer.json" if state.model_path else None
        return found if found is not None and found.is_file() else None
    return None


@functools.lru_cache(maxsize=4)
def _load(path: Path) -> Any:
    from tokenizers import Tokenizer  # vLLM's own tokenizer library, installed with it

    return Tokenizer.from_file(str(path))


def decode_each(path: Path | None, token_ids: Iterable[int]) -> dict[int, str]:
    """Each token id's text on its own (special tokens named too), with the tokenizer at ``path``; none without
    one, or where it cannot be read."""
    if path is None:
        return {}
    try:
        tokenizer = _load(path)
    except Exception:  # noqa: BLE001 - a tokenizer that does not load names nothing; the server names them later
        return {}
    return {i: tokenizer.decode([i], skip_special_tokens=False) for i in dict.fromkeys(token_ids)}
