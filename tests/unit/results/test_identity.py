"""One name for a setup (specscope.results.identity): every key that separates rows shows wherever a number does."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from helpers.paths import DATA
from specscope.analysis import explore, explore_text, intervals, versions
from specscope.cli import layout
from specscope.cli import main as cli_main
from specscope.engine import models
from specscope.results import identity
from specscope.results.store import Store

ROW = {
    "source": "specscope",
    "model": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "method": "ngram",
    "dataset": "code-editing",
    "hardware": "cpu-2core",
    "host": "bundled:vm",
    "vllm_version": "0.32.0",
    "torch_version": "2.13.0+cpu",
    "weights": "real",
    "acceptance": "real",
    "response_format": "none",
}


@pytest.fixture(scope="module")
def bundled() -> Store:
    return Store(result_dirs=[DATA / "results"], request_dirs=[])


def test_a_label_names_every_key_that_separates_setups():
    assert identity.setup_label(ROW) == (
        "SmolLM2-135M-Instruct · ngram · code-editing · cpu-2core @ bundled · vLLM 0.32.0"
    )
    constrained = identity.setup_label(
        {
            **ROW,
            "response_format": "json_schema",
            "weights": "dummy",
            "acceptance": "synthetic",
            "draft_model": "/root/m/shape-Qwen3-1.7B",
        }
    )
    assert constrained == (
        "SmolLM2-135M-Instruct · ngram (shape-Qwen3-1.7B) · code-editing · constrained "
        "(json_schema) · cpu-2core @ bundled · vLLM 0.32.0 · dummy weights, synthetic acceptance"
    )
    assert "vLLM" not in identity.setup_label(ROW, omit=("vllm_version",))
    assert "vLLM" not in identity.setup_label({**ROW, "vllm_version": None})  # not recorded: not invented


def test_labels_that_would_read_alike_name_what_tells_them_apart():
    other_torch = {**ROW, "torch_version": "2.9.0+cpu"}
    assert identity.unique_labels([ROW, other_torch]) == [
        identity.setup_label(ROW) + " · torch 2.13.0+cpu",
        identity.setup_label(ROW) + " · torch 2.9.0+cpu",
    ]
    runs = identity.unique_labels([{**ROW, "run_id": "a"}, {**ROW, "run_id": "b"}])
    assert runs[0].endswith("· run a") and runs[1].endswith("· run b")
    assert identity.unique_labels([ROW, dict(ROW)]) == [identity.setup_label(ROW)] * 2  # one setup, one name
    versions_apart = identity.unique_labels([ROW, {**ROW, "vllm_version": "0.31.0"}])
    assert versions_apart[0] != versions_apart[1]


def test_varying_lists_the_columns_a_table_needs():
    frame = pd.DataFrame([ROW, {**ROW, "response_format": "json_schema"}, {**ROW, "vllm_version": None}])
    assert identity.varying(frame) == ["response_format", "vllm_version"]
    assert identity.format_name("none") == "free" and identity.format_name(None) == "not recorded"
    assert identity.format_name("json_schema") == "constrained (json_schema)"


def test_a_figure_folded_over_runs_says_so():
    folded = {"speedup": 1.587, "speedup_lo": 0.679, "speedup_hi": 2.495, "runs": 2, "method": "ngram"}
    assert intervals.value_text(folded) == "1.587× [0.679, 2.495] (mean of 2 runs)"
    assert intervals.value_text({**folded, "runs": 1}) == "1.587× [0.679, 2.495]"
    assert identity.folded_text(None) == ""


def test_models_are_named_not_located():
    assert models.model_name("/root/ssmodels/shape-Qwen3-1.7B") == "shape-Qwen3-1.7B"
    assert models.model_name("/root/ssmodels/shape-Qwen3-1.7B/") == "shape-Qwen3-1.7B"
    assert models.model_name("meta-llama/Llama-3.2-1B-Instruct") == "meta-llama/Llama-3.2-1B-Instruct"
    assert models.model_name(None) is None
    config = {"method": "draft_model", "model": "/x/y/SmolLM2-135M-Instruct-draft-24L", "num_speculative_tokens": 4}
    assert models.named_config(config) == {**config, "model": "SmolLM2-135M-Instruct-draft-24L"}
    assert models.named_config({"method": "ngram"}) == {"method": "ngram"}


def test_the_same_setup_on_two_vllm_versions_reads_as_two(bundled):
    """The bundled versions run measured ngram K=4 on 0.31.0 and 0.32.0, and the code-editing run measured
    it on 0.32.0 too: the speedup-vs-K panel keeps the versions apart, and the 0.32.0 point says it folds
    two runs and opens into each run's figure."""
    vs_k = explore.speedup_vs_k(bundled, {"method": ["ngram"], "dataset": ["code-editing"], "hardware": ["cpu-2core"]})
    at_k4 = vs_k[(vs_k["k"] == 4) & (vs_k["concurrency"] == 1)]
    assert len(at_k4) == 2 and at_k4["setup"].nunique() == 2
    assert {"vLLM 0.31.0", "vLLM 0.32.0"} == {s.split(" · ")[-1] for s in at_k4["setup"]}
    folded = at_k4[at_k4["vllm_version"] == "0.32.0"].iloc[0]
    assert folded["runs"] == 2 and "(mean of 2 runs)" in intervals.value_text(folded.to_dict())
    runs = explore.point_runs(bundled, {"method": ["ngram"], "dataset": ["code-editing"], "hardware": ["cpu-2core"]})
    assert sorted(runs["run_id"]) == ["specscope-cpu-code-editing", "specscope-cpu-versions"]
    assert sorted(runs["speedup"].round(3)) == [1.516, 1.658]
    # the runs combined by their own intervals (the versions run's paired over its rounds; the code-editing run
    # measured its repeats back to back, so Fieller): between the two, narrower than either run's interval
    assert runs["speedup"].min() < folded["speedup"] < runs["speedup"].max()
    assert sorted(runs["speedup_interval"]) == ["fieller", "paired"]
    assert ((folded["speedup_hi"] - folded["speedup_lo"]) < (runs["speedup_hi"] - runs["speedup_lo"])).all()
    text = layout.render(versions.speedup_by(bundled, {"method": ["ngram"], "hardware": ["cpu-2core"]}))
    assert "(mean of 2 runs)" in text
    assert "run specscope-cpu-code-editing 1.658×" in text and "run specscope-cpu-versions 1.516×" in text
    records = json.loads(versions.speedup_by(bundled, {"method": ["ngram"]}, as_json=True))
    assert [r["run_ids"] for r in records if r["runs"] == 2] == [
        ["specscope-cpu-code-editing", "specscope-cpu-versions"]
    ]


def test_speedup_best_names_vllm_run_and_the_mean_of_the_point(bundled, specscope_home, capsys):
    assert (
        cli_main(
            ["speedup", "--best", "--wide", "--method", "ngram", "--dataset", "code-editing", "--hardware", "cpu-2core"]
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert "vLLM" in out[0] and "baseline from" in out[0]
    k4 = [line for line in out[1:] if " 1  4 " in line]
    assert len(k4) == 2 and {"0.31.0" in line for line in k4} == {True, False}
    assert any("run specscope-cpu-code-editing, one of 2 runs of this point (their mean 1.570×" in line for line in k4)
    assert (
        cli_main(
            ["speedup", "--best", "--method", "ngram", "--dataset", "code-editing", "--hardware", "cpu-2core", "--json"]
        )
        == 0
    )
    records = json.loads(capsys.readouterr().out)
    at = {(r["vllm_version"], r["concurrency"]): r for r in records}
    assert at[("0.32.0", 1)]["point_runs"] == 2 and at[("0.32.0", 1)]["run_id"] == "specscope-cpu-code-editing"
    assert at[("0.31.0", 1)]["point_runs"] == 1
    assert len({r["setup"] for r in records if r["concurrency"] == 1}) == 2


def test_advise_names_each_group_apart(bundled, specscope_home, capsys):
    assert cli_main(["advise", "--method", "ngram", "--dataset", "code-editing", "--source", "specscope"]) == 0
    heads, family = [], ""
    for line in capsys.readouterr().out.splitlines():  # a family's answer, then a line per concurrency under it
        if " (specscope): " in line and not line.startswith(" "):
            family = line.split(": ")[0]
        elif line.startswith("  concurrency "):
            heads.append(f"{family} {line.split(':')[0].strip()}")
    assert len(heads) == len(set(heads)) >= 3


def test_the_best_k_table_names_the_run_of_each_best_k(bundled):
    filters = {"method": ["ngram"], "dataset": ["code-editing"], "hardware": ["cpu-2core"]}
    table = explore_text.best_k_table(explore.by_concurrency(bundled, filters), explore.speedup_vs_k(bundled, filters))
    assert table["setup"].nunique() == 2  # 0.31.0 and 0.32.0 apart
    measured = set(table["measured by"])
    assert "run specscope-cpu-versions" in measured
    assert any(
        m.startswith("run specscope-cpu-code-editing, one of 2 runs of this point (their mean 1.570×") for m in measured
    ), measured
