"""Writing files so a reader never sees half of one: write next to the target, then rename over it.

write_atomic(path, text_or_bytes)
with atomic_target(path) as tmp:      # for writers that take a path (Parquet, downloads)
    pq.write_table(table, tmp)
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_target", "write_atomic"]


@contextmanager
def atomic_target(path: Path) -> Iterator[Path]:
    """A hidden temp path beside ``path``; renamed onto ``path`` when the block ends, removed on error."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` all at once; returns ``path``."""
    with atomic_target(path) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)
