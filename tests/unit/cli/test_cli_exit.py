"""The real ``specscope`` command, run as a subprocess: a failing import ends with its own
one-sentence message and exit status 1, every time, and leaves no native thread running that
could abort the exit ("terminate called without an active exception", status 134)."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from helpers.paths import APP

SCRIPT = "import sys; from specscope.cli import main; sys.exit(main())"  # what the console script runs
# The threads of this process before and after the command (Arrow's pool threads are native).
COUNTING = """import os, sys
from specscope.cli import build_parser, main
build_parser()  # imports every command's modules (pyarrow starts its own threads on import)
before = len(os.listdir("/proc/self/task"))
status = main(sys.argv[1:])
print(before, len(os.listdir("/proc/self/task")), status)"""
RUNS = 12


def _foreign_parquet(tmp_path: Path) -> Path:
    path = tmp_path / "foreign.parquet"
    pq.write_table(
        pa.table({"Model": ["m", "m"], "Method": ["nosd", "ngram"], "Users": [4, 4], "TokPerSec": [100.0, 130.0]}), path
    )
    return path


def _env(tmp_path: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(APP), "SPECSCOPE_HOME": str(tmp_path / "home")}


def test_a_failing_import_starts_no_thread_that_outlives_it(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", COUNTING, "import", str(_foreign_parquet(tmp_path))],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    before, after, status = done.stdout.split()
    assert status == "1" and after == before, done.stdout + done.stderr


def test_a_file_needing_a_column_map_exits_1_with_its_message_every_time(tmp_path):
    path = _foreign_parquet(tmp_path)

    def run(_) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", SCRIPT, "import", str(path)],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )

    with ThreadPoolExecutor(4) as pool:  # separate processes, a few at a time: each exit is its own
        runs = list(pool.map(run, range(RUNS)))
    for done in runs:
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("specscope: foreign.parquet fits no known results format")
        assert done.stderr.count("\n") == 1 and "terminate called" not in done.stderr
    assert not (tmp_path / "home" / "results").exists() or not any((tmp_path / "home" / "results").iterdir())


def test_help_reads_as_plain_text():
    env = {**os.environ, "PYTHONPATH": str(APP)}
    shown = subprocess.run(
        [sys.executable, "-c", SCRIPT, "--help"], capture_output=True, text=True, env=env, timeout=120
    )
    assert shown.returncode == 0 and "specscope" in shown.stdout and "``" not in shown.stdout
