"""download_ruiz over real HTTP on loopback: a local http.server thread serves the shared copy
of the Ruiz Parquet, so the sha256 check, the import and the failure paths run offline."""

from __future__ import annotations

import functools
import hashlib
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from specscope.errors import InputError
from specscope.results import datasets
from specscope.results.store import Store

SHARED = Path("/work/shared/data")
RUIZ_COPY = SHARED / datasets.RUIZ_FILENAME

pytestmark = pytest.mark.skipif(
    not RUIZ_COPY.is_file(), reason=f"needs the shared copy of the Ruiz Parquet at {RUIZ_COPY}"
)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def served_url():
    handler = functools.partial(_QuietHandler, directory=str(SHARED))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/{datasets.RUIZ_FILENAME}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_HOME", str(tmp_path))
    return tmp_path


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_pinned_checksum_is_the_shared_copys():
    assert hashlib.sha256(RUIZ_COPY.read_bytes()).hexdigest() == datasets.RUIZ_SHA256
    assert datasets.RUIZ_COMMIT in datasets.RUIZ_URL
    assert datasets.RUIZ_URL.startswith("https://raw.githubusercontent.com/tomasruizt/vllm-scripts/")


def test_download_verifies_saves_and_imports(home, served_url):
    seen = []
    written = datasets.download_ruiz(lambda done, total: seen.append((done, total)), url=served_url)
    size = RUIZ_COPY.stat().st_size
    assert seen[-1] == (size, size)
    assert all(a[0] < b[0] for a, b in zip(seen, seen[1:]))
    assert _files(home / "downloads") == [datasets.RUIZ_FILENAME]
    assert (home / "downloads" / datasets.RUIZ_FILENAME).read_bytes() == RUIZ_COPY.read_bytes()
    assert written.parent == home / "results" and written.is_file()

    store = Store(result_dirs=[home / "results"], request_dirs=[])
    assert store.count() == 262
    best = store.speedup({"draft_model": ["meta-llama/Llama-3.2-1B"], "concurrency": [1]}, best=True)
    assert (int(best["k"].iloc[0]), round(float(best["speedup"].iloc[0]), 3)) == (8, 3.555)

    # A second call finds the verified copy and does not download again.
    again = []
    assert (
        datasets.fetch_ruiz(lambda d, t: again.append((d, t)), url=served_url + ".absent")
        == home / "downloads" / datasets.RUIZ_FILENAME
    )
    assert again == [(size, size)]


def test_wrong_checksum_keeps_nothing(home, served_url):
    with pytest.raises(InputError, match="nothing was kept"):
        datasets.download_ruiz(url=served_url, sha256="0" * 64)
    assert _files(home / "downloads") == []
    assert _files(home / "results") == []


def test_missing_file_is_one_clear_error(home, served_url):
    with pytest.raises(InputError, match="Could not download .*404"):
        datasets.download_ruiz(url=served_url + ".absent")
    assert _files(home / "downloads") == []
    assert _files(home / "results") == []
