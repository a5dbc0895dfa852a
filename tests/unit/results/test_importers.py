"""Importers: Ruiz Parquet headline values, vllm bench JSON, column maps, and malformed files."""

from __future__ import annotations

import json

import pytest

from helpers.paths import CAPTURES
from specscope.cli import main
from specscope.errors import InputError
from specscope.results import importers
from specscope.results.store import Store


def _best(capsys, *args):
    assert main(["speedup", "--best", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def _pick(rows, model, draft, conc):
    [row] = [r for r in rows if r["model"] == model and r["draft_model"] == draft and r["concurrency"] == conc]
    return row


def test_ruiz_headline_values_through_the_cli(specscope_home, ruiz_parquet, capsys, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_DATA", str(specscope_home / "no-bundled"))
    assert main(["import", str(ruiz_parquet)]) == 0
    assert "imported 262 rows" in capsys.readouterr().out
    rows = _best(capsys)
    llama, qwen = "meta-llama/Llama-3.3-70B-Instruct", "Qwen/Qwen3-32B"
    r = _pick(rows, llama, "meta-llama/Llama-3.2-1B", 1)
    assert (r["k"], round(r["speedup"], 3)) == (8, 3.555)
    r = _pick(rows, qwen, "Qwen/Qwen3-1.7B", 1)
    assert (r["k"], round(r["speedup"], 3)) == (5, 1.994)
    assert round(_pick(rows, qwen, "Qwen/Qwen3-1.7B", 256)["speedup"], 3) == 0.800
    r = _pick(rows, llama, "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B", 1)
    assert (r["method"], r["k"], round(r["speedup"], 3)) == ("eagle3", 7, 2.946)
    for key in (
        "source",
        "model",
        "draft_model",
        "method",
        "dataset",
        "concurrency",
        "k",
        "speedup",
        "acceptance_length",
    ):
        assert key in r


def test_importing_the_same_file_twice_does_not_duplicate(specscope_home, ruiz_parquet, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_DATA", str(specscope_home / "no-bundled"))
    first = importers.import_file(ruiz_parquet)
    second = importers.import_file(ruiz_parquet)
    assert first.path == second.path
    assert Store().count() == 262


@pytest.mark.parametrize("capture", sorted(CAPTURES.glob("vllm_bench_*.json")), ids=lambda p: p.name)
def test_vllm_bench_json_from_a_real_run(specscope_home, capture):
    raw = json.loads(capture.read_text())
    result = importers.import_file(capture)
    row = Store().query("SELECT * FROM results WHERE run_id = ?", [result.run_id]).iloc[0]
    assert row["output_throughput"] == pytest.approx(raw["output_throughput"])
    assert row["concurrency"] == raw["max_concurrency"]
    assert row["mean_tpot_ms"] == pytest.approx(raw["mean_tpot_ms"])
    if raw.get("spec_decode_acceptance_rate") is not None:
        assert row["acceptance_rate"] == pytest.approx(raw["spec_decode_acceptance_rate"] / 100)
        assert list(row["per_position_acceptance"]) == pytest.approx(raw["spec_decode_per_position_acceptance_rates"])


def test_csv_with_a_column_map(specscope_home, tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("Model,Method,Users,TokPerSec,K\nm,none,4,100,\nm,ngram,4,130,3\n")
    result = importers.import_file(
        path,
        column_map={
            "model": "Model",
            "method": "Method",
            "concurrency": "Users",
            "output_throughput": "TokPerSec",
            "k": "K",
        },
    )
    assert result.rows == 2
    frame = Store().speedup({"method": ["ngram"], "source": ["import"]})
    assert frame["speedup"].round(3).tolist() == [1.3]


def _malformed(tmp_path, ruiz_parquet):
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(ruiz_parquet.read_bytes()[:5000])
    wrong_json = tmp_path / "wrong.json"
    wrong_json.write_text(json.dumps({"hello": [1, 2, 3]}))
    list_json = tmp_path / "list.json"
    list_json.write_text("[1, 2]")
    empty = tmp_path / "empty.parquet"
    empty.write_bytes(b"")
    csv = tmp_path / "missing.csv"
    csv.write_text("Model,Method,Users\nm,none,4\n")
    return [
        (truncated, None, "truncated"),
        (wrong_json, None, "not a `vllm bench serve"),
        (list_json, None, "not a `vllm bench serve"),
        (empty, None, "empty"),
        (
            csv,
            {"model": "Model", "method": "Method", "concurrency": "Users", "output_throughput": "TokPerSec"},
            "lacks the mapped column",
        ),
    ]


def test_malformed_inputs_give_one_sentence_and_change_nothing(specscope_home, tmp_path, ruiz_parquet):
    importers.import_file(ruiz_parquet)
    before = sorted(p.name for p in (specscope_home / "results").iterdir())
    for path, column_map, phrase in _malformed(tmp_path, ruiz_parquet):
        with pytest.raises(InputError) as info:
            importers.import_file(path, column_map=column_map)
        message = str(info.value)
        assert phrase in message, message
        assert "\n" not in message
    assert sorted(p.name for p in (specscope_home / "results").iterdir()) == before


def test_cli_reports_a_bad_file_in_one_line(specscope_home, tmp_path, capsys):
    empty = tmp_path / "x.json"
    empty.write_bytes(b"")
    assert main(["import", str(empty)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("specscope: ") and "empty" in err and "\n" not in err


def test_upload_names_never_become_paths(specscope_home, ruiz_parquet):
    result = importers.import_upload("../../etc/evil.parquet", ruiz_parquet.read_bytes())
    assert result.path.parent == specscope_home / "results"


@pytest.mark.parametrize("label", ["None", "nosd", "baseline", "no-spec", ""])
def test_a_mapped_import_recognises_the_baseline_label_and_says_so(specscope_home, tmp_path, label):
    path = tmp_path / "foreign.csv"
    path.write_text(f"Model,Method,Users,TokPerSec,K\nm,{label},4,100,\nm,ngram,4,130,3\n")
    result = importers.import_file(
        path,
        column_map={
            "model": "Model",
            "method": "Method",
            "concurrency": "Users",
            "output_throughput": "TokPerSec",
            "k": "K",
        },
    )
    shown = repr(label) if label else "'(empty)'"
    assert result.notes == (f"Took method {shown} as the baseline (no speculative decoding).",)
    frame = Store().speedup({"source": ["import"]}).set_index("method")
    assert frame.loc["none", "k"] == 0 and round(frame.loc["ngram", "speedup"], 3) == 1.3


def test_a_flag_stands_in_for_a_required_column_the_file_lacks(specscope_home, tmp_path, capsys):
    path = tmp_path / "no-model.csv"
    path.write_text("Method,Users,TokPerSec\nnosd,1,50\nsuffix,1,80\n")
    assert (
        main(
            [
                "import",
                str(path),
                "--map",
                "method=Method,concurrency=Users,output_throughput=TokPerSec",
                "--model",
                "org/m",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "imported 2 rows" in out and "Took method 'nosd' as the baseline" in out
    canonical = tmp_path / "canonical-no-model.csv"
    canonical.write_text("method,concurrency,output_throughput\nnone,2,40\nngram,2,60\n")
    assert main(["import", str(canonical), "--model", "org/other"]) == 0
    capsys.readouterr()
    rows = _best(capsys, "--model", "org/m") + _best(capsys, "--model", "org/other")
    assert sorted(round(r["speedup"], 2) for r in rows if r["method"] != "none") == [1.5, 1.6]


def test_speedup_best_never_reports_a_row_without_a_speedup(specscope_home, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_DATA", str(specscope_home / "no-bundled"))
    path = tmp_path / "unmatched.csv"  # speculative rows only, and no baseline anywhere
    path.write_text("model,method,k,concurrency,output_throughput\nm,ngram,2,1,50\nm,ngram,4,1,55\n")
    assert main(["import", str(path)]) == 0
    capsys.readouterr()
    assert main(["speedup", "--best", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == []
    assert "1 group(s) have no matching baseline" in captured.err


def test_a_file_needing_a_column_map_says_how_on_page_and_command_line(specscope_home, tmp_path):
    path = tmp_path / "foreign.csv"
    path.write_text("Model,Method,Users,TokPerSec\nm,nosd,4,100\n")
    with pytest.raises(importers.ColumnMapNeeded) as info:
        importers.import_file(path)
    assert info.value.columns == ["Model", "Method", "Users", "TokPerSec"]
    assert "Explorer's import" in str(info.value) and "--map" in str(info.value)
    assert importers.guess_map(["Model", "Method", "Users", "output throughput", "K"]) == {
        "model": "Model",
        "method": "Method",
        "output_throughput": "output throughput",
        "k": "K",
    }


def test_an_earlier_ruiz_export_is_recognised_and_told_apart(specscope_home, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    # the columns of vllm-scripts' results/data-2026-01-23.parquet (commit fccb861), before full-bench-data
    earlier = {
        "directory": ["vllm-throughput-InstructCoder-nosd-t0.0-tp1"],
        "temp": [0.0],
        "tp": [1],
        "sd_method": ["None"],
        "num_spec_toks": [0],
        "draft_model": ["None"],
        "dataset": ["InstructCoder"],
        "concurrency": [1],
        "n_reqs": [100],
        "total_token_throughput": [900.0],
    }
    old = tmp_path / "data-2026-01-23.parquet"
    pq.write_table(pa.table(earlier), old)
    with pytest.raises(InputError, match="earlier Ruiz export: it has total_token_throughput"):
        importers.import_file(old)
    # a Ruiz export without `analysis`: the model comes from --model
    no_setup = tmp_path / "no-analysis.parquet"
    pq.write_table(
        pa.table(
            {
                **{k: v * 2 for k, v in earlier.items() if k != "total_token_throughput"},
                "sd_method": ["None", "draft_model"],
                "num_spec_toks": [0, 4],
                "draft_model": ["None", "Qwen/Qwen3-1.7B"],
                "output_token_throughput": [100.0, 150.0],
            }
        ),
        no_setup,
    )
    with pytest.raises(InputError, match="without the analysis column"):
        importers.import_file(no_setup)
    result = importers.import_file(no_setup, overrides={"model": "Qwen/Qwen3-32B", "hardware": "1xH100"})
    assert result.format == "ruiz-parquet"
    [row] = Store().speedup({"model": ["Qwen/Qwen3-32B"], "method": ["draft_model"]}).to_dict("records")
    assert row["k"] == 4 and row["speedup"] == pytest.approx(1.5) and row["hardware"] == "1xH100"


def test_vllm_bench_json_from_before_max_concurrency(specscope_home, tmp_path):
    raw = json.loads((CAPTURES / "vllm_bench_none_c2.json").read_text())
    del raw["max_concurrency"]  # earlier vLLM sent every prompt at once when the rate was unlimited
    path = tmp_path / "old.json"
    path.write_text(json.dumps(raw))
    result = importers.import_file(path)
    row = Store().query("SELECT * FROM results WHERE run_id = ?", [result.run_id]).iloc[0]
    assert row["concurrency"] == raw["num_prompts"] and raw["request_rate"] == "inf"
