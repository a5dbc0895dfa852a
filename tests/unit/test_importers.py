"""Importers: Ruiz Parquet headline values, vllm bench JSON, column maps, and malformed files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specscope import importers
from specscope.cli import main
from specscope.errors import InputError
from specscope.store import Store

CAPTURES = Path(__file__).resolve().parents[1] / "captures"


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
    for key in ("source", "model", "draft_model", "method", "dataset", "concurrency", "k", "speedup",
                "acceptance_length"):
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
        assert list(row["per_position_acceptance"]) == pytest.approx(
            raw["spec_decode_per_position_acceptance_rates"])


def test_csv_with_a_column_map(specscope_home, tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("Model,Method,Users,TokPerSec,K\nm,none,4,100,\nm,ngram,4,130,3\n")
    result = importers.import_file(path, column_map={"model": "Model", "method": "Method",
                                                     "concurrency": "Users",
                                                     "output_throughput": "TokPerSec", "k": "K"})
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
    return [(truncated, None, "truncated"), (wrong_json, None, "not a `vllm bench serve"),
            (list_json, None, "not a `vllm bench serve"), (empty, None, "empty"),
            (csv, {"model": "Model", "method": "Method", "concurrency": "Users",
                   "output_throughput": "TokPerSec"}, "lacks the mapped column")]


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
