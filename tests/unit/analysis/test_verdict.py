"""What to deploy: a measured schedule against every fixed K, ties within noise left to the fixed K."""

from __future__ import annotations

import pytest

from helpers.scheduled_rows import SCHEDULE
from helpers.scheduled_rows import row as _row
from specscope.analysis import explore, verdict
from specscope.engine.k_schedule import SCHEDULE_KEY
from specscope.results.store import Store
from specscope.results.writing import write_results


def _verdicts(tmp_path, cells: dict[int, tuple[float, float, float, float]], jitters=(-1.0, 0.0, 1.0)):
    """``cells``: concurrency -> throughput of (baseline, K=1, K=4, the schedule), one row per repeat. Each cell
    meets the jitters in its own order, so they are its own noise, not a slowdown its round shares (which the
    paired intervals would cancel)."""
    rows = []
    for repeat in range(1, len(jitters) + 1):
        for c, (base, k1, k4, sched) in cells.items():
            j = [jitters[(repeat + i) % len(jitters)] for i in range(4)]
            rows += [
                _row("none", 0, c, base + j[0], repeat),
                _row("ngram", 1, c, k1 + j[1], repeat),
                _row("ngram", 4, c, k4 + j[2], repeat),
                _row("ngram", 4, c, sched + j[3], repeat, SCHEDULE),
            ]
    write_results(rows, run_id="r1", directory=tmp_path)
    return verdict.verdicts(explore.curves_vs_concurrency(Store(result_dirs=[tmp_path], request_dirs=[])))


def test_a_schedule_faster_somewhere_and_slower_nowhere_is_deployed(tmp_path):
    # K=4 has the best mean (1.6 + 1.05) / 2; the schedule ties it at c=1 and beats it at c=4
    [v] = _verdicts(tmp_path, {1: (100, 130, 160, 161), 4: (200, 230, 210, 240)})
    assert v.fixed_k == 4 and v.fixed_mean == pytest.approx(1.325, abs=1e-3)
    assert [(c.concurrency, c.outcome, c.best_k) for c in v.comparisons] == [(1, "tie", 4), (4, "faster", 1)]
    assert v.deploy == f"schedule {SCHEDULE}" and v.intervals
    assert v.speculative_config() == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        SCHEDULE_KEY: [[1, 2, 4], [3, 256, 1]],
    }
    assert v.sentence() == (
        f"Deploy the schedule {SCHEDULE}: against K=4 it was faster at concurrency 4 (1.143×) and slower nowhere "
        "(beyond the 95% intervals); mean speedup over concurrency 1–4: schedule 1.405×, K=4 1.325×; against the "
        "best fixed K at each concurrency the schedule keeps at least 1.006 (K=4 at 1). Measured up to "
        "concurrency 4 only: at batch sizes above 4 the schedule's K is an extrapolation, not compared."
    )


def test_a_schedule_slower_somewhere_and_faster_nowhere_gives_the_best_single_k(tmp_path):
    [v] = _verdicts(tmp_path, {1: (100, 130, 160, 150), 4: (200, 230, 220, 218.5)})
    assert [c.outcome for c in v.comparisons] == ["slower", "tie"]
    assert v.deploy == "K=4" and v.speculative_config() == {"method": "ngram", "num_speculative_tokens": 4}
    assert v.sentence().startswith(
        f"Deploy K=4 rather than the schedule {SCHEDULE}: against K=4 it was slower at "
        "concurrency 1 (0.938×) and faster nowhere (beyond the 95% intervals)"
    )


def test_faster_at_some_loads_and_slower_at_others_goes_by_the_mean(tmp_path):
    [v] = _verdicts(tmp_path, {1: (100, 130, 160, 175), 4: (200, 230, 220, 205)})
    assert [c.outcome for c in v.comparisons] == ["faster", "slower"] and v.schedule_mean > v.fixed_mean
    assert v.deploy_schedule and v.sentence().startswith(
        f"Deploy the schedule {SCHEDULE}, by mean speedup: against K=4 it was faster at concurrency 1 (1.094×) "
        "and slower at concurrency 4 (0.932×)"
    )


def test_a_schedule_that_only_ties_leaves_the_simpler_fixed_k(tmp_path):
    [v] = _verdicts(tmp_path, {1: (100, 130, 160, 160.5), 4: (200, 230, 220, 220.5)})
    assert {c.outcome for c in v.comparisons} == {"tie"} and v.deploy == "K=4"
    assert v.sentence().startswith(
        f"Deploy K=4 rather than the schedule {SCHEDULE}, the simpler server: it tied "
        "K=4 everywhere (within the 95% intervals)"
    )


def test_a_single_run_compares_points_says_so_and_deploys_the_fixed_k(tmp_path):
    [v] = _verdicts(tmp_path, {1: (100, 130, 160, 160.5), 4: (200, 230, 150, 231)}, jitters=(0.0,))
    assert v.fixed_k == 1 and not v.intervals and [c.outcome for c in v.comparisons] == ["faster", "faster"]
    assert not v.deploy_schedule and v.deploy == "K=1"  # points alone never pick a schedule over the simpler server
    assert v.sentence().startswith(
        f"Deploy K=1 rather than the schedule {SCHEDULE}, the simpler server: a single run "
        "cannot tell them apart; against K=1 it was faster at concurrency 1"
    )
    assert "(single run: points compared, no interval)" in v.sentence()


def test_specscope_verify_prints_what_to_deploy(specscope_home, capsys, monkeypatch):
    import json

    from specscope import settings
    from specscope.cli import main as cli_main

    monkeypatch.setenv("SPECSCOPE_DATA", str(specscope_home / "no-bundled"))  # the bundled H100 run measured one
    assert cli_main(["verify"]) == 0
    assert "no setup measured a K schedule" in capsys.readouterr().out
    _verdicts(settings.results_dir(), {1: (100, 130, 160, 150), 4: (200, 230, 220, 218.5)})
    assert cli_main(["verify", "--json"]) == 0
    [found] = json.loads(capsys.readouterr().out)
    assert found["deploy"] == "K=4" and found["speculative_config"] == {"method": "ngram", "num_speculative_tokens": 4}
    assert [c["outcome"] for c in found["by_concurrency"]] == ["slower", "tie"]
    assert cli_main(["verify", "--method", "eagle3"]) == 0  # filtered away
    assert "no setup measured" in capsys.readouterr().out
