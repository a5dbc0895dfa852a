"""Fits and the K advisor: exact recovery on formula data, and the held-out check on Ruiz's results."""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers.paths import APP
from specscope.advice import advisor, fitting, speedup_curves, theory
from specscope.cli import main as cli_main
from specscope.errors import InputError
from specscope.results import importers, writing
from specscope.results.store import Store


@pytest.fixture
def ruiz_frame(ruiz_parquet, tmp_path):
    importers.import_file(ruiz_parquet, directory=tmp_path / "results")
    return Store(result_dirs=[tmp_path / "results"], request_dirs=[]).speedup()


def test_fit_alpha_recovers_iid_alpha():
    ks = [1, 2, 3, 4]
    alpha, rmse = fitting.fit_alpha(ks, [theory.tokens_per_step(0.8, k) for k in ks])
    assert alpha == pytest.approx(0.8, abs=1e-3) and rmse < 1e-3


def test_fit_rates_recovers_first_and_decay():
    ks = [3, 4, 5]
    first, decay, rmse = fitting.fit_rates(ks, [theory.tokens_per_step_rates(0.9, 0.85, k) for k in ks])
    assert first == pytest.approx(0.9, abs=5e-3)
    assert decay == pytest.approx(0.85, abs=2e-3)
    assert rmse < 1e-3


def test_fit_cost_line_and_single_k():
    assert fitting.fit_cost([1, 2, 3], [1.15, 1.25, 1.35]) == pytest.approx((1.05, 0.10))
    assert fitting.fit_cost([4], [1.2]) == pytest.approx((1.0, 0.05))  # Leviathan form d0 = 1


def test_a_step_cost_line_never_starts_below_the_baseline_step():
    """The 1B draft model's probes on an H200 (c=1): D = 2.74 at K=3 and 5.43 at K=6. The free line starts at
    D(0) = 0.05, a speculative step twenty times cheaper than the baseline's, and promised K=1 a step of 0.95; held
    at D(0) = 1, K=1's step is 1.71 (measured: 1.65)."""
    d0, d1 = fitting.fit_cost([3, 6], [2.74, 5.43])
    assert d0 == 1.0 and d1 == pytest.approx((3 * 1.74 + 6 * 4.43) / 45)
    assert d0 + d1 == pytest.approx(1.707, abs=1e-3)
    assert fitting.fit_cost([3, 6], [1.6, 2.2]) == pytest.approx((1.0, 0.2))  # a free d0 of 1.0 is kept as it is


def test_measured_crossover_interpolates_in_log2():
    import pandas as pd

    rows = pd.DataFrame({"concurrency": [64, 64, 128, 128], "speedup": [1.2, 1.1, 0.8, 0.7]})
    # best 1.2 at 64, 0.8 at 128: crosses halfway in log2 -> 64 * 2^0.5
    assert speedup_curves.measured_crossover(rows) == pytest.approx(64 * 2**0.5)
    assert speedup_curves.measured_crossover(rows[rows.concurrency == 64]) is None


def test_held_out_k_never_enter_the_fit(ruiz_frame):
    fit = fitting.fit_families(ruiz_frame, train_smallest=3)[0]
    for _, g in fit.rows.groupby("concurrency"):
        assert sorted(g[g["train"]]["k"]) == sorted(g["k"])[:3]
    changed = ruiz_frame.copy()
    smallest = changed.groupby(["model", "draft_model", "method", "concurrency"])["k"].transform(
        lambda k: k.rank(method="dense")
    )
    held = (changed["method"] != "none") & (smallest > 3)
    changed.loc[held, "speedup"] *= 0.5
    changed.loc[held, "acceptance_rate"] *= 0.5
    refit = fitting.fit_families(changed, train_smallest=3)[0]
    assert refit.predict(6, 8) == pytest.approx(fit.predict(6, 8), rel=1e-12)


def test_must_show_advisor_on_ruiz(ruiz_frame):
    within, groups, errors, crossovers = 0, 0, [], 0
    for fit in fitting.fit_families(ruiz_frame, train_smallest=3):
        measured_crossover = speedup_curves.measured_crossover(fit.rows)
        predicted = speedup_curves.predicted_crossover(fit, sorted(fit.rows["k"].unique()))
        if measured_crossover is None:
            assert predicted is None
        else:
            crossovers += 1
            assert predicted == pytest.approx(measured_crossover, rel=0.12)
        for conc, g in fit.rows.groupby("concurrency"):
            measured = dict(zip(g["k"].astype(int), g["speedup"]))
            advice = advisor.advise(fit, float(conc), ks=list(measured))
            within += measured[advice.k] >= 0.97 * max(measured.values())
            groups += 1
            errors += [abs(fit.predict(int(r.k), float(conc)) / r.speedup - 1) for r in g[~g["train"]].itertuples()]
    assert groups == 41 and crossovers == 3
    assert within / groups >= 0.95
    assert np.median(errors) <= 0.015


def test_advise_answer_and_crossover(ruiz_frame):
    fits = {(f.keys["model"], f.keys["draft_model"]): f for f in fitting.fit_families(ruiz_frame)}
    qwen = fits[("Qwen/Qwen3-32B", "Qwen/Qwen3-1.7B")]
    low = advisor.advise(qwen, 1)
    assert low.speculate and 3 <= low.k <= 6 and low.predicted_speedup > 1.8
    assert 128 < low.crossover < 256  # measured: best 1.077 at 128, 0.80 at 256
    assert "stops paying" in low.reason
    high = advisor.advise(qwen, 256)
    assert not high.speculate and high.k <= 2
    llama = advisor.advise(fits[("meta-llama/Llama-3.3-70B-Instruct", "meta-llama/Llama-3.2-1B")], 1)
    assert llama.crossover is None and llama.k == 8  # the largest candidate: the reason says so
    assert "largest K considered" in llama.reason
    assert 64 < llama.evidence.crossover_extrapolated < 256  # past the data: said as extrapolated
    assert "not measured" in llama.reason
    between = advisor.advise(qwen, 48)
    assert between.evidence.extrapolated is False
    assert advisor.advise(qwen, 512).evidence.extrapolated is True


def test_fit_without_sd_rows_says_what_to_do(ruiz_frame):
    with pytest.raises(InputError, match="No speculative rows"):
        fitting.fit_families(ruiz_frame[ruiz_frame["method"] == "none"])


def test_cli_advise_json(ruiz_parquet, specscope_home, capsys, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_DATA", str(specscope_home / "no-bundled"))
    assert cli_main(["import", str(ruiz_parquet)]) == 0
    capsys.readouterr()
    assert cli_main(["advise", "--model", "Qwen/Qwen3-32B", "--method", "eagle3", "--concurrency", "8", "--json"]) == 0
    answers = json.loads(capsys.readouterr().out)
    assert len(answers) == 1
    assert answers[0]["family"]["draft_model"] == "RedHatAI/Qwen3-32B-speculator.eagle3"
    [at_8] = answers[0]["concurrencies"]
    [advice] = answers[0]["advice"]
    assert at_8["concurrency"] == 8 and at_8["k"] == advice["k"] in range(1, 7) and advice["predicted_speedup"] > 1.5
    assert answers[0]["speculative_config"]["method"] == "eagle3"
    assert cli_main(["advise", "--model", "no/such-model"]) == 1
    assert "No results match" in capsys.readouterr().err


def test_single_k_family_falls_back_to_iid_and_leviathan_cost():
    import pandas as pd

    al = theory.tokens_per_step(0.7, 3)
    rows = pd.DataFrame(
        {
            "source": "own",
            "model": "m",
            "draft_model": "d",
            "method": "draft_model",
            "dataset": "x",
            "hardware": "cpu",
            "k": [3, 3],
            "concurrency": [1, 4],
            "acceptance_rate": (al - 1) / 3,
            "acceptance_length": al,
            "per_position_acceptance": None,
            "speedup": [al / 1.3, al / 1.6],
            "baseline_throughput": [10.0, 30.0],
        }
    )
    fit = fitting.fit_family(rows)
    assert fit.alpha == pytest.approx(0.7, abs=1e-3) and fit.decay == fit.first == fit.alpha
    assert fit.cost.at(1) == pytest.approx((1.0, 0.1))
    assert fit.predict(3, 4) == pytest.approx(al / 1.6, rel=1e-3)
    assert advisor.advise(fit, 2).k in (1, 2, 3)


def test_measured_per_position_rates_are_used_directly():
    import pandas as pd

    rates = [0.714, 0.498, 0.363, 0.270]
    rows = pd.DataFrame(
        {
            "source": "own",
            "model": "m",
            "draft_model": "d",
            "method": "draft_model",
            "dataset": "x",
            "hardware": "cpu",
            "k": [4, 4],
            "concurrency": [1, 8],
            "acceptance_rate": sum(rates) / 4,
            "acceptance_length": 1 + sum(rates),
            "per_position_acceptance": [rates, rates],
            "speedup": [2.0, 1.5],
            "baseline_throughput": [10.0, 60.0],
        }
    )
    fit = fitting.fit_family(rows)
    assert fit.al(4) == pytest.approx(2.845)
    assert fit.al(2) == pytest.approx(1 + 0.714 + 0.498)
    assert fit.al(6) < 2.845 + 2 * 0.270  # beyond the measured positions: fitted decay
    assert fit.predict(4, 1) == pytest.approx(2.0)


def test_concurrency_figure_marks_crossover_in_data_units(ruiz_frame, monkeypatch):

    monkeypatch.syspath_prepend(str(APP))
    from ui import theory_charts

    fit = next(f for f in fitting.fit_families(ruiz_frame) if f.keys["draft_model"] == "Qwen/Qwen3-1.7B")
    ks = range(1, 7)
    curve, measured = speedup_curves.concurrency_curves(fit, ks)
    crossover = speedup_curves.predicted_crossover(fit, ks)
    spec = theory_charts.speedup_vs_concurrency_figure(curve, measured, crossover)
    rule = next(
        layer
        for layer in spec["layer"]
        if layer["mark"]["type"] == "rule" and layer["encoding"].get("x", {}).get("field") == "concurrency"
    )
    assert spec["datasets"][rule["data"]["name"]] == [
        {"concurrency": crossover, "text": f"stops paying ~{crossover:.0f}"}
    ]
    assert 128 < crossover < 256
    assert list(measured["concurrency"]) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    # a log-2 axis with a tick at every doubling, in data units
    x = spec["layer"][1]["encoding"]["x"]
    assert x["scale"]["type"] == "log" and x["scale"]["base"] == 2
    assert x["axis"]["values"] == [1, 2, 4, 8, 16, 32, 64, 128, 256]


def test_advisor_does_not_rank_k_it_cannot_tell_apart(tmp_path):
    import numpy as np

    rates = [0.8, 0.6, 0.45, 0.3]
    base = [20.0, 21.0, 19.0, 20.5]
    # K=2 and K=3 within noise of each other; K=1 and K=4 clearly below them
    tput = {
        1: [26.0, 26.5, 25.5, 26.2],
        2: [31.0, 29.0, 30.5, 29.5],
        3: [30.0, 31.5, 29.0, 30.8],
        4: [24.0, 24.5, 23.5, 24.2],
    }
    rows = [
        {
            "source": "specscope",
            "model": "m",
            "dataset": "d",
            "hardware": "cpu-2core",
            "host": "box",
            "concurrency": 1,
            "method": "none",
            "k": 0,
            "repeat": i,
            "output_throughput": v,
            "status": "ok",
        }
        for i, v in enumerate(base)
    ]
    for k, values in tput.items():
        rows += [
            {
                "source": "specscope",
                "model": "m",
                "dataset": "d",
                "hardware": "cpu-2core",
                "host": "box",
                "concurrency": 1,
                "method": "ngram",
                "k": k,
                "repeat": i,
                "output_throughput": v,
                "acceptance_rate": float(np.mean(rates[:k])),
                "acceptance_length": 1 + sum(rates[:k]),
                "status": "ok",
            }
            for i, v in enumerate(values)
        ]
    writing.write_results(rows, run_id="noisy", directory=tmp_path)
    frame = Store(result_dirs=[tmp_path], request_dirs=[]).speedup()
    answer = advisor.advise(fitting.fit_family(frame[frame["method"] != "none"]), 1)
    assert answer.k == 2 and answer.basis == "measured"  # tied with K=3 within noise: the smaller K
    assert answer.tied_ks == [3]
    assert "tied within noise" in answer.reason and "the smaller K drafts less" in answer.reason
    assert answer.summary().startswith("Use K = 2 (K = 3 measured alike within noise; the smaller K drafts less)")
    measured = {m["k"]: m for m in answer.as_dict()["evidence"]["measured"]}
    assert measured[answer.k]["speedup_95"][0] < measured[answer.k]["speedup"] < measured[answer.k]["speedup_95"][1]


def test_single_runs_warn_that_close_k_may_swap(ruiz_frame):
    fit = fitting.fit_family(ruiz_frame[(ruiz_frame["model"] == "Qwen/Qwen3-32B") & (ruiz_frame["method"] == "eagle3")])
    answer = advisor.advise(fit, 1)
    assert answer.tied_ks == [] and "single runs without intervals" in answer.reason


@pytest.fixture
def bundled_frame(specscope_home):
    """Every bundled result (published articles and SpecScope's own CPU runs) with its speedup."""
    return Store().speedup()


def _cpu_fits(frame):
    """SpecScope's own CPU families on code-editing (measured at K 2 and 4)."""
    return [
        f
        for f in fitting.fit_families(frame)
        if f.keys["source"] == "specscope"
        and f.keys["dataset"] == "code-editing"
        and f.keys["hardware"].startswith("cpu")
    ]


def test_group_labels_name_prompt_set_and_hardware_and_are_distinct(bundled_frame):
    fits = _cpu_fits(bundled_frame)
    labels = fitting.family_labels([f.keys for f in fits])
    assert len(set(labels)) == len(fits) >= 2  # ngram and suffix on code-editing, ngram on two vLLM versions
    assert any("· vLLM 0.31.0 (specscope)" in label for label in labels)  # every label names its vLLM
    assert any("· vLLM 0.32.0 (specscope)" in label for label in labels)
    for fit, label in zip(fits, labels):
        assert fit.keys["dataset"] in label and fit.keys["hardware"] in label and fit.keys["method"] in label
    same = {"source": "s", "model": "m", "draft_model": None, "method": "ngram", "dataset": None, "hardware": "h"}
    assert fitting.family_labels([same, same]) == [
        fitting.family_label(same) + " #1",
        fitting.family_label(same) + " #2",
    ]


def test_bundled_cpu_advice_picks_the_best_measured_k(bundled_frame):
    """Each CPU group's advice is its fastest measured K at every measured concurrency, or a smaller K tied
    with it within noise, with that K's measured speedup (the mean of its runs)."""
    for fit in _cpu_fits(bundled_frame):
        for conc, here in fit.rows.groupby("concurrency"):
            answer = advisor.advise(fit, float(conc))
            measured = here.groupby(here["k"].astype(int))["speedup"].mean().to_dict()
            fastest = max(measured, key=measured.get)
            assert answer.basis == "measured", (fit.keys, conc)
            assert answer.k == fastest or (answer.k < fastest and fastest in answer.tied_ks), (fit.keys, conc)
            assert answer.measured_speedup == pytest.approx(measured[answer.k], abs=1e-4)
    suffix = next(
        f for f in _cpu_fits(bundled_frame) if f.keys["method"] == "suffix" and f.keys["dataset"] == "code-editing"
    )
    answer = advisor.advise(suffix, 1)
    measured = suffix.rows[(suffix.rows["concurrency"] == 1) & (suffix.rows["k"] == answer.k)]["speedup"].mean()
    assert answer.k in (2, 4) and f"measured {measured:.3f}×" in answer.summary()


def test_acceptance_length_wins_when_steps_draft_fewer_than_k():
    import pandas as pd

    rows = pd.DataFrame(
        {"k": [2, 4, 4], "acceptance_rate": [0.6545, 0.5123, 0.5], "acceptance_length": [2.121, 3.05, None]}
    )
    al = fitting.with_acceptance_length(rows)["al"].tolist()
    assert al[0] == pytest.approx(2.121)  # suffix: 1 + 0.6545*2 = 2.309 disagrees: not every step drafts K
    assert al[1] == pytest.approx(1 + 0.5123 * 4)  # agrees to rounding: the 4-digit rate is finer
    assert al[2] == pytest.approx(3.0)


def test_negative_cost_slope_fits_a_flat_cost():
    assert fitting.fit_cost([2, 2, 4, 4], [1.02, 1.04, 0.90, 0.92]) == pytest.approx((0.97, 0.0))


def _zigzag_rows():
    """Measured speedups no cost line can follow: the fit misses them widely."""
    import pandas as pd

    speedups = {1: 1.25, 2: 1.0, 3: 1.9, 4: 1.05}
    return pd.DataFrame(
        {
            "source": "own",
            "model": "m",
            "draft_model": None,
            "method": "ngram",
            "dataset": "x",
            "hardware": "cpu",
            "k": list(speedups),
            "concurrency": 1,
            "acceptance_rate": [(theory.tokens_per_step(0.7, k) - 1) / k for k in speedups],
            "acceptance_length": [theory.tokens_per_step(0.7, k) for k in speedups],
            "per_position_acceptance": None,
            "speedup": list(speedups.values()),
            "baseline_throughput": 10.0,
        }
    )


def test_a_poor_fit_cannot_outvote_the_fastest_measured_k():
    fit = fitting.fit_family(_zigzag_rows())
    answer = advisor.advise(fit, 1)
    assert answer.evidence.here_median_rel_err > fitting.POOR_FIT
    assert answer.basis == "measured" and answer.k == 3 and answer.measured_speedup == pytest.approx(1.9)
    assert "Measured beats modelled" in answer.reason
    assert answer.summary().startswith("Use K = 3: measured 1.900× at concurrency 1")


def test_published_results_without_what_a_fit_needs_say_what_is_missing(bundled_frame, capsys):
    unfit = {fitting.family_label(keys): problem for keys, problem in fitting.unfitted(bundled_frame)}
    guide = {label: p for label, p in unfit.items() if "(vllm-sd-guide)" in label}
    assert len(guide) == 16  # 2 models x 4 methods x 2 prompt sets
    eagle3 = (
        "Llama-3.3-70B-Instruct · eagle3 (Llama-3.3-70B-Instruct-speculator.eagle3) · "
        "sharegpt · 2xH200 · vLLM 0.12.0 (vllm-sd-guide)"
    )
    assert "no acceptance rate or length" in guide[eagle3]
    assert all("K (speculative tokens)" in p for label, p in guide.items() if "· suffix ·" in label)
    assert all("concurrency" in p for label, p in unfit.items() if "(pace-sd-lab)" in label)
    own = {label: p for label, p in unfit.items() if "(specscope)" in label}  # the H100 run whose every cell hit
    assert own and all(
        "1xH100-80GB" in label
        and p.startswith("every measured cell fails a check that distorts its figure (Prefix-cache hits")
        for label, p in own.items()
    )
    assert cli_main(["advise", "--source", "specscope", "--source", "vllm-sd-guide"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # prose wraps
    assert f"not fitted: {eagle3}: no acceptance rate or length" in out
    assert "SmolLM2-135M-Instruct · suffix · code-editing · cpu-2core · vLLM 0.32.0 (specscope): Deploy suffix" in out
    assert "concurrency 1: Use K = " in out


def test_reason_is_plain_words_and_the_formulas_come_apart(bundled_frame):
    import re

    for fit in _cpu_fits(bundled_frame):
        answer = advisor.advise(fit, 1)
        assert answer.reason.startswith(f"K = {answer.k} at concurrency 1: ")
        assert not re.search(r"\bd[01]\b|\bAL\b|\^|·|tokens/step", answer.reason), answer.reason
        formulas = " ".join(answer.details)
        assert "ΔAL > d1·S" in formulas and "D(K) = d0 + d1·K" in formulas


def test_the_advice_quotes_a_point_of_two_runs_as_every_view_does(specscope_home, capsys):
    """The bundled ngram K=4 point at concurrency 1 folds two runs (1.658× and 1.516×): the Explorer reads
    1.570× [1.367, 1.803] (mean of 2 runs; the versions run's interval paired over its rounds). The advice
    quoted 1.587× [1.175, 2.016] (the runs' mean with one run's interval); it reads the point's own figure now."""
    assert cli_main(["advise", "--method", "ngram", "--dataset", "code-editing"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "1: K=4 1.570× [1.367, 1.803] measured" in out and "1.587×" not in out
