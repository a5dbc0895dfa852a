"""Public datasets SpecScope offers for download: fetched from a pinned URL, checked by sha256.

The Ruiz benchmark Parquet (tomasruizt/vllm-scripts, results/full-bench-data.parquet at a
pinned commit) is not bundled; ``download_ruiz`` fetches it into ``<home>/downloads/``,
verifies its sha256 and imports it into the home's results. A file whose checksum differs is
deleted and nothing is imported.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import requests

from specscope import access, files, settings
from specscope.errors import InputError, StoreError
from specscope.results import importers

__all__ = [
    "RUIZ_COMMIT",
    "RUIZ_URL",
    "RUIZ_SHA256",
    "RUIZ_FILENAME",
    "MAX_DOWNLOAD_BYTES",
    "Progress",
    "downloads_dir",
    "fetch_verified",
    "fetch_ruiz",
    "download_ruiz",
]

RUIZ_COMMIT = "d94d714fa4e451591f628542a57bbc7f9c2d2619"
RUIZ_URL = f"https://raw.githubusercontent.com/tomasruizt/vllm-scripts/{RUIZ_COMMIT}/results/full-bench-data.parquet"
RUIZ_SHA256 = "9c73353909b6e085a9189e57032ffbd54ebe5d8c1b00168037e925dfd8e83855"
RUIZ_FILENAME = "tomasruizt_vllm-scripts_full-bench-data_d94d714.parquet"
MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024
_CHUNK = 64 * 1024

# progress(bytes_done, bytes_total or None when the server sends no length)
Progress = Callable[[int, "int | None"], object]  # (bytes so far, total); what it returns is ignored


def downloads_dir() -> Path:
    """Where verified downloads are kept in the SpecScope home."""
    path = settings.home() / "downloads"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _stream_to(url: str, part: Path, progress: Progress | None, timeout: float) -> str:
    """Stream ``url`` into ``part``; returns the sha256 of what was written."""
    digest = hashlib.sha256()
    with requests.get(url, stream=True, timeout=timeout) as response:
        response.raise_for_status()
        total = int(response.headers.get("Content-Length") or 0) or None
        done = 0
        with open(part, "wb") as fh:
            for chunk in response.iter_content(_CHUNK):
                done += len(chunk)
                if done > MAX_DOWNLOAD_BYTES:
                    raise InputError(
                        f"{url} sends more than {MAX_DOWNLOAD_BYTES // 2**20} MiB, "
                        "far more than the expected file; nothing was kept."
                    )
                fh.write(chunk)
                digest.update(chunk)
                if progress is not None:
                    progress(done, total)
    return digest.hexdigest()


def fetch_verified(
    url: str, sha256: str, filename: str, progress: Progress | None = None, timeout: float = 30.0
) -> Path:
    """Download ``url`` to ``<home>/downloads/<filename>`` unless a verified copy is there.

    The bytes go to a hidden part file and are renamed only after their sha256 matches;
    on any failure the part file is removed and InputError says what went wrong.
    """
    target = downloads_dir() / filename
    if target.is_file() and _sha256_of(target) == sha256:
        if progress is not None:
            size = target.stat().st_size
            progress(size, size)
        return target
    try:
        with files.atomic_target(target) as part:
            actual = _stream_to(url, part, progress, timeout)
            if actual != sha256:
                raise InputError(
                    f"The file from {url} has sha256 {actual}, not the expected {sha256}; "
                    "nothing was kept (the download was corrupted or the file changed)."
                )
    except requests.RequestException as exc:
        raise InputError(f"Could not download {url} ({exc}); check the network connection and retry.") from exc
    except OSError as exc:
        raise StoreError(
            f"Could not save the download to {target.parent} ({exc.strerror or exc}); check the disk and permissions."
        ) from exc
    return target


def fetch_ruiz(progress: Progress | None = None, *, url: str = RUIZ_URL, sha256: str = RUIZ_SHA256) -> Path:
    """The verified Ruiz Parquet under ``<home>/downloads/`` (downloaded when missing)."""
    return fetch_verified(url, sha256, RUIZ_FILENAME, progress)


def download_ruiz(progress: Progress | None = None, *, url: str = RUIZ_URL, sha256: str = RUIZ_SHA256) -> Path:
    """Fetch and verify the Ruiz Parquet, import it, and return the results file written (operators only)."""
    access.require("import results")
    return importers.import_file(fetch_ruiz(progress, url=url, sha256=sha256)).path
