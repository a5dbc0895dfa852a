"""One answer everywhere: a free + constrained ngram sweep at K 2 and 4, concurrency 1, three repeats,
where K=2 measured best (constrained 1.210x against 1.203x, free 1.180x against 1.160x, K=4 tied within
noise). The Theory page, ``advise``, ``advise --schedule``, the Explorer and ``speedup --best`` all name K=2."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from streamlit.testing.v1 import AppTest

from helpers.paths import DASHBOARD, VIEWS
from specscope import settings
from specscope.cli import main as cli_main
from specscope.results import writing

pytestmark = pytest.mark.app

SPEEDUPS = {"none": {2: 1.180, 4: 1.160}, "json_schema": {2: 1.210, 4: 1.203}}  # by response format, then K
SPREAD = (0.99, 1.0, 1.01)  # three repeats around each mean


def _write_replay() -> None:
    t0 = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
    rows = []
    for fmt, by_k in SPEEDUPS.items():
        for k, speedup in [(0, 1.0), *by_k.items()]:
            for repeat, factor in enumerate(SPREAD, start=1):
                rows.append(
                    {
                        "created_at": t0,
                        "run_id": "replay",
                        "source": "specscope",
                        "model": "SmolLM2-135M-Instruct",
                        "method": "ngram" if k else "none",
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
                        "concurrency": 1,
                        "repeat": repeat,
                        "status": "ok",
                        "output_throughput": 50.0 * speedup * (factor if k else 1.0),
                        "acceptance_length": {0: None, 2: 1.8, 4: 2.3}[k],
                        "acceptance_rate": {0: None, 2: 0.4, 4: 0.325}[k],
                        "method_params": json.dumps({"prompt_lookup_max": 4, "prompt_lookup_min": 2}) if k else None,
                    }
                )
    writing.write_results(rows, run_id="replay", directory=settings.results_dir())


@pytest.fixture
def replay(page_env, no_bundled_results):
    _write_replay()
    return page_env


def test_speedup_best_and_advise_name_k2(replay, capsys):
    assert cli_main(["speedup", "--best", "--json", "--method", "ngram"]) == 0
    best = json.loads(capsys.readouterr().out)
    assert {r["response_format"]: r["k"] for r in best} == {"none": 2, "json_schema": 2}
    assert cli_main(["advise", "--json"]) == 0
    answers = json.loads(capsys.readouterr().out)
    assert len(answers) == 2
    for answer in answers:
        assert answer["deploy"] == "K=2" and answer["speculative_config"]["num_speculative_tokens"] == 2
        assert [c["k"] for c in answer["concurrencies"]] == [2] and [a["k"] for a in answer["advice"]] == [2]
    assert cli_main(["advise", "--schedule", "--json"]) == 0
    for answer in json.loads(capsys.readouterr().out):
        assert answer["deploy"] == "K=2" and answer["schedule"].startswith("1:2") or answer["schedule"].startswith("1-")
        assert answer["ranges"][0]["K"] == 2 and answer["ranges"][0]["source"].startswith("measured at 1")
    assert cli_main(["advise"]) == 0
    out = capsys.readouterr().out
    assert out.count("Deploy ngram with K = 2") == 2 and out.count("concurrency 1: Use K = 2") == 2


def _theory() -> AppTest:
    at = AppTest.from_file(str(VIEWS / "theory.py"), default_timeout=120).run()
    assert not at.exception, at.exception
    return at


def test_the_theory_page_names_k2_for_each_group(replay):
    at = _theory()
    for option in at.selectbox(key="theory_group").options:
        at.selectbox(key="theory_group").set_value(option).run()
        assert not at.exception
        assert at.success[0].value.startswith("Deploy ngram with K = 2"), option
        advice = next(m.value for m in at.markdown if m.value.startswith("**At concurrency 1:**"))
        assert advice.replace("\\", "").startswith("**At concurrency 1:** Use K = 2"), advice
        assert "Deploy the fixed K = 2 at every batch size" in " ".join(m.value for m in at.markdown)


def test_the_explorer_names_k2_for_each_setup(replay):
    at = AppTest.from_file(str(DASHBOARD), default_timeout=120).run()
    assert not at.exception, at.exception
    at.session_state["explorer_deploy_open"] = True
    at.run()
    chooser = at.selectbox(key="explorer_deploy_setup")
    assert len(chooser.options) == 2
    for option in chooser.options:
        chooser.set_value(option).run()
        assert not at.exception
        assert any(s.value.startswith("Deploy ngram with K = 2") for s in at.success), option
        [config] = [json.loads(c.value) for c in at.code if "num_speculative_tokens" in c.value]
        assert config["num_speculative_tokens"] == 2 and config["prompt_lookup_max"] == 4
        chooser = at.selectbox(key="explorer_deploy_setup")
