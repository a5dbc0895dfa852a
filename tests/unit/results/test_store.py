"""The results store: atomic per-run files, union over files, SQL speedup against the matching baseline."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from specscope import distributions, stats
from specscope.cli import main as cli_main
from specscope.errors import StoreError
from specscope.results import store, writing
from specscope.schema import RESULT_COLUMNS


def _row(method, k, conc, tput, **extra):
    return {
        "source": "t",
        "model": "m",
        "dataset": "d",
        "hardware": "h",
        "output_len": 200,
        "method": method,
        "k": k,
        "concurrency": conc,
        "output_throughput": tput,
        "status": "ok",
        **extra,
    }


def test_write_is_one_file_per_run_with_every_column(tmp_path):
    path = writing.write_results([_row("none", 0, 1, 100.0)], run_id="r1", directory=tmp_path)
    assert path == tmp_path / "r1.parquet"
    table = pq.read_table(path)
    assert table.column_names == list(RESULT_COLUMNS)
    assert table.column("run_id").to_pylist() == ["r1"]
    assert table.column("created_at").to_pylist()[0] is not None
    assert not list(tmp_path.glob(".*tmp"))


def test_speedup_is_throughput_over_matching_baseline(tmp_path):
    writing.write_results(
        [
            _row("none", 0, 1, 100.0),
            _row("none", 0, 8, 400.0),
            _row("ngram", 2, 1, 150.0),
            _row("ngram", 4, 1, 180.0),
            _row("ngram", 4, 8, 300.0),
        ],
        run_id="a",
        directory=tmp_path,
    )
    # another source's baseline must not be used
    writing.write_results([_row("none", 0, 1, 1.0, source="other")], run_id="b", directory=tmp_path)
    db = store.Store(result_dirs=[tmp_path], request_dirs=[])
    frame = db.speedup({"source": ["t"], "method": ["ngram"]})
    got = {(r.k, r.concurrency): round(r.speedup, 6) for r in frame.itertuples()}
    assert got == {(2, 1): 1.5, (4, 1): 1.8, (4, 8): 0.75}
    best = db.speedup({"source": ["t"], "method": ["ngram"]}, best=True)
    assert {(r.concurrency, r.k) for r in best.itertuples()} == {(1, 4), (8, 4)}


def test_failed_cells_are_saved_on_disk_but_left_out_of_speedup(tmp_path):
    writing.write_results(
        [_row("none", 0, 1, 100.0), _row("ngram", 2, 1, None, status="failed", error="server died")],
        run_id="a",
        directory=tmp_path,
    )
    db = store.Store(result_dirs=[tmp_path], request_dirs=[])
    assert db.count() == 2
    assert db.speedup({"method": ["ngram"]}).empty


def test_store_sees_new_files_without_restart(tmp_path):
    db = store.Store(result_dirs=[tmp_path], request_dirs=[])
    assert db.count() == 0
    writing.write_results([_row("none", 0, 1, 100.0)], run_id="x", directory=tmp_path)
    assert db.count() == 1


def test_filters_are_parameters_and_columns_are_checked(tmp_path):
    writing.write_results([_row("none", 0, 1, 100.0)], run_id="x", directory=tmp_path)
    db = store.Store(result_dirs=[tmp_path], request_dirs=[])
    assert db.speedup({"model": ["m' OR 1=1 --"]}).empty
    with pytest.raises(StoreError, match="Cannot filter"):
        db.speedup({"1=1; DROP TABLE results": ["x"]})


def test_bad_run_id_is_refused(tmp_path):
    with pytest.raises(StoreError, match="Run id"):
        writing.write_results([_row("none", 0, 1, 1.0)], run_id="../escape", directory=tmp_path)


def test_damaged_file_gives_one_sentence(tmp_path):
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(StoreError, match="could not be read"):
        store.Store(result_dirs=[tmp_path], request_dirs=[]).count()


def _cpu_row(method, k, conc, tput, **extra):
    """A row of a SpecScope CPU sweep, labelled as the bundled CPU demo is."""
    return _row(
        method,
        k,
        conc,
        tput,
        source="specscope",
        model="SmolLM2-135M-Instruct",
        dataset="code-editing",
        hardware="cpu-2core",
        output_len=64,
        temperature=0.0,
        **extra,
    )


def test_each_run_divides_by_its_own_baseline_and_reads_one(tmp_path):
    # Two runs with the same labels, measured under different load: 21.5 and 36.7 tok/s baselines.
    # Averaging the two baselines made the second run's baseline read 1.261x and ngram K=4 1.70x.
    writing.write_results(
        [_cpu_row("none", 0, 1, 21.5, host="bundled:cpu"), _cpu_row("ngram", 4, 1, 30.0, host="bundled:cpu")],
        run_id="old",
        directory=tmp_path,
    )
    writing.write_results(
        [_cpu_row("none", 0, 1, 36.7, host="box"), _cpu_row("ngram", 4, 1, 49.6, host="box")],
        run_id="new",
        directory=tmp_path,
    )
    # Same labels and host as "new", its baselines measured twice: still no mixing.
    writing.write_results(
        [_cpu_row("none", 0, 1, 20.0, host="box"), _cpu_row("ngram", 4, 1, 25.0, host="box")],
        run_id="third",
        directory=tmp_path,
    )
    frame = store.Store(result_dirs=[tmp_path], request_dirs=[]).speedup()
    got = {(r.run_id, r.method): (r.speedup, r.baseline_run_id) for r in frame.itertuples()}
    assert got[("new", "none")] == (1.0, "new")
    assert got[("old", "none")] == (1.0, "old")
    assert got[("third", "none")] == (1.0, "third")
    assert got[("new", "ngram")] == (pytest.approx(49.6 / 36.7), "new")
    assert got[("old", "ngram")] == (pytest.approx(30.0 / 21.5), "old")
    assert got[("third", "ngram")] == (pytest.approx(25.0 / 20.0), "third")


def test_run_without_baseline_falls_back_to_newest_on_the_same_host(tmp_path):
    early = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    late = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    writing.write_results([_cpu_row("none", 0, 1, 40.0, host="box", created_at=early)], run_id="b1", directory=tmp_path)
    writing.write_results([_cpu_row("none", 0, 1, 50.0, host="box", created_at=late)], run_id="b2", directory=tmp_path)
    writing.write_results(
        [_cpu_row("none", 0, 1, 10.0, host="other-box", created_at=late)], run_id="elsewhere", directory=tmp_path
    )
    writing.write_results([_cpu_row("suffix", 8, 1, 75.0, host="box")], run_id="only-suffix", directory=tmp_path)
    writing.write_results([_cpu_row("suffix", 8, 1, 75.0, host="third-box")], run_id="no-match", directory=tmp_path)
    frame = store.Store(result_dirs=[tmp_path], request_dirs=[]).speedup({"method": ["suffix"]})
    by_run = frame.set_index("run_id")
    assert by_run.loc["only-suffix", "baseline_run_id"] == "b2"
    assert by_run.loc["only-suffix", "speedup"] == pytest.approx(1.5)
    assert pd.isna(by_run.loc["no-match", "speedup"]) and pd.isna(by_run.loc["no-match", "baseline_run_id"])


def test_repeats_fold_into_a_mean_with_intervals(tmp_path):
    """Rounds shared with the run's own baseline: the speedup's interval is paired (per-round log ratios)."""
    base, ngram = [20.0, 22.0, 21.0], [30.0, 34.0, 31.0]
    rows = [_cpu_row("none", 0, 1, v, repeat=i, host="box") for i, v in enumerate(base)]
    rows += [_cpu_row("ngram", 4, 1, v, repeat=i, host="box") for i, v in enumerate(ngram)]
    rows.append(_cpu_row("ngram", 4, 1, None, repeat=3, host="box", status="failed", error="died"))
    writing.write_results(rows, run_id="rep", directory=tmp_path)
    frame = store.Store(result_dirs=[tmp_path], request_dirs=[]).speedup().set_index("method")
    assert list(frame["repeats"]) == [3, 3]
    spec = frame.loc["ngram"]
    assert spec["output_throughput"] == pytest.approx(np.mean(ngram))
    assert spec["speedup"] == pytest.approx(np.mean(ngram) / np.mean(base))
    logs = np.log(np.array(ngram) / np.array(base))
    step = distributions.t_quantile(0.975, 2) * np.std(logs, ddof=1) / np.sqrt(3)
    assert spec["speedup_lo"] == pytest.approx(spec["speedup"] * np.exp(-step))
    assert spec["speedup_hi"] == pytest.approx(spec["speedup"] * np.exp(step))
    assert spec["speedup_interval"] == "paired" and spec["baseline_repeats"] == 3
    mean = stats.mean_interval(ngram)
    assert spec["output_throughput_lo"] == pytest.approx(mean.low)
    assert frame.loc["none", "speedup"] == 1.0 and frame.loc["none", "speedup_interval"] == "baseline"


def test_single_runs_have_no_interval(tmp_path):
    writing.write_results([_row("none", 0, 1, 100.0), _row("ngram", 2, 1, 150.0)], run_id="a", directory=tmp_path)
    spec = store.Store(result_dirs=[tmp_path], request_dirs=[]).speedup({"method": ["ngram"]}).iloc[0]
    assert spec["repeats"] == 1 and spec["speedup_interval"] == "none"
    assert pd.isna(spec["speedup_lo"]) and pd.isna(spec["output_throughput_lo"])


def test_best_k_lists_the_k_it_cannot_tell_apart(tmp_path):
    base = [20.0, 21.0, 19.0, 20.5]
    rows = [_cpu_row("none", 0, 1, v, repeat=i, host="box") for i, v in enumerate(base)]
    for k, values in {2: [30.0, 31.0, 29.5, 30.5], 4: [30.0, 29.0, 31.0, 30.0], 8: [22.0, 21.5, 22.5, 21.0]}.items():
        rows += [_cpu_row("ngram", k, 1, v, repeat=i, host="box") for i, v in enumerate(values)]
    writing.write_results(rows, run_id="ties", directory=tmp_path)
    [best] = (
        store.Store(result_dirs=[tmp_path], request_dirs=[])
        .speedup({"method": ["ngram"]}, best=True)
        .to_dict("records")
    )
    assert best["k"] == 2 and best["tied_ks"] == [4]


def test_own_runs_record_their_host(tmp_path):
    path = writing.write_results([_cpu_row("none", 0, 1, 1.0)], run_id="mine", directory=tmp_path)
    assert pq.read_table(path).column("host").to_pylist() == [socket.gethostname()]
    path = writing.write_results([_row("none", 0, 1, 1.0)], run_id="imported", directory=tmp_path)
    assert pq.read_table(path).column("host").to_pylist() == [None]
    assert writing.host_of("http://127.0.0.1:8000") == socket.gethostname()
    assert writing.host_of("http://gpu-box:8000/v1") == "gpu-box"


def test_cli_json_gives_intervals_ties_and_the_baseline_run(specscope_home, monkeypatch, capsys):
    monkeypatch.setenv("SPECSCOPE_DATA", str(specscope_home / "no-bundled"))
    rows = [_cpu_row("none", 0, 1, v, repeat=i, host="box") for i, v in enumerate([20.0, 21.0, 19.0])]
    for k, values in {2: [30.0, 31.0, 29.5], 4: [30.0, 29.0, 31.0]}.items():
        rows += [_cpu_row("ngram", k, 1, v, repeat=i, host="box") for i, v in enumerate(values)]
    writing.write_results(rows, run_id="cli-run")
    assert cli_main(["speedup", "--best", "--json", "--method", "ngram"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["k"] == 2 and row["tied_ks"] == [4] and row["baseline_run_id"] == "cli-run"
    assert row["speedup_lo"] < row["speedup"] < row["speedup_hi"] and row["speedup_interval"] == "paired"
    assert row["repeats"] == 3 and row["baseline_repeats"] == 3 and row["host"] == "box"
    assert cli_main(["speedup", "--best"]) == 0
    text = capsys.readouterr().out
    assert "tied with K 4 (within noise)" in text and "× [" in text and "±" not in text
    lines = [line for line in text.splitlines() if line.strip()]
    assert "setup" in lines[0] and "cpu-2core" in text and "(baseline)" not in text  # the best K only
    assert "checks" in lines[0] and "✓" in text  # its cell passed every check
    assert not any(word in text for word in ("NaN", "<NA>", "None"))
    assert cli_main(["speedup"]) == 0
    assert "1.000× (baseline)" in capsys.readouterr().out


def test_duckdb_holds_a_memory_limit_and_spills_under_the_cache(tmp_path, monkeypatch):
    import subprocess
    import sys

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECSCOPE_DUCKDB_MEMORY", "512MB")
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    ).stdout.strip()
    stale = tmp_path / "cache" / "specscope" / "duckdb" / gone
    stale.mkdir(parents=True)
    (stale / "duckdb_temp_storage-0.tmp").write_bytes(b"left by a killed process")
    writing.write_results([_row("none", 0, 1, 100.0)], run_id="a", directory=tmp_path / "results")
    db = store.Store(result_dirs=[tmp_path / "results"], request_dirs=[])
    settings = db.query("SELECT current_setting('memory_limit') AS m, current_setting('temp_directory') AS t")
    assert settings["m"][0] == "488.2 MiB"  # 512 MB
    assert settings["t"][0] == str(tmp_path / "cache" / "specscope" / "duckdb" / str(os.getpid()))
    assert not stale.exists()


def test_a_store_that_never_spilled_leaves_no_folder_when_a_signal_ends_it(tmp_path, monkeypatch):
    """A bare `streamlit run` stopped with SIGTERM runs no exit handler: its spill folder must not exist
    unless DuckDB spilled into it (DuckDB makes it then)."""
    import signal
    import subprocess
    import sys

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    writing.write_results([_row("none", 0, 1, 100.0)], run_id="a", directory=tmp_path / "results")
    code = (
        "import os, signal; from pathlib import Path; from specscope.results import store; "
        f"print(store.Store(result_dirs=[Path({str(tmp_path / 'results')!r})], request_dirs=[]).count(), "
        "flush=True); "
        "os.kill(os.getpid(), signal.SIGTERM)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == -signal.SIGTERM and done.stdout.strip() == "1", done.stderr
    assert list((tmp_path / "cache" / "specscope" / "duckdb").iterdir()) == []


def test_a_bad_memory_limit_is_one_sentence(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECSCOPE_DUCKDB_MEMORY", "lots")
    with pytest.raises(StoreError, match="SPECSCOPE_DUCKDB_MEMORY"):
        store.Store(result_dirs=[tmp_path], request_dirs=[]).count()


def test_cells_alike_but_for_their_k_schedule_come_in_one_order_and_their_flags_in_one_text(tmp_path):
    """The dashboard keeps work per content of a part's rows: the same cells must read the same in every query."""
    rows = [
        _row("none", 0, 1, 100.0),
        _row("ngram", 4, 1, 150.0, hygiene="waves"),
        _row("ngram", 4, 1, 160.0, k_schedule="1-64:4"),
    ]
    repeats = [
        _row("ngram", 2, 1, 120.0, repeat=i, hygiene=flags)
        for i, flags in enumerate(["waves", "few_requests", "waves", "few_requests"])
    ]
    writing.write_results(rows + repeats, run_id="a", directory=tmp_path)
    for _ in range(5):  # a fresh store each time: another load, another plan
        frame = store.Store(result_dirs=[tmp_path], request_dirs=[]).speedup({"method": ["ngram"]})
        assert list(zip(frame["k"], frame["k_schedule"].fillna(""))) == [(2, ""), (4, "1-64:4"), (4, "")]
        assert frame["hygiene"].iloc[0] == "few_requests,waves"
