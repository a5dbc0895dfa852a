"""The oracle bound: a hand-made per-step trace, its cost model, and SpecDecode-Bench's traces."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from specscope.analysis import oracle
from specscope.cli import main


def _request(accepted, drafted, output_tokens, decode_ms, prompt_id="p1"):
    return {
        "prompt_id": prompt_id,
        "per_step_accepted": accepted,
        "per_step_drafted": drafted,
        "output_tokens": output_tokens,
        "ttft_ms": 20.0,
        "e2el_ms": 20.0 + decode_ms,
        "tpot_ms": decode_ms / (output_tokens - 1),
    }


def test_steps_without_a_draft_are_the_rest_of_the_output():
    steps = oracle.steps_of([4, 0, 0, 1], [4, 4, 4, 4], 11)  # token 0 from prefill, 9 from drafting steps
    assert (steps.count, steps.plain, steps.tokens, steps.wasted) == (5, 1, 10, 11)
    assert oracle.steps_of(None, None, 11) is None and oracle.steps_of([1], [1, 2], 5) is None


def test_the_oracle_bound_of_a_hand_made_trace():
    """K=4 drafted 4 at each of 4 steps and got 4, 0, 0, 1 accepted; one step drafted nothing. Over a 10 ms
    plain step, each step took 12.56 ms: D = 1.256 = 1 + c x 3.2 drafted a step, so c = 0.08. Drafting only
    what is accepted (5 tokens over 5 steps, 11 fewer) costs D_oracle = 1.256 - 0.08 x 11/5 = 1.08."""
    cell = pd.DataFrame([_request([4, 0, 0, 1], [4, 4, 4, 4], 11, decode_ms=5 * 12.56)])
    found = oracle.cell_gain(cell, baseline_tpot_ms=10.0)
    assert found["step_ratio"] == pytest.approx(1.256)
    assert found["per_token_cost"] == pytest.approx(0.08)
    assert found["tokens_per_step"] == pytest.approx(2.0) and found["wasted_per_step"] == pytest.approx(2.2)
    assert found["gain"] == pytest.approx(1.256 / 1.08)
    [request] = oracle.request_gains(cell, 10.0, found["per_token_cost"]).to_dict("records")
    assert request["decode_speedup"] == pytest.approx(10.0 / 6.28)  # the baseline's TPOT over its own
    assert request["oracle_speedup"] == pytest.approx(10.0 / 6.28 * 1.256 / 1.08)
    assert request["oracle_speedup"] <= request["tokens_per_step"]  # a free step could do no better


def test_free_drafts_or_nothing_rejected_leave_the_speedup_as_measured():
    faster_than_plain = pd.DataFrame([_request([4, 0], [4, 4], 7, decode_ms=2 * 9.0)])
    assert oracle.cell_gain(faster_than_plain, 10.0)["gain"] == pytest.approx(1.0)  # D < 1: c = 0
    all_accepted = pd.DataFrame([_request([3, 3], [3, 3], 9, decode_ms=2 * 13.0)])
    assert oracle.cell_gain(all_accepted, 10.0)["gain"] == pytest.approx(1.0)
    assert oracle.cell_gain(pd.DataFrame([_request(None, None, 9, 10.0)]), 10.0) is None


def test_a_traced_request_oracle_against_fixed_k():
    acc = [1, 1, 6, 5, 4, 3, 2, 1, 3, 2, 1, 1]  # a step at position i would emit acc[i] tokens
    free = oracle.StepCost(per_token=0.0)
    # oracle at K=4: steps at 0, 1, 2 (emits 5), 7, 8 (3), 11 -> 12 tokens in 6 steps
    assert oracle.trace_speedup(acc, 4, free) == pytest.approx(12 / 6)
    costly = oracle.StepCost(per_token=0.1)
    # fixed K=4 pays for 4 drafts at every step: 6 steps x 1.4
    assert oracle.trace_speedup(acc, 4, costly, fixed=True) == pytest.approx(12 / (6 * 1.4))
    assert oracle.trace_speedup(acc, 4, costly) == pytest.approx(12 / (6 + 0.1 * (0 + 0 + 4 + 0 + 2 + 0)))


def test_specdecode_bench_ngram_on_instructcoder_at_batch_1(specdecode_traces):
    """The paper reports ~2.75x for the oracle and ~2.1x for the best fixed K (ngram, InstructCoder, batch 1);
    under its simulator's H100 cost model the first 100 traces give about the same."""
    traces = oracle.read_trace(specdecode_traces / "combined_instructcoder.jsonl", "ngram")[:100]
    found = oracle.trace_summary(traces, ks=(1, 3, 5), k_max=20)
    assert found["requests"] == 100 and 2.3 < found["oracle"] < 3.2, found
    assert found["best_k"] == 5 and 1.8 < found["best_fixed"] < found["oracle"]


def test_the_oracle_command_on_a_trace_file(tmp_path, capsys):
    path = tmp_path / "combined_x.jsonl"
    path.write_text(
        json.dumps(
            {"generated_token_ids": list(range(12)), "acc_ngram": {"acc_len": [1, 1, 6, 5, 4, 3, 2, 1, 3, 2, 1, 1]}}
        )
        + "\n"
    )
    assert main(["oracle", str(path), "--k", "1,4", "--k-max", "4", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["requests"] == 1 and found["best_k"] == 4 and found["oracle"] >= found["best_fixed"]
    assert main(["oracle", str(path), "--k", "0"]) == 1
    assert "--k needs K values of at least 1" in capsys.readouterr().err
