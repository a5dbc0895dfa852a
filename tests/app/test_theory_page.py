"""The Theory page under Streamlit's AppTest: sliders drive the curves; the advisor answers from the store."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from helpers.paths import VIEWS
from helpers.vega_charts import rows, titled
from specscope.results import importers

pytestmark = [pytest.mark.app, pytest.mark.usefixtures("no_bundled_results")]

PAGE = VIEWS / "theory.py"


def _run() -> AppTest:
    at = AppTest.from_file(str(PAGE), default_timeout=120).run()
    assert not at.exception, at.exception
    return at


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_sliders_drive_the_model(page_env):
    at = _run()
    assert _metric(at, "Tokens per step at K") == "3.362"  # alpha 0.8, K 4
    assert _metric(at, "Speedup at K") == f"{3.3616 / 1.2:.3f}×"  # c 0.05
    before = [r["speedup"] for r in rows(titled(at, "Model: speedup vs K"), "line")]
    at.slider(key="theory_alpha").set_value(0.6).run()
    assert not at.exception
    assert _metric(at, "Tokens per step at K") == f"{(1 - 0.6**5) / 0.4:.3f}"
    after = [r["speedup"] for r in rows(titled(at, "Model: speedup vs K"), "line")]
    assert after != before and after[4] == pytest.approx((1 - 0.6**5) / 0.4 / 1.2)
    assert any("No speculative results yet" in info.value for info in at.info)


def test_advisor_answer_over_imported_results(page_env, ruiz_parquet):
    importers.import_file(ruiz_parquet)
    at = _run()
    groups = at.selectbox(key="theory_group")
    llama = next(o for o in groups.options if "Llama-3.2-1B" in o)
    groups.set_value(llama).run()
    at.selectbox(key="theory_conc").set_value(1).run()
    assert not at.exception
    answer = next(i.value for i in at.info if "3.555×" in i.value).replace("\\", "")
    assert "1: K=8 3.555× measured" in answer  # the answer names K=8 at 1
    # published single runs: no interval tells K apart, so no schedule is picked from them and nothing is green
    assert answer.startswith("Single runs suggest draft_model with K = 8, but no interval tells it from the baseline")
    assert not at.success
    assert any(m.value.startswith("**At concurrency 1:** Use K = 8") for m in at.markdown)
    measured = rows(titled(at, "Fitted at concurrency 1: speedup vs K"), "point")
    assert any(round(r["speedup"], 3) == 3.555 for r in measured)
    assert not at.code  # drawn once its expander is opened
    at.session_state["theory_config_open"] = True
    at.run()
    [config] = [json.loads(c.value) for c in at.code]  # the fixed K, exactly as vLLM takes it
    assert config["method"] == "draft_model" and config["num_speculative_tokens"] == 8
    assert "num_speculative_tokens_per_batch_size" not in config
    schedule = next(m.value for m in at.markdown if m.value.startswith("| batch sizes | K | source |"))
    sources = [row.split(" | ")[2].removesuffix(" |").replace("\\", "") for row in schedule.splitlines()[2:]]
    assert sources[0].startswith("measured at 1")  # each batch size's own K, shown beside the fixed K deployed
    assert sources[-1].endswith("extrapolated past the measured concurrencies (1-64)")  # it reaches batch 256
    at.selectbox(key="theory_group").set_value(
        next(o for o in at.selectbox(key="theory_group").options if "Qwen3-1.7B" in o)
    ).run()
    at.selectbox(key="theory_conc").set_value(256).run()
    assert any(m.value.startswith("**At concurrency 256:** Do not speculate") for m in at.markdown)


def test_load_fit_into_sliders(page_env, ruiz_parquet):
    importers.import_file(ruiz_parquet)
    at = _run()
    assert not at.slider  # the illustration is drawn once its expander is opened
    at.button(key="theory_load_fit").click().run()
    assert not at.exception
    assert at.session_state["theory_illustration_open"]  # loading the fit opens it
    assert at.slider(key="theory_alpha").value != 0.80
    assert at.slider(key="theory_c").value != 0.05


def test_held_out_view_marks_points_not_fitted(page_env, ruiz_parquet):
    importers.import_file(ruiz_parquet)
    at = _run()
    at.selectbox(key="theory_train").set_value("3 smallest K per concurrency").run()
    assert not at.exception
    sets = {r["set"] for r in rows(titled(at, "Fitted at concurrency 1: speedup vs K"), "point")}
    assert sets == {"fit on", "held out"}


def test_measured_step_cost_predicts_for_any_alpha_and_for_the_prompt_set(page_env):
    from helpers import calibration_rows
    from specscope import settings
    from specscope.advice import theory

    calibration_rows.write(settings.results_dir())
    at = _run()
    assert [o for o in at.selectbox(key="theory_group").options if "calibration" in o] == []
    assert at.selectbox(key="theory_calibration").value == "m · draft_model + d · cpu-2core · host h"
    assert any("not on this machine" in c.value for c in at.caption)  # its rows' host is h, not this one
    assert "theory_whatif_alpha" not in at.session_state  # the what-if is drawn once its expander is opened
    at.session_state["theory_whatif_open"] = True
    at.run()
    at.slider(key="theory_whatif_alpha").set_value(0.5).run()
    assert not at.exception
    line = [
        r
        for r in rows(titled(at, "Predicted on the measured step cost, α=0.50"), "line")
        if r["concurrency"] == "concurrency 1"
    ]
    d0, d1 = calibration_rows.D0[1], calibration_rows.D1[1]
    assert [r["speedup"] for r in sorted(line, key=lambda r: r["k"])][:2] == pytest.approx(
        [theory.tokens_per_step(0.5, k) / (d0 + d1 * k) for k in (1, 2)]
    )
    checked = next(d.value for d in at.dataframe if "rel_err" in d.value.columns).set_index(["concurrency", "k"])
    assert checked.loc[(2, 3), "measured"] == pytest.approx(calibration_rows.HELD_OUT / calibration_rows.BASE[2])
    assert any("Predicted, not measured" in c.value for c in at.caption)
