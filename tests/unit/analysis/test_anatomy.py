"""The step anatomy's arithmetic (specscope.analysis.anatomy): a step split into verify, draft and overhead from
result rows of a baseline, a near-free drafter (ngram), the method and its draft model served alone."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from specscope import stats
from specscope.advice import fitting, theory
from specscope.analysis import anatomy, anatomy_figure
from specscope.engine import presets
from specscope.errors import ConfigError

SETUP = dict(
    source="specscope",
    hardware="cpu-2core",
    host="box",
    vllm_version="0.32.0",
    torch_version="2.13.0+cpu",
    weights="real",
    dataset="copy",
    response_format="none",
    output_len=48,
    temperature=0.0,
    concurrency=1,
    status="ok",
    created_at=pd.Timestamp("2026-11-26", tz="UTC"),
    k_schedule=None,
    method_params=None,
)


def _row(
    method,
    k,
    tpot,
    *,
    model="target",
    draft_model=None,
    run_id="run",
    out=100,
    completed=2,
    accepted=0,
    drafts=0,
    draft_tokens=0,
    al=None,
    acceptance=None,
    **extra,
):
    return {
        **SETUP,
        "run_id": run_id,
        "model": model,
        "draft_model": draft_model,
        "method": method,
        "k": k,
        "mean_tpot_ms": tpot,
        "total_output_tokens": out,
        "completed": completed,
        "accepted_tokens": accepted,
        "num_drafts": drafts,
        "draft_tokens": draft_tokens,
        "acceptance_length": al,
        "acceptance": acceptance,
        **extra,
    }


def _raw(*rows) -> pd.DataFrame:
    return pd.DataFrame(list(rows))


def _demo(tpots=(10.0,), probe_tpot=8.0, method_tpot=12.0, drafter_tpot=3.0):
    """98 decode tokens per repeat; ngram accepts 48 of them in 40 of its 50 steps (f = 0.8), draft_model
    accepts 49 in 49 steps (f = 1, 2 tokens a step)."""
    rows = []
    for n, t in enumerate(tpots):
        rows += [
            _row("none", 0, t * (1 + 0.01 * n)),
            _row("ngram", 4, probe_tpot * (1 + 0.01 * n), accepted=48, drafts=40, draft_tokens=160, acceptance="real"),
            _row(
                "draft_model",
                4,
                method_tpot * (1 + 0.01 * n),
                draft_model="/models/draft",
                accepted=49,
                drafts=49,
                draft_tokens=196,
                acceptance="real",
            ),
            _row("none", 0, drafter_tpot * (1 + 0.01 * n), model="draft", run_id="run-drafter"),
        ]
    return _raw(*rows)


def test_figures_add_their_intervals_in_quadrature():
    a, b = anatomy_figure.Figure(10.0, 3.0), anatomy_figure.Figure(4.0, 4.0)
    assert (a + b).value == 14.0 and (a + b).half == pytest.approx(5.0)
    assert (a - b).value == 6.0 and (a - b).half == pytest.approx(5.0)
    assert a.times(0.5) == anatomy_figure.Figure(5.0, 1.5)
    assert (a + anatomy_figure.Figure(1.0)).half is None  # a part measured once has no interval, nor has the sum
    assert (a.low, a.high) == (7.0, 13.0)


def test_a_draft_model_step_splits_into_verify_draft_and_overhead_that_add_up():
    table = anatomy.table(_demo())
    row = table[table["method"] == "draft_model"].iloc[0]
    # the method: 98 decode tokens in 98 - 49 = 49 steps -> 2 tokens a step, TPOT 12 -> a 24 ms step
    assert row["tokens_per_step"] == pytest.approx(2.0) and row["step_ms"] == pytest.approx(24.0)
    assert row["plain_ms"] == pytest.approx(10.0) and row["d_ms"] == pytest.approx(2.4)
    # ngram: 50 steps, 40 drafting (f = 0.8); its step 8 * 98/50 = 15.68 ms; one drafting step
    # (15.68 - 0.2 * 10) / 0.8 = 17.1 ms is the target over K+1 tokens
    verify = (8.0 * 98 / 50 - 0.2 * 10.0) / 0.8
    assert row["verify_ms"] == pytest.approx(verify)
    assert row["draft_ms"] == pytest.approx(4 * 3.0)  # K passes of the drafter's TPOT served alone
    assert row["overhead_ms"] == pytest.approx(24.0 - verify - 12.0)
    assert row["verify_ms"] + row["draft_ms"] + row["overhead_ms"] == pytest.approx(row["step_ms"])
    shares = row["verify_share"] + row["draft_share"] + row["overhead_share"]
    assert shares == pytest.approx(1.0)
    assert "served alone" in row["draft_how"] and "drafting on 80% of steps" in row["verify_how"]


def test_tokens_accepted_past_the_output_cap_do_not_make_a_step_longer():
    """8 requests of 128 tokens, every draft of K=2 accepted (3 tokens a step): 43 steps a request make 129
    tokens, the last 2 dropped at the cap but counted as accepted. A step yields 127/43 tokens, never more than
    K+1 = 3, and the step is TPOT x 127/43."""
    raw = _raw(
        _row("none", 0, 6.0, out=1024, completed=8),
        _row(
            "eagle3",
            2,
            2.5,
            draft_model="head",
            out=1024,
            completed=8,
            accepted=688,
            drafts=344,
            draft_tokens=688,
            al=3.0,
            acceptance="synthetic",
        ),
    )
    row = anatomy.table(raw).iloc[0]
    assert row["tokens_per_step"] == pytest.approx(1016 / 344) and row["drafting_share"] == 1.0
    assert row["step_ms"] == pytest.approx(2.5 * 1016 / 344)


def test_repeats_give_every_part_an_interval_that_holds_its_value():
    table = anatomy.table(_demo(tpots=(10.0, 10.0, 10.0)))
    row = table[table["method"] == "draft_model"].iloc[0]
    assert row["repeats"] == 3
    steps = [12.0 * (1 + 0.01 * n) * 2.0 for n in range(3)]
    found = stats.mean_interval(steps)
    assert (row["step_lo"], row["step_hi"]) == pytest.approx((found.low, found.high))
    for part in ("verify", "draft", "overhead"):
        assert row[f"{part}_lo"] < row[f"{part}_ms"] < row[f"{part}_hi"], part
    # overhead = step - verify - draft: its half-width is theirs in quadrature
    halves = [(row[f"{p}_hi"] - row[f"{p}_lo"]) / 2 for p in ("step", "verify", "draft", "overhead")]
    assert halves[3] == pytest.approx(math.sqrt(halves[0] ** 2 + halves[1] ** 2 + halves[2] ** 2))


def test_a_duration_interval_stops_at_zero_while_a_difference_may_go_below():
    """Two repeats far apart (t = 12.7 with one degree of freedom) reach below 0 ms: a step, a verify or a
    draft cannot take less than nothing, so its low end is 0; overhead is a difference and keeps its own."""
    raw = _demo(tpots=(10.0, 10.0))
    raw.loc[(raw["method"] == "draft_model") & (raw["mean_tpot_ms"] > 12.0), "mean_tpot_ms"] = 18.0
    row = anatomy.table(raw).query("method == 'draft_model'").iloc[0]
    assert row["step_lo"] == 0.0 < row["step_ms"] < row["step_hi"]
    assert row["overhead_lo"] < 0.0 < row["overhead_hi"]
    found = stats.mean_interval([24.0, 36.0])
    assert found.low < 0.0 and row["step_hi"] == pytest.approx(found.high)


def test_an_overhead_below_zero_with_its_interval_says_why():
    """The drafter served alone is an upper bound on its passes: timed under heavier load than the method's cell
    (5 ms a pass, 20 ms for K=4), the parts exceed the 24 ms step and the overhead says what that means."""
    row = anatomy.table(_demo(tpots=(10.0, 10.0), drafter_tpot=5.0)).query("method == 'draft_model'").iloc[0]
    assert row["overhead_hi"] < 0.0
    assert "below 0" in row["overhead_how"] and "quiet machine" in row["overhead_how"]
    fine = anatomy.table(_demo(tpots=(10.0, 10.0), drafter_tpot=1.0)).query("method == 'draft_model'").iloc[0]
    assert fine["overhead_hi"] > 0.0 and fine["overhead_how"] == "the rest: step - verify - draft"


def test_ngram_is_its_own_verify_probe_so_its_step_is_all_verify():
    row = anatomy.table(_demo()).query("method == 'ngram'").iloc[0]
    assert row["verify_ms"] == pytest.approx(row["step_ms"]) and row["draft_ms"] == 0.0
    assert row["overhead_ms"] == pytest.approx(0.0, abs=1e-9)
    assert "passes no model" in row["draft_how"]


def test_a_probe_that_seldom_drafts_gives_no_verify_and_says_why():
    raw = _demo()
    raw.loc[raw["method"] == "ngram", "num_drafts"] = 10  # 10 of 50 steps drafted
    row = anatomy.table(raw).query("method == 'draft_model'").iloc[0]
    assert pd.isna(row["verify_ms"]) and pd.isna(row["overhead_ms"])
    assert "drafted on only 20% of its steps" in row["verify_how"]
    assert row["rest_ms"] == pytest.approx(row["step_ms"])  # the step stands unsplit


def test_a_head_is_not_served_alone_so_draft_and_overhead_come_together():
    raw = _demo()
    raw.loc[raw["method"] == "draft_model", ["method", "draft_model"]] = ["eagle3", "/models/head"]
    row = anatomy.table(raw).query("method == 'eagle3'").iloc[0]
    assert pd.notna(row["verify_ms"]) and pd.isna(row["draft_ms"]) and pd.isna(row["overhead_ms"])
    assert row["rest_ms"] == pytest.approx(row["step_ms"] - row["verify_ms"])
    assert "cannot be served alone" in row["draft_how"]


def test_parts_come_only_from_the_same_setup():
    raw = _demo()
    raw.loc[raw["model"] == "draft", "vllm_version"] = "0.31.0"  # the drafter alone on another vLLM
    raw.loc[raw["method"] == "ngram", "concurrency"] = 4  # the probe at another concurrency
    row = anatomy.table(raw).query("method == 'draft_model'").iloc[0]
    assert pd.isna(row["verify_ms"]) and "no ngram cell at K=4" in row["verify_how"]
    assert "not measured alone" in row["draft_how"]


def test_d_is_tokens_per_step_over_the_speedup_with_its_interval():
    speedups = pd.DataFrame(
        [
            {
                **SETUP,
                "run_id": "run",
                "model": "target",
                "draft_model": "/models/draft",
                "method": "draft_model",
                "k": 4,
                "acceptance": "real",
                "speedup": 0.8,
                "speedup_lo": 0.5,
                "speedup_hi": 1.0,
            }
        ]
    )
    row = anatomy.table(_demo(), speedups).query("method == 'draft_model'").iloc[0]
    assert row["d"] == pytest.approx(2.0 / 0.8)
    assert (row["d_lo"], row["d_hi"]) == pytest.approx((2.0 / 1.0, 2.0 / 0.5))


def test_d_reads_its_interval_and_says_when_it_has_no_upper_bound():
    assert anatomy.d_text({"d": 2.8617, "d_lo": 2.3272, "d_hi": 3.7149}) == "2.86 [2.33, 3.71]"
    # a speedup interval clipped at 0 leaves D a low end only: said, not dropped as if measured once
    assert anatomy.d_text({"d": 4.6647, "d_lo": 2.1287, "d_hi": None}) == "4.66 [2.13, no upper bound]"
    assert anatomy.d_text({"d": 4.6647, "d_lo": 2.1287, "d_hi": float("nan")}) == "4.66 [2.13, no upper bound]"
    assert anatomy.d_text({"d": 1.5, "d_lo": None, "d_hi": None}, "1 run") == "1.50 (1 run)"


def test_as_records_are_json_ready():
    records = anatomy.as_records(anatomy.table(_demo()))
    assert {r["method"] for r in records} == {"ngram", "draft_model"}
    assert all(not (isinstance(v, float) and math.isnan(v)) for r in records for v in r.values())


def test_cost_slopes_are_the_drafters_pass_plus_verifys_growth_in_plain_steps():
    raw = pd.concat(
        [
            _demo(),
            _demo().assign(
                k=lambda f: f["k"].where(f["k"] == 0, 2),
                num_drafts=lambda f: f["num_drafts"],
                mean_tpot_ms=lambda f: f["mean_tpot_ms"].where(f["method"] != "ngram", 7.0),
            ),
        ]
    )
    table = anatomy.table(raw)
    keys = {
        "model": "target",
        "draft_model": "/models/draft",
        "method": "draft_model",
        "hardware": "cpu-2core",
        "vllm_version": "0.32.0",
    }
    slope = anatomy.cost_slopes(table, keys)[1.0]
    rows = table[table["method"] == "draft_model"].sort_values("k")
    per_verify = list(rows["verify_ms"] / 10.0)
    assert slope == pytest.approx(3.0 / 10.0 + (per_verify[1] - per_verify[0]) / 2)
    assert anatomy.cost_slopes(table, {**keys, "vllm_version": "0.31.0"}) == {}


def test_the_advisor_takes_the_measured_cost_per_token_where_one_k_was_measured():
    groups = pd.DataFrame(
        [
            {"concurrency": 1, "d0": 1.0, "d1": 0.35, "train_ks": [4], "baseline_step_ms": 10.0},
            {"concurrency": 4, "d0": 1.2, "d1": 0.2, "train_ks": [2, 4], "baseline_step_ms": 12.0},
        ]
    )
    cost = theory.CostCurve((1.0, 4.0), (1.0, 1.2), (0.35, 0.2))
    fit = fitting.FamilyFit({"method": "draft_model"}, 0.7, 0.0, 0.7, 0.7, 0.0, cost, groups, pd.DataFrame(), None)
    changed = fitting.with_parts(fit, {1.0: 0.3, 4.0: 0.9})
    d0, d1 = changed.cost.at(1.0)
    assert (d0, d1) == pytest.approx((2.4 - 0.3 * 4, 0.3))  # through the measured D(4) = 2.4, slope from parts
    assert changed.cost.at(4.0) == pytest.approx((1.2, 0.2))  # two K measured there: the fit stays
    assert list(changed.groups["cost_from"]) == ["measured parts", "fit"]
    assert fitting.with_parts(fit, {}) is fit


def test_the_drafter_preset_serves_the_draft_model_alone(specscope_home):
    name = anatomy.drafter_preset("cpu-smollm2", "draft_model")
    preset = presets.get_preset(name)
    base = presets.get_preset("cpu-smollm2")
    assert preset.model == base.method("draft_model").params["model"] and list(preset.methods) == ["none"]
    assert preset.engine_args == base.engine_args and preset.env == base.env and preset.engine == base.engine
    with pytest.raises(ConfigError, match="no draft model"):
        anatomy.drafter_preset("cpu-smollm2", "ngram")
    with pytest.raises(ConfigError, match="cannot be served alone"):
        anatomy.drafter_preset("shape-llama31-8b", "eagle3")


def test_a_free_and_a_constrained_cell_are_two_setups_never_one_stacked_bar(specscope_home):
    """The bundled structured run measured ngram K=4 free and constrained: each is a setup of its own in "Where a
    step goes" (one bar each, one table row each), and the speedup panel's axis sits on its right, away from the
    D(K) axis title of the panel beside it."""
    from specscope.results.store import Store
    from ui import anatomy as view

    table = view._with_labels(anatomy.from_store(Store(), {"run_id": ["specscope-cpu-structured"]}))
    assert len(table) == 2 and table["setup"].nunique() == 2
    assert sum("constrained (json_schema)" in s for s in table["setup"]) == 1
    for setup in table["setup"]:
        fig = view.figure(table, setup)
        speedups = [t for t in fig.data if t.name == "speedup"]
        assert len(speedups) == 1 and list(speedups[0].x) == ["ngram K=4"]
        assert list(view._table(table[table["setup"] == setup])["method, K"]) == ["ngram K=4"]
        assert fig.layout.yaxis3.side == "right" and fig.layout.yaxis2.title.text == "D(K), plain steps"


def test_the_table_put_together_from_its_setups_is_the_table_of_all_rows(specscope_home):
    from specscope.results.store import Store

    frame = Store().speedup()  # the bundled runs: several setups, hosts and vLLM versions
    parts = [frame.loc[labels] for labels in anatomy.setups(frame)]
    assert len(parts) > 1 and sum(len(p) for p in parts) == frame["mean_tpot_ms"].notna().sum()
    whole = anatomy.table(frame)
    joined = pd.concat([anatomy.table(p) for p in parts], ignore_index=True)
    order = ["model", "hardware", "host", "vllm_version", "method", "concurrency", "k", "run_id"]
    whole, joined = (
        f[whole.columns].sort_values(order, key=lambda s: s.astype(str)).reset_index(drop=True) for f in (whole, joined)
    )
    pd.testing.assert_frame_equal(*(f.astype(object).where(f.notna(), None) for f in (whole, joined)))
