"""What to deploy: a measured schedule against every fixed K, ties within noise left to the fixed K."""

from __future__ import annotations

import pytest

from specscope import explore, verdict
from specscope.schedule import SCHEDULE_KEY
from specscope.store import Store, write_results

SCHEDULE = "1-2:4,3-256:1"


def _row(method: str, k: int, concurrency: int, throughput: float, repeat: int,
         schedule: str | None = None) -> dict:
    return {"run_id": "r1", "source": "specscope", "model": "m", "method": method, "k": k,
            "k_schedule": schedule, "dataset": "d", "hardware": "cpu", "host": "h", "output_len": 64,
            "temperature": 0.0, "concurrency": concurrency, "repeat": repeat, "status": "ok",
            "output_throughput": throughput}


def _verdicts(tmp_path, cells: dict[int, tuple[float, float, float, float]], jitters=(-1.0, 0.0, 1.0)):
    """``cells``: concurrency -> throughput of (baseline, K=1, K=4, the schedule), one row per repeat."""
    rows = []
    for repeat, jitter in enumerate(jitters, start=1):
        for c, (base, k1, k4, sched) in cells.items():
            rows += [_row("none", 0, c, base + jitter, repeat), _row("ngram", 1, c, k1 + jitter, repeat),
                     _row("ngram", 4, c, k4 + jitter, repeat), _row("ngram", 4, c, sched + jitter, repeat, SCHEDULE)]
    write_results(rows, run_id="r1", directory=tmp_path)
    return verdict.verdicts(explore.curves_vs_concurrency(Store(result_dirs=[tmp_path], request_dirs=[])))


def test_a_schedule_faster_somewhere_and_slower_nowhere_is_deployed(tmp_path):
    # c=1: schedule 161 ties K=4 160; c=4: schedule 240 beats K=1 230 beyond the intervals
    [v] = _verdicts(tmp_path, {1: (100, 130, 160, 161), 4: (200, 230, 150, 240)})
    assert [(c.concurrency, c.best_k, c.outcome) for c in v.comparisons] == [(1, 4, "tie"), (4, 1, "faster")]
    assert v.deploy == f"schedule {SCHEDULE}" and v.intervals
    assert v.speculative_config() == {"method": "ngram", "num_speculative_tokens": 4,
                                      SCHEDULE_KEY: [[1, 2, 4], [3, 256, 1]]}
    assert v.sentence().startswith(f"Deploy the schedule {SCHEDULE}: faster than the best fixed K at "
                                   "concurrency 4 (1.043x of K=1) and slower at none (beyond the 95% intervals)")


def test_a_schedule_slower_beyond_noise_anywhere_gives_the_best_single_k(tmp_path):
    # K=4 averages (1.6 + 1.1) / 2, K=1 (1.3 + 1.15) / 2; the schedule loses 5% at c=4
    [v] = _verdicts(tmp_path, {1: (100, 130, 160, 170), 4: (200, 230, 220, 218.5)})
    assert [c.outcome for c in v.comparisons] == ["faster", "slower"]
    assert v.deploy == "K=4" and v.fixed_k == 4 and v.fixed_mean == pytest.approx(1.35, abs=1e-3)
    assert v.speculative_config() == {"method": "ngram", "num_speculative_tokens": 4}
    assert "the schedule 1-2:4,3-256:1 was slower at concurrency 4 (0.950x of K=1) and faster at 1" in v.sentence()


def test_a_schedule_that_only_ties_leaves_the_simpler_fixed_k(tmp_path):
    [v] = _verdicts(tmp_path, {1: (100, 130, 160, 160.5), 4: (200, 230, 150, 229.5)})
    assert {c.outcome for c in v.comparisons} == {"tie"}
    assert v.deploy == "K=1"  # K=1's mean (1.3 + 1.15) / 2 beats K=4's (1.6 + 0.75) / 2
    assert "tied the best fixed K everywhere, and a fixed K is the simpler server (within the 95% intervals)" \
        in v.sentence()


def test_a_single_run_compares_points_and_says_so(tmp_path):
    [v] = _verdicts(tmp_path, {1: (100, 130, 160, 160.5), 4: (200, 230, 150, 231)}, jitters=(0.0,))
    assert not v.intervals and [c.outcome for c in v.comparisons] == ["faster", "faster"]
    assert v.deploy_schedule and "single run: points compared, no interval" in v.sentence()


def test_specscope_verify_prints_what_to_deploy(specscope_home, capsys):
    import json

    from specscope import settings
    from specscope.cli import main as cli_main

    assert cli_main(["verify"]) == 0
    assert "no setup measured a K schedule" in capsys.readouterr().out
    _verdicts(settings.results_dir(), {1: (100, 130, 160, 170), 4: (200, 230, 220, 218.5)})
    assert cli_main(["verify", "--json"]) == 0
    [found] = json.loads(capsys.readouterr().out)
    assert found["deploy"] == "K=4" and found["speculative_config"] == {"method": "ngram", "num_speculative_tokens": 4}
    assert [c["outcome"] for c in found["by_concurrency"]] == ["faster", "slower"]
    assert cli_main(["verify", "--method", "eagle3"]) == 0  # filtered away
    assert "no setup measured" in capsys.readouterr().out
