"""A step-cost prior from `vllm bench forward` (vLLM 0.33.0 on; specscope.advice.forward_prior).

vLLM 0.33.0 needs a GPU and this machine has none, so the files read here were not written by it: they were built
by tests/captures/bench_forward.py as vLLM 0.33.0's writer lays its --output-json out (per case "case",
"requests", "median_us", "ranks": vllm/benchmarks/forward/main.py:258-266 and 288-290; each rank's keys:
main.py:219-224, capture.py:111-115, 154-156, 242-254 and 290-303, speculator.py:74-87; the same in 0.34.0), with
forward times from a cost model, not timings. Three runs of one EAGLE-3 server shape: its target alone
(--exclude-drafter: plain decodes and verifies, and a prefill), its drafter timed at K=3, and at K=1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.paths import CAPTURES
from specscope.advice import forward_prior
from specscope.cli import main as cli_main
from specscope.errors import InputError
from specscope.results import importers

ALONE, K3, K1 = (CAPTURES / f"bench_forward_eagle3_{name}.json" for name in ("exclude_drafter", "k3", "k1"))
GIVEN = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "hardware": "1xH100-80GB",
    "draft_model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
    "vllm_version": "0.33.0",
}


def _us(path: Path, case: str) -> float:
    return next(c["median_us"] for c in json.loads(path.read_text()) if c["case"] == case)


def _cell(prior: forward_prior.ForwardPrior, batch: int, k: int) -> dict:
    cells = prior.cells
    return cells[(cells["concurrency"] == batch) & (cells["k"] == k)].iloc[0].to_dict()


def test_each_step_is_priced_in_plain_steps_of_forward_time():
    prior = forward_prior.read([ALONE, K3, K1], GIVEN)
    assert prior.keys["method"] == "eagle3" and prior.keys["model"] == GIVEN["model"]
    assert prior.keys["files"] == [ALONE.name, K3.name, K1.name]
    one = _cell(prior, 1, 3)
    plain = _us(ALONE, "plain1")
    assert one["plain_us"] == plain and one["step_us"] == _us(K3, "verify1")
    assert one["cost"] == pytest.approx(_us(K3, "verify1") / plain)  # D = step / plain
    assert one["verify"] == pytest.approx(_us(ALONE, "verify1") / plain)  # the target over K+1 tokens
    assert one["draft"] == pytest.approx((_us(K3, "verify1") - _us(ALONE, "verify1")) / plain)
    assert one["verify"] + one["draft"] == pytest.approx(one["cost"])
    assert one["context"] == 4096
    # K=1 at batch 8 comes from the server of num_speculative_tokens 1: the K=3 server's drafter drafts 3 there
    assert _cell(prior, 8, 1)["step_us"] == _us(K1, "verify8k1")
    assert sorted(zip(prior.cells["concurrency"], prior.cells["k"])) == [(1.0, 3), (8.0, 1), (8.0, 3)]
    assert any("case 'prefill': not a decode or verify step" in note for note in prior.notes)
    assert any("batch 8, K=1: the drafter drafted 3 tokens while the target verified 1" in n for n in prior.notes)


def test_the_prior_is_a_calibration_with_its_origin_said():
    prior = forward_prior.read([ALONE, K3, K1], GIVEN)
    calibration = prior.calibration()
    assert calibration.origin == forward_prior.ORIGIN and "no sampling, rejection sampling" in calibration.origin
    d1, d3 = _cell(prior, 8, 1)["cost"], _cell(prior, 8, 3)["cost"]
    assert calibration.cost(1, 8) == pytest.approx(d1) and calibration.cost(3, 8) == pytest.approx(d3)
    # one K at batch 1: the Leviathan form d0 = 1 through it (fitting.fit_cost)
    group = calibration.groups.set_index("concurrency").loc[1.0]
    assert group["d0"] == 1.0 and group["d1"] == pytest.approx((_cell(prior, 1, 3)["cost"] - 1) / 3)
    assert calibration.measured(3, 8) and not calibration.measured(2, 8)
    # every draft accepted, as vllm bench forward times them: K + 1 tokens a step
    row = calibration.cells[(calibration.cells["k"] == 3) & (calibration.cells["concurrency"] == 8)].iloc[0]
    assert row["al"] == 4 and row["speedup"] == pytest.approx(4 / d3)


def test_a_drafter_passing_no_model_is_priced_by_its_verify():
    prior = forward_prior.read([ALONE], {**GIVEN, "method": "ngram", "draft_model": None})
    cell = _cell(prior, 8, 3)
    assert cell["cost"] == pytest.approx(_us(ALONE, "verify8") / _us(ALONE, "plain8")) and cell["draft"] == 0.0


def test_a_prior_is_kept_and_read_back(specscope_home):
    prior = forward_prior.read([ALONE, K3, K1], GIVEN)
    path = forward_prior.save(prior)
    assert path.parent == specscope_home / "step-priors"
    (back,) = forward_prior.stored()
    assert back.keys == prior.keys and back.notes == prior.notes
    assert back.calibration().cost(3, 8) == pytest.approx(prior.calibration().cost(3, 8))


@pytest.mark.parametrize(
    "files, given, message",
    [
        (
            [ALONE],
            {"model": "m", "hardware": "h"},
            "The cases time the target alone (--exclude-drafter) and do not say "
            "the method; give --method, e.g. ngram, whose drafter passes no model.",
        ),
        (
            [ALONE],
            {"model": "m", "hardware": "h", "method": "eagle3"},
            "The cases time the target alone, which is a whole step only for a drafter that passes no model (ngram, "
            "suffix); a step of eagle3 also runs its drafter: run vllm bench forward with its --speculative-config, "
            "without --exclude-drafter.",
        ),
        (
            [ALONE],
            {"model": "m", "hardware": "h", "method": "draft_model"},
            "The cases time the target alone, which is a whole step only for a drafter that passes no model (ngram, "
            "suffix); vllm bench forward times no draft model's passes.",
        ),
        (
            [K3],
            {"model": "m", "hardware": "h", "method": "mtp"},
            "The files time the drafter of eagle3, but --method gives mtp; leave --method out (the files' method is "
            "used) or import that method's files.",
        ),
        (
            [K3],
            {"model": "m", "hardware": "h"},
            "The cases price no eagle3 step: each needs a plain decode timed without the drafter and, at the same "
            "batch size, a verify of K drafts timed with a drafter of K drafts.",
        ),
        ([ALONE], {"hardware": "h"}, "vllm bench forward output does not name the model; give --model."),
    ],
)
def test_what_prices_no_step_is_refused_in_one_sentence(files, given, message):
    with pytest.raises(InputError) as info:
        forward_prior.read(files, given)
    assert str(info.value) == message


def test_other_json_is_refused_and_a_forward_file_is_not_taken_for_results(tmp_path):
    other = tmp_path / "bench.json"
    other.write_text(json.dumps({"model_id": "m", "output_throughput": 1.0}))
    with pytest.raises(InputError, match=r"^bench.json is not `vllm bench forward --output-json` output"):
        forward_prior.read([other], {"model": "m", "hardware": "h"})
    with pytest.raises(
        InputError,
        match=r"is `vllm bench forward` output: forward times of exact batches, not "
        r"results; import it as a step-cost prior with specscope calibrate --forward",
    ):
        importers.read_rows(ALONE)


def test_the_cli_imports_the_files_and_lists_the_prior_with_the_calibrations(specscope_home, capsys):
    argv = [
        "calibrate",
        "--forward",
        str(ALONE),
        str(K3),
        str(K1),
        "--model",
        GIVEN["model"],
        "--hardware",
        GIVEN["hardware"],
        "--draft-model",
        GIVEN["draft_model"],
        "--alpha",
        "0.7",
    ]
    assert cli_main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())  # prose wraps to the terminal's width
    assert "kept as" in out and "a prior from vllm bench forward" in out and "c=8 K=3: D 1.3" in out
    assert cli_main(["calibrate", "--show", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    (entry,) = [e for e in shown if e.get("origin") == forward_prior.ORIGIN]
    assert entry["calibration"]["method"] == "eagle3" and len(entry["parts"]) == 3
    assert {row["concurrency"] for row in entry["step_cost"]} == {1.0, 8.0}
