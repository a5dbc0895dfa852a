"""Checks travel: a sweep whose fastest K is flagged (suffix K=4 at 3.465x, its server's suffix cache carried over
from earlier cells and too few requests: the issue's case) while suffix K=2 measured 1.61x with every check
passed. The headline, the landing figure, the Best-K table, ``speedup --best`` (and its JSON), the Theory page,
``advise`` and the deploy answer all fall back to the clean K=2 and show the flagged figure beside it with its
flags; a constrained suffix setup flagged throughout is fitted by no one, and says what to measure again."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from streamlit.testing.v1 import AppTest

from helpers.paths import VIEWS
from specscope import settings
from specscope.advice import deploy, fitting
from specscope.analysis import explore, explore_text
from specscope.cli import main as cli_main
from specscope.results import writing
from specscope.results.store import Store

pytestmark = pytest.mark.app

FLAGS = "suffix_cache,few_requests"
# (method, K, response format) -> (speedup, the checks its cells fail)
CELLS = {
    ("ngram", 2, "none"): (1.30, ""),
    ("ngram", 4, "none"): (1.408, ""),
    ("suffix", 2, "none"): (1.61, ""),
    ("suffix", 4, "none"): (3.465, FLAGS),
    ("suffix", 2, "json_schema"): (2.10, FLAGS),
    ("suffix", 4, "json_schema"): (2.90, FLAGS),
}
SPREAD = (0.98, 1.0, 1.02)  # three interleaved rounds around each mean


def _write_sweep() -> None:
    t0 = dt.datetime(2026, 12, 7, tzinfo=dt.UTC)
    rows = []
    for fmt in ("none", "json_schema"):
        cells = [(("none", 0, fmt), (1.0, ""))] + [(key, value) for key, value in CELLS.items() if key[2] == fmt]
        for (method, k, _), (speedup, flags) in cells:
            for conc in (1, 4):
                for repeat, factor in enumerate(SPREAD, start=1):
                    rows.append(
                        {
                            "created_at": t0,
                            "run_id": "sweep",
                            "source": "specscope",
                            "model": "SmolLM2-135M-Instruct",
                            "method": method,
                            "k": k,
                            "hardware": "cpu-2core",
                            "host": "box",
                            "vllm_version": "0.32.0",
                            "weights": "real",
                            "acceptance": "real" if k else None,
                            "dataset": "uploaded",
                            "response_format": fmt,
                            "temperature": 0.0,
                            "output_len": 32,
                            "concurrency": conc,
                            "repeat": repeat,
                            "status": "ok",
                            "hygiene": flags,
                            "output_throughput": 40.0 * conc**0.5 * speedup * (factor if k else 1.0),
                            "acceptance_length": {0: None, 2: 2.4, 4: 3.6}[k]
                            if method == "suffix"
                            else {0: None, 2: 1.8, 4: 2.3}[k],
                            "acceptance_rate": None if not k else 0.5,
                        }
                    )
    writing.write_results(rows, run_id="sweep", directory=settings.results_dir())


@pytest.fixture
def sweep(page_env, no_bundled_results):
    _write_sweep()
    return page_env


def _suffix(frame, fmt: str = "none"):
    return frame[(frame["method"] == "suffix") & (frame["response_format"] == fmt)]


def test_the_headline_landing_figure_and_best_k_table_fall_back_to_the_clean_k(sweep):
    store = Store()
    best = explore.by_concurrency(store)
    top = explore.best_point(best)
    assert (top["method"], int(top["k"]), round(top["speedup"], 2)) == ("suffix", 2, 1.61)  # not ngram 1.408x
    passed_over = explore.flagged_above(best, top)
    assert round(passed_over["speedup"], 3) == 3.465 and set(passed_over["checks"]) == {"suffix_cache", "few_requests"}
    vs_k = explore.speedup_vs_k(store)
    [landing] = explore.landing_setups(vs_k, top)
    assert "suffix" in landing and "constrained" not in landing  # the clean setup, not the one flagged throughout
    assert "constrained" in explore.k_sweep_setups(vs_k)[-1]  # flagged throughout: ranked last
    table = explore_text.best_k_table(best, vs_k)
    free = table[table["setup"] == landing]
    assert list(free["K (draft tokens)"]) == ["2", "2"] and set(free["checks"]) == {"✓"}
    assert all(
        text.startswith("K=4 3.465× [") and text.endswith("left out (⚠ suffix cache · few requests)")
        for text in free["a higher figure left out"]
    )
    constrained = table[table["setup"].str.contains("constrained")]
    assert set(constrained["checks"]) == {"⚠ suffix cache · few requests"}  # no clean K: its best, flagged


def test_speedup_best_and_its_json_carry_each_rows_checks_and_the_figure_left_out(sweep, capsys):
    assert cli_main(["speedup", "--best", "--json", "--method", "suffix"]) == 0
    rows = json.loads(capsys.readouterr().out)
    free = [r for r in rows if r["response_format"] == "none"]
    assert {r["k"] for r in free} == {2} and all(r["checks"] == [] for r in free)
    assert all(
        r["flagged_k"] == 4
        and r["flagged_speedup"] == pytest.approx(3.465, rel=1e-3)
        and r["flagged_checks"] == ["suffix_cache", "few_requests"]
        for r in free
    )
    assert all(r["checks"] == ["suffix_cache", "few_requests"] for r in rows if r["response_format"] != "none")
    assert cli_main(["speedup", "--best", "--method", "suffix"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the table wraps its cells
    assert "K=4 3.465×" in out and "left out (⚠ suffix cache · few requests)" in out


def test_advise_and_the_deploy_answer_use_the_clean_k_and_name_what_they_left_out(sweep, capsys):
    fits = fitting.fit_families(explore.cells_with_points(Store()))
    suffix = next(f for f in fits if f.keys["method"] == "suffix")
    answer = deploy.answer(suffix)
    assert answer.fixed_k == 2 and answer.config["num_speculative_tokens"] == 2 and answer.gain == "everywhere"
    assert "Left out for their checks (measure them again): K=4 at concurrency 1, 3.465×" in answer.sentence()
    assert "(Suffix cache carried over)" in answer.sentence()
    assert cli_main(["advise", "--json", "--method", "suffix"]) == 0
    [found] = json.loads(capsys.readouterr().out)
    assert found["deploy"] == "K=2" and found["left_out"].startswith("Left out for their checks")
    assert cli_main(["advise", "--method", "suffix"]) == 0
    out = capsys.readouterr().out
    assert "Deploy suffix with K = 2" in out and "3.465×" in out
    assert (
        "not fitted:" in out
        and "every measured cell fails a check that distorts its figure (Suffix cache carried over)"
        in " ".join(out.split())
    )


def test_the_theory_page_answers_the_clean_k_and_shows_the_flagged_one(sweep):
    at = AppTest.from_file(str(VIEWS / "theory.py"), default_timeout=120).run()
    assert not at.exception, at.exception
    options = at.selectbox(key="theory_group").options
    suffix = next(o for o in options if "suffix" in o)
    at.selectbox(key="theory_group").set_value(suffix).run()
    assert not at.exception
    box = at.success[0].value
    assert box.startswith("Deploy suffix with K = 2") and "K=4 at concurrency 1, 3.465×" in box
    assert not any("json_schema" in option for option in options)  # flagged throughout: not fitted, not offered


def _noisy(page_env) -> None:
    """Two rounds on a shared box, K=4 beside K=2 at concurrency 1 and 4, whose ratios to their round's baseline
    swing from round to round (1.5x then 0.95x): intervals that hold 1.000x even paired (the issue's case:
    nothing measured shows a gain)."""
    t0 = dt.datetime(2026, 12, 7, tzinfo=dt.UTC)
    rows = []
    for conc, base, by_k in (
        (1, (20.0, 30.0), {2: (21.0, 33.0), 4: (30.0, 28.5)}),
        (4, (60.0, 90.0), {2: (66.0, 92.0), 4: (87.0, 88.0)}),
    ):
        for k, values in [(0, base), *by_k.items()]:
            for repeat, value in enumerate(values, start=1):
                rows.append(
                    {
                        "created_at": t0,
                        "run_id": "noisy",
                        "source": "specscope",
                        "model": "m",
                        "method": "ngram" if k else "none",
                        "k": k,
                        "hardware": "cpu-2core",
                        "host": "box",
                        "vllm_version": "0.32.0",
                        "weights": "real",
                        "acceptance": "real" if k else None,
                        "dataset": "uploaded",
                        "temperature": 0.0,
                        "output_len": 32,
                        "concurrency": conc,
                        "repeat": repeat,
                        "status": "ok",
                        "hygiene": "",
                        "output_throughput": value,
                        "acceptance_length": {0: None, 2: 1.8, 4: 2.3}[k],
                        "acceptance_rate": None,
                    }
                )
    writing.write_results(rows, run_id="noisy", directory=settings.results_dir())


def test_a_k_that_ties_the_baseline_is_no_green_deploy_and_every_view_calls_ties_alike(
    page_env, no_bundled_results, capsys
):
    """The issue's Theory box read a green "Deploy ngram with K = 4" above "K = 4 ties the baseline", and the
    Best-K table called K=4 "tied with K 2" where the advisor said "faster beyond noise". One rule now: the
    box is no success, says nothing measured shows a gain and what would tell, and the table's ties are the
    advisor's."""
    _noisy(page_env)
    store = Store()
    best = explore.by_concurrency(store)
    [fit] = fitting.fit_families(explore.cells_with_points(store))
    answer = deploy.answer(fit)
    for choice in answer.choices:
        row = best[(best["method"] == "ngram") & (best["concurrency"] == choice.concurrency)].iloc[0]
        assert sorted({int(row["k"]), *row["tied_ks"]}) == sorted(choice.tied or (choice.k,))
    assert answer.gain == "nowhere" and answer.sentence().startswith("Nothing measured shows a gain from ngram")
    assert "repeats would tell" in answer.sentence()
    at = AppTest.from_file(str(VIEWS / "theory.py"), default_timeout=120).run()
    assert not at.exception, at.exception
    assert not at.success and any(i.value.startswith("Nothing measured shows a gain") for i in at.info)
    assert any("No K beats the baseline beyond noise at concurrency" in m.value for m in at.markdown)
    assert cli_main(["advise", "--schedule"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith(f": deploy {answer.deploy}")  # the header names the answer, not the ranges' schedule
