"""The results store's DuckDB connection: in memory within ``settings.duckdb_memory_limit()``, spilling to a folder
of this process's under SpecScope's cache, which is removed at exit.

    con = connect()
"""

from __future__ import annotations

import atexit
import os
import shutil
from pathlib import Path

import duckdb

from specscope import procfs, settings
from specscope.errors import StoreError

__all__ = ["connect", "spill_dir"]

_SPILL_SET: set[Path] = set()  # the spill folders this process set up (a forked child's pid names another)


def spill_dir() -> Path:
    """This process's folder for DuckDB's spill files, under SpecScope's cache. DuckDB creates it only when a
    query spills, so a process that never spilled leaves nothing, even when a signal ends it before its exit
    handlers run; one that did is removed at exit, and the folders of processes that are gone (killed before
    they could clean up) are removed first."""
    folder = settings.cache_dir() / "duckdb"
    mine = folder / str(os.getpid())
    if mine not in _SPILL_SET:
        _SPILL_SET.add(mine)
        folder.mkdir(parents=True, exist_ok=True)  # DuckDB makes the last level only
        for other in folder.glob("*"):
            if other.name.isdigit() and not procfs.pid_exists(int(other.name)):
                shutil.rmtree(other, ignore_errors=True)
        atexit.register(shutil.rmtree, mine, ignore_errors=True)
    return mine


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB within ``settings.duckdb_memory_limit()``, spilling under ``spill_dir()``."""
    try:
        return duckdb.connect(
            config={"memory_limit": settings.duckdb_memory_limit(), "temp_directory": str(spill_dir())}
        )
    except duckdb.Error as exc:
        raise StoreError(
            f"DuckDB refused its settings ({exc}); set SPECSCOPE_DUCKDB_MEMORY to a size such as 4GB."
        ) from exc
