"""Where SpecScope keeps its files: the SpecScope home and the bundled data folder."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "home",
    "results_dir",
    "requests_dir",
    "servers_dir",
    "models_dir",
    "prompts_dir",
    "runs_dir",
    "cache_dir",
    "duckdb_memory_limit",
    "bundled_data_dir",
    "repo_root",
    "home_at",
    "measuring_lock",
]


def repo_root() -> Path:
    """The checkout SpecScope runs from (app/specscope/ is two levels below it)."""
    return Path(__file__).resolve().parents[2]


def bundled_data_dir() -> Path:
    """The bundled data folder (``$SPECSCOPE_DATA`` overrides it)."""
    return Path(os.environ.get("SPECSCOPE_DATA", repo_root() / "data"))


def home() -> Path:
    """``$SPECSCOPE_HOME``, else ``$XDG_DATA_HOME/specscope``, else ``~/.local/share/specscope``."""
    env = os.environ.get("SPECSCOPE_HOME")
    if env:
        path = Path(env).expanduser()
    else:
        base = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share"))
        path = base / "specscope"
    return _made(path)


def _made(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _sub(name: str) -> Path:
    return _made(home() / name)


def results_dir() -> Path:
    """One Parquet file per run of canonical rows."""
    return _sub("results")


def requests_dir() -> Path:
    """One Parquet file per run of per-request rows."""
    return _sub("requests")


def servers_dir() -> Path:
    """State and log files of launched servers."""
    return _sub("servers")


def models_dir() -> Path:
    """Models SpecScope prepared locally (the CPU demo model and its draft).

    ``$SPECSCOPE_MODELS`` points elsewhere, so tests with a throwaway home share one prepared copy.
    """
    env = os.environ.get("SPECSCOPE_MODELS")
    return _made(Path(env).expanduser() if env else home() / "models")


def prompts_dir() -> Path:
    """Uploaded prompt sets, stored under their content hash."""
    return _sub("prompts")


def runs_dir() -> Path:
    """Sweep checkpoints and recordings."""
    return _sub("runs")


def cache_dir() -> Path:
    """Files SpecScope may delete at any time (DuckDB's spill files): ``$XDG_CACHE_HOME/specscope``,
    else ``~/.cache/specscope``."""
    return _made(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "specscope")


def warm_landing() -> bool:
    """Whether the dashboard computes its landing pages at start, before the first viewer:
    ``$SPECSCOPE_WARM`` ``0`` turns it off (its first viewer then waits for them), else on."""
    return os.environ.get("SPECSCOPE_WARM", "1") != "0"


def measuring_lock() -> Path:
    """The file whose lock marks a sweep's cell measured on this machine, whichever home or user runs it:
    ``$SPECSCOPE_MEASURING_LOCK``, else ``specscope-measuring.lock`` in the temporary folder."""
    return Path(os.environ.get("SPECSCOPE_MEASURING_LOCK") or Path(tempfile.gettempdir()) / "specscope-measuring.lock")


def duckdb_memory_limit() -> str:
    """How much memory the results store's DuckDB may hold before it spills to ``cache_dir()``:
    ``$SPECSCOPE_DUCKDB_MEMORY`` in DuckDB's units (``4GB``), else 2GB."""
    return os.environ.get("SPECSCOPE_DUCKDB_MEMORY", "2GB")


@contextmanager
def home_at(path: Path | str, store: str | None = None) -> Iterator[Path]:
    """For the block: the SpecScope home is ``path`` (models stay where they were) and the shared
    store is ``store`` (None: none); the environment is restored after."""
    names = ("SPECSCOPE_HOME", "SPECSCOPE_MODELS", "SPECSCOPE_STORE")
    saved = {name: os.environ.get(name) for name in names}
    models = models_dir()
    os.environ.update(SPECSCOPE_HOME=str(path), SPECSCOPE_MODELS=str(models))
    if store is None:
        os.environ.pop("SPECSCOPE_STORE", None)
    else:
        os.environ["SPECSCOPE_STORE"] = store
    try:
        yield home()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
