"""The results store: atomic per-run files, union over files, SQL speedup against the matching baseline."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from specscope import store
from specscope.errors import StoreError
from specscope.schema import RESULT_COLUMNS


def _row(method, k, conc, tput, **extra):
    return {"source": "t", "model": "m", "dataset": "d", "hardware": "h", "output_len": 200,
            "method": method, "k": k, "concurrency": conc, "output_throughput": tput, "status": "ok",
            **extra}


def test_write_is_one_file_per_run_with_every_column(tmp_path):
    path = store.write_results([_row("none", 0, 1, 100.0)], run_id="r1", directory=tmp_path)
    assert path == tmp_path / "r1.parquet"
    table = pq.read_table(path)
    assert table.column_names == list(RESULT_COLUMNS)
    assert table.column("run_id").to_pylist() == ["r1"]
    assert table.column("created_at").to_pylist()[0] is not None
    assert not list(tmp_path.glob(".*tmp"))


def test_speedup_is_throughput_over_matching_baseline(tmp_path):
    store.write_results([_row("none", 0, 1, 100.0), _row("none", 0, 8, 400.0),
                         _row("ngram", 2, 1, 150.0), _row("ngram", 4, 1, 180.0),
                         _row("ngram", 4, 8, 300.0)], run_id="a", directory=tmp_path)
    # another source's baseline must not be used
    store.write_results([_row("none", 0, 1, 1.0, source="other")], run_id="b", directory=tmp_path)
    db = store.Store(result_dirs=[tmp_path], request_dirs=[])
    frame = db.speedup({"source": ["t"], "method": ["ngram"]})
    got = {(r.k, r.concurrency): round(r.speedup, 6) for r in frame.itertuples()}
    assert got == {(2, 1): 1.5, (4, 1): 1.8, (4, 8): 0.75}
    best = db.speedup({"source": ["t"], "method": ["ngram"]}, best=True)
    assert {(r.concurrency, r.k) for r in best.itertuples()} == {(1, 4), (8, 4)}


def test_failed_cells_are_kept_on_disk_but_left_out_of_speedup(tmp_path):
    store.write_results([_row("none", 0, 1, 100.0),
                         _row("ngram", 2, 1, None, status="failed", error="server died")],
                        run_id="a", directory=tmp_path)
    db = store.Store(result_dirs=[tmp_path], request_dirs=[])
    assert db.count() == 2
    assert db.speedup({"method": ["ngram"]}).empty


def test_store_sees_new_files_without_restart(tmp_path):
    db = store.Store(result_dirs=[tmp_path], request_dirs=[])
    assert db.count() == 0
    store.write_results([_row("none", 0, 1, 100.0)], run_id="x", directory=tmp_path)
    assert db.count() == 1


def test_filters_are_parameters_and_columns_are_checked(tmp_path):
    store.write_results([_row("none", 0, 1, 100.0)], run_id="x", directory=tmp_path)
    db = store.Store(result_dirs=[tmp_path], request_dirs=[])
    assert db.speedup({"model": ["m' OR 1=1 --"]}).empty
    with pytest.raises(StoreError, match="Cannot filter"):
        db.speedup({"1=1; DROP TABLE results": ["x"]})


def test_bad_run_id_is_refused(tmp_path):
    with pytest.raises(StoreError, match="Run id"):
        store.write_results([_row("none", 0, 1, 1.0)], run_id="../escape", directory=tmp_path)


def test_damaged_file_gives_one_sentence(tmp_path):
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(StoreError, match="could not be read"):
        store.Store(result_dirs=[tmp_path], request_dirs=[]).count()
