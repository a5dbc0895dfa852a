"""Hygiene on a row's own figures: above its physical ceiling (imports included), acceptance collapse,
greedy drafts at temperature > 0."""

from __future__ import annotations

import json

import pytest

from specscope.cli import main
from specscope.results import hygiene
from specscope.results.store import Store

ROW = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "hardware": "1xH100-80GB",
    "method": "eagle3",
    "k": 3,
    "concurrency": 1,
    "output_throughput": 300.0,
    "mean_tpot_ms": 3.2,
    "acceptance_length": 2.6,
    "temperature": 0.0,
    "method_params": "{}",
}


def test_a_plausible_row_passes():
    assert hygiene.row_flags(ROW) == []


@pytest.mark.parametrize(
    "change, flag",
    [
        ({"output_throughput": 900.0}, "above_ceiling"),  # 4 x 209 tok/s is the most at K=3, batch 1
        ({"acceptance_length": 4.2}, "above_ceiling"),  # a step emits at most K+1 = 4
        ({"acceptance_length": 1.04}, "acceptance_collapse"),
        ({"temperature": 0.7}, "greedy_draft"),  # vLLM's default draft_sample_method is greedy
    ],
)
def test_each_check_on_a_rows_own_figures(change, flag):
    assert hygiene.row_flags({**ROW, **change}) == [flag]
    assert flag in hygiene.flags({**ROW, **change, "completed": 10, "warmups": 1}, repeats=3)


def test_sampling_drafts_and_model_free_methods_are_not_greedy_drafts():
    sampling = {**ROW, "temperature": 0.7, "method_params": '{"draft_sample_method": "probabilistic"}'}
    assert hygiene.row_flags(sampling) == []
    assert hygiene.row_flags({**ROW, "method": "ngram", "temperature": 0.7}) == []


def test_a_foreign_result_above_its_roofline_is_flagged_on_import(specscope_home, tmp_path, capsys, monkeypatch):
    """A vendor-style claim: 6,200 tok/s for a 70B at 4 users on one H200, whose ceiling at K=3 is about 540."""
    monkeypatch.setenv("SPECSCOPE_DATA", str(specscope_home / "no-bundled"))
    path = tmp_path / "claims.csv"
    path.write_text(
        "Model,Method,Users,TokPerSec,K,GPU\n"
        "meta-llama/Llama-3.3-70B-Instruct,none,4,110,,1xH200\n"
        "meta-llama/Llama-3.3-70B-Instruct,eagle3,4,6200,3,1xH200\n"
    )
    assert (
        main(
            [
                "import",
                str(path),
                "--map",
                "model=Model,method=Method,concurrency=Users,output_throughput=TokPerSec,k=K,hardware=GPU",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "row 2 (eagle3, concurrency 4) is above its physical ceiling: 6200 tok/s > roofline 544 tok/s" in out, out
    flagged = Store().query("SELECT method, coalesce(hygiene, '') AS hygiene FROM results ORDER BY method")
    assert flagged["hygiene"].tolist() == ["above_ceiling", ""]  # eagle3's; the baseline's own figures pass
    assert main(["speedup", "--json"]) == 0
    rows = {r["method"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["eagle3"]["ceiling"] == pytest.approx(544, abs=1) and rows["eagle3"]["ceiling_share"] > 11
    assert rows["none"]["ceiling"] == pytest.approx(136, abs=1) and rows["eagle3"]["k_ceiling"] == 4
