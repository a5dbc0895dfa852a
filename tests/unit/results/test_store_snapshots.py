"""The store under many readers: a content version per set of files, reads in parallel, reloads
that never disturb a query already running."""

from __future__ import annotations

import threading

from specscope.results import store, writing


def _rows(n: int, model: str = "m") -> list[dict]:
    return [
        {
            "source": "t",
            "model": model,
            "dataset": "d",
            "hardware": "h",
            "output_len": 200,
            "method": "none" if i == 0 else "ngram",
            "k": i,
            "concurrency": 1,
            "output_throughput": 100.0 + i,
            "status": "ok",
        }
        for i in range(n)
    ]


def test_version_changes_exactly_when_files_do(tmp_path):
    db = store.Store(result_dirs=[tmp_path], request_dirs=[])
    empty = db.refresh()
    assert db.refresh() == empty
    path = writing.write_results(_rows(2), run_id="a", directory=tmp_path)
    added = db.refresh()
    assert added != empty and db.refresh() == added
    writing.write_results(_rows(3), run_id="a", directory=tmp_path)  # the same run rewritten
    changed = db.refresh()
    assert changed != added and db.count() == 3
    path.unlink()
    assert db.refresh() == empty
    assert db.count() == 0


def test_parallel_readers_see_whole_versions_while_runs_land(tmp_path):
    writing.write_results(_rows(4), run_id="base", directory=tmp_path)
    db = store.Store(result_dirs=[tmp_path], request_dirs=[])
    seen: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        try:
            while not stop.is_set():
                frame = db.query("SELECT count(*) AS n, count(DISTINCT model) AS models FROM results")
                n, models = int(frame["n"].iloc[0]), int(frame["models"].iloc[0])
                assert n == 4 * models  # a snapshot holds whole runs, never half of one
                seen.append(n)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(6)]
    for thread in readers:
        thread.start()
    for i in range(5):
        writing.write_results(_rows(4, model=f"m{i}"), run_id=f"run{i}", directory=tmp_path)
        db.refresh()
    stop.set()
    for thread in readers:
        thread.join(30)
    assert not errors, errors[0]
    assert db.count() == 24
    assert set(seen) <= {4, 8, 12, 16, 20, 24} and len(seen) > 6
