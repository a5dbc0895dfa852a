"""The one deploy answer (``specscope.advice.deploy``): measured beats modelled, ties go to the smaller K, a
schedule only where the best K moves with load beyond noise, a measured schedule decides, and the schedule
over batch sizes keeps the choices' sources."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from helpers.paths import DATA, SHARED_DATA
from specscope.advice import deploy, fitting, k_choice, theory
from specscope.engine.k_schedule import SCHEDULE_KEY
from specscope.results import importers
from specscope.results.store import Store

AL = {1: 1.7, 2: 2.2, 3: 2.55, 4: 2.8, 5: 2.95}


def _rows(points: dict[tuple[int, int], tuple], **extra) -> pd.DataFrame:
    """A family's SD rows: (concurrency, K) -> (speedup, low, high[, repeats]), acceptance from ``AL``."""
    (concs, ks), values = zip(*points), list(points.values())
    return pd.DataFrame(
        {
            "source": "own",
            "model": "m",
            "draft_model": None,
            "method": "ngram",
            "dataset": "x",
            "response_format": "none",
            "hardware": "cpu",
            "vllm_version": "0.32.0",
            "weights": "real",
            "acceptance": "real",
            "k": list(ks),
            "concurrency": list(concs),
            "acceptance_rate": [(AL[k] - 1) / k for k in ks],
            "acceptance_length": [AL[k] for k in ks],
            "per_position_acceptance": None,
            "speedup": [v[0] for v in values],
            "speedup_lo": [v[1] for v in values],
            "speedup_hi": [v[2] for v in values],
            "repeats": [v[3] if len(v) > 3 else None for v in values],
            "baseline_throughput": 10.0,
            "k_schedule": None,
            "method_params": '{"prompt_lookup_max": 4}',
            **extra,
        }
    )


def _fit(points) -> fitting.FamilyFit:
    return fitting.fit_family(_rows(points))


def test_a_tie_within_noise_goes_to_the_smaller_k_and_says_so():
    fit = _fit({(1, 2): (1.210, 1.15, 1.27), (1, 4): (1.203, 1.14, 1.26)})
    found = deploy.answer(fit)
    [choice] = found.choices
    assert (choice.k, choice.source, choice.tied) == (2, "measured", (2, 4))
    assert found.fixed_k == 2 and not found.use_schedule and found.deploy == "K=2"
    assert found.config == {"method": "ngram", "prompt_lookup_max": 4, "num_speculative_tokens": 2}
    assert found.sentence().startswith(
        "Deploy ngram with K = 2 (by concurrency, 1: K=2 1.210× [1.150, 1.270] measured)"
    )
    # the fastest is K=4 by a hair: still a tie, still the smaller K, and the sentence names the fastest
    tied = deploy.answer(_fit({(1, 2): (1.203, 1.14, 1.26), (1, 4): (1.210, 1.15, 1.27)}))
    assert tied.choices[0].k == 2 and tied.fixed_k == 2
    assert "tied within noise with the fastest measured, K = 4" in tied.choices[0].sentence()


def test_the_answer_says_where_its_k_ties_or_loses_to_the_baseline():
    """A K that pays at low load but not at high: the sentence says where its interval holds 1.000× and where
    it lies below, so the deploy answer never reads as a gain everywhere."""
    points = {(1, 2): (1.30, 1.25, 1.35), (8, 2): (1.02, 0.97, 1.07)}
    found = deploy.answer(_fit(points), ks=[2])
    assert found.fixed_k == 2 and not found.use_schedule and found.gain == "somewhere"
    assert found.sentence().startswith(
        "Deploy ngram with K = 2 for loads like concurrency 1, where it beats the "
        "baseline beyond noise (by concurrency, 1: K=2 1.300× [1.250, 1.350] measured"
    )
    assert "). K = 2 ties the baseline within noise at concurrency 8. " in found.sentence()
    # slower beyond noise at 32: a schedule drafting nothing there answers; without K=0 the fixed K says it loses
    slower = {**points, (32, 2): (0.90, 0.85, 0.95)}
    assert deploy.answer(_fit(slower), ks=[2]).use_schedule
    assert (
        "K = 2 ties the baseline within noise at concurrency 8; it is slower than the baseline beyond noise at "
        "concurrency 32."
    ) in deploy.answer(_fit(slower), ks=[2], allow_zero=False).sentence()
    everywhere = deploy.answer(_fit({(1, 2): (1.30, 1.25, 1.35)}), ks=[2])
    assert "baseline" not in everywhere.sentence() and everywhere.gain == "everywhere"


def test_an_answer_whose_k_beats_the_baseline_nowhere_is_no_deploy_and_says_what_would_tell():
    """The issue's Theory box: a green "Deploy" above "K = 4 ties the baseline at concurrency 1, 4". Nothing
    measured shows a gain, so the answer says what was measured and about how many repeats would tell."""
    rows = {(1, 4): (1.408, 0.900, 2.203, 3), (4, 4): (1.35, 0.95, 1.92, 3)}
    found = deploy.answer(_fit(rows), ks=[4])
    assert found.gain == "nowhere" and found.config is not None
    sentence = found.sentence()
    assert sentence.startswith(
        "Nothing measured shows a gain from ngram with K = 4 (by concurrency, 1: K=4 1.408× [0.900, 2.203] measured"
    )
    assert "K = 4 ties the baseline within noise at concurrency 1, 4 (about " in sentence
    assert "repeats would tell, if the measured spread holds)" in sentence and "Deploy" not in sentence.split(".")[0]


def test_single_runs_rank_by_their_points():
    found = deploy.answer(_fit({(1, 2): (1.203, None, None), (1, 4): (1.210, None, None)}))
    assert found.choices[0].k == 4 and found.fixed_k == 4


def test_a_poor_fit_cannot_outvote_a_measurement():
    zigzag = {
        (1, 1): (1.25, None, None),
        (1, 2): (1.0, None, None),
        (1, 3): (1.9, None, None),
        (1, 4): (1.05, None, None),
    }
    found = deploy.answer(_fit(zigzag))
    assert found.choices[0].k == 3 and found.choices[0].source == "measured" and found.fixed_k == 3


def test_an_unmeasured_k_wins_only_beyond_the_fits_error():
    fit = _fit(
        {(1, 2): (1.5, 1.45, 1.55), (1, 4): (1.62, 1.57, 1.67), (4, 2): (1.4, 1.35, 1.45), (4, 4): (1.47, 1.46, 1.48)}
    )
    near = k_choice.choose(fit, 1, ks=[1, 2, 3, 4])
    assert near.source == "measured" and near.k == 4  # K=3 is predicted, but not beyond the fit's error
    cheap = dataclasses.replace(fit, cost=theory.CostCurve((1.0, 4.0), (0.5, 0.5), (0.0, 0.0)))  # drafts free
    far = k_choice.choose(cheap, 1, ks=[1, 2, 3, 4, 5])
    assert far.k == 5 and far.source == "predicted" and "measure it before deploying it" in far.sentence()


def test_a_schedule_only_where_the_best_k_moves_beyond_noise():
    moving = _fit(
        {(1, 2): (1.5, 1.45, 1.55), (1, 4): (1.9, 1.85, 1.95), (64, 2): (1.3, 1.25, 1.35), (64, 4): (1.0, 0.95, 1.05)}
    )
    found = deploy.answer(moving, ks=[2, 4], max_batch=64)
    assert [c.k for c in found.choices] == [4, 2] and found.use_schedule
    assert found.k_schedule.k_at(1) == 4 and found.k_schedule.k_at(64) == 2
    assert found.config[SCHEDULE_KEY] == found.k_schedule.as_vllm() and found.config["num_speculative_tokens"] == 4
    assert found.deploy.startswith("schedule ") and "moves with load beyond noise" in found.why
    still = _fit({(1, 2): (1.5, 1.2, 1.8), (1, 4): (1.6, 1.3, 1.9), (64, 2): (1.3, 1.0, 1.6), (64, 4): (1.2, 0.9, 1.5)})
    fixed = deploy.answer(still, ks=[2, 4], max_batch=64)
    assert not fixed.use_schedule and fixed.fixed_k == 2 and fixed.config["num_speculative_tokens"] == 2
    assert "does not move with load beyond noise" in fixed.why


def test_a_k_only_predicted_never_wins_a_tie():
    found = deploy.answer(_fit({(1, 4): (1.682, 1.358, 2.109)}))
    assert found.fixed_k == 4 and found.choices[0].k == 4


def test_drafting_zero_counts_what_it_measured_not_the_baseline():
    points = {
        (1, 1): (1.2, None, None),
        (1, 4): (1.4, None, None),
        (8, 1): (0.98, None, None),
        (8, 4): (0.95, None, None),
        (32, 1): (0.90, None, None),
        (32, 4): (0.80, None, None),
    }
    fit = _fit(points)
    assumed = deploy.answer(fit, ks=[1, 4], max_batch=32)
    assert [c.k for c in assumed.choices] == [4, 0, 0]  # drafting nothing taken as the baseline's 1.0
    zero = _rows({(8, 1): (0.94, None, None), (32, 1): (0.95, None, None)}).assign(k_schedule="1-32:0")
    measured = deploy.answer(fit, ks=[1, 4], max_batch=32, rows=pd.concat([fit.rows, zero]))
    assert [c.k for c in measured.choices] == [4, 1, 0]  # a speculative server drafting 0 costs 6% at 8
    assert "measured on a server drafting 0" in measured.drafting_zero


def test_a_measured_schedule_decides_over_the_model():
    points = {
        (1, 2): (1.5, 1.45, 1.55),
        (1, 4): (1.9, 1.85, 1.95),
        (64, 2): (1.3, 1.25, 1.35),
        (64, 4): (1.0, 0.95, 1.05),
    }
    fit = _fit(points)
    slower = _rows({(1, 4): (1.6, 1.55, 1.65), (64, 4): (1.1, 1.05, 1.15)}).assign(k_schedule="1-8:4,9-256:2")
    found = deploy.answer(fit, max_batch=64, rows=pd.concat([fit.rows, slower]))
    assert not found.use_schedule and found.measured_schedule is not None
    assert found.why.startswith("Measured beats modelled: ")
    faster = _rows({(1, 4): (1.9, 1.85, 1.95), (64, 4): (1.3, 1.25, 1.35)}).assign(k_schedule="1-8:4,9-256:2")
    won = deploy.answer(fit, max_batch=64, rows=pd.concat([fit.rows, faster]))
    assert won.use_schedule and won.k_schedule.text() == "1-8:4,9-256:2"


@pytest.fixture
def ruiz_fits(ruiz_parquet, tmp_path):
    importers.import_file(ruiz_parquet, directory=tmp_path / "results")
    return fitting.fit_families(Store(result_dirs=[tmp_path / "results"], request_dirs=[]).speedup())


def test_the_schedule_keeps_each_measured_choice(ruiz_fits):
    for fit in ruiz_fits:
        top = int(fit.rows["concurrency"].max())
        points = deploy.schedule_points(fit, sorted(int(k) for k in fit.rows["k"].unique()), top, {}, True)
        for conc in fit.rows["concurrency"].unique():
            choice = k_choice.choose(fit, float(conc), sorted(int(k) for k in fit.rows["k"].unique()))
            assert points[int(conc) - 1].k == choice.k, (fitting.family_label(fit.keys), conc)
            if choice.source == "measured" and choice.k:
                measured = fit.rows[fit.rows["concurrency"] == conc].groupby("k")["speedup"].mean()
                assert choice.k == int(measured.idxmax())  # single runs: no ties, the fastest


def test_a_predicted_k_never_rises_with_the_batch_not_even_after_zero(ruiz_fits, specscope_home):
    bundled = fitting.fit_families(Store().speedup())
    for fit in [*ruiz_fits, *bundled]:
        points = deploy.schedule_points(fit, list(range(1, int(fit.rows["k"].max()) + 1)), 256, {}, True)
        for before, point in zip(points, points[1:]):
            if not point.measured_here:
                assert point.k <= before.k, (fitting.family_label(fit.keys), point, before)


def test_the_schedule_drops_k_where_the_ruiz_data_stops_paying(ruiz_fits):
    """Qwen3-32B + Qwen3-1.7B: long drafts alone, shorter under load, none at 256 (below 1x there)."""
    fit = next(f for f in ruiz_fits if "32B" in f.keys["model"] and "1.7B" in (f.keys["draft_model"] or ""))
    found = deploy.answer(fit, max_batch=256)
    assert found.k_schedule.k_at(1) > found.k_schedule.k_at(128) > 0
    assert found.k_schedule.k_at(256) == 0
    assert found.use_schedule and "measured at 1" in found.ranges[0].source


def test_a_curves_rates_give_its_acceptance_at_every_k_and_stay_non_increasing():
    from specscope import sweep
    from specscope.advice import priors

    curve = priors.named("eagle3-kimi-k2.5")
    assert curve.rates(4) == [0.83, 0.6, 0.45, 0.36] and curve.at(3) == pytest.approx(2.88)
    noisy = priors.named("dspark-deepseek-v4")  # its published AL falls past K=6: pooled, never rising
    rates = noisy.rates(8)
    assert all(b <= a for a, b in zip(rates, rates[1:])) and all(0 <= r <= 1 for r in rates)
    synthetic = sweep.Synthetic(rates=tuple(curve.rates(8)))
    assert synthetic.keys(2) == {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.83, 0.6]}
    assert len(synthetic.keys(10)["synthetic_acceptance_rates"]) == 10  # past the curve: nothing more accepted
    assert synthetic.keys(0) is None


def test_bench_takes_a_curve_as_per_position_rates(specscope_home, monkeypatch):
    from specscope.cli import bench as bench_cli
    from specscope.cli import build_parser

    args = build_parser().parse_args(
        [
            "bench",
            "--preset",
            "shape-llama31-8b-shared",
            "--methods",
            "none,eagle3",
            "--k",
            "2,4",
            "--prompts",
            "data/prompts/code-editing.jsonl",
            "--synthetic-curve",
            "eagle3-kimi-k2.5",
        ]
    )
    sent = []
    monkeypatch.setattr(bench_cli, "run", lambda plan, *rest: sent.append(plan) or 0)  # the plan it would run
    bench_cli._bench(args)
    assert sent[0].spec.synthetic.keys(4)["synthetic_acceptance_rates"] == [0.83, 0.6, 0.45, 0.36]


def test_the_carried_curves_are_their_sources_figures():
    """The published curves SpecScope carries, checked against the files they were transcribed from."""
    import json as _json

    import yaml

    from specscope.advice import priors

    golden = SHARED_DATA / "inferencex_golden_al_843c625"
    if not golden.is_dir():
        pytest.skip(f"{golden} is missing; tests read the published curves from ../shared/data")
    kimi = yaml.safe_load((golden / "kimik2.5_eagle3.yaml").read_text())["kimi-k2.5-nvfp4"]["thinking_on"]
    assert priors.PRIORS["eagle3-kimi-k2.5"].al == tuple(kimi[k] for k in range(1, 9))
    mtp = yaml.safe_load((golden / "qwen3.5_mtp.yaml").read_text())["qwen3.5-397b-a17b-nvfp4"]["thinking_on"]
    assert priors.PRIORS["mtp-qwen3.5"].al == tuple(mtp[k] for k in range(1, 9))
    ruiz = pd.read_parquet(next(SHARED_DATA.glob("tomasruizt_*.parquet")))
    medians = ruiz[ruiz["draft_model"] == "Qwen/Qwen3-1.7B"].groupby("num_spec_toks")["acceptance_length"].median()
    assert priors.PRIORS["draft-qwen3-1.7b-for-32b"].al == tuple(round(float(v), 2) for v in medians)
    traces = [
        _json.loads(line)
        for line in (SHARED_DATA / "specdecode-bench_simulator_2fdccbd" / "combined_instructcoder.jsonl")
        .read_text()
        .splitlines()
    ]
    used = [
        t["acc_eagle"]["acc_len"] for t in traces if len(t["acc_eagle"]["acc_len"]) == len(t["generated_token_ids"])
    ]

    def tokens_per_step(k: int) -> float:
        tokens = steps = 0
        for accepted in used:
            pos = 0
            while pos < len(accepted):
                pos += min(accepted[pos], k + 1, len(accepted) - pos)
                steps += 1
            tokens += len(accepted)
        return round(tokens / steps, 3)

    assert priors.PRIORS["eagle-llama3.1-8b-instructcoder"].al == tuple(tokens_per_step(k) for k in range(1, 9))


def test_a_concurrency_whose_own_pick_ties_the_fixed_k_reads_the_deployed_k_first():
    """One answer on the page: where a concurrency alone would pick a K tied with the deployed fixed K, its line
    leads with the deployed K's figure, and the K-by-batch-size sentence deploys the fixed K, not the schedule."""
    found = deploy.answer(
        _fit(
            {
                (1, 2): (1.40, 1.20, 1.60),
                (1, 4): (1.50, 1.30, 1.70),
                (4, 2): (1.10, 1.05, 1.15),
                (4, 4): (1.30, 1.25, 1.35),
            }
        ),
        ks=[2, 4],
        max_batch=8,
    )
    assert [c.k for c in found.choices] == [2, 4] and not found.use_schedule and found.fixed_k == 4
    here = found.here(1.0)
    assert here.startswith("deploy K = 4 here too (K=4 1.500×") and "alone would pick K = 2 (1.400×" in here
    assert here.endswith(
        "tied with K = 4 within noise; over the measured concurrencies together K = 4 is faster "
        "beyond noise (1.400× against 1.250× on average, their intervals pooled)."
    )
    assert found.here(4.0) is None  # the concurrency's own answer is the deployed K
    assert found.schedule_sentence().startswith("Deploy the fixed K = 4 at every batch size")
    assert f"would read {found.k_schedule.text()}" in found.schedule_sentence()
    rows = [found.deployed(c) for c in found.choices]  # the Explorer's table: the deployed K at each concurrency
    assert [(d["k"], d["speedup"], d["source"]) for d in rows] == [(4, 1.5, "measured"), (4, 1.3, "measured")]
    assert rows[0]["why"] == "this concurrency " + found.alone(1.0) and here.endswith(found.alone(1.0))
    assert rows[1]["why"] == found.choices[1].sentence()


def _bundled_loop(run_id: str, probe_ks: tuple[int, int]):
    """The request of the loop's bundled H200 runs (tests/bench/deploy.py): EAGLE-3 on the 8B shape at a
    published curve, c = 1, 4, 16, 64, three repeats."""
    from specscope.loop import deploy_plan

    data = DATA
    return deploy_plan.Request(
        preset="shape-llama31-8b-shared",
        methods=("eagle3",),
        concurrencies=(1, 4, 16, 64),
        prompts=data / "prompts" / "code-editing.jsonl",
        acceptance="eagle3-kimi-k2.5",
        probe_ks=probe_ks,
        repeats=3,
        run_id=run_id,
    )


def test_the_bundled_h200_loop_answers_from_what_it_measured_and_says_why_its_schedule_was_not(specscope_home):
    """The loop on an H200 (vLLM 0.26.0, EAGLE-3 at a published curve): the prediction moved K with load, the
    schedule server did not start on that vLLM's V2 runner, so the answer is the fixed K the verified cells chose."""
    from specscope.loop import deploy_run

    request = _bundled_loop("gpu-deploy-8b-eagle3-r4-vllm0.26.0", (2, 6))
    outcome = deploy_run.report(request)
    assert outcome.plan.schedule == "1-15:4,16-57:3,58-64:2" and outcome.plan.verify_ks == [2, 4, 8]  # K=3 gains < 3%
    assert outcome.unserved.startswith("The eagle3 K=4 server did not start")
    assert "ZeroDivisionError" in outcome.unserved
    assert "the planned schedule 1-15:4,16-57:3,58-64:2 was not measured: The eagle3 K=4" in outcome.report()
    assert outcome.figures()["sched_vs_best_fixed_min"] is None  # nothing measured: no figure, not a guess
    assert not outcome.answer.use_schedule and outcome.answer.config["num_speculative_tokens"] == 3
    assert all(r["deployed"] is not None for r in outcome.rows)  # measured at every concurrency
    assert len(outcome.verified) == 12  # K=3, K=4 and K=8 (not probes, measured) at four concurrencies


def test_the_bundled_h200_schedule_ran_on_the_v1_runner_and_lost_so_the_answer_is_a_fixed_k(specscope_home):
    """The loop's fourth GPU run (H200, vLLM 0.26.0, probes K=3 and 6): the prediction moved K with load, the
    schedule server started on vLLM's V1 runner and drafted by batch size as planned, but lost to every fixed K
    at three loads; measured beats modelled, so the answer is fixed K=3, within 2% of the best K at each load."""
    from specscope.loop import deploy_run

    request = _bundled_loop("gpu-deploy-8b-eagle3-r5-vllm0.26.0", (3, 6))
    outcome = deploy_run.report(request)
    # the schedule the run served (today's fit, whose step never costs less than the baseline's, would verify
    # K=2 and 4; the run's fit verified K=1, 3 and 4, all reported)
    assert outcome.plan.schedule == "1-6:4,7-14:3,15-42:2,43-64:1" and outcome.plan.verify_ks == [2, 4]
    assert not outcome.unserved and not outcome.answer.use_schedule
    assert "the schedule ran on vLLM's V1 model runner" in outcome.report()  # not priced like the fixed K
    assert outcome.answer.config["num_speculative_tokens"] == 3
    assert "rather than the schedule 1-6:4,7-14:3,15-42:2,43-64:1" in outcome.answer.sentence()
    figures = outcome.figures()
    assert figures["answer_vs_oracle"] >= 0.98 and figures["sched_vs_best_fixed_min"] < 0.5
    assert {v["k"] for v in outcome.verified} == {0, 1, 4} and len(outcome.verified) == 12


def test_a_schedule_on_another_model_runner_is_priced_by_the_probe_schedule_step_1_measured(specscope_home):
    """Where the schedule must run on vLLM's V1 runner, step 1 measures a schedule that drafts the smaller probe K
    at every load but the largest; its speed over the same K's on the default runner prices the schedule's
    prediction. Here the fourth H200 run's K=3 cells at half their speed stand for the probe's."""
    from specscope.loop import deploy_plan

    request = _bundled_loop("gpu-deploy-8b-eagle3-r5-vllm0.26.0", (3, 6))
    probe = deploy_plan.runner_probe(request, 64)
    assert probe == "1-63:3,64:2"  # the largest load is the last batch size: it drafts one fewer there
    assert deploy_plan.runner_probe(dataclasses.replace(request, concurrencies=(1, 16)), 64) == "1-16:3,17-64:2"
    assert deploy_plan.runner_probe(request, 1) is None

    curve = deploy_plan.acceptance_curve(request.acceptance)
    fits, rows = deploy_plan._fits(request.run_id, curve, request.probe_ks)
    step_1 = rows[rows["k_schedule"].isna() & rows["k"].isin([0, 3, 6])]
    fake = step_1[step_1["k"] == 3].assign(k_schedule=probe, speedup=lambda f: f["speedup"] * 0.5)
    frame = pd.concat([step_1, fake], ignore_index=True)
    fit = fits[0]
    price = deploy_plan._runner_price(fit, frame, request, 64)
    assert [round(price[c], 6) for c in ("1", "4", "16")] == [0.5, 0.5, 0.5]
    # at 64 it drafts K=2, which step 1 did not measure: priced against the fit's prediction there
    assert price["64"] == pytest.approx(fake[fake["concurrency"] == 64]["speedup"].mean() / fit.predict(2, 64))
    # a K=2 cell step 3 measured later leaves it as it was: the price reads step 1's cells alone
    later = step_1[(step_1["k"] == 3) & (step_1["concurrency"] == 64)].assign(k=2, speedup=lambda f: f["speedup"] * 2)
    assert deploy_plan._runner_price(fit, pd.concat([frame, later], ignore_index=True), request, 64) == price

    unpriced = deploy_plan._plan(fits, step_1, request, 64)
    priced = deploy_plan._plan(fits, frame, request, 64)
    assert not unpriced.runner_price and priced.runner_price == price
    assert priced.schedule == unpriced.schedule and priced.schedule is not None
    assert priced.predicted["0@4"] == pytest.approx(unpriced.predicted["0@4"] * 0.5)
    assert priced.predicted["3@4"] == unpriced.predicted["3@4"]  # the fixed K stay on their own runner


def test_the_bundled_h200_run_priced_the_schedules_runner_and_answers_a_fixed_k_measured_best_everywhere(
    specscope_home,
):
    """The loop's fifth GPU run (H200, vLLM 0.26.0): step 1 measured the probe schedule 1-63:3,64:2 on vLLM's V1
    runner beside K=3 and 6, so the schedule's prediction carries that runner's price; the schedule served in step
    3 lost. K=4 is the best measured fixed K at every load, but the answer is K=3, the smaller K it ties over the
    loads pooled: step 1's cells pair with the baseline's rounds, so K=3's intervals are paired (1.406x [0.866,
    2.283] at 64, where Fieller's read [0.872, 1.955]), while step 3's K=4, measured after those rounds, keeps
    Fieller's; the answer keeps 0.96 of the best fixed K's speedup."""
    from specscope.loop import deploy_run

    request = _bundled_loop("gpu-deploy-8b-eagle3-r6-vllm0.26.0", (3, 6))
    outcome = deploy_run.report(request)
    assert outcome.plan.schedule == "1-4:4,5-9:3,10-64:2" and outcome.plan.verify_ks == [4]  # served, then planned
    assert set(outcome.plan.runner_price) == {"1", "4", "16", "64"} and outcome.plan.runner_price["4"] < 0.6
    assert "priced by step 1's probe schedule 1-63:3,64:2" in outcome.report()
    assert not outcome.answer.use_schedule and outcome.answer.config["num_speculative_tokens"] == 3
    assert "rather than the schedule 1-4:4,5-9:3,10-64:2" in outcome.answer.sentence()  # not the probe's
    assert all(r["best_fixed_k"] == 4 for r in outcome.rows)
    figures = outcome.figures()
    assert figures["answer_vs_oracle"] == pytest.approx(0.960, abs=0.001) and figures["sched_vs_best_fixed_min"] < 0.7
    assert {v["k"] for v in outcome.verified} == {0, 4} and len(outcome.verified) == 8


def test_the_bundled_draft_model_loop_answers_the_measured_k_and_says_the_prediction_missed(specscope_home):
    """The loop for the 1B draft model on the 8B shape (H200, vLLM 0.26.0, acceptance from the nearest published
    draft-model curve): the verified K=1 measured 0.92-1.04x, and the answer reads those measured figures with their
    intervals. The run's fit promised 1.11-1.33x at K=1 (a line through K=3 and 6 whose step at K=0 cost half a
    baseline step); with the step held at no less than the baseline's, the miss is a median 9.8%."""
    from specscope.loop import deploy_plan, deploy_run

    data = DATA
    request = deploy_plan.Request(
        preset="shape-llama31-8b-shared",
        methods=("draft_model",),
        concurrencies=(1, 16, 64),
        prompts=data / "prompts" / "code-editing.jsonl",
        acceptance="draft-qwen3-1.7b-for-32b",
        ks=tuple(range(1, 7)),
        probe_ks=(3, 6),
        repeats=3,
        run_id="gpu-deploy-8b-draft-r2-vllm0.26.0",
    )
    outcome = deploy_run.report(request)
    assert outcome.plan.fixed_k == 1 and outcome.plan.schedule is None and outcome.plan.verify_ks == [1]
    assert not outcome.answer.use_schedule and outcome.answer.config["num_speculative_tokens"] == 1
    sentence = outcome.answer.sentence()
    assert "1: K=1 1.042× [1.003, 1.082] measured" in sentence and "16: K=1 0.915× [0.755, 1.081] measured" in sentence
    assert "K = 1 ties the baseline within noise at concurrency 16, 64" in sentence  # not at 1
    assert [v["k"] for v in outcome.verified] == [1, 1, 1]
    assert [round(v["error"], 3) for v in outcome.verified] == [-0.032, 0.157, 0.098]
    figures = outcome.figures()
    assert figures["pred_err_median"] == pytest.approx(0.098, abs=0.001)
    assert figures["sched_vs_best_fixed_min"] is None  # no schedule was served: no figure


def test_the_bundled_long_context_loop_answers_k4_at_every_load_within_its_prediction(specscope_home):
    """The loop on 3,000-token prompts (H200, vLLM 0.26.0, EAGLE-3 at a published curve, c 1, 4, 16): the best K
    stays 4 as load grows, the speedup falls from 1.9x to 1.25x, and the fit predicted each verified cell within 4%."""
    from specscope.loop import deploy_plan, deploy_run

    data = DATA
    request = deploy_plan.Request(
        preset="shape-llama31-8b-long",
        methods=("eagle3",),
        concurrencies=(1, 4, 16),
        prompts=data / "prompts" / "code-editing.jsonl",
        acceptance="eagle3-kimi-k2.5",
        ks=tuple(range(1, 9)),
        probe_ks=(3, 6),
        repeats=3,
        num_prompts=8,
        per_concurrency=4,
        run_id="gpu-deploy-8b-eagle3-long3k-vllm0.26.0",
    )
    outcome = deploy_run.report(request)
    assert outcome.plan.fixed_k == 4 and set(outcome.plan.best_k.values()) == {4}
    assert outcome.answer.config["num_speculative_tokens"] == 4 and not outcome.answer.use_schedule
    sentence = outcome.answer.sentence()
    assert "1: K=4 1.915× [1.771, 2.058] measured" in sentence and "16: K=4 1.250× [1.228, 1.272] measured" in sentence
    assert all(abs(v["error"]) < 0.04 for v in outcome.verified if v["k"] == 4)
    figures = outcome.figures()
    assert figures["pred_err_median"] == pytest.approx(0.020, abs=0.001) and figures["answer_vs_oracle"] == 1.0


def test_the_vllm_032_loop_on_an_h100_serves_its_schedule_at_the_best_fixed_ks_speed(specscope_home):
    """The loop on an H100 with vLLM 0.32.0 (torch 2.13.0 carried; docs/gpu.md): the prediction moved K with load
    (4, then 3 past batch 42), and on 0.32.0's V2 runner the schedule kept full CUDA graphs: it measured within 2%
    of the best fixed K at every load (0.982 at worst), where vLLM 0.26.0's V1 runner lost 35-59%. It tied K=4
    everywhere, so the answer is the simpler server, K=4."""
    from specscope.loop import deploy_run

    outcome = deploy_run.report(_bundled_loop("gpu-deploy-8b-eagle3-vllm0.32.0", (3, 6)))
    assert outcome.plan.schedule == "1-42:4,43-64:3" and outcome.plan.verify_ks == [4]
    assert not outcome.answer.use_schedule and outcome.answer.config["num_speculative_tokens"] == 4
    figures = outcome.figures()
    assert figures["sched_vs_best_fixed_min"] == pytest.approx(0.982, abs=0.001)
    assert figures["answer_vs_oracle"] == pytest.approx(1.0) and figures["pred_err_median"] < 0.05
